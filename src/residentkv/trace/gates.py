"""The four trace gates of SPEC §4: observation, failure_outcome, lifecycle, attribution.

A gate judges the facts of one stream (:mod:`residentkv.trace.tracker`) for one claim and
returns a :class:`GateResult`: ``passed``, the sorted ``missing`` requirement ids, the negative
``controls`` that fired, the ``evidence`` seqs of each satisfied requirement, and a ``boundary``
sentence saying what the result does not show. A claim with zero events fails every gate.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import chain
from pathlib import Path
from typing import BinaryIO

from pydantic import BaseModel, ConfigDict

from residentkv.findings import Finding
from residentkv.model.automaton import VIOLATION_WHY, Step, Violation
from residentkv.model.events import Envelope, StreamStarted
from residentkv.model.vocabulary import CONTROLS as CONTROLS
from residentkv.model.vocabulary import GATE_NAMES as GATE_NAMES
from residentkv.model.vocabulary import GateName, Requirement
from residentkv.trace.reader import DEFAULT_MAX_LINE_BYTES, TraceReader, seq_lines
from residentkv.trace.tracker import ClaimTrack, StreamFacts, collect

R = Requirement


def _ids(*requirements: Requirement) -> tuple[str, ...]:
    return tuple(r.value for r in requirements)


COMMON: tuple[str, ...] = _ids(
    R.TRACE_WELL_FORMED, R.CLAIM_EVENTS_PRESENT, R.CLAIM_ACCEPTED_BEFORE_LIFECYCLE,
    R.IDENTITY_COMPLETE, R.STABLE_IDENTITY, R.PREDICATE_FIXED, R.LEGAL_TRANSITIONS,
    R.NO_OBSERVATION_GAP, R.NO_OPEN_FAILURE,
)
OBSERVATION: tuple[str, ...] = _ids(
    R.MATERIALIZED, R.STORE_SUCCEEDED, R.OFFLOADED, R.LOOKUP_HIT, R.RESTORE_REQUIRED,
    R.LOAD_SUCCEEDED, R.RESTORED_FROM_OFFLOAD, R.REUSED_AFTER_RESTORE,
    R.RESTORE_CONTENT_VERIFIED,
)
FAILURE: tuple[str, ...] = _ids(
    R.STORE_SUCCEEDED, R.RESTORE_REQUIRED, R.CLAIM_LOAD_FAILED, R.SCHEDULER_FAILURE_BRANCH,
    R.RESTORE_FAILED_SCOPED, R.REFUSAL_ATTRIBUTED, R.OUTCOME_BEFORE_FINISH,
    R.NO_RESTORE_AFTER_FAILURE, R.NO_BLOCKING_SMEAR,
)
LIFECYCLE: tuple[str, ...] = _ids(
    R.NO_BLOCKING_SMEAR, R.SUCCESS_GENERATION, R.FAILURE_GENERATION, R.GENERATIONS_ORDERED,
    R.EXPIRY_BEFORE_LOSS, R.DEMOTION_BEFORE_LOSS, R.NO_HARM, R.MATERIALIZED,
    R.CONFLICT_ATTRIBUTED,
)
ATTRIBUTION: tuple[str, ...] = _ids(
    R.NO_BLOCKING_SMEAR, R.MULTIPLE_CLAIMS, R.TARGET_FAILURE_OUTCOME, R.FAILURES_NAME_ONLY_TARGET,
    R.NON_TARGETS_SERVED,
)

#: gate -> every requirement id it can report
REQUIREMENTS: dict[str, tuple[str, ...]] = {
    GateName.OBSERVATION.value: COMMON + OBSERVATION,
    GateName.FAILURE_OUTCOME.value: COMMON + FAILURE,
    GateName.LIFECYCLE.value: COMMON + LIFECYCLE,
    GateName.ATTRIBUTION.value: COMMON + ATTRIBUTION,
}

BOUNDARIES: dict[str, str] = {
    "observation": (
        "shows one ordered, claim-identified offload/restore/reuse chain in this stream; "
        "not that every reuse of the claim would succeed, nor anything about other streams"
    ),
    "failure_outcome": (
        "shows that this controlled load failure of this claim became an ordered, "
        "claim-scoped refusal before the request finished; not how uncontrolled faults behave"
    ),
    "lifecycle": (
        "shows the claim's lifecycle paths present in this stream in a legal order; "
        "not that paths absent from the stream would behave the same"
    ),
    "attribution": (
        "shows that in this stream the failure outcome named only the target claim; "
        "not attribution under other claim mixes or concurrency"
    ),
}

Seqs = dict[str, list[int]]


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


class TraceCheck(BaseModel):
    """The gates run over one trace file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    events: int
    problems: list[Finding]
    problem_count: int
    results: list[GateResult]
    #: the stream's ``stream_started`` event, when it opens with one (SPEC §4.1)
    provenance: StreamStarted | None = None

    @property
    def passed(self) -> bool:
        return bool(self.results) and not self.problem_count and all(
            r.passed for r in self.results
        )


