"""The streaming reader of the automaton table (:mod:`residentkv.model.automaton`).

One :class:`Acceptor` per file: a :class:`ClaimRun` per claim and a :class:`RequestRun` per
request keep the running answers every guard needs (the last cycle's label and request, the
copy's tier, the claims a request carried, ...), so a step costs one table lookup and the
guards of one cell. Each guard is a function in :data:`CLAIM_GUARDS` or :data:`REQUEST_GUARDS`;
each cell is prepared once, at import, as its rows' functions in row order. Memory is
O(claims + requests): no event is kept. The reference semantics reads the same table over the
whole event list (:mod:`residentkv.trace.semantics.legal`); both must agree on every trace.

Legality is per claim (SPEC §4.3): a claim's first violation is its own run's, or one of a
request naming it (one of its events names both, the claim in any claim field); another
claim's illegal step on that request is that claim's, not this one's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from residentkv.model.automaton import (
    CARRYING_KINDS,
    CLAIM_TABLE,
    DECIDED_AGAIN,
    HEAD_ENDINGS,
    LIVE,
    NAMING_KINDS,
    ON_DEVICE,
    OUTCOME_ENDINGS,
    PRE,
    REFUSALS,
    REQUEST_TABLE,
    STAY,
    Cell,
    Guard,
    Outcome,
    Phase,
    RequestGuard,
    RequestPhase,
    Step,
    Violation,
    failed_load,
    failure_chain_event,
    outcome_envelope_mismatch,
    refusal_names,
    substrate_failure,
)
from residentkv.model.event_record import EventRecord, required_label
from residentkv.model.events import IDENTITY_FIELDS
from residentkv.model.predicate import AcceptedPredicate
from residentkv.model.vocabulary import Arbiter
from residentkv.trace.streams import CLOSER, OPENER, StreamCursor, StreamEnd

#: fields of claim_accepted that define the claim (with its predicate): a second acceptance may
#: not change them
ACCEPTED_FIELDS = (*IDENTITY_FIELDS, "registration", "protection_mode", "footprint_blocks",
                   "owner_scope", "expires_after_s")

#: a v1 event: a pydantic model of residentkv.model.events, or its fast-decoded twin
Event = EventRecord


def defining(e: Event) -> tuple[Any, ...]:
    """What a ``claim_accepted`` fixes about its claim."""
    p = e.predicate
    return (*(_plain(getattr(e, f)) for f in ACCEPTED_FIELDS), p.id, str(p.kind), p.blocks,
            p.start)


def _plain(value: Any) -> Any:
    return str(value) if value is not None and not isinstance(value, int | float) else value


def earlier(a: Step | None, b: Step | None) -> Step | None:
    """The violation that comes first (by seq, then by id, so every reader picks the same)."""
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b, key=lambda s: (s.seq, s.violation.value))


@dataclass(slots=True, eq=False)
class ClaimRun:
    """One claim's automaton, with the running answers of its guards."""

    claim_id: str
    phase: Phase = Phase.START
    #: the first violation of the claim's own run, and the first of it or of a request that
    #: names the claim
    own: Step | None = None
    violation: Step | None = None
    #: the first violation but those only the reading's stop made (SPEC §9.1: what is open
    #: where the reading stops is live, not failed)
    settled: Step | None = None
    #: a second decision: rejected after acceptance, accepted after a rejection, after the
    #: claim ended, or in a later incarnation's stream (SPEC §9.1 "decided once")
    decided_again: bool = False
    #: open at a graceful close, or at a restart and not ended at the next stream's head
    vanished: bool = False
    #: open when an earlier stream of the file ended (its acceptance was in that stream)
    across: bool = False
    #: open where the reading stopped, in a stream with no close
    live: bool = False
    #: the requests whose request_started named the claim before its decision (its intake)
    intake: set[str | None] = field(default_factory=set)
    #: the seq and kind of the first event (a request_started or claim_submitted) that named
    #: the claim before it was decided
    named_seq: int | None = None
    named_kind: str = ""
    submitted: bool = False
    submitted_scope: str | None = None
    scope: str | None = None
    definition: tuple[Any, ...] | None = None
    predicate: AcceptedPredicate | None = None
    top_cycle_label: int = -1
    top_copy_label: int = -1
    store_tier: str | None = None
    #: every tier a successful store of the claim wrote to (SPEC §4.3 Copies)
    stored_tiers: set[str] = field(default_factory=set)
    offload_tier: str | None = None
    cycle_request: str | None = None
    cycle_label: int = -1
    #: the load jobs the open cycle's kv_load_started events started
    cycle_jobs: set[int | str | None] = field(default_factory=set)
    #: a load of the open cycle failed
    cycle_failed: bool = False
    mode: str | None = None
    offloaded: bool = False
    copy_lost: bool = False

    def end(self, how: StreamEnd = StreamEnd.CLOSED) -> None:
        """The stream ended: a claim a request_started named in it must have been decided in
        it. Where the reading stopped (*how* open), an undecided or open claim is live."""
        settled = how is not StreamEnd.OPEN
        if self.named_seq is not None and self.phase in PRE:
            step = Step(self.named_seq, self.named_kind, self.phase.value,
                        Violation.NEVER_DECIDED)
            self.own = earlier(self.own, step)
            self.record(step, settled=settled)
            self.live = self.live or not settled
        if not settled:
            self.live = self.live or self.phase in LIVE
            return
        # a request names the claim within its own stream: the next one starts afresh
        self.named_seq, self.named_kind = None, ""
        self.intake = set()

    def record(self, step: Step, *, settled: bool = True) -> None:
        """A violation of the claim, or of a request naming it (*settled*: not one only the
        reading's stop made)."""
        self.violation = earlier(self.violation, step)
        if settled:
            self.settled = earlier(self.settled, step)

    def vanish(self, position: int, kind: str, *, settled: bool) -> None:
        """SPEC §9.1: the claim is open where its stream ended (at *position*, the
        ``stream_closed`` or the next stream's opener) and was not ended."""
        step = Step(position, kind, self.phase.value, Violation.VANISHED)
        self.own = earlier(self.own, step)
        self.record(step, settled=settled)
        self.vanished = self.vanished or settled

    def step(self, e: Event, acc: Acceptor) -> bool:
        """Feed one event that names this claim; True when it was illegal."""
        outcome, rows, teach = _CLAIM_CELLS[self.phase][e.event]
        if rows is not None:
            for holds, then in rows:
                if holds(self, e, acc):
                    outcome = then
                    break
        if outcome.__class__ is Violation:
            step = Step(e.seq, e.event, self.phase.value, outcome)
            self.own = earlier(self.own, step)
            self.record(step)
            if outcome in DECIDED_AGAIN:
                self.decided_again = True
            return True
        if teach is not None:
            teach(self, e)
        if outcome is not STAY:
            self.phase = outcome  # type: ignore[assignment]
        return False

    def loss(self, e: Event) -> bool:
        """SPEC §4.1/§4.2: an observed loss (see :attr:`Guard.LOSS`)."""
        name = e.event
        if name == "claim_reused":
            return not e.holds
        if name == "claim_materialized":
            return not self.proves(e)
        if self.predicate is not None and not self.predicate.needs(e.position):
            return False
        held = (self.mode == "offloadable" and self.store_tier is not None and self.offloaded
                and not self.copy_lost)
        return not held or (e.medium is not None and e.medium == self.store_tier)

    def proves(self, e: Event) -> bool:
        p = self.predicate
        return p is not None and p.proves(e.leading, e.surviving)


