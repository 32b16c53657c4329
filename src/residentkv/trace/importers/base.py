"""What every importer returns: the v1 events and a report of everything it did not map."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from residentkv.findings import Finding
from residentkv.model.events import Envelope


@dataclass
class ImportReport:
    """Every mapping decision of one import, so nothing is lost silently."""

    dialect: str
    path: str
    events_in: int = 0
    events_out: int = 0
    mapped: Counter[str] = field(default_factory=Counter)
    dropped: dict[str, str] = field(default_factory=dict)
    dropped_counts: Counter[str] = field(default_factory=Counter)
    unmapped_fields: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    synthesized: list[dict[str, Any]] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    problems: list[Finding] = field(default_factory=list)

    def drop(self, foreign: str, reason: str) -> None:
        self.dropped.setdefault(foreign, reason)
        self.dropped_counts[foreign] += 1

    def assume(self, text: str) -> None:
        if text not in self.assumptions:
            self.assumptions.append(text)

    def to_json_obj(self) -> dict[str, Any]:
        """A deterministic JSON form of the report."""
        return {
            "dialect": self.dialect,
            "path": self.path,
            "events_in": self.events_in,
            "events_out": self.events_out,
            "mapped": dict(sorted(self.mapped.items())),
            "dropped": {
                k: {"count": self.dropped_counts[k], "reason": v}
                for k, v in sorted(self.dropped.items())
            },
            "unmapped_fields": {k: sorted(v) for k, v in sorted(self.unmapped_fields.items())},
            "synthesized": self.synthesized,
            "assumptions": self.assumptions,
            "problems": [p.render() for p in self.problems],
        }


@dataclass
class ImportResult:
    """v1 events in seq order plus the report, and where each event came from: v1 seq -> the
    foreign sequence number of the event it was mapped from (a synthesized event: of the event
    it stands before), so the source's own numbers stay visible."""

    events: list[Envelope]
    report: ImportReport
    origin: dict[int, int] = field(default_factory=dict)