def _common(facts: StreamFacts, t: ClaimTrack, well_formed: bool) -> Seqs:
    """SPEC §4 common requirements (see :mod:`residentkv.trace.semantics.rules`)."""
    ok: Seqs = {"claim_events_present": [t.first_seq or 0]}
    if well_formed and facts.duplicate_finish is None and not facts.best_effort:
        ok["trace_well_formed"] = []
    if t.head_accepted and t.accepted_seq is not None:
        ok["claim_accepted_before_lifecycle"] = [t.accepted_seq]
    if not t.identity_missing:
        ok["identity_complete"] = []
    if not t.unstable():
        ok["stable_identity"] = []
    p = t.predicate
    if (p is not None and t.first_predicate_id == p[0]
            and t.required_values <= {p[2]}):
        ok["predicate_fixed"] = [t.accepted_seq or 0]
    if t.run.violation is None:
        ok["legal_transitions"] = []
    if facts.gap is None:
        ok["no_observation_gap"] = []
    if not t.open_on:
        ok["no_open_failure"] = []
    if not t.smear:
        ok["no_blocking_smear"] = []
    return ok


def _lifecycle(facts: StreamFacts, t: ClaimTrack) -> tuple[Seqs, tuple[str, ...]]:
    """The lifecycle paths a claim's protection mode promises (SPEC §2, §4, §4.1).

    expiring / demotable: the release precedes every loss, no harm. hard_protected: resident,
    unharmed, and a conflicting active request refused or deferred naming exactly this live
    claim before that request's first finish. soft_priority: resident, every loss reported as
    harm first. offloadable and the rest: a success cycle, then the failure cycle.
    """
    ok: Seqs = {}
    if t.first_harm is None and not t.unreported_loss():
        ok["no_harm"] = []
    if t.materialized_seq is not None:
        ok["materialized"] = [t.materialized_seq]
    if t.mode == "soft_priority":
        # a harmed claim's lifecycle is not shown to pass, reported or not (fail-closed)
        return ok, ("no_blocking_smear", "materialized", "no_harm")
    if t.mode == "hard_protected":
        _conflict_attributed(t, ok)
        return ok, ("no_blocking_smear", "materialized", "no_harm", "conflict_attributed")
    if t.mode in ("expiring", "demotable"):
        key, event = (("expiry_before_loss", "claim_expired") if t.mode == "expiring"
                      else ("demotion_before_loss", "claim_demoted"))
        release = t.release_of.get(event)
        # no vacuous path (SPEC §4.2): the path starts with a materialization that holds
        if release is not None and t.materialized_seq is not None and (
                t.materialized_seq < release) and (t.first_loss is None or release < t.first_loss):
            ok[key] = [release]
        # the holding materialization is evidence of the path (B2 rests on it)
        return ok, ("no_blocking_smear", "materialized", key, "no_harm")
    _generations(t, ok)
    return ok, ("no_blocking_smear", "no_harm", "success_generation", "failure_generation",
                "generations_ordered")


def _conflict_attributed(t: ClaimTrack, ok: Seqs) -> None:
    fin = t.conflict_finish
    if t.conflict is None or fin is None or t.conflict_early:
        return
    if not (t.conflict_refused and fin[1] == "served"):
        ok["conflict_attributed"] = [t.conflict, fin[0]]