@dataclass(slots=True, eq=False)
class RequestRun:
    """One request's automaton, with the claims it named (they share its violations) and what
    its guards ask: the claims it carried, the failures it had and which a refusal answered."""

    phase: RequestPhase = RequestPhase.NEW
    #: the first violation of the request's own run; the first of its run, shared with every
    #: claim it names; and the latter but for what only the reading's stop made
    own: Step | None = None
    violation: Step | None = None
    settled: Step | None = None
    #: the claims it names: one kept bare, several in a list (most requests name one)
    named: ClaimRun | list[ClaimRun] | None = None
    #: the first failure-chain event of the request (it must finish in the stream)
    failure_seq: int | None = None
    failure_kind: str | None = None
    #: SPEC §4.3: the claims it carried (its claim_accepted, lookup, restore or reuse named
    #: it); the claims a failure named on it before its finish, and those a refusal of it
    #: then answered; the load jobs it started, by claim
    #: (one claim or one job, the common case, is kept bare: a request is kept for the whole
    #: stream, since late records and store completions may name it after its finish)
    carried: str | set[str] | None = None
    failing: set[str] | None = None
    answered: set[str] | None = None
    job: int | str | None = None
    job_claim_id: str | None = None
    more_jobs: dict[int | str, str | None] | None = None
    #: the owner scope its first request_started declared (None: none, or not started yet;
    #: kept here so a guard reads it from the request the event already reached)
    scope: str | None = None
    started: bool = False

    def step(self, e: Event, acc: Acceptor) -> bool:
        """Feed one event that names this request; True when it was illegal."""
        name = e.event
        if self.failure_seq is None and name in _FAILURE_KINDS and failure_chain_event(e):
            self.failure_seq, self.failure_kind = e.seq, name
        outcome, rows, _ = _REQUEST_CELLS[self.phase][name]
        if rows is not None:
            for holds, then in rows:
                if holds(self, e, acc):
                    outcome = then
                    break
        if name in _REQUEST_TEACHING:
            self._learn(e, name, acc)
        if outcome.__class__ is Violation:
            step = Step(e.seq, name, self.phase.value, outcome)
            self.own = earlier(self.own, step)
            self.violate(step)
            return True
        if outcome is not STAY:
            self.phase = outcome  # type: ignore[assignment]
        return False

    def _learn(self, e: Event, name: str, acc: Acceptor) -> None:
        """What the request's guards ask of its later events (learnt from every event that
        names it, legal or not, as the reference reads it)."""
        cid = e.claim_id
        if name in CARRYING_KINDS:
            if cid is not None:
                held = self.carried
                if held is None:
                    self.carried = acc.claim_id(cid)
                elif isinstance(held, str):
                    if held != cid:
                        self.carried = {held, cid}
                else:
                    held.add(cid)
            return
        if name == "kv_load_started":
            job = e.job_id
            if job is not None:
                if self.job is None or self.job == job:
                    self.job = job
                    self.job_claim_id = None if cid is None else acc.claim_id(cid)
                else:
                    if self.more_jobs is None:
                        self.more_jobs = {}
                    self.more_jobs[job] = cid
            return
        if self.phase is RequestPhase.FINISHED:
            return  # after the finish nothing answers a failure any more
        if (name == "active_request_refused" and e.arbiter != Arbiter.HARNESS) \
                or name in OUTCOME_ENDINGS:
            # a refusal of the request naming the claim, or the mode's ending naming it
            outcome = e.outcome_claim_id if name == "active_request_refused" else cid
            if outcome is not None and self.failing and outcome in self.failing:
                if self.answered is None:
                    self.answered = set()
                self.answered.add(outcome)
        elif cid is not None and substrate_failure(e):
            if self.failing is None:
                self.failing = set()
            self.failing.add(cid)

    def end(self, how: StreamEnd = StreamEnd.CLOSED) -> None:
        """The stream ended: a request with a failure chain must have finished in it. A
        request its incarnation's death cut off could not (SPEC §9.1: its claim's ending at
        the next stream's head answers it); where the reading stopped it may still finish,
        so every claim it names is live."""
        if (self.failure_seq is None or self.phase is RequestPhase.FINISHED
                or how is StreamEnd.RESTARTED):
            return
        settled = how is StreamEnd.CLOSED
        step = Step(self.failure_seq, self.failure_kind or "", self.phase.value,
                    Violation.UNFINISHED)
        self.own = earlier(self.own, step)
        self.violate(step, settled=settled)
        if not settled:
            for run in self.claims():
                run.live = True

    def violate(self, step: Step, *, settled: bool = True) -> None:
        """A step of this request was illegal: every claim it names shares the violation."""
        self.violation = earlier(self.violation, step)
        if settled:
            self.settled = earlier(self.settled, step)
        for run in self.claims():
            run.record(step, settled=settled)

    def claims(self) -> list[ClaimRun]:
        """The claims the request names, in the order it first named them."""
        named = self.named
        return [] if named is None else [named] if isinstance(named, ClaimRun) else named

    def names(self, run: ClaimRun) -> None:
        """The request names *run*'s claim: it shares the request's violations."""
        named = self.named
        if named is run:
            return
        if named is None:
            self.named = run
        elif isinstance(named, ClaimRun):
            self.named = [named, run]
        elif all(c is not run for c in named):
            named.append(run)
        else:
            return
        if self.violation is not None:
            run.violation = earlier(run.violation, self.violation)
            run.settled = earlier(run.settled, self.settled)

    def carries(self, claim: str) -> bool:
        """Whether the request carried *claim* (SPEC §4.3)."""
        held = self.carried
        return held == claim if isinstance(held, str) else held is not None and claim in held

    def job_claim(self, job: int | str | None) -> str | None:
        """The claim the request's last ``kv_load_started`` of *job* named."""
        if job is None:
            return None
        if self.more_jobs is not None and job in self.more_jobs:
            return self.more_jobs[job]
        return self.job_claim_id if job == self.job else None


