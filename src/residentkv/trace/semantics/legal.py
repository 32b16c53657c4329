"""The reference reading of the automaton (SPEC §4.2–§4.3): replay the table over whole event
lists.

A claim's run is every event whose envelope names it, and every refusal or deferral that names
it in any claim field (SPEC §4.3: a step of each claim it names); a request's run is every
event that names it. Each guard is a function of the step (:data:`CLAIM_GUARDS`,
:data:`REQUEST_GUARDS`) that asks the steps accepted so far and the whole stream — quadratic
and obvious. Where each stream of a file ends (SPEC §9.1) the accepting conditions are asked,
and a claim left open vanishes. Legality is per claim: a claim's violations are its own run's
and those of the runs of the requests its events name (in any claim field). The streaming
acceptor (:mod:`residentkv.trace.acceptor`) keeps running answers instead; the two must agree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from residentkv.model.automaton import (
    CARRYING_KINDS,
    CLAIM_TABLE,
    HEAD_ENDINGS,
    LIVE,
    ON_DEVICE,
    OUTCOME_ENDINGS,
    PRE,
    REFUSALS,
    REQUEST_TABLE,
    STAY,
    Guard,
    Outcome,
    Phase,
    RequestGuard,
    RequestPhase,
    Step,
    Violation,
    decide,
    failed_load,
    failure_chain_event,
    outcome_envelope_mismatch,
    refusal_names,
    substrate_failure,
)
from residentkv.model.event_record import claim_names
from residentkv.model.predicate import AcceptedPredicate
from residentkv.model.vocabulary import Arbiter
from residentkv.trace.acceptor import defining, earlier
from residentkv.trace.semantics.stream import NEVER, Event, Stream, first, generation
from residentkv.trace.streams import CLOSER, OPENER, StreamEnd

__all__ = ["Stream", "Window", "claim_found", "claim_run", "claim_steps", "claim_violation",
           "head_answered", "head_windows", "phase_at", "request_cut_live", "request_found",
           "request_run", "requests_naming"]


def _memo(stream: Stream) -> dict[tuple[str, str], Any]:
    """Per-stream answers (the stream's events never change once read)."""
    memo: dict[tuple[str, str], Any] = vars(stream).setdefault("_legal_memo", {})
    return memo


#: a violation found, and whether it is settled (not one only the reading's stop made:
#: SPEC §9.1, what is open where the reading stops is live)
Found = tuple[Step, bool]


def claim_violation(stream: Stream, claim_id: str, *, settled: bool = False) -> Step | None:
    """The first violation of the claim's run or of the run of a request that names it (with
    *settled*, the first but those only the reading's stop made)."""
    memo = _memo(stream)
    key = ("violation", claim_id)
    if key not in memo:
        memo[key] = _claim_violations(stream, claim_id)
    found: list[Found] = memo[key]
    return _first(step for step, done in found if done or not settled)


def _first(steps: Any) -> Step | None:
    found: Step | None = None
    for step in steps:
        found = earlier(found, step)
    return found


def _claim_violations(stream: Stream, claim_id: str) -> list[Found]:
    """SPEC §4.3 per claim: the claim's own run, and the runs of the requests it names."""
    found = list(claim_found(stream, claim_id))
    for rid in requests_naming(stream, claim_id):
        found += request_found(stream, rid)
    return found


def requests_naming(stream: Stream, claim_id: str) -> set[str]:
    """The requests an event names together with the claim (in any claim field)."""
    return {e.request_id for e in stream.events
            if e.request_id is not None and claim_id in refusal_names(e)}


def request_run(stream: Stream, request_id: str) -> tuple[RequestPhase, Step | None]:
    """The state one request's run ends in, and its first violation."""
    state, found = _request_replay(stream, request_id)
    return state, _first(step for step, _ in found)


def request_found(stream: Stream, request_id: str) -> list[Found]:
    """Every violation of one request's run."""
    return _request_replay(stream, request_id)[1]


def _request_replay(stream: Stream, request_id: str) -> tuple[RequestPhase, list[Found]]:
    state = RequestPhase.NEW
    found: list[Found] = []
    mine = [e for e in stream.events if e.request_id == request_id]
    met: list[tuple[Event, RequestPhase]] = []
    for e in mine:
        at = _RequestAt(e, list(met), state)
        met.append((e, state))
        outcome = decide(REQUEST_TABLE[state, e.event], at.holds)
        if isinstance(outcome, Violation):
            found.append((Step(e.seq, e.event, state.value, outcome), True))
        elif outcome is not STAY:
            state = RequestPhase(outcome)
    # accepting condition: a request with a failure chain finished in its stream; one its
    # incarnation's death cut off could not; where the reading stopped it still may
    chain = first(mine, failure_chain_event)
    if chain is not None and state is not RequestPhase.FINISHED:
        how = stream.spans[stream.stream_of(chain.seq)].end
        if how is not StreamEnd.RESTARTED:
            found.append((Step(chain.seq, chain.event, state.value, Violation.UNFINISHED),
                          how is StreamEnd.CLOSED))
    return state, found


def request_cut_live(stream: Stream, request_id: str) -> bool:
    """Where the reading stopped: the request has a failure chain and has not finished (every
    claim it names is live)."""
    return any(not done and step.violation is Violation.UNFINISHED
               for step, done in request_found(stream, request_id))


def claim_run(stream: Stream, claim_id: str) -> tuple[Phase, Step | None]:
    """The state the claim's own run ends in, and its first violation."""
    state = phase_at(stream, claim_id, NEVER)
    return state, _first(step for step, _ in claim_found(stream, claim_id))


def claim_steps(stream: Stream, claim_id: str) -> list[Step]:
    """Every violation of the claim's own run, in seq order."""
    return sorted((step for step, _ in claim_found(stream, claim_id)), key=lambda st: st.seq)


def claim_found(stream: Stream, claim_id: str) -> list[Found]:
    """Every violation of the claim's own run (its events, the accepting conditions where each
    stream ends, and its vanishing)."""
    memo = _memo(stream)
    key = ("found", claim_id)
    if key not in memo:
        found = [(step, True) for step in _replay(stream, claim_id)[1]]
        found += _never_decided(stream, claim_id)
        found += _vanished(stream, claim_id)
        memo[key] = found
    result: list[Found] = memo[key]
    return result


def phase_at(stream: Stream, claim_id: str, position: int) -> Phase:
    """The claim's state just before the event at *position* (NEVER: at the end)."""
    timeline, _ = _replay(stream, claim_id)
    state = Phase.START
    for seq, phase in timeline:
        if seq >= position:
            break
        state = phase
    return state


def _replay(stream: Stream, claim_id: str) -> tuple[list[tuple[int, Phase]], list[Step]]:
    """The claim's own run: each state it entered (after the seq of its step), and each
    violation."""
    memo = _memo(stream)
    key = ("run", claim_id)
    if key not in memo:
        memo[key] = _table_replay(stream, claim_id)
    found: tuple[list[tuple[int, Phase]], list[Step]] = memo[key]
    return found


def _table_replay(stream: Stream, claim_id: str) -> tuple[list[tuple[int, Phase]], list[Step]]:
    state = Phase.START
    history: list[Event] = []  # the steps the automaton accepted, in order
    timeline: list[tuple[int, Phase]] = []
    found: list[Step] = []
    for e in stream.events:
        if e.claim_id != claim_id and not (e.event in REFUSALS
                                           and claim_id in refusal_names(e)):
            continue
        at = _ClaimAt(e, history, stream, state, claim_id)
        outcome: Outcome = decide(CLAIM_TABLE[state, e.event], at.holds)
        if isinstance(outcome, Violation):
            found.append(Step(e.seq, e.event, state.value, outcome))
            continue
        history.append(e)
        if outcome is not STAY:
            state = Phase(outcome)
            timeline.append((e.seq, state))
    return timeline, found


def _never_decided(stream: Stream, claim_id: str) -> list[Found]:
    """Accepting condition, per stream: a claim an event of the stream named (a
    request_started or its claim_submitted; nothing else is legal before the decision) was
    decided in that stream. Where the reading stopped it still may be (live)."""
    found: list[Found] = []
    named: dict[int, Event] = {}
    for e in stream.events:
        if (e.claim_id == claim_id and e.event in ("request_started", "claim_submitted")
                and phase_at(stream, claim_id, e.seq) in PRE):
            named.setdefault(stream.stream_of(e.seq), e)
    for k, e in named.items():
        stop = stream.stream_stop(e.seq)
        state = phase_at(stream, claim_id, stop)
        if state in PRE:
            found.append((Step(e.seq, e.event, state.value, Violation.NEVER_DECIDED),
                          stream.spans[k].end is not StreamEnd.OPEN))
    return found


def _vanished(stream: Stream, claim_id: str) -> list[Found]:
    """SPEC §9.1: open (accepted, not ended) at its stream's ``stream_closed``, or at the next
    stream's opener and still open when that stream's head window closes."""
    found: list[Found] = []
    for span in stream.spans:
        if span.closed is not None:
            state = phase_at(stream, claim_id, span.closed)
            if state in LIVE:
                found.append((Step(span.closed, CLOSER, state.value, Violation.VANISHED), True))
    for window in head_windows(stream):
        if claim_id not in window.pending:
            continue
        state = phase_at(stream, claim_id, NEVER if window.close is None else window.close)
        if state in LIVE:
            found.append((Step(window.opener, OPENER, state.value, Violation.VANISHED),
                          window.close is not None))
    return found


@dataclass(frozen=True)
class Window:
    """The head of a stream opened after another (SPEC §9.1)."""

    #: the position of the stream's opener
    opener: int
    #: the claims open (accepted, not ended) when the previous stream ended
    pending: frozenset[str]
    #: the position of the first event after the opener that is not an ending of a pending
    #: claim not yet ended there (None: the reading stopped inside the window)
    close: int | None


def head_windows(stream: Stream) -> list[Window]:
    """The head window of every stream after the first (see :class:`Window`)."""
    memo = _memo(stream)
    if ("windows", "") not in memo:
        memo["windows", ""] = _head_windows(stream)
    found: list[Window] = memo["windows", ""]
    return found


def _head_windows(stream: Stream) -> list[Window]:
    claims = claim_names(*(e.claim_id for e in stream.events))
    windows = []
    for span in stream.spans[1:]:
        opener = span.opener or 0
        pending = frozenset(c for c in claims if phase_at(stream, c, opener) in LIVE)
        waiting, close = set(pending), None
        for e in stream.events:
            if e.seq <= opener:
                continue
            if e.event in HEAD_ENDINGS and e.claim_id in waiting:
                waiting.discard(e.claim_id)
                continue
            close = e.seq
            break
        windows.append(Window(opener, pending, close))
    return windows


def head_answered(stream: Stream, claim_id: str, position: int) -> bool | None:
    """For a failure at *position* in a stream its incarnation's death ended: whether the
    claim, open then, ended at the next stream's head (None: the reading stopped in that head
    with the claim still open)."""
    k = stream.stream_of(position)
    if stream.spans[k].end is not StreamEnd.RESTARTED:
        return False
    window = head_windows(stream)[k]
    if claim_id not in window.pending:
        return False
    state = phase_at(stream, claim_id, NEVER if window.close is None else window.close)
    if state not in LIVE:
        return True
    return None if window.close is None else False


# ------------------------------------------------------------------------ the claim guards
@dataclass(frozen=True)
class _ClaimAt:
    """A step of a claim's run: the event, the steps the automaton accepted before it, the
    stream, the state it meets and the claim."""

    e: Event
    history: list[Event]
    stream: Stream
    state: Phase
    claim: str

    def named(self, *names: str) -> list[Event]:
        return [h for h in self.history if h.event in names]

    @property
    def accepted(self) -> Event | None:
        return first(self.history, lambda h: h.event == "claim_accepted")

    @property
    def predicate(self) -> AcceptedPredicate | None:
        a = self.accepted
        return None if a is None else AcceptedPredicate.of(a.predicate, a.footprint_blocks)

    @property
    def cycle(self) -> Event | None:
        """The open (last) restore cycle's claim_restore_required."""
        cycles = self.named("claim_restore_required")
        return cycles[-1] if cycles else None

    @property
    def cycle_steps(self) -> list[Event]:
        """The steps accepted since the open cycle's claim_restore_required (none: no cycle)."""
        opened = [i for i, h in enumerate(self.history) if h.event == "claim_restore_required"]
        return self.history[opened[-1]:] if opened else []

    @property
    def cycle_jobs(self) -> set[Any]:
        """The jobs the open cycle's kv_load_started events started."""
        return {h.job_id for h in self.cycle_steps
                if h.event == "kv_load_started" and h.job_id is not None}

    @property
    def cycle_failed(self) -> bool:
        """A load of the open cycle failed, or the failure branch fired on its request (among
        the steps accepted)."""
        steps = self.cycle_steps
        return any((h.event in ("kv_load_finished", "kv_load_failed") and failed_load(h))
                   or _fail_branch_of(h, steps[0]) for h in steps[1:])

    def proves(self) -> bool:
        p = self.predicate
        return p is not None and p.proves(self.e.leading, self.e.surviving)

    def holds(self, guard: Guard) -> bool:
        return CLAIM_GUARDS[guard](self)


def claim_scope(history: list[Event]) -> str | None:
    """SPEC §4.2: the owner scope on the claim's ``claim_accepted``, else on its
    ``claim_submitted``."""
    a = first(history, lambda h: h.event == "claim_accepted")
    if a is not None and a.owner_scope is not None:
        return str(a.owner_scope)
    s = first(history, lambda h: h.event == "claim_submitted")
    return None if s is None or s.owner_scope is None else str(s.owner_scope)


def request_scope(stream: Stream, request_id: str | None, before: int) -> str | None:
    """SPEC §4.2: a request's owner scope is fixed at its first declaration (its first
    ``request_started``)."""
    started = first(stream.events, lambda h: h.event == "request_started"
                    and h.request_id == request_id and request_id is not None)
    if started is None or started.seq >= before or started.owner_scope is None:
        return None
    return str(started.owner_scope)


def _loss(at: _ClaimAt) -> bool:
    """SPEC §4.1/§4.2: a reuse that does not hold, a materialization the numbers no longer
    prove, or an eviction of a needed position while no stored, offloaded copy is held (only
    an offloadable claim holds one; an eviction from the copy's medium loses it)."""
    e, history = at.e, at.history
    if e.event == "claim_reused":
        return not e.holds
    if e.event == "claim_materialized":
        return not at.proves()
    p = at.predicate
    if p is not None and not p.needs(e.position):
        return False
    a = at.accepted
    stores = [i for i, h in enumerate(history) if h.event == "kv_store_finished" and h.success]
    if a is None or str(a.protection_mode) != "offloadable" or not stores:
        return True
    tier = history[stores[-1]].to_tier
    lost = any(h.event == "block_evicted" and h.medium is not None and h.medium == tier
               and (p is None or p.needs(h.position)) for h in history[stores[-1]:])
    offloaded = any(h.event == "claim_offloaded" for h in history)
    return lost or not offloaded or (e.medium is not None and e.medium == tier)


def _copy(at: _ClaimAt) -> Event | None:
    """The claim's stored copy: the last successful store, else the last offload."""
    stores = [h for h in at.named("kv_store_finished") if h.success]
    offloads = at.named("claim_offloaded")
    return stores[-1] if stores else (offloads[-1] if offloads else None)


def _not_carrier(at: _ClaimAt) -> bool:
    """A request_started of the claim's stream named it before acceptance on another request
    (a request names the claim within its own stream)."""
    start = at.stream.stream_start(at.e.seq)
    return any(h.request_id != at.e.request_id for h in at.named("request_started")
               if h.seq > start)


def _label_below(at: _ClaimAt) -> bool:
    gen = generation(at.e)
    return gen is not None and any(gen < generation(h)  # type: ignore[operator]
                                   for h in at.named("claim_restore_required"))


def _label_not_new(at: _ClaimAt) -> bool:
    gen = generation(at.e)
    cycles = at.named("claim_restore_required")
    copies = at.named("kv_store_started", "kv_store_finished", "claim_offloaded")
    return any(generation(h) >= gen for h in cycles) or any(  # type: ignore[operator]
        generation(h) is not None and generation(h) > gen for h in copies)  # type: ignore[operator]


def _wrong_tier(at: _ClaimAt) -> bool:
    copy = _copy(at)
    return copy is None or at.e.from_tier != copy.to_tier


def _load_tier(at: _ClaimAt) -> bool:
    tier = getattr(at.e, "from_tier", None)
    copy = _copy(at)
    return tier is not None and (copy is None or tier != copy.to_tier)


def _carrier_scope(at: _ClaimAt) -> bool:
    e = at.e
    mine = e.owner_scope if e.owner_scope is not None else claim_scope(at.history)
    theirs = request_scope(at.stream, e.request_id, e.seq)
    return mine is not None and theirs is not None and theirs != str(mine)


def _foreign_scope(at: _ClaimAt) -> bool:
    """SPEC §4.2, §4.3: restores and reuses are by a request of the claim's owner scope; an
    unscoped claim's only by requests without one."""
    return request_scope(at.stream, at.e.request_id, at.e.seq) != claim_scope(at.history)


def _other_label(at: _ClaimAt) -> bool:
    gen, cycle = generation(at.e), at.cycle
    return gen is not None and (cycle is None or gen != generation(cycle))


def _foreign_job(at: _ClaimAt) -> bool:
    job = getattr(at.e, "job_id", None)
    return job is not None and job not in at.cycle_jobs


def carries(stream: Stream, request_id: str | None, claim: str, before: int) -> bool:
    """SPEC §4.3: the request carried the claim before *before*: its claim_accepted, lookup,
    restore or reuse named the request."""
    return request_id is not None and any(
        h.seq < before and h.request_id == request_id and h.claim_id == claim
        and h.event in CARRYING_KINDS for h in stream.events)


def _off_carrier(at: _ClaimAt) -> bool:
    """SPEC §4.3: a refusal or deferral naming the claim on a request that does not carry it,
    and no conflict with a hard_protected claim resident on the device."""
    if carries(at.stream, at.e.request_id, at.claim, at.e.seq):
        return False
    a = at.accepted
    hard = a is not None and str(a.protection_mode) == "hard_protected"
    return not (hard and at.state in ON_DEVICE)


def _fail_branch_of(e: Event, cycle: Event | None) -> bool:
    """*e* is the runtime's failure branch (policy ``fail``) on *cycle*'s request."""
    return (cycle is not None and e.event == "scheduler_load_failure" and e.policy == "fail"
            and e.request_id is not None and e.request_id == cycle.request_id)


def _late_record(at: _ClaimAt) -> bool:
    """SPEC §4.3: the failed cycle's invalid-block report after the claim failed closed: on
    the cycle's request, naming a job the cycle started."""
    cycle, e = at.cycle, at.e
    if cycle is None or e.request_id is None or e.request_id != cycle.request_id:
        return False
    if e.event == "claim_restore_failed":
        return at.cycle_failed
    return e.job_id is not None and e.job_id in at.cycle_jobs


#: the reference answer of every claim guard (SPEC §4.2–§4.3, sentence by sentence)
CLAIM_GUARDS: dict[Guard, Callable[[_ClaimAt], bool]] = {
    Guard.BEST_EFFORT: lambda at: str(at.e.protection_mode) == "best_effort",
    Guard.NOT_CARRIER: _not_carrier,
    Guard.EARLIER_INCARNATION: lambda at: any(
        h.seq < at.stream.stream_start(at.e.seq) for h in at.named("claim_accepted")),
    Guard.CHANGED_DEFINITION: lambda at: (a := at.accepted) is not None and defining(
        a) != defining(at.e),
    Guard.HOLDS_CONTRADICTED: lambda at: bool(at.e.holds) != at.proves(),
    Guard.PROVEN: lambda at: at.proves(),
    Guard.SAME_TIER: lambda at: bool(at.e.from_tier == at.e.to_tier),
    Guard.LABEL_BELOW: _label_below,
    Guard.LABEL_NOT_NEW: _label_not_new,
    Guard.WRONG_TIER: _wrong_tier,
    Guard.LOAD_TIER: _load_tier,
    Guard.OUTCOME_ENVELOPE: lambda at: outcome_envelope_mismatch(at.e),
    Guard.CARRIER_SCOPE: _carrier_scope,
    Guard.SHORT_COPY: lambda at: (p := at.predicate) is None or p.short(at.e.block_count),
    Guard.NO_STORE: lambda at: not any(h.success and h.to_tier == at.e.to_tier
                                       for h in at.named("kv_store_finished")),
    Guard.FOREIGN_JOB: _foreign_job,
    Guard.FOREIGN_SCOPE: _foreign_scope,
    Guard.OTHER_REQUEST: lambda at: (c := at.cycle) is None or at.e.request_id != c.request_id,
    Guard.OTHER_LABEL: _other_label,
    Guard.UNNAMED_FAILURE: lambda at: at.e.request_id is None and substrate_failure(at.e),
    Guard.FAILED_LOAD: lambda at: failed_load(at.e),
    Guard.FALLBACK: lambda at: bool(at.e.source == "fallback_recompute"),
    Guard.LOSS: _loss,
    Guard.NOT_OFFLOADED: lambda at: not at.named("claim_offloaded"),
    Guard.OFF_CARRIER: _off_carrier,
    Guard.LATE_RECORD: _late_record,
    Guard.FAIL_BRANCH: lambda at: _fail_branch_of(at.e, at.cycle),
}


# ---------------------------------------------------------------------- the request guards
@dataclass(frozen=True)
class _RequestAt:
    """A step of a request's run: the event, the request's events before it (each with the
    state it met), the state this one meets."""

    e: Event
    before: list[tuple[Event, RequestPhase]] = field(repr=False)
    state: RequestPhase

    def answered(self) -> set[str]:
        """SPEC §4.3: the claims whose failure on the request an outcome answered (a refusal of
        it naming the claim, or the mode's demotion, expiry or harm naming it): the failure,
        then the outcome, each met while the request was unfinished."""
        found: set[str] = set()
        failing: set[str] = set()
        for h, state in self.before:
            if state is RequestPhase.FINISHED:
                continue
            if h.event == "active_request_refused":
                if h.outcome_claim_id in failing and h.arbiter != Arbiter.HARNESS:
                    found.add(h.outcome_claim_id)
            elif h.event in OUTCOME_ENDINGS:  # the mode's ending naming the request
                if h.claim_id in failing:
                    found.add(h.claim_id)
            elif h.claim_id is not None and substrate_failure(h):
                failing.add(h.claim_id)
        return found

    def holds(self, guard: RequestGuard) -> bool:
        return REQUEST_GUARDS[guard](self)

    def job_claim(self, job: Any) -> str | None:
        """The claim the request's last kv_load_started of *job* named."""
        starts = [h for h, _ in self.before if h.event == "kv_load_started" and h.job_id == job]
        return starts[-1].claim_id if starts and job is not None else None


def _late(at: _RequestAt) -> bool:
    """SPEC §4.3: a late record of a failure an outcome answered before the request's finish:
    the failed job's invalid blocks, the claim's restore failure, the refusal again."""
    answered, e = at.answered(), at.e
    if e.event == "claim_restore_failed":
        return e.claim_id in answered
    if e.event == "active_request_refused":
        return e.outcome_claim_id in answered
    claim = at.job_claim(e.job_id)
    return claim is not None and claim in answered and e.claim_id in (None, claim)


def _carried_store(at: _RequestAt) -> bool:
    """SPEC §4.3: a store completion of a claim the request carried (vLLM saves at finish)."""
    e = at.e
    return e.claim_id is not None and any(h.claim_id == e.claim_id and h.event in CARRYING_KINDS
                                          for h, _ in at.before)


#: the reference answer of every request guard
REQUEST_GUARDS: dict[RequestGuard, Callable[[_RequestAt], bool]] = {
    RequestGuard.SERVED: lambda at: at.e.status == "served",
    RequestGuard.OUTCOME_ENVELOPE: lambda at: outcome_envelope_mismatch(at.e),
    RequestGuard.UNCLAIMED_BRANCH: lambda at: at.e.claim_id is None,
    RequestGuard.FAILED_LOAD: lambda at: not at.e.success,
    RequestGuard.CARRIED_STORE: _carried_store,
    RequestGuard.LATE_RECORD: _late,
}
assert set(CLAIM_GUARDS) == set(Guard) and set(REQUEST_GUARDS) == set(RequestGuard)