def _generations(t: ClaimTrack, ok: Seqs) -> None:
    if t.full:
        ok["success_generation"] = [t.full[0][0]]
    f = t.failure
    if f is None or not f.requirements(f.cycle.before).keys() >= _FAIL_SET:
        return
    ok["failure_generation"] = [f.cycle.seq]
    before = [s for s, label in f.prior_full if label != f.cycle.label]
    if before:
        ok["generations_ordered"] = [before[0], f.cycle.seq]


_FAIL_SET = frozenset(FAILURE) - {"no_blocking_smear"}


class _Roster:
    """Stream-wide claim facts the attribution gate needs, computed once per stream."""

    def __init__(self, facts: StreamFacts) -> None:
        accepted = [c for c in facts.claims.values() if c.accepted_seq is not None]
        self.count = len(accepted)
        self.first_seqs = sorted((c.accepted_seq or 0, c.claim_id) for c in accepted)[:17]
        self.first_two = [s for s, _ in self.first_seqs[:2]]
        self.unserved = {c.claim_id for c in accepted if not c.served()}
        # SPEC §4.2: any other claim of the stream, accepted or not, needs a legal history
        self.unserved |= {cid for cid, t in facts.claims.items() if t.run.violation is not None}
        self.accepted = {c.claim_id for c in accepted}


def _roster(facts: StreamFacts) -> _Roster:
    # computed once per stream, after collection: facts no longer change
    if not isinstance(facts.derived.get("roster"), _Roster):
        facts.derived["roster"] = _Roster(facts)
    roster: _Roster = facts.derived["roster"]
    return roster


def _attribution(facts: StreamFacts, t: ClaimTrack, common: Seqs) -> Seqs:
    ok: Seqs = {}
    roster = _roster(facts)
    if roster.count >= 2:
        ok["multiple_claims"] = roster.first_two
    failure = {**common, **t.failure_requirements()}
    if all(r in failure for r in COMMON + FAILURE):
        ok["target_failure_outcome"] = sorted({s for v in failure.values() for s in v})
    if facts.failure_names == {t.claim_id} and not facts.failure_named_more:
        ok["failures_name_only_target"] = []
    others = roster.count - (t.claim_id in roster.accepted)
    if others and not (roster.unserved - {t.claim_id}):
        # evidence: the acceptance seqs of (at most 16 of) the served non-targets
        ok["non_targets_served"] = [s for s, c in roster.first_seqs if c != t.claim_id][:16]
    return ok


def _controls(facts: StreamFacts, t: ClaimTrack) -> dict[str, bool]:
    names = facts.failure_names
    return {
        "generic_counter_only": facts.generic_counters > 0 and not t.evidence,
        "wrong_claim_failure": bool(names - {None, t.claim_id}) or facts.failure_named_more,
        "unclaimed_failure": facts.unclaimed_failure,
        "fallback_recompute": t.fallback,
        "ordinary_offload_without_claim": facts.unclaimed_store is not None,
        "post_hoc_naming": t.claim_events > 0 and not (
            t.head_accepted and t.accepted_seq is not None),
        "restore_after_reuse": t.restore_after_reuse,
        "blocking_claim_smear": t.smear,
        "ambiguous_identity": t.claim_events > 0 and t.unstable(),
        "admission_refusal": t.admission,
    }


def judge(facts: StreamFacts, gate: str, claim_id: str, *, well_formed: bool = True) -> GateResult:
    """Judge *gate* for *claim_id* from the collected facts of one stream."""
    if gate not in REQUIREMENTS:
        raise ValueError(f"unknown gate {gate!r}")
    return _ClaimJudge(facts, claim_id, well_formed).result(gate)