# ------------------------------------------------------------------ the claim guards
def _copy_tier(r: ClaimRun) -> str | None:
    return r.offload_tier if r.store_tier is None else r.store_tier


def _label(e: Event) -> int | None:
    label: int | None = getattr(e, "generation", None)
    return label


def _carrier_scope(r: ClaimRun, e: Event, acc: Acceptor) -> bool:
    mine = e.owner_scope if e.owner_scope is not None else r.submitted_scope
    theirs = acc.scope()
    return mine is not None and theirs is not None and str(theirs) != str(mine)


def _foreign_scope(r: ClaimRun, e: Event, acc: Acceptor) -> bool:
    """SPEC §4.2, §4.3: the request's declared owner scope is not the claim's (a request
    without one never restores a scoped claim; a scoped one never an unscoped claim)."""
    return acc.scope() != r.scope


def _label_below(r: ClaimRun, e: Event, acc: Acceptor) -> bool:
    g = _label(e)
    return g is not None and g < r.top_cycle_label


def _label_not_new(r: ClaimRun, e: Event, acc: Acceptor) -> bool:
    g = required_label(e)
    return g <= r.top_cycle_label or g < r.top_copy_label


def _other_label(r: ClaimRun, e: Event, acc: Acceptor) -> bool:
    g = _label(e)
    return g is not None and g != r.cycle_label


