"""The litmus suite's items, titles and result type (SPEC §10), shared by every litmus item.

The runners (:mod:`~.litmus` for L1–L7, :mod:`~.lowering_c1` for C1) both produce
:class:`LitmusResult`; neither imports the other for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["pass", "fail", "not_run"]

TITLES: dict[str, str] = {
    "L1": "no accepted claim => eviction is not harm",
    "L2": "write no-admit still evicts residents",
    "L3": "accepted hard claim => attributed refusal",
    "L4": "demotion precedes loss => post-release loss, harm 0",
    "L5": "expiry precedes loss => post-release loss, harm 0",
    "L6": "59 surviving blocks with block 0 lost => predicate false",
    "L7": "the L3 trace alone reconstructs the story",
    "C1": "soft priority: as hard_protected => rejected_mapping, as soft_priority => "
          "approximation_substrate",
}
#: every item, in suite order
ITEMS: tuple[str, ...] = tuple(TITLES)


@dataclass(frozen=True)
class LitmusResult:
    """The verdict of one litmus item: every named check, the seqs that support them."""

    id: str
    title: str
    status: Status
    checks: dict[str, bool]
    evidence: dict[str, list[int]] = field(default_factory=dict)
    detail: str = ""
    trace: str | None = None

    @property
    def passed(self) -> bool:
        """Only ``pass`` passes: ``not_run`` is a failure."""
        return self.status == "pass"

    def to_dict(self) -> dict[str, Any]:
        """Deterministic JSON form."""
        return {
            "id": self.id,
            "title": self.title,
            "status": self.status,
            "checks": dict(sorted(self.checks.items())),
            "evidence": dict(sorted(self.evidence.items())),
            "detail": self.detail,
            "trace": self.trace,
        }
