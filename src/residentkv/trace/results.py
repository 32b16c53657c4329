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
from residentkv.model.vocabulary import Control, GateName, Requirement
from residentkv.trace.requirements import Seqs
from residentkv.trace.streams import StreamSpan

__all__ = ["GateResult", "IllegalStep", "StreamSummary", "StreamVerdict", "control_values",
           "illegal_step", "stream_verdict", "summaries", "trusted_result", "verdict"]

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


class StreamSummary(BaseModel):
    """One stream of the file (SPEC §9.1: one per engine incarnation)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: 0 for the file's first stream
    index: int
    incarnation: str | None
    #: ``closed`` (its stream_closed), ``restarted`` (the next incarnation's stream_started)
    #: or ``open`` (the reading stopped in it)
    end: str
    #: the reason of its stream_closed
    reason: str | None = None
    #: a result's seq of an event of this stream is ``offset + seq`` (0 in the first stream)
    offset: int
    #: the line of its stream_started (None: no opener, or events given without a file)
    line: int | None = None


class StreamVerdict(BaseModel):
    """Gate ``conformance`` over the whole file: one verdict beside the per-claim results."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gate: str = GateName.CONFORMANCE.value
    #: every claim judged passed (and there was one: no vacuous pass)
    passed: bool
    claims: int
    #: the claims whose conformance failed, in order of first appearance
    failed: list[str]
    #: the claims open where the reading stopped, in a stream with no close: not failed, not
    #: finished either (each passed or failed on what the stream shows so far)
    live: list[str]
    streams: list[StreamSummary]


def summaries(spans: list[StreamSpan], lines: list[int] | None = None) -> list[StreamSummary]:
    """The report form of a pass's streams (*lines*: each opener's line, when read from a
    file)."""
    lines = lines or []
    return [StreamSummary(index=s.index, incarnation=s.incarnation, end=s.end.value,
                          reason=s.reason, offset=s.offset,
                          line=lines[s.index] if s.index < len(lines) else None)
            for s in spans]


def stream_verdict(results: list[GateResult], live: set[str],
                   streams: list[StreamSummary]) -> StreamVerdict:
    """The stream verdict of the conformance results among *results*."""
    mine = [r for r in results if r.gate == GateName.CONFORMANCE]
    return StreamVerdict(
        passed=bool(mine) and all(r.passed for r in mine), claims=len(mine),
        failed=[r.claim_id for r in mine if not r.passed],
        live=[r.claim_id for r in mine if r.claim_id in live], streams=streams)