def _load_tier(r: ClaimRun, e: Event, acc: Acceptor) -> bool:
    tier = getattr(e, "from_tier", None)
    return tier is not None and tier != _copy_tier(r)


def _foreign_job(r: ClaimRun, e: Event, acc: Acceptor) -> bool:
    job = getattr(e, "job_id", None)
    return job is not None and job not in r.cycle_jobs


def _off_carrier(r: ClaimRun, e: Event, acc: Acceptor) -> bool:
    """SPEC §4.3: a refusal or deferral naming the claim, on a request that did not carry it,
    and no conflict with a hard_protected claim resident on the device."""
    req = acc.request
    if req is not None and req.carries(r.claim_id):
        return False
    return not (r.mode == "hard_protected" and r.phase in ON_DEVICE)


def _fail_branch(r: ClaimRun, e: Event) -> bool:
    """The runtime's failure branch (policy ``fail``) on the open cycle's request."""
    return e.policy == "fail" and e.request_id is not None and e.request_id == r.cycle_request


def _late_record(r: ClaimRun, e: Event, acc: Acceptor) -> bool:
    """SPEC §4.3: the report of the failed cycle's invalid blocks, after the claim failed
    closed: on the cycle's request, naming a job the cycle started."""
    if e.request_id is None or e.request_id != r.cycle_request:
        return False
    if e.event == "claim_restore_failed":
        return r.cycle_failed
    job = e.job_id
    return job is not None and job in r.cycle_jobs


