"""What a gate returns for one claim: :class:`GateResult` and its :class:`IllegalStep`.

The streaming gates (:mod:`residentkv.trace.gates`) and the reference semantics
(:mod:`residentkv.trace.semantics`) build the same result from what a claim meets and what the
gate asks (:func:`verdict`); requirement ids and control names are plain strings here, as the
JSON and SARIF reports print them.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict

from residentkv.model.automaton import VIOLATION_WHY, Step
from residentkv.model.vocabulary import Control, Requirement
from residentkv.trace.requirements import Seqs

__all__ = ["GateResult", "IllegalStep", "control_values", "illegal_step", "verdict"]

_VALUE: dict[Requirement, str] = {r: r.value for r in Requirement}


class IllegalStep(BaseModel):
    """The first step of the claim (or of a request naming it) the automaton refused."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seq: int
    event: str
    state: str
    violation: str
    why: str


def illegal_step(step: Step | None) -> IllegalStep | None:
    """The report form of an automaton violation."""
    if step is None:
        return None
    return IllegalStep(seq=step.seq, event=step.kind, state=step.state,
                       violation=step.violation.value, why=VIOLATION_WHY[step.violation])


class GateResult(BaseModel):
    """The verdict of one gate for one claim in one stream."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gate: str
    claim_id: str
    passed: bool
    missing: list[str]
    controls: dict[str, bool]
    evidence: dict[str, list[int]]
    boundary: str
    #: the first illegal step (SPEC §4.2), when ``legal_transitions`` is missing
    illegal: IllegalStep | None = None


def verdict(found: Seqs, wanted: tuple[Requirement, ...]) -> tuple[list[str], dict[str, list[int]]]:
    """The sorted missing ids of *wanted*, and the evidence of those *found* meets."""
    value = _VALUE
    missing = sorted(value[r] for r in wanted if r not in found)
    evidence = {value[k]: found[k] for k in sorted(found) if k in wanted}
    return missing, evidence


def control_values(controls: Mapping[Control, bool]) -> dict[str, bool]:
    """A result's own controls dict, keyed by the controls' plain names."""
    return {c.value: fired for c, fired in controls.items()}
