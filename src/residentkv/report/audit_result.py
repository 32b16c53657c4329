"""The result of one audit: a value the audit job fills and every audit renderer reads.

It lives below the audit job (which builds it) and beside the renderers (which read it), so the
report layer never imports the job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from residentkv import __version__
from residentkv.lowering.check import CheckResult

__all__ = ["AUDIT_SCHEMA", "AuditResult", "witness_trace_paths"]

AUDIT_SCHEMA = "residentkv.audit/v1"


@dataclass
class AuditResult:
    """Everything the audit found; ``doc`` is the canonical check JSON plus the curation
    (notes, anchor targets: ``report.json``)."""

    check: CheckResult
    doc: dict[str, Any]
    sources: list[dict[str, Any]]
    witness: dict[str, Any]
    suite: dict[str, Any]
    unverified: list[str]
    positive_public: list[str]
    #: distinct source anchors into pinned releases: reviewed / unchanged / pending
    reviews: dict[str, int] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    #: ``--live``: the observer's run and the rows its trace was attached to (else empty)
    observed: dict[str, Any] = field(default_factory=dict)
    #: observed rows whose live anchor is not the expected failing gate (the audit falls short)
    observed_short: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """0 only when every row matches, every pinned anchor verified, the witness (if live)
        matched SPEC §9, the observer's live trace (if live) failed the rows' lifecycle gate as the
        runtime's unreported loss must, and the suite (if present) passed; else 1."""
        short = (self.check.exit_code != 0 or bool(self.unverified)
                 or bool(self.positive_public) or bool(self.observed_short)
                 or (self.witness.get("mode") == "live" and not self.witness.get("passed"))
                 or (self.suite.get("available") and not self.suite.get("passed")))
        return 1 if short else 0

    def audit_json(self) -> dict[str, Any]:
        """The audit's own record (``audit.json``): sources, witness, suite, shortfalls."""
        return {
            "schema": AUDIT_SCHEMA,
            "tool": {"name": "residentkv", "version": __version__},
            "sources": self.sources, "witness": self.witness, "suite": self.suite,
            "observed": self.observed, "observed_shortfalls": self.observed_short,
            "unverified_anchors": self.unverified,
            "positive_public_rows": self.positive_public,
            "anchor_review": self.reviews,
            "summary": self.doc["summary"], "files": self.files,
            "exit_code": self.exit_code,
        }


def witness_trace_paths(witness: dict[str, Any]) -> list[Path]:
    """The witness traces an audit classified the adapter rows on (shipped or live)."""
    if witness.get("mode") == "live" and witness.get("descriptor"):
        folder = Path(witness["descriptor"]).parent / "traces" / "witness"
        return sorted(folder.glob("*.jsonl"))
    return [Path(t["path"]) for t in witness.get("traces", [])]