ClaimGuardFn = Callable[[ClaimRun, Event, "Acceptor"], bool]
#: every claim guard (see :class:`~residentkv.model.automaton.Guard`) as a function of the
#: claim's running facts, the event and the acceptor (the requests' scopes and carried claims)
CLAIM_GUARDS: dict[Guard, ClaimGuardFn] = {
    Guard.BEST_EFFORT: lambda r, e, acc: str(e.protection_mode) == "best_effort",
    Guard.NOT_CARRIER: lambda r, e, acc: any(c != e.request_id for c in r.intake),
    Guard.CHANGED_DEFINITION: lambda r, e, acc: defining(e) != r.definition,
    Guard.HOLDS_CONTRADICTED: lambda r, e, acc: bool(e.holds) != r.proves(e),
    Guard.PROVEN: lambda r, e, acc: r.proves(e),
    Guard.SAME_TIER: lambda r, e, acc: e.from_tier == e.to_tier,
    Guard.LABEL_BELOW: _label_below,
    Guard.LABEL_NOT_NEW: _label_not_new,
    Guard.WRONG_TIER: lambda r, e, acc: (c := _copy_tier(r)) is None or e.from_tier != c,
    Guard.FOREIGN_SCOPE: _foreign_scope,
    Guard.OTHER_REQUEST: lambda r, e, acc: e.request_id != r.cycle_request,
    Guard.OTHER_LABEL: _other_label,
    Guard.UNNAMED_FAILURE: lambda r, e, acc: e.request_id is None and substrate_failure(e),
    Guard.FAILED_LOAD: lambda r, e, acc: failed_load(e),
    Guard.FALLBACK: lambda r, e, acc: e.source == "fallback_recompute",
    Guard.LOSS: lambda r, e, acc: r.loss(e),
    Guard.NOT_OFFLOADED: lambda r, e, acc: not r.offloaded,
    Guard.OUTCOME_ENVELOPE: lambda r, e, acc: outcome_envelope_mismatch(e),
    Guard.CARRIER_SCOPE: _carrier_scope,
    Guard.SHORT_COPY: lambda r, e, acc: r.predicate is None or r.predicate.short(e.block_count),
    Guard.NO_STORE: lambda r, e, acc: e.to_tier not in r.stored_tiers,
    Guard.LOAD_TIER: _load_tier,
    Guard.FOREIGN_JOB: _foreign_job,
    Guard.EARLIER_INCARNATION: lambda r, e, acc: r.across,
    Guard.OFF_CARRIER: _off_carrier,
    Guard.LATE_RECORD: _late_record,
    Guard.FAIL_BRANCH: lambda r, e, acc: _fail_branch(r, e),
}


# ------------------------------------------------------------------ the request guards
def _late(q: RequestRun, e: Event, acc: Acceptor) -> bool:
    """SPEC §4.3: a late record of a failure an outcome answered before the request's finish
    (a refusal of it naming the claim, or the mode's demotion, expiry or harm naming it): the
    failed job's invalid blocks, the claim's restore failure, the refusal again."""
    answered = q.answered
    if not answered:
        return False
    name = e.event
    if name == "claim_restore_failed":
        return e.claim_id in answered
    if name == "active_request_refused":
        return e.outcome_claim_id in answered
    job = e.job_id
    claim = q.job_claim(job)
    return claim is not None and claim in answered and e.claim_id in (None, claim)


RequestGuardFn = Callable[[RequestRun, Event, "Acceptor"], bool]
#: every request guard (see :class:`~residentkv.model.automaton.RequestGuard`)
REQUEST_GUARDS: dict[RequestGuard, RequestGuardFn] = {
    RequestGuard.SERVED: lambda q, e, acc: e.status == "served",
    RequestGuard.OUTCOME_ENVELOPE: lambda q, e, acc: outcome_envelope_mismatch(e),
    RequestGuard.UNCLAIMED_BRANCH: lambda q, e, acc: e.claim_id is None,
    RequestGuard.FAILED_LOAD: lambda q, e, acc: not e.success,
    RequestGuard.CARRIED_STORE: lambda q, e, acc: e.claim_id is not None and q.carries(
        e.claim_id),
    RequestGuard.LATE_RECORD: _late,
}
assert set(CLAIM_GUARDS) == set(Guard) and set(REQUEST_GUARDS) == set(RequestGuard)


# ------------------------------------------------------------- what a legal step teaches
def _teach_started(r: ClaimRun, e: Event) -> None:
    if r.phase in PRE:
        r.intake.add(e.request_id)
        _teach_named(r, e)


def _teach_named(r: ClaimRun, e: Event) -> None:
    """The first event that names the claim before it is decided (it must be decided)."""
    if r.named_seq is None:
        r.named_seq, r.named_kind = e.seq, e.event


def _teach_submitted(r: ClaimRun, e: Event) -> None:
    _teach_named(r, e)
    if not r.submitted:
        r.submitted, r.submitted_scope = True, e.owner_scope


def _teach_accepted(r: ClaimRun, e: Event) -> None:
    if r.definition is None:
        r.definition = defining(e)
        r.predicate = AcceptedPredicate.of(e.predicate, e.footprint_blocks)
        r.scope = e.owner_scope if e.owner_scope is not None else r.submitted_scope
        r.mode = str(e.protection_mode)


