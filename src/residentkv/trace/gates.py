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
from itertools import pairwise
from pathlib import Path
from typing import BinaryIO

from pydantic import BaseModel, ConfigDict

from residentkv.findings import Finding
from residentkv.model.claim import ProtectionMode, Registration
from residentkv.model.events import Envelope, StreamStarted
from residentkv.model.vocabulary import CONTROLS as CONTROLS
from residentkv.model.vocabulary import GATE_NAMES as GATE_NAMES
from residentkv.model.vocabulary import GateName, Requirement
from residentkv.trace.reader import DEFAULT_MAX_LINE_BYTES, TraceReader
from residentkv.trace.tracker import Chain, ClaimTrack, StreamFacts, collect

R = Requirement


def _ids(*requirements: Requirement) -> tuple[str, ...]:
    return tuple(r.value for r in requirements)


COMMON: tuple[str, ...] = _ids(
    R.TRACE_WELL_FORMED, R.CLAIM_EVENTS_PRESENT, R.CLAIM_ACCEPTED_BEFORE_LIFECYCLE,
    R.IDENTITY_COMPLETE, R.STABLE_IDENTITY, R.PREDICATE_FIXED,
)
OBSERVATION: tuple[str, ...] = _ids(
    R.MATERIALIZED, R.STORE_SUCCEEDED, R.OFFLOADED, R.LOOKUP_HIT, R.RESTORE_REQUIRED,
    R.LOAD_SUCCEEDED, R.RESTORED_FROM_OFFLOAD, R.REUSED_AFTER_RESTORE,
)
FAILURE: tuple[str, ...] = _ids(
    R.STORE_SUCCEEDED, R.RESTORE_REQUIRED, R.CLAIM_LOAD_FAILED, R.SCHEDULER_FAILURE_BRANCH,
    R.RESTORE_FAILED_SCOPED, R.REFUSAL_ATTRIBUTED, R.OUTCOME_BEFORE_FINISH,
    R.NO_RESTORE_AFTER_FAILURE,
)
LIFECYCLE: tuple[str, ...] = _ids(
    R.LEGAL_TRANSITIONS, R.SUCCESS_GENERATION, R.FAILURE_GENERATION, R.GENERATIONS_ORDERED,
    R.EXPIRY_BEFORE_LOSS, R.DEMOTION_BEFORE_LOSS, R.NO_HARM, R.MATERIALIZED,
    R.CONFLICT_ATTRIBUTED,
)
ATTRIBUTION: tuple[str, ...] = _ids(
    R.MULTIPLE_CLAIMS, R.TARGET_FAILURE_OUTCOME, R.FAILURES_NAME_ONLY_TARGET,
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


def _first(*seqs: int | None) -> bool:
    """True when every seq is present and they are strictly increasing."""
    present = [s for s in seqs if s is not None]
    return len(present) == len(seqs) and all(a < b for a, b in pairwise(present))


def _common(facts: StreamFacts, t: ClaimTrack, well_formed: bool) -> Seqs:
    ok: Seqs = {"claim_events_present": [t.first_seq or 0]}
    if well_formed:
        ok["trace_well_formed"] = []
    if (t.first_event == "claim_accepted" and t.registration is Registration.PRE_REGISTERED
            and t.accepted_seq is not None):
        ok["claim_accepted_before_lifecycle"] = [t.accepted_seq]
    if t.identity_missing_seq is None and len(t.identity) == 4:
        ok["identity_complete"] = []
    if t.ambiguous_seq is None:
        ok["stable_identity"] = []
    if (t.predicate_id is not None and t.identity.get("predicate_id") == t.predicate_id
            and t.required_values <= {t.predicate_blocks}):
        ok["predicate_fixed"] = [t.accepted_seq or 0]
    return ok


def _offload_before(t: ClaimTrack, c: Chain) -> int | None:
    candidates = [s for g, s in t.offloaded if g <= c.generation and s < c.restore_required]
    return min(candidates) if candidates else None


def _observation_chain(t: ClaimTrack, c: Chain) -> Seqs:
    ok: Seqs = {}
    off = _offload_before(t, c)
    if t.materialized_seq is not None and t.materialized_seq < c.restore_required:
        ok["materialized"] = [t.materialized_seq]
    if off is not None:
        ok["offloaded"] = [off]
    if t.store_ok_seq is not None and t.store_ok_seq < min(off or c.restore_required,
                                                          c.restore_required):
        ok["store_succeeded"] = [t.store_ok_seq]
    if c.lookup_hit is not None and (off is None or off < c.lookup_hit):
        ok["lookup_hit"] = [c.lookup_hit]
    ok["restore_required"] = [c.restore_required]
    if c.load_ok is not None:
        ok["load_succeeded"] = [c.load_ok]
    if c.restored_offload is not None and (c.load_ok is None or c.load_ok < c.restored_offload):
        ok["restored_from_offload"] = [c.restored_offload]
    if _first(c.restored_any, c.reused_holds) and c.reused_before_restore is None:
        ok["reused_after_restore"] = [c.reused_holds or 0]
    return ok


def _failure_chain(facts: StreamFacts, t: ClaimTrack, c: Chain) -> Seqs:
    ok: Seqs = {"restore_required": [c.restore_required]}
    if t.store_ok_seq is not None and t.store_ok_seq < c.restore_required:
        ok["store_succeeded"] = [t.store_ok_seq]
    if c.load_failed is None:
        return ok
    if c.load_failed_injected:
        ok["claim_load_failed"] = [c.load_failed]
    if c.sched_fail is not None:
        ok["scheduler_failure_branch"] = [c.sched_fail]
    if c.restore_failed_scoped is not None:
        ok["restore_failed_scoped"] = [c.restore_failed_scoped]
    if c.refusal_attributed is not None:
        ok["refusal_attributed"] = [c.refusal_attributed]
    finish = facts.finish_seq.get(c.refusal_request or "") if c.refusal_request else None
    if c.refusal_any is not None and finish is not None and c.refusal_any < finish:
        ok["outcome_before_finish"] = [c.refusal_any, finish]
    if t.last_restored_seq is None or t.last_restored_seq < c.load_failed:
        ok["no_restore_after_failure"] = []
    return ok


def _best(chains: Iterable[Seqs], wanted: frozenset[str]) -> Seqs:
    """The chain that satisfies most of *wanted* (the first, on ties)."""
    best: Seqs = {}
    best_score = 0
    for seqs in chains:
        score = len(wanted & seqs.keys())
        if score > best_score:
            best, best_score = seqs, score
    return best


_OBS_SET = frozenset(OBSERVATION)
_FAIL_SET = frozenset(FAILURE)


def _views(facts: StreamFacts, t: ClaimTrack) -> tuple[list[Seqs], list[Seqs]]:
    """Observation and failure evaluations of each chain of *t*, in generation order.

    Several gates judge the same claim one after another; only the last claim's views are kept,
    so memory stays flat however many claims the stream has.
    """
    cached = facts.derived.get("views")
    if cached is None or cached[0] is not t:
        chains = _ordered(t)
        cached = (t, [_observation_chain(t, c) for c in chains],
                  [_failure_chain(facts, t, c) for c in chains])
        facts.derived["views"] = cached
    return cached[1], cached[2]


def _observation(facts: StreamFacts, t: ClaimTrack) -> Seqs:
    return _best(_views(facts, t)[0], _OBS_SET)


def _failure(facts: StreamFacts, t: ClaimTrack) -> Seqs:
    return _best(_views(facts, t)[1], _FAIL_SET)


def _ordered(t: ClaimTrack) -> list[Chain]:
    return [t.chains[g] for g in sorted(t.chains)]


def _lifecycle(facts: StreamFacts, t: ClaimTrack) -> tuple[Seqs, tuple[str, ...]]:
    """The lifecycle paths a claim's protection mode promises (SPEC §2, §4).

    expiring / demotable: the release precedes every loss, no harm. hard_protected: resident,
    unharmed, and a conflicting active request refused or deferred naming exactly this claim
    before that request finished. soft_priority: resident (any loss must be reported as harm).
    offloadable and the rest: a success generation, then a failure generation.
    """
    ok: Seqs = {}
    if t.illegal_seq is None and t.lifecycle is not None:
        ok["legal_transitions"] = []
    if t.harm_seq is None:
        ok["no_harm"] = []
    if t.materialized_seq is not None:
        ok["materialized"] = [t.materialized_seq]
    if t.mode is ProtectionMode.SOFT_PRIORITY:
        return ok, ("legal_transitions", "materialized")
    if t.mode is ProtectionMode.HARD_PROTECTED:
        finish = facts.finish_seq.get(t.conflict_request or "")
        if t.conflict_seq is not None and finish is not None and t.conflict_seq < finish:
            ok["conflict_attributed"] = [t.conflict_seq, finish]
        return ok, ("legal_transitions", "materialized", "no_harm", "conflict_attributed")
    if t.mode in (ProtectionMode.EXPIRING, ProtectionMode.DEMOTABLE):
        key, event = (
            ("expiry_before_loss", "claim_expired") if t.mode is ProtectionMode.EXPIRING
            else ("demotion_before_loss", "claim_demoted")
        )
        release = t.release_seq.get(event)
        if release is not None and (t.first_loss_seq is None or release < t.first_loss_seq):
            ok[key] = [release]
        return ok, ("legal_transitions", key, "no_harm")
    observed, failed = _views(facts, t)
    chains = _ordered(t)
    success = [c for c, v in zip(chains, observed, strict=True) if v.keys() >= _OBS_SET]
    failure = [c for c, v in zip(chains, failed, strict=True) if v.keys() >= _FAIL_SET]
    if success:
        ok["success_generation"] = [success[0].restore_required]
    if failure:
        ok["failure_generation"] = [failure[-1].restore_required]
    if success and failure and success[0].generation < failure[-1].generation and (
        (success[0].reused_holds or 0) < failure[-1].restore_required
    ):
        ok["generations_ordered"] = [success[0].reused_holds or 0, failure[-1].restore_required]
    return ok, ("legal_transitions", "no_harm", "success_generation", "failure_generation",
                "generations_ordered")


class _Roster:
    """Stream-wide claim facts the attribution gate needs, computed once per stream."""

    def __init__(self, facts: StreamFacts) -> None:
        accepted = [c for c in facts.claims.values() if c.accepted_seq is not None]
        self.count = len(accepted)
        self.first_seqs = sorted((c.accepted_seq or 0, c.claim_id) for c in accepted)[:17]
        self.first_two = [s for s, _ in self.first_seqs[:2]]
        self.unserved = {c.claim_id for c in accepted if not _served(c)}
        self.accepted_seqs = {c.claim_id: c.accepted_seq or 0 for c in accepted}


def _roster(facts: StreamFacts) -> _Roster:
    # computed once per stream, after collection: facts no longer change
    if not isinstance(facts.derived.get("roster"), _Roster):
        facts.derived["roster"] = _Roster(facts)
    roster: _Roster = facts.derived["roster"]
    return roster


def _attribution(facts: StreamFacts, t: ClaimTrack, well_formed: bool) -> Seqs:
    ok: Seqs = {}
    roster = _roster(facts)
    if roster.count >= 2:
        ok["multiple_claims"] = roster.first_two
    failure = {**_common(facts, t, well_formed), **_failure(facts, t)}
    if all(r in failure for r in COMMON + FAILURE):
        ok["target_failure_outcome"] = sorted({s for v in failure.values() for s in v})
    if (facts.failure_named == {t.claim_id} and not facts.failure_named_overflow
            and facts.unclaimed_failure is None and facts.smeared_refusal is None
            and t.smear_seq is None):
        ok["failures_name_only_target"] = []
    others = roster.count - (t.claim_id in roster.accepted_seqs)
    if others and not (roster.unserved - {t.claim_id}):
        # evidence: the acceptance seqs of (at most 16 of) the served non-targets
        ok["non_targets_served"] = [s for s, c in roster.first_seqs if c != t.claim_id][:16]
    return ok


def _served(o: ClaimTrack) -> bool:
    if o.harm_seq is not None or o.failure_seq is not None:
        return False
    return all(c.restored_offload is not None and c.load_failed is None for c in o.chains.values())


def _controls(facts: StreamFacts, t: ClaimTrack) -> dict[str, bool]:
    others_failed = bool(facts.failure_named - {t.claim_id}) or facts.failure_named_overflow
    chains = t.chains.values()
    return {
        "generic_counter_only": facts.generic_counters > 0 and t.event_count == 0,
        "wrong_claim_failure": others_failed,
        "unclaimed_failure": facts.unclaimed_failure is not None,
        "fallback_recompute": any(
            c.restored_fallback is not None or c.sched_recompute is not None for c in chains
        ),
        "ordinary_offload_without_claim": facts.unclaimed_store is not None,
        "post_hoc_naming": t.registration is Registration.POST_HOC or (
            t.event_count > 0 and t.first_event != "claim_accepted"
        ),
        "restore_after_reuse": any(c.reused_before_restore is not None for c in chains),
        "blocking_claim_smear": t.smear_seq is not None,
        "ambiguous_identity": t.ambiguous_seq is not None,
        "admission_refusal": t.admission_refusal_seq is not None,
    }


def _shared_controls(facts: StreamFacts, t: ClaimTrack) -> dict[str, bool]:
    """One controls dict per claim, shared by its gate results (they are read-only values)."""
    cached = facts.derived.get("controls")
    if cached is None or cached[0] is not t:
        cached = facts.derived["controls"] = (t, _controls(facts, t))
    controls: dict[str, bool] = cached[1]
    return controls


def judge(facts: StreamFacts, gate: str, claim_id: str, *, well_formed: bool = True) -> GateResult:
    """Judge *gate* for *claim_id* from the collected facts of one stream."""
    if gate not in REQUIREMENTS:
        raise ValueError(f"unknown gate {gate!r}")
    t = facts.claims.get(claim_id) or ClaimTrack(claim_id)
    wanted: tuple[str, ...] = REQUIREMENTS[gate]
    if t.event_count == 0:
        ok: Seqs = {}
    else:
        ok = _common(facts, t, well_formed)
        if gate == "observation":
            ok.update(_observation(facts, t))
        elif gate == "failure_outcome":
            ok.update(_failure(facts, t))
        elif gate == "lifecycle":
            found, applicable = _lifecycle(facts, t)
            ok.update(found)
            wanted = COMMON + applicable
        else:
            ok.update(_attribution(facts, t, well_formed))
    if t.event_count == 0 and gate == "lifecycle":
        wanted = (*COMMON, "legal_transitions")
    missing = sorted(r for r in wanted if r not in ok)
    # built from values this module computed: validation would only re-check them
    return GateResult.model_construct(
        gate=gate,
        claim_id=claim_id,
        passed=not missing,
        missing=missing,
        controls=_shared_controls(facts, t),
        evidence={k: v for k, v in sorted(ok.items()) if k in wanted},
        boundary=BOUNDARIES[gate],
    )


def claims_in(facts: StreamFacts) -> list[str]:
    """Every claim id that has at least one claim event, in order of first appearance."""
    return list(facts.claims)


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
        return [judge(facts, g, c, well_formed=well_formed) for c in claims for g in gates]


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
        facts = collect(reader.events())
    problems = list(reader.problems)
    if reader.events_read == 0:
        problems.append(Finding(code="T009", message="no valid event in the trace",
                                path=str(path), help="a trace must hold v1 events, one per line"))
    well_formed = reader.problem_count == 0
    if claim_id is None and not facts.claims and reader.events_read:
        problems.append(Finding(code="T012", message="the trace names no claim",
                                path=str(path),
                                help="gates judge claims; events without a claim id show nothing"))
    if claim_id is not None and claim_id not in facts.claims:
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