class _ClaimJudge:
    """One claim's gate results; what its gates share (common requirements, controls) is
    computed once."""

    def __init__(self, facts: StreamFacts, claim_id: str, well_formed: bool) -> None:
        self.facts = facts
        self.claim_id = claim_id
        self.t = t = facts.claims.get(claim_id) or ClaimTrack(claim_id)
        self.common = _common(facts, t, well_formed) if t.claim_events else {}
        # one controls dict shared by the claim's results (they are read-only values)
        self.controls = _controls(facts, t)
        self.illegal = illegal_step(t.run.violation)

    def result(self, gate: str) -> GateResult:
        ok, wanted = self._met(gate)
        missing = sorted(r for r in wanted if r not in ok)
        # values this module computed: built without re-validating them (a test holds every
        # result equal to its validated form)
        return GateResult.model_construct(
            gate=gate,
            claim_id=self.claim_id,
            passed=not missing,
            missing=missing,
            controls=self.controls,
            evidence={k: ok[k] for k in sorted(ok) if k in wanted},
            boundary=BOUNDARIES[gate],
            illegal=self.illegal if "legal_transitions" in missing else None,
        )

    def _met(self, gate: str) -> tuple[Seqs, tuple[str, ...]]:
        """What the claim meets, and which requirements the gate asks of it."""
        facts, t, ok = self.facts, self.t, self.common
        if t.claim_events == 0:
            return {}, COMMON if gate == "lifecycle" else REQUIREMENTS[gate]
        if gate == "observation":
            return {**ok, **t.best}, REQUIREMENTS[gate]
        if gate == "failure_outcome":
            return {**ok, **t.failure_requirements()}, REQUIREMENTS[gate]
        if gate == "lifecycle":
            found, applicable = _lifecycle(facts, t)
            merged = {**ok, **found}
            if t.mode == "soft_priority" and t.unreported_loss(t.first_harm):
                merged.pop("legal_transitions", None)  # an unreported loss is an illegal step
            return merged, (*COMMON, *applicable)
        return {**ok, **_attribution(facts, t, ok)}, REQUIREMENTS[gate]


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


def _judge_all(facts: StreamFacts, gates: Sequence[str], claim_id: str | None,
               well_formed: bool) -> list[GateResult]:
    """Every gate for the given claim, or for every claim of the stream."""
    claims = [claim_id] if claim_id is not None else claims_in(facts)
    with _cyclic_gc_paused():
        judges = (_ClaimJudge(facts, c, well_formed) for c in claims)
        return [j.result(g) for j in judges for g in gates]


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


def _best_effort(facts: StreamFacts, path: str | Path) -> list[Finding]:
    """SPEC §4.2: ``best_effort`` on ``claim_accepted`` is a problem of that line."""
    seqs = sorted(t.run.own.seq for t in facts.claims.values() if t.run.own is not None
                  and t.run.own.violation is Violation.BEST_EFFORT)
    lines = seq_lines(path, seqs) if seqs else {}
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
    unknown = [g for g in gates if g not in REQUIREMENTS]
    if unknown:
        raise ValueError(f"unknown gate(s): {', '.join(unknown)}")
    reader = TraceReader(path, max_line_bytes=max_line_bytes, stream=stream, fast=True)
    with _cyclic_gc_paused():
        facts = collect(chain.from_iterable(reader.event_chunks()))
    problems = list(reader.problems)
    if reader.events_read == 0:
        problems.append(Finding(code="T009", message="no valid event in the trace",
                                path=str(path), help="a trace must hold v1 events, one per line"))
    well_formed = reader.problem_count == 0
    if facts.duplicate_finish is not None:
        seq, request = facts.duplicate_finish
        problems.append(Finding(code="T013", message=f"request {request!r} finished twice "
                                f"(second request_finished at seq {seq})", path=str(path),
                                help="a request finishes once; the first finish is its deadline"))
    problems += _best_effort(facts, path)
    if claim_id is None and not facts.order and reader.events_read:
        problems.append(Finding(code="T012", message="the trace names no claim",
                                path=str(path),
                                help="gates judge claims; events without a claim id show nothing"))
    if claim_id is not None and claim_id not in facts.order:
        problems.append(Finding(code="T011", message=f"no event for claim {claim_id!r}",
                                path=str(path)))
    results = _judge_all(facts, gates, claim_id, well_formed)
    return TraceCheck(
        path=str(path),
        events=reader.events_read,
        problems=problems,
        problem_count=reader.problem_count + len(problems) - len(reader.problems),
        results=results,
        provenance=reader.provenance,
    )