def _teach_copy_label(r: ClaimRun, e: Event) -> None:
    gen = _label(e)
    if gen is not None and gen > r.top_copy_label:
        r.top_copy_label = gen


def _teach_store_finished(r: ClaimRun, e: Event) -> None:
    _teach_copy_label(r, e)
    if e.success:
        r.store_tier, r.copy_lost = e.to_tier, False
        if e.to_tier is not None:
            r.stored_tiers.add(e.to_tier)


def _teach_offloaded(r: ClaimRun, e: Event) -> None:
    _teach_copy_label(r, e)
    r.offload_tier, r.offloaded = e.to_tier, True


def _teach_evicted(r: ClaimRun, e: Event) -> None:
    p = r.predicate
    if e.medium is not None and e.medium == r.store_tier and (p is None or p.needs(e.position)):
        r.copy_lost = True


def _teach_restore_required(r: ClaimRun, e: Event) -> None:
    r.top_cycle_label = r.cycle_label = required_label(e)
    r.cycle_request = e.request_id
    r.cycle_jobs = set()
    r.cycle_failed = False


def _teach_load_end(r: ClaimRun, e: Event) -> None:
    if failed_load(e):
        r.cycle_failed = True


def _teach_branch(r: ClaimRun, e: Event) -> None:
    if _fail_branch(r, e):
        r.cycle_failed = True


def _teach_load_started(r: ClaimRun, e: Event) -> None:
    if e.job_id is not None:
        r.cycle_jobs.add(e.job_id)


Teach = Callable[[ClaimRun, Event], None]
#: what a legal step of each teaching kind tells the claim's guards
_TEACH: dict[str, Teach] = {
    "request_started": _teach_started,
    "claim_submitted": _teach_submitted,
    "claim_accepted": _teach_accepted,
    "kv_store_started": _teach_copy_label,
    "kv_store_finished": _teach_store_finished,
    "claim_offloaded": _teach_offloaded,
    "block_evicted": _teach_evicted,
    "claim_restore_required": _teach_restore_required,
    "kv_load_started": _teach_load_started,
    "kv_load_finished": _teach_load_end,
    "kv_load_failed": _teach_load_end,
    "scheduler_load_failure": _teach_branch,
}


# ------------------------------------------------------------------ the prepared tables
Prepared = tuple[Outcome, tuple[tuple[Any, Outcome], ...] | None, Any]


def _prepare(cell: Cell[Any], guards: dict[Any, Any], teach: Any) -> Prepared:
    """A cell as (its unguarded outcome, its guarded rows as (function, outcome) in row order,
    or None when it has none, and what a legal step teaches)."""
    *guarded, (_, default) = cell
    rows = tuple((guards[g], outcome) for g, outcome in guarded) or None
    return default, rows, teach


#: state -> kind -> the prepared cell (one lookup less per event than the pair key)
_CLAIM_CELLS: dict[Phase, dict[str, Prepared]] = {
    p: {k: _prepare(c, CLAIM_GUARDS, _TEACH.get(k)) for (q, k), c in CLAIM_TABLE.items()
        if q is p} for p in Phase}
_REQUEST_CELLS: dict[RequestPhase, dict[str, Prepared]] = {
    p: {k: _prepare(c, REQUEST_GUARDS, None) for (q, k), c in REQUEST_TABLE.items() if q is p}
    for p in RequestPhase}
#: event kinds a failure chain may hold (``failure_chain_event`` decides)
_FAILURE_KINDS = frozenset({"kv_load_finished", "kv_load_failed", "scheduler_load_failure",
                            "claim_restore_failed", "active_request_refused"})
#: kinds a request learns from (see ``RequestRun._learn``)
_REQUEST_TEACHING = CARRYING_KINDS | {"kv_load_started", "active_request_refused",
                                      "kv_store_finished", "kv_load_finished", "kv_load_failed",
                                      "scheduler_load_failure"} | OUTCOME_ENDINGS


def _plain_stay(prepared: Prepared) -> bool:
    return prepared[0] is STAY and prepared[1] is None


#: state -> kinds whose step must run (not a plain "stay", or it teaches a guard something);
#: a pass skips the others inline
CLAIM_STEPS: dict[Phase, frozenset[str]] = {
    p: frozenset(k for k, c in cells.items() if not _plain_stay(c) or c[2] is not None)
    for p, cells in _CLAIM_CELLS.items()}
