"""The gates (through the package's public trace check) against the independent acceptor.

A disagreement is a gate that passes for a claim while the acceptor found an event of that
claim, or of a request that names it, illegal for that gate; for ``attribution`` also any other
claim of the stream whose own history is illegal (SPEC §4.2 Attribution: a non-target passes
only if its own history is legal).
"""

from __future__ import annotations

import io
from collections import Counter
from dataclasses import dataclass

from acceptor import ATTRIBUTION, Verdict, Violation, judge_bytes

from residentkv.trace.gates import check_trace


@dataclass(frozen=True)
class Disagreement:
    gate: str
    claim_id: str
    subject: str  # the claim whose event is illegal (a non-target, for attribution)
    violation: Violation | None  # None: the acceptor does not know the claim at all

    def category(self) -> str:
        v = self.violation
        rule = (v.rule.value + (" (reading)" if v.reading else "")) if v else "unknown_claim"
        return f"{self.gate}:{rule}"

    def __str__(self) -> str:
        v = self.violation
        where = f"seq {v.seq} {v.rule}: {v.why}" if v else "claim unknown to the acceptor"
        other = f" (non-target {self.subject})" if self.subject != self.claim_id else ""
        return f"{self.gate} passes {self.claim_id}{other}, but {where}"


def gate_verdicts(data: bytes) -> dict[tuple[str, str], bool]:
    """(gate, claim) -> passed, for every claim the gates judge in the trace in *data*."""
    check = check_trace("mutant.jsonl", stream=io.BytesIO(data))
    return {(r.gate, r.claim_id): r.passed for r in check.results}


def gate_passes(data: bytes) -> list[tuple[str, str]]:
    """(gate, claim) for every gate that passes a claim of the trace in *data*."""
    return [key for key, passed in gate_verdicts(data).items() if passed]


def disagreements(data: bytes, verdicts: dict[str, Verdict] | None = None,
                  readings: bool = False) -> list[Disagreement]:
    """Every gate pass the acceptor contradicts, one entry per violating event (by the SPEC's
    text; with *readings*, also by the acceptor's readings where the text is silent)."""
    verdicts = judge_bytes(data) if verdicts is None else verdicts
    out: list[Disagreement] = []
    for gate, claim in gate_passes(data):
        verdict = verdicts.get(claim)
        if verdict is None:
            out.append(Disagreement(gate, claim, claim, None))
            continue
        out.extend(Disagreement(gate, claim, claim, v)
                   for v in verdict.against(gate, readings))
        if gate == ATTRIBUTION:
            for other, v2 in verdicts.items():
                if other != claim:
                    out.extend(Disagreement(gate, claim, other, v)
                               for v in v2.against_non_target(readings))
    return out


def tally(found: list[Disagreement]) -> Counter[str]:
    return Counter(d.category() for d in found)
