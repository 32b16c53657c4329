"""Reproduce the research artifact's published per-scenario gate table from its raw traces.

Every trace under the fixtures folder is imported (dialect ``resident-kv-artifact``) and judged
by our gates; the published value of each (trace, gate) is read from the artifact's aggregate
files. Disagreements are never bent away: each carries a reason built from the requirement ids
our gate found missing and the seqs of the events involved. A disagreement whose missing
requirements have no documented explanation is *unexplained* and makes the command fail.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from residentkv.errors import UserInputError
from residentkv.model.events import Envelope
from residentkv.trace.gates import GateResult, check_events
from residentkv.trace.importers import DIALECTS


@dataclass(frozen=True)
class Row:
    """One (trace, gate) comparison."""

    scenario: str
    trace: str | None
    gate: str
    ours: str
    published: str | None
    agree: bool
    explained: bool
    reason: str

    def to_json_obj(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "trace": self.trace, "gate": self.gate,
                "ours": self.ours, "published": self.published, "agree": self.agree,
                "explained": self.explained, "reason": self.reason}


def load_manifest() -> dict[str, Any]:
    """The shipped manifest (data/reproduction/paper_traces.yaml)."""
    text = (files("residentkv.data") / "reproduction" / "paper_traces.yaml").read_text()
    manifest: dict[str, Any] = YAML(typ="safe").load(text)
    return manifest


def _published(root: Path, manifest: dict[str, Any], scenario: str, run_dir: str,
               gate: str) -> str | None:
    source = next((v for pattern, v in manifest["published_by"].items()
                   if fnmatch.fnmatch(run_dir, pattern)), None)
    if source is None:
        return None
    path = root / manifest["aggregates"][source]
    if not path.is_file():
        return None
    rates = json.loads(path.read_text()).get("scenarios", {}).get(scenario, {})
    rate = rates.get(manifest["gate_keys"][gate])
    if not rate or not rate.get("total"):
        return None
    if rate["passed"] == rate["total"]:
        return "pass"
    return "fail" if rate["passed"] == 0 else None


def _seqs(events: list[Envelope], event_types: list[str]) -> str:
    found = [f"{t} at seq {', '.join(str(e.seq) for e in events if e.event == t)}"  # type: ignore[attr-defined]
             if any(e.event == t for e in events) else f"no {t}"  # type: ignore[attr-defined]
             for t in event_types]
    return "; ".join(found)


def _reason(result: GateResult | None, events: list[Envelope], manifest: dict[str, Any],
            agree: bool) -> tuple[str, bool]:
    if result is None:
        return "the trace names no claim: there is nothing a gate could show", True
    if agree:
        return "agrees", True
    if result.passed:
        return "ours pass where the artifact's table says fail", False
    explanations = manifest["explanations"]
    parts = []
    for req in result.missing:
        entry = explanations.get(req)
        if entry is None:
            parts.append(f"{req}: no documented explanation")
            continue
        parts.append(f"{req}: {entry['because']} ({_seqs(events, entry['cite'])})")
    explained = all(r in explanations for r in result.missing)
    return "; ".join(parts), explained


def _trace_rows(root: Path, trace: Path, manifest: dict[str, Any]) -> list[Row]:
    scenario, run_dir = trace.parent.parent.name, trace.parent.name
    imported = DIALECTS[manifest["dialect"]](trace)
    results = check_events(imported.events, manifest["gates"],
                           well_formed=not imported.report.problems)
    rows = []
    for gate in manifest["gates"]:
        mine = [r for r in results if r.gate == gate]
        result = next((r for r in mine if r.passed), mine[0] if mine else None)
        ours = "pass" if result is not None and result.passed else "fail"
        published = _published(root, manifest, scenario, run_dir, gate)
        if published is None:
            why = (f"missing {', '.join(result.missing)}" if result is not None
                   else "the trace names no claim")
            reason, explained = f"no published value for this trace; ours {ours}" + (
                f" ({why})" if ours == "fail" else ""), True
        else:
            reason, explained = _reason(result, imported.events, manifest, published == ours)
        rows.append(Row(scenario, str(trace.relative_to(root)), gate, ours, published,
                        published == ours, explained, reason))
    return rows


def reproduce(root: str | Path) -> list[Row]:
    """Compare our gates with the published table for every scenario under *root*."""
    root = Path(root)
    if not root.is_dir():
        raise UserInputError("fixtures folder not found", code="L001", path=str(root))
    manifest = load_manifest()
    scenarios = sorted(p for p in root.iterdir() if p.is_dir())
    if not scenarios:
        raise UserInputError("no scenario folders in the fixtures folder", code="L001",
                             path=str(root))
    rows: list[Row] = []
    for scenario in scenarios:
        traces = sorted(scenario.glob(f"*/{manifest['trace_file']}"))
        if not traces:
            rows += _no_trace_rows(root, scenario, manifest)
        for trace in traces:
            rows += _trace_rows(root, trace, manifest)
    return rows


def _no_trace_rows(root: Path, scenario: Path, manifest: dict[str, Any]) -> list[Row]:
    rows = []
    for gate in manifest["gates"]:
        published = _published(root, manifest, scenario.name, "rep-001", gate)
        rows.append(Row(scenario.name, None, gate, "fail", published,
                        published == "fail", True,
                        f"no evidence: {manifest['no_trace_reason']}"))
    return rows


def succeeded(rows: Sequence[Row]) -> bool:
    """True when every row with a published value agrees or carries an explained reason."""
    return all(r.agree or r.published is None or r.explained for r in rows)