REQUEST_STEPS: dict[RequestPhase, frozenset[str]] = {
    p: frozenset(k for k, c in cells.items()
                 if not _plain_stay(c) or k in _FAILURE_KINDS or k in _REQUEST_TEACHING)
    for p, cells in _REQUEST_CELLS.items()}


# ------------------------------------------------------------------ one file's acceptor
class Acceptor:
    """The automaton over one file, fed event by event: :meth:`place` for what opens or
    closes a stream (and every event while :attr:`slow`), then :meth:`step` for every event.
    Forgetting what is kept per request when a stream ends is the caller's
    (:meth:`forget_requests`)."""

    __slots__ = ("claims", "files", "request", "requests")

    def __init__(self) -> None:
        self.claims: dict[str, ClaimRun] = {}
        self.requests: dict[str, RequestRun] = {}
        #: the run of the request the event being stepped names (None: it names none): the
        #: guards and the caller read it instead of looking the request up again
        self.request: RequestRun | None = None
        self.files = Incarnations()

    def claim(self, claim_id: str) -> ClaimRun:
        run = self.claims.get(claim_id)
        if run is None:
            run = self.claims[claim_id] = ClaimRun(claim_id)
        return run

    def claim_id(self, claim_id: str) -> str:
        """The id string the claim's run keeps, if it has one: what every request keeps
        instead of each event's own copy (a stream names a claim on many requests)."""
        run = self.claims.get(claim_id)
        return claim_id if run is None else run.claim_id

    def scope(self) -> str | None:
        """The owner scope of the request the event being stepped names (None: none)."""
        req = self.request
        return None if req is None else req.scope

    def runs(self) -> Iterator[ClaimRun]:
        return iter(self.claims.values())

    @property
    def slow(self) -> bool:
        """Whether the next event must be placed whatever it is (see :class:`Incarnations`)."""
        return self.files.slow

    def place(self, e: Event, previous: int) -> Placed:
        """Place *e* (an opener or closer, or any event while :attr:`slow`) among the file's
        streams; *previous* is the position of the event before it. A stream it ends is ended
        here (its accepting conditions); the caller forgets its requests."""
        placed = self.files.place(e, previous, self.runs)
        if placed.ended is not None:
            end_stream(self.requests.values(), self.runs(), placed.ended)
        return placed

    def finish(self) -> tuple[StreamEnd, list[ClaimRun] | None]:
        """The reading stopped: the last stream's accepting conditions; how it ended and the
        claims of the head window the reading stopped in, if it did."""
        how, head = self.files.finish()
        end_stream(self.requests.values(), self.runs(), how)
        return how, head

    def forget_requests(self) -> None:
        """Requests are per stream (a restarted engine numbers them afresh)."""
        self.requests.clear()
        self.request = None

    def step(self, e: Event) -> bool:
        """Feed *e* (at its position) to the run of the request it names, then of each claim it
        names; True when a step was illegal or it began its request's failure chain."""
        name, rid, cid = e.event, e.request_id, e.claim_id
        req = None
        kept = False
        if rid is not None:
            req = self.requests.get(rid)
            if req is None:
                req = self.requests[rid] = RequestRun()
        self.request = req
        if req is not None:
            if name == "request_started" and not req.started:
                req.scope, req.started = e.owner_scope, True
            if name in REQUEST_STEPS[req.phase]:
                chain = req.failure_seq
                kept = req.step(e, self) or (chain is None and req.failure_seq is not None)
        if cid is not None:
            run = self.claims.get(cid)
            if run is None:
                run = self.claims[cid] = ClaimRun(cid)
            if name in CLAIM_STEPS[run.phase]:
                kept = run.step(e, self) or kept
            if req is not None:
                req.names(run)
        if name in NAMING_KINDS:
            # SPEC §4.3: a refusal or deferral is a step of every claim it names; a request
            # names every claim its events name, in any claim field
            for other in refusal_names(e):
                if other == cid:
                    continue
                run = self.claim(other)
                if name in REFUSALS:
                    kept = run.step(e, self) or kept
                if req is not None:
                    req.names(run)
        return kept


# ------------------------------------------------------------ several streams in one file
def close_stream(runs: Iterable[ClaimRun], position: int) -> None:
    """SPEC §9.1: a graceful stop (the ``stream_closed`` at *position*) ends every claim
    first; one still open there vanished."""
    for run in runs:
        if run.phase in LIVE:
            run.vanish(position, CLOSER, settled=True)


