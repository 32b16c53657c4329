"""The trace gates: the four of SPEC §4 (observation, failure_outcome, lifecycle,
attribution) and ``conformance`` (SPEC §9.1).

A gate judges the facts of one file's streams (:mod:`residentkv.trace.tracker`; several streams,
one per engine incarnation, are judged together, :mod:`residentkv.trace.streams`) for one claim
and returns a :class:`GateResult`: ``passed``, the sorted ``missing`` requirement ids, the
negative ``controls`` that fired, the ``evidence`` seqs (positions, in a file of several
streams) of each satisfied requirement, and a ``boundary`` sentence saying what the result does
not show. A claim with zero events fails every gate. ``conformance`` adds one
:class:`StreamVerdict` for the whole file, listing the claims open where the reading stopped
(live).
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import chain
from pathlib import Path
from typing import BinaryIO

from pydantic import BaseModel, ConfigDict, Field, SkipValidation

from residentkv.findings import Finding
from residentkv.model.automaton import Violation
from residentkv.model.events import Envelope, StreamStarted
from residentkv.model.vocabulary import ALL_GATE_NAMES as ALL_GATE_NAMES
from residentkv.model.vocabulary import CONTROLS as CONTROLS
from residentkv.model.vocabulary import GATE_NAMES as GATE_NAMES
from residentkv.model.vocabulary import GateName, Requirement
from residentkv.trace import requirements as _groups
from residentkv.trace.judges import ClaimFacts
from residentkv.trace.reader import DEFAULT_MAX_LINE_BYTES, TraceReader, seq_lines
from residentkv.trace.registry import GATES, Gate, gates_named
from residentkv.trace.results import GateResult as GateResult
from residentkv.trace.results import IllegalStep as IllegalStep
from residentkv.trace.results import StreamSummary as StreamSummary
from residentkv.trace.results import StreamVerdict as StreamVerdict
from residentkv.trace.results import illegal_step as illegal_step
from residentkv.trace.results import stream_verdict, summaries, trusted_result, verdict
from residentkv.trace.tracker import StreamFacts, collect
from residentkv.trace.verdict_words import ClaimStory, claim_stories

#: the requirement groups as plain strings (see :mod:`residentkv.trace.requirements`)
COMMON: tuple[str, ...] = _groups.ids(_groups.COMMON)
OBSERVATION: tuple[str, ...] = _groups.ids(_groups.OBSERVATION)
FAILURE: tuple[str, ...] = _groups.ids(_groups.FAILURE)
LIFECYCLE: tuple[str, ...] = _groups.ids(_groups.LIFECYCLE)
ATTRIBUTION: tuple[str, ...] = _groups.ids(_groups.ATTRIBUTION)

#: gate -> every requirement id it can report
REQUIREMENTS: dict[str, tuple[str, ...]] = {g.name.value: g.ids for g in GATES.values()}
#: gate -> what a result of it does not show
BOUNDARIES: dict[str, str] = {g.name.value: g.boundary for g in GATES.values()}

_LEGAL = Requirement.LEGAL_TRANSITIONS.value


class TraceCheck(BaseModel):
    """The gates run over one trace file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    events: int
    problems: list[Finding]
    problem_count: int
    results: list[GateResult]
    #: the stream's ``stream_started`` event, when it opens with one (SPEC §4.1; in a file of
    #: several streams, the first one's: every later one must name the same emitter, runtime
    #: and replica, else the reader reports T034)
    provenance: StreamStarted | None = None
    #: what happened to each claim with a failed result (the facts its words need)
    stories: SkipValidation[dict[str, ClaimStory]] = Field(default_factory=dict, exclude=True,
                                                           repr=False)
    #: the file's streams (SPEC §9.1: one per engine incarnation)
    streams: list[StreamSummary] = []
    #: gate ``conformance``'s verdict over the file, when that gate ran
    conformance: StreamVerdict | None = None

    @property
    def passed(self) -> bool:
        return bool(self.results) and not self.problem_count and all(
            r.passed for r in self.results
        )


def judge(facts: StreamFacts, gate: str, claim_id: str, *, well_formed: bool = True) -> GateResult:
    """Judge *gate* for *claim_id* from the collected facts of one stream."""
    if gate not in GATES:
        raise ValueError(f"unknown gate {gate!r}")
    return _result(ClaimFacts(facts, claim_id, well_formed), gates_named([gate])[0])


def _result(j: ClaimFacts, gate: Gate) -> GateResult:
    """One gate's verdict for one claim (the claim's shared facts computed once in *j*)."""
    if j.t.claim_events:
        found, wanted = gate.streaming(j)
    else:
        found, wanted = {}, gate.unconditional
    missing, evidence = verdict(found, wanted)
    illegal = (j.settled if gate.live else j.illegal) if _LEGAL in missing else None
    # values this module computed: built without re-validating them
    return trusted_result(gate.name.value, j.claim_id, not missing, missing, j.controls.copy(),
                          evidence, gate.boundary, illegal)


def claims_in(facts: StreamFacts) -> list[str]:
    """Every claim id that has at least one claim event, in order of first appearance."""
    return list(facts.order)


