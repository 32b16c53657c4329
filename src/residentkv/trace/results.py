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

__all__ = ["GateResult", "IllegalStep", "control_values", "illegal_step", "trusted_result",
           "verdict"]

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


_FIELDS = tuple(GateResult.model_fields)
#: every result sets every field; one set shared by all of them (a result is frozen, so
#: pydantic never adds to it, and a copy copies it) saves ~0.7 KiB per result
_ALL_SET = set(_FIELDS)
_set = object.__setattr__


def trusted_result(gate: str, claim_id: str, passed: bool, missing: list[str],
                   controls: dict[str, bool], evidence: dict[str, list[int]], boundary: str,
                   illegal: IllegalStep | None) -> GateResult:
    """A :class:`GateResult` of values the gates computed themselves, built without
    re-validating them: what ``model_construct`` does for a model without aliases, defaults
    left out, private attributes or post-init, in one step (a test holds every result equal to
    its validated form)."""
    result = GateResult.__new__(GateResult)
    _set(result, "__dict__", {"gate": gate, "claim_id": claim_id, "passed": passed,
                              "missing": missing, "controls": controls, "evidence": evidence,
                              "boundary": boundary, "illegal": illegal})
    _set(result, "__pydantic_fields_set__", _ALL_SET)
    _set(result, "__pydantic_extra__", None)
    _set(result, "__pydantic_private__", None)
    return result


#: the shortcut above holds only for a model of exactly these plain fields
assert _FIELDS == ("gate", "claim_id", "passed", "missing", "controls", "evidence", "boundary",
                   "illegal")
assert not GateResult.__pydantic_post_init__ and not GateResult.__private_attributes__
assert all(f.alias is None and f.validation_alias is None
           for f in GateResult.model_fields.values())


def verdict(found: Seqs, wanted: tuple[Requirement, ...]) -> tuple[list[str], dict[str, list[int]]]:
    """The sorted missing ids of *wanted*, and the evidence of those *found* meets."""
    value = _VALUE
    ordered = _ORDERED.get(wanted)
    if ordered is None:
        ordered = _ORDERED[wanted] = tuple(sorted(wanted, key=value.__getitem__))
    missing = [value[r] for r in ordered if r not in found]
    evidence = {value[r]: found[r] for r in ordered if r in found}
    return missing, evidence


#: each gate's wanted requirements in id order (a gate asks for few distinct tuples)
_ORDERED: dict[tuple[Requirement, ...], tuple[Requirement, ...]] = {}


def control_values(controls: Mapping[Control, bool]) -> dict[str, bool]:
    """A result's own controls dict, keyed by the controls' plain names."""
    return {c.value: fired for c, fired in controls.items()}