def end_stream(requests: Iterable[RequestRun], runs: Iterable[ClaimRun], how: StreamEnd) -> None:
    """A stream ended (closed, restarted, or where the reading stopped): the accepting
    conditions of its requests and claims (a failure chain finished, a named claim decided)."""
    for req in requests:
        req.end(how)
    for run in runs:
        run.end(how)


class HeadWindow:
    """The first events of a stream opened after an earlier one (SPEC §9.1): while each is an
    ending (:data:`~residentkv.model.automaton.HEAD_ENDINGS`) of a claim the previous stream
    left open, not yet ended here. When the window closes, such a claim still open vanished.

    Precisely: the events after the opener, up to (not including) the first one that is not a
    ``claim_harmed``, ``claim_released``, ``claim_expired`` or ``claim_demoted`` naming a claim
    open at the opener whose ending the window has not shown yet.
    """

    __slots__ = ("opener", "pending", "waiting")

    def __init__(self, runs: Iterable[ClaimRun], opener: int) -> None:
        self.opener = opener
        #: the claims open when the previous stream ended
        self.pending = [run for run in runs if run.phase in LIVE]
        self.waiting = {run.claim_id for run in self.pending}
        for run in self.pending:
            run.across = True

    def continues(self, e: Event) -> bool:
        """Whether *e* is one more event of the window."""
        if e.event in HEAD_ENDINGS and e.claim_id in self.waiting:
            self.waiting.discard(e.claim_id)
            return True
        return False

    def close(self, *, settled: bool) -> list[ClaimRun]:
        """The window closed (*settled*), or the reading stopped inside it: every pending
        claim still open vanished (only the latter leaves it live). Returns the pending runs."""
        for run in self.pending:
            if run.phase in LIVE:
                run.vanish(self.opener, OPENER, settled=settled)
        return self.pending


@dataclass(slots=True)
class Placed:
    """An event placed among the streams of its file (:meth:`Incarnations.place`)."""

    #: the event at its position
    event: Event
    #: the claims of the head window that closed just before it (settled), if one did
    head: list[ClaimRun] | None = None
    #: it opened the next stream: how the previous one ended
    ended: StreamEnd | None = None


class Incarnations:
    """The automaton's side of a file of several streams (SPEC §9.1): it places the file's
    first event, every opener and closer, and every event while :attr:`slow` (a later
    stream's, or one of a head window) at its position, makes the claims open at a
    ``stream_closed`` vanish, and keeps the head window of a stream opened after another."""

    __slots__ = ("cursor", "head")

    def __init__(self) -> None:
        self.cursor = StreamCursor()
        self.head: HeadWindow | None = None

    @property
    def slow(self) -> bool:
        """Whether the next event must be placed whatever it is: the file's first, a later
        stream's or one of a head window (the rest of the first stream's need not)."""
        return not self.cursor.spans or bool(self.cursor.offset) or self.head is not None

    def place(self, e: Event, previous: int, runs: Callable[[], Iterable[ClaimRun]]) -> Placed:
        """Place *e*, which follows the event at position *previous*; *runs* gives every claim
        run."""
        cursor = self.cursor
        head = None
        if cursor.opens(e):
            if self.head is not None:
                head = self._close_head(settled=True)
            ended = cursor.ended()
            opener = cursor.restart(e, previous)
            window = HeadWindow(runs(), opener.seq)
            self.head = window if window.pending else None
            return Placed(opener, head, ended)
        if self.head is not None and not self.head.continues(e):
            head = self._close_head(settled=True)
        closes = e.event == CLOSER and not cursor.closed
        positioned = cursor.enter(e)
        if closes:
            close_stream(runs(), positioned.seq)
        return Placed(positioned, head)

    def finish(self) -> tuple[StreamEnd, list[ClaimRun] | None]:
        """The reading stopped: how the last stream ended, and the claims of the head window
        the reading stopped in, if it did (they are live, not vanished)."""
        head = self._close_head(settled=False) if self.head is not None else None
        return self.cursor.finish(), head

    def _close_head(self, *, settled: bool) -> list[ClaimRun]:
        head, self.head = self.head, None
        assert head is not None
        return head.close(settled=settled)