def check_events(
    events: Iterable[Envelope],
    gates: Sequence[str] = GATE_NAMES,
    claim_id: str | None = None,
    *,
    well_formed: bool = True,
) -> list[GateResult]:
    """Run *gates* over already-read events for one claim or for every claim found."""
    return _judge_all(collect(events), gates, claim_id, well_formed)


def judge_events(
    events: Iterable[Envelope],
    gates: Sequence[str] = ALL_GATE_NAMES,
    claim_id: str | None = None,
    *,
    well_formed: bool = True,
) -> tuple[list[GateResult], StreamVerdict | None]:
    """:func:`check_events`, with gate ``conformance``'s stream verdict when it is asked."""
    facts = collect(events)
    results = _judge_all(facts, gates, claim_id, well_formed)
    return results, _verdict(facts, gates, results)


def _verdict(facts: StreamFacts, gates: Sequence[str], results: list[GateResult],
             lines: list[int] | None = None) -> StreamVerdict | None:
    if GateName.CONFORMANCE not in gates:
        return None
    live = {cid for cid, t in facts.claims.items() if t.run.live and not t.run.vanished}
    return stream_verdict(results, live, summaries(facts.files.cursor.spans, lines))


def _judge_all(facts: StreamFacts, gates: Sequence[str], claim_id: str | None,
               well_formed: bool) -> list[GateResult]:
    """Every gate for the given claim, or for every claim of the stream."""
    claims = [claim_id] if claim_id is not None else claims_in(facts)
    records = gates_named(gates)
    with _cyclic_gc_paused():
        judges = (ClaimFacts(facts, c, well_formed) for c in claims)
        return [_result(j, g) for j in judges for g in records]


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Pause the cyclic collector while gate state grows.

    The per-claim facts and results are many small acyclic objects: the collector would walk
    them again and again with nothing to free (about a fifth of the time on large traces).
    Reference counting still frees everything as usual.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _best_effort(facts: StreamFacts, path: str | Path,
                 streams: list[StreamSummary]) -> list[Finding]:
    """SPEC §4.2: ``best_effort`` on ``claim_accepted`` is a problem of that line."""
    seqs = sorted(t.run.own.seq for t in facts.claims.values() if t.run.own is not None
                  and t.run.own.violation is Violation.BEST_EFFORT)
    lines = seq_lines(path, seqs, streams) if seqs else {}
    return [Finding(code="T030", message=f"claim_accepted at seq {seq} declares protection_mode "
                    "best_effort, which is not a claim", path=str(path), line=lines.get(seq),
                    help="declare one of the five claim modes, or emit no claim")
            for seq in seqs]


def check_trace(
    path: str | Path,
    gates: Sequence[str] = GATE_NAMES,
    claim_id: str | None = None,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    stream: BinaryIO | None = None,
) -> TraceCheck:
    """Read one trace file (streaming) and run *gates* for one claim or for every claim.

    *stream*, when given, is read instead of opening *path* (which then only names the trace).
    Raises :class:`~residentkv.errors.TraceReadError` when the file cannot be read at all.
    A trace with reader problems is judged on its valid events, but fails
    ``trace_well_formed`` in every gate.
    """
    gates_named(gates)  # an unknown gate is refused before the trace is read
    reader = TraceReader(path, max_line_bytes=max_line_bytes, stream=stream, fast=True)
    with _cyclic_gc_paused():
        facts = collect(chain.from_iterable(reader.event_chunks()))
        streams = summaries(facts.files.cursor.spans, reader.stream_lines)
        problems = _stream_problems(reader, facts, path, claim_id, streams)
        results = _judge_all(facts, gates, claim_id, reader.problem_count == 0)
        stories = claim_stories(facts, {r.claim_id for r in results if not r.passed})
        conformance = _verdict(facts, gates, results, reader.stream_lines)
        # the facts go while the collector is paused: re-enabling it then walks only the
        # results, not every object of the pass
        del facts
    return TraceCheck(
        path=str(path),
        events=reader.events_read,
        problems=problems,
        problem_count=reader.problem_count + len(problems) - len(reader.problems),
        results=results,
        provenance=reader.provenance,
        stories=stories,
        streams=streams,
        conformance=conformance,
    )


def _stream_problems(reader: TraceReader, facts: StreamFacts, path: str | Path,
                     claim_id: str | None, streams: list[StreamSummary]) -> list[Finding]:
    """The reader's problems and those of the stream as a whole."""
    problems = list(reader.problems)
    if reader.events_read == 0:
        problems.append(Finding(code="T009", message="no valid event in the trace",
                                path=str(path), help="a trace must hold v1 events, one per line"))
    if facts.duplicate_finish is not None:
        seq, request = facts.duplicate_finish
        problems.append(Finding(code="T013", message=f"request {request!r} finished twice "
                                f"(second request_finished at seq {seq})", path=str(path),
                                help="a request finishes once; the first finish is its deadline"))
    problems += _best_effort(facts, path, streams)
    if claim_id is None and not facts.order and reader.events_read:
        problems.append(Finding(code="T012", message="the trace names no claim",
                                path=str(path),
                                help="gates judge claims; events without a claim id show nothing"))
    if claim_id is not None and claim_id not in facts.order:
        problems.append(Finding(code="T011", message=f"no event for claim {claim_id!r}",
                                path=str(path)))
    return problems

