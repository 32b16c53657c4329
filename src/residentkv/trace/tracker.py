"""One streaming pass over a trace that keeps, per claim, only the facts the gates need.

This is the streaming form of the reference semantics (:mod:`residentkv.trace.semantics`):
each fact below is the running answer of one of its predicates. Memory follows the number of
claims and requests, never the number of events: a claim keeps its open restore cycle, the
best closed observation cycle, its failure cycle and a few flags. A closed cycle is settled
(its verdicts are final once the next cycle begins) before it is forgotten, so bounded memory
drops resolved history only, never an open obligation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from residentkv.model.automaton import LIVE, PRE, PROMISE_ENDINGS, RELEASES
from residentkv.model.claim import OUTCOME_BEFORE_LOSS
from residentkv.model.event_record import EventRecord, claim_names, records, required_label
from residentkv.model.events import CLAIM_EVENT_NAMES, EVENT_MODELS, IDENTITY_FIELDS, Envelope
from residentkv.model.predicate import AcceptedPredicate
from residentkv.model.vocabulary import Arbiter, StopCause
from residentkv.model.vocabulary import Requirement as R
from residentkv.trace.acceptor import ACCEPTED_FIELDS, Acceptor, ClaimRun, Incarnations
from residentkv.trace.requirements import OBSERVATION, Seqs
from residentkv.trace.streams import STREAM_KINDS, StreamEnd

__all__ = ["ACCEPTED_FIELDS", "ClaimTrack", "StreamFacts", "collect"]
_NAMES_KEPT = 2  # two distinct failure names already decide every attribution question

#: a v1 event: a pydantic model of residentkv.model.events, or its fast-decoded twin
Event = EventRecord
ClaimHandler = Callable[["StreamFacts", "ClaimTrack", Event], None]


_AFTER_REQUIRED = (R.LOAD_SUCCEEDED, R.RESTORED_FROM_OFFLOAD, R.REUSED_AFTER_RESTORE)
#: the requirements a failure cycle carries over from the cycle's start
_FAILURE_BEFORE = (R.STORE_SUCCEEDED, R.RESTORE_REQUIRED)


@dataclass(slots=True)
class Cycle:
    """One restore cycle of one claim: its ``claim_restore_required`` up to the next one."""

    seq: int
    label: int
    request_id: str | None
    #: observation facts fixed when the cycle begins (the seqs that met them; see ``before``)
    materialized: int | None
    offloaded: int | None
    stored: int | None
    hit: int | None
    #: the content digest the stored copy's store recorded (None: it recorded none)
    digest: str | None = None
    loads: list[tuple[int | str | None, int]] | None = None
    voided_jobs: set[int | str | None] | None = None
    voided_all: bool = False
    offload_restores: list[int] | None = None
    verified: set[int] | None = None
    restore_any: int | None = None
    restore_offload: int | None = None
    restored_member: int | None = None
    reuse_first: int | None = None
    reuse_ok: int | None = None
    foreign_reuse: bool = False
    failed_load: int | None = None
    injected_failure: int | None = None

    def member(self, e: Event) -> bool:
        """An event carrying a generation belongs to the cycle only under its label."""
        g = getattr(e, "generation", None)
        return g is None or g == self.label

    @property
    def before(self) -> Seqs:
        """The observation requirements met when the cycle began, with their seqs."""
        met: Seqs = {R.RESTORE_REQUIRED: [self.seq]}
        for key, seq in ((R.MATERIALIZED, self.materialized), (R.OFFLOADED, self.offloaded),
                         (R.STORE_SUCCEEDED, self.stored), (R.LOOKUP_HIT, self.hit)):
            if seq is not None:
                met[key] = [seq]
        return met

    def known_before(self) -> int:
        """How many observation requirements were met when the cycle began."""
        return 1 + (self.materialized is not None) + (self.offloaded is not None) + (
            self.stored is not None) + (self.hit is not None)

    def settled(self) -> tuple[int | None, int | None, int | None]:
        """The deciding seqs of load_succeeded, restored_from_offload, reused_after_restore."""
        load = restored = None
        if self.loads is not None and not self.voided_all:
            voided = self.voided_jobs or ()
            for job, seq in self.loads:
                if job not in voided:
                    load = seq
                    break
        if self.offload_restores is not None:
            after = -1 if load is None else load
            for seq in self.offload_restores:
                if seq > after:
                    restored = seq
                    break
        return load, restored, self.reuse_ok if self._reused_after_restore() else None

    def observation(self) -> Seqs:
        """The observation requirements this cycle meets (final once it is closed)."""
        met = dict(self.before)
        settled = self.settled()
        for key, seq in zip(_AFTER_REQUIRED, settled, strict=True):
            if seq is not None:
                met[key] = [seq]
        if self.content_verified(settled[1]):
            met[R.RESTORE_CONTENT_VERIFIED] = [] if settled[1] is None else [settled[1]]
        return met

    def content_verified(self, restored: int | None) -> bool:
        """Schema v1: when the stored copy's store recorded a digest, the restore that counts
        carries ``content_verified: true`` (no digest: nothing to verify)."""
        return self.digest is None or restored in (self.verified or ())

    def _reused_after_restore(self) -> bool:
        if self.restore_any is None or self.reuse_ok is None or self.foreign_reuse:
            return False
        gate = self.restore_offload if self.restore_offload is not None else self.restore_any
        return self.reuse_first is None or self.reuse_first >= gate


@dataclass(slots=True)
class FailureChain:
    """The claim's failure cycle: the cycle of its first failed load, judged to the end."""

    cycle: Cycle
    prior_full: list[tuple[int, int]]
    sched_fail: int | None = None
    restore_failed: int | None = None
    restore_failed_checked: bool = False
    refusal: int | None = None
    finish: tuple[int, str | None] | None = None
    finished_early: bool = False
    restored_after: bool = False
    #: opened by the failure branch: a failed load before the finish opens it again
    by_branch: bool = False

    def requirements(self, before: Seqs) -> Seqs:
        c = self.cycle
        met: Seqs = {k: v for k, v in before.items() if k in _FAILURE_BEFORE}
        if c.injected_failure is not None:
            met[R.CLAIM_LOAD_FAILED] = [c.injected_failure]
        if self.sched_fail is not None:
            met[R.SCHEDULER_FAILURE_BRANCH] = [self.sched_fail]
        if self.restore_failed is not None:
            met[R.RESTORE_FAILED_SCOPED] = [self.restore_failed]
        if self.refusal is not None:
            met[R.REFUSAL_ATTRIBUTED] = [self.refusal]
            # a null status (imported traces) cannot show the request was not served
            if self.finish is not None and not self.finished_early and self.finish[1] not in (
                    "served", None):
                met[R.OUTCOME_BEFORE_FINISH] = [self.refusal, self.finish[0]]
        if not self.restored_after:
            met[R.NO_RESTORE_AFTER_FAILURE] = []
        return met


@dataclass(slots=True)
class ClaimIdentity:
    """What the claim is: its acceptance, predicate and identity fields (SPEC §3, §4)."""

    head_accepted: bool = False
    #: the claim's first event (beyond its submission and its carrier's start) rejects it
    head_rejected: bool = False
    accepted_seq: int | None = None
    registration: str | None = None
    mode: str | None = None
    #: the accepted predicate's id, and the predicate with the footprint it is judged in
    predicate_id: str | None = None
    predicate: AcceptedPredicate | None = None
    owner_scope: str | None = None
    defining: tuple[Any, ...] | None = None
    first_predicate_id: str | None = None
    required_values: set[int] = field(default_factory=set)
    #: identity field -> the first value a claim event gave it
    values: dict[str, Any] = field(default_factory=dict)
    missing: bool = False
    ambiguous: bool = False
    submitted_scopes: set[str] = field(default_factory=set)


@dataclass(slots=True)
class ClaimLifecycle:
    """Where the claim's life went: materialization, copies, restore cycles, losses, ending."""

    end_seq: int | None = None
    materialized_seq: int | None = None
    first_loss: int | None = None
    first_harm: int | None = None
    #: the first harm whose cause is not a stop of the process that held the claim, and the
    #: first that is (SPEC §9.1: ``engine_restarted``, ``shutdown``)
    first_mode_harm: int | None = None
    first_stop_harm: int | None = None
    #: an observation_gap while the claim was open (SPEC §9.1 "nothing inside an unseen
    #: window")
    unseen: bool = False
    first_release: int | None = None
    release_of: dict[str, int] = field(default_factory=dict)
    store_seq: int | None = None
    offload_seq: int | None = None
    #: request -> the seq of its last kv_lookup hit of the claim since the last restore began
    #: (SPEC §4.1: the hit must be the restoring request's own)
    hits: dict[str | None, int] = field(default_factory=dict)
    last_required: int = -1
    #: the open restore cycle, how many began, the best closed one's observation facts, the
    #: (at most two) complete ones, the first and the first with a stored copy
    cycle: Cycle | None = None
    cycles: int = 0
    best: Seqs = field(default_factory=dict)
    full: list[tuple[int, int]] = field(default_factory=list)
    first_cycle: Cycle | None = None
    first_stored: Cycle | None = None
    copy_digest: str | None = None
    stored: bool = False
    copy_medium: str | None = None
    unrestored_cycle: bool = False
    restore_after_reuse: bool = False


@dataclass(slots=True)
class Pending:
    """A claim's failures on one request and what answered them (SPEC §4.2 Failures, §4.3): a
    failure is answered by an outcome (a refusal of the request naming the claim, or the
    mode's demotion, expiry or harm) before the request's first finish, and closed by its
    record (``claim_restore_failed`` of the request naming the claim) or by that ending."""

    #: a failure no outcome answered yet (still in time: the request has not finished since)
    unanswered: bool = False
    #: a failure no claim_restore_failed (nor an ending of the claim) followed yet
    unrecorded: bool = False
    #: a failure the request finished without answering, or one naming no request: open for
    #: good
    missed: bool = False
    #: an outcome (a refusal of the request naming the claim, or the mode's ending) answered a
    #: failure: a later kv_load_failed of them is a record of that failure, and opens none
    answered: bool = False

    def open(self) -> bool:
        return self.unanswered or self.unrecorded or self.missed


@dataclass(slots=True)
class ClaimFailures:
    """The claim's failed loads and what became of them (SPEC §4 failure_outcome, §4.1)."""

    failure: FailureChain | None = None
    failed_requests: set[str] = field(default_factory=set)
    #: request -> the claim's failures on it and what answered them (this stream's requests)
    pending: dict[str | None, Pending] = field(default_factory=dict)
    failed_load: bool = False
    restore_failed: bool = False
    fallback: bool = False
    #: a request carrying the claim finished other than served (or never finished) with no
    #: failure or outcome on it naming the claim (SPEC §4.2 attribution)
    carrier_unexplained: bool = False
    #: a failure left open when an earlier stream of the file ended (closed, or restarted with
    #: the claim not ended at the next stream's head)
    open_before: bool = False
    #: a failure on a request its incarnation's death cut off, answered if the claim ends at
    #: the next stream's head (SPEC §9.1)
    awaiting_head: bool = False
    #: where the reading stopped: an open failure that can no longer be answered or recorded
    #: (the request finished unanswered, it names none, or the claim ended)
    open_settled: bool = False

    def open_failure(self) -> bool:
        """A failure of the claim not answered and closed (SPEC §4.2, §4.3)."""
        return self.open_before or self.awaiting_head or any(
            p.open() for p in self.pending.values())

    def settled_open_failure(self) -> bool:
        """The same, but for those where the reading stopped that may still be answered."""
        return self.open_before or self.open_settled

    def on(self, request_id: str | None) -> Pending:
        """The claim's failures on *request_id* (made when a failure names the request)."""
        p = self.pending.get(request_id)
        if p is None:
            p = self.pending[request_id] = Pending()
        return p


@dataclass(slots=True)
class ClaimConflicts:
    """Refusals and deferrals naming the claim (SPEC §2 hard_protected), and the negative
    controls (SPEC §4) from the events that concern the claim (SPEC §9.1)."""

    smear: bool = False
    admission: bool = False
    #: controls, each from events that concern the claim (they name it, or are on a request
    #: carrying it): a failure or outcome naming another claim, one naming no claim, a
    #: successful store naming no claim, a generic counter
    other_named: bool = False
    unnamed: bool = False
    unclaimed_store: bool = False
    counter: bool = False
    #: the first refusal or deferral naming exactly this live, resident claim, its request,
    #: whether it refused, that request's first finish, and whether the finish came first
    conflict: int | None = None
    conflict_request: str | None = None
    conflict_refused: bool = False
    conflict_finish: tuple[int, str | None] | None = None
    conflict_early: bool = False


@dataclass(slots=True)
class ClaimTrack:
    """What one pass learned about one claim: what every event of it updates at the top, the
    rest in four named sub-records."""

    claim_id: str
    #: the claim's automaton (SPEC §4.2): its state and first violation (the acceptor's run)
    run: ClaimRun = None  # type: ignore[assignment]
    claim_events: int = 0
    #: an event names the claim beyond its submission and acceptance (not a generic counter)
    evidence: bool = False
    first_seq: int | None = None
    head_seen: bool = False
    #: the identity tuple of the claim's last claim event (a repeat teaches nothing)
    last_identity: tuple[str | None, ...] | None = None
    identity: ClaimIdentity = field(default_factory=ClaimIdentity)
    life: ClaimLifecycle = field(default_factory=ClaimLifecycle)
    failures: ClaimFailures = field(default_factory=ClaimFailures)
    conflicts: ClaimConflicts = field(default_factory=ClaimConflicts)

    def __post_init__(self) -> None:
        if self.run is None:
            self.run = ClaimRun(self.claim_id)

    def evaluates(self, e: Event) -> bool:
        """The accepted predicate evaluated on a ``claim_materialized`` event's numbers."""
        p = self.identity.predicate
        return p is not None and bool(e.holds) and p.proves(e.leading, e.surviving)

    def needs(self, position: int | None) -> bool:
        p = self.identity.predicate
        return p is None or p.needs(position)

    def unreported_loss(self, *reports: int | None) -> bool:
        """A loss before any release (or before one of *reports*)."""
        told = min((s for s in (self.life.first_release, *reports) if s is not None), default=None)
        return self.life.first_loss is not None and (told is None or self.life.first_loss < told)

    def unpromised_loss(self) -> bool:
        """SPEC §4.1: a loss the claim's mode did not announce first (the reference's
        ``rules.unpromised_loss``)."""
        mode, life = self.identity.mode, self.life
        if mode == "soft_priority":
            return self.unreported_loss(life.first_harm)
        if mode in OUTCOME_BEFORE_LOSS:
            # a harm a stopped process reported (SPEC §9.1) ends the claim; it is no loss the
            # mode failed to announce
            return life.first_mode_harm is not None or self.unreported_loss(life.first_stop_harm)
        return False

    def unstable(self) -> bool:
        """Ambiguous identity, or a submitted owner scope the acceptance contradicts."""
        ident = self.identity
        mine, submitted = ident.owner_scope, ident.submitted_scopes
        return ident.ambiguous or (mine is not None and bool(submitted - {mine})) or (
            mine is None and len(submitted) > 1)

    def served(self) -> bool:
        """SPEC §4 attribution: restored/served or untouched (see the reference's ``served``)."""
        life, failures = self.life, self.failures
        return not (life.first_harm is not None or failures.restore_failed
                    or failures.failed_load or life.unrestored_cycle or self.unreported_loss()
                    or self.run.violation is not None or failures.carrier_unexplained
                    or self.unstable())

    def failure_requirements(self) -> Seqs:
        """The failure requirements met by the failure cycle (else the best cycle without)."""
        if self.failures.failure is not None:
            return self.failures.failure.requirements(self.failures.failure.cycle.before)
        cy = self.life.first_stored or self.life.first_cycle
        if cy is None:
            return {}
        return {k: v for k, v in cy.before.items() if k in _FAILURE_BEFORE}


@dataclass(slots=True)
class StreamFacts:
    """Stream-wide facts: per-claim tracks plus what no single claim owns."""

    claims: dict[str, ClaimTrack] = field(default_factory=dict)
    #: claims with a claim event, in order of first appearance
    order: dict[str, None] = field(default_factory=dict)
    finished: set[str] = field(default_factory=set)
    duplicate_finish: tuple[int, str] | None = None
    #: the automaton over the file (SPEC §4.2–§4.3, §9.1): every claim's and request's run,
    #: the requests' owner scopes, the streams
    acceptor: Acceptor = field(default_factory=Acceptor)
    #: request -> claims waiting for its first finish
    awaiting: dict[str, list[ClaimTrack]] = field(default_factory=dict)
    #: request -> claims it carries (its claim_accepted names it, or it restores or reuses
    #: the claim), until its first finish
    carried: dict[str, list[ClaimTrack]] = field(default_factory=dict)
    #: request -> the carried claims a failure or outcome on it has named, until its finish
    explained: dict[str, set[str]] = field(default_factory=dict)
    #: request -> claims whose failure cycle is that request's
    failing: dict[str, list[ClaimTrack]] = field(default_factory=dict)
    #: request -> claims whose load failed on it
    failed_on: dict[str, list[ClaimTrack]] = field(default_factory=dict)
    #: request -> claims with failures on it (SPEC §4.3: answered before its finish)
    pending_on: dict[str, list[ClaimTrack]] = field(default_factory=dict)
    #: request -> claims whose open restore cycle began on it (an unclaimed kv_load_failed of
    #: the request voids the loads of those whose open cycle is still its own); a cycle leaves
    #: its list when the claim's next cycle begins
    cycling: dict[str, list[ClaimTrack]] = field(default_factory=dict)
    #: load job -> claims whose open cycle loaded it successfully (SPEC §4.2: a failed load
    #: voids the job its job_id names, whichever claim or request the failure names)
    loaded_jobs: dict[int | str, dict[str, ClaimTrack]] = field(default_factory=dict)
    #: load job -> seq of its last failed-load report
    failed_jobs: dict[int | str, int] = field(default_factory=dict)
    #: a claim_accepted declared best_effort: a problem line (SPEC §4.2), so no stream is well
    #: formed
    best_effort: bool = False
    #: seq of the first observation_gap (SPEC §4.2: what a gap hides is unknown)
    gap: int | None = None
    failure_names: set[str | None] = field(default_factory=set)
    failure_named_more: bool = False
    derived: dict[str, Any] = field(default_factory=dict)

    @property
    def files(self) -> Incarnations:
        """SPEC §9.1: the streams of the file (and the head window of the current one)."""
        return self.acceptor.files

    def forget_pass(self) -> None:
        """Drop the state only the pass reads (judging reads claims and stream-wide flags)."""
        self.acceptor.forget_requests()
        for working in (self.finished, self.awaiting, self.carried, self.explained,
                        self.failing, self.failed_on, self.pending_on, self.cycling,
                        self.loaded_jobs, self.failed_jobs):
            working.clear()

    def track(self, claim_id: str) -> ClaimTrack:
        t = self.claims.get(claim_id)
        if t is None:
            t = self.claims[claim_id] = ClaimTrack(claim_id, self.acceptor.claim(claim_id))
        return t

    def name_failure(self, e: Event, *names: str | None) -> None:
        """Record the claim names of one failure or outcome event (SPEC §4.1 attribution)."""
        rid = e.request_id
        carried = self.carried.get(rid) if rid is not None else None
        if carried:
            ids = {c.claim_id for c in carried}
            named = [n for n in names if n is not None and n in ids]
            if named:
                self.explained.setdefault(rid, set()).update(named)  # type: ignore[arg-type]
        self._concern(carried, names)
        for name in names:
            if name in self.failure_names:
                continue
            if len(self.failure_names - {None}) >= _NAMES_KEPT and name is not None:
                self.failure_named_more = True
            else:
                self.failure_names.add(name)

    def _concern(self, carried: list[ClaimTrack] | None, names: tuple[str | None, ...]) -> None:
        """The controls of every claim the failure or outcome concerns: each claim it names,
        and each its request carries."""
        known = claim_names(*names)
        concerned = [self.track(n) for n in known]
        if carried:
            concerned += [c for c in carried if c.claim_id not in known]
        for c in concerned:
            if not known:
                c.conflicts.unnamed = True
            elif len(known) > 1 or c.claim_id not in known:
                c.conflicts.other_named = True

    def carriers(self, rid: str | None) -> list[ClaimTrack]:
        """The claims request *rid* carries now (SPEC §4.2 attribution)."""
        return (self.carried.get(rid) or []) if rid is not None else []

    def await_finish(self, request_id: str, t: ClaimTrack) -> None:
        self.awaiting.setdefault(request_id, []).append(t)


def collect(events: Iterable[Envelope] | Iterable[Event]) -> StreamFacts:
    """Run one pass over *events* (already in seq order) and return the settled facts.

    What only the pass needed (every request's automaton and the per-request maps) is dropped
    before the facts are judged: it grows with every request the stream ever named, and judging
    reads none of it, so the peak memory of a check is that of the pass or of the results, not
    of both at once.
    """
    facts = stream_pass(events)
    facts.forget_pass()
    return facts


def stream_pass(events: Iterable[Envelope] | Iterable[Event]) -> StreamFacts:
    """The pass of :func:`collect`, its working state kept (each request's automaton)."""
    facts = StreamFacts()
    claims, track, order, carried = facts.claims, facts.track, facts.order, facts.carried
    acceptor = facts.acceptor
    feed = acceptor.step
    dispatch = _DISPATCH
    stream_kinds, previous = STREAM_KINDS, -1
    slow = acceptor.slow

    # the hot loop: one lookup says what an event is; what every claim event shares is inline
    for event in records(events):
        name = event.event
        if slow or name in stream_kinds:
            # the file's first event, an opener or closer, or anything of a later stream or
            # of a head window (SPEC §9.1): placed at its position
            placed = acceptor.place(event, previous)
            event = placed.event
            if placed.head is not None:
                _head_closed(facts, placed.head, settled=True)
            if placed.ended is not None:
                _end_stream(facts, placed.ended)
            slow = acceptor.slow
        previous = event.seq
        feed(event)  # the automaton (SPEC §4.2–§4.3): the request's step, then the claims'
        cid = event.claim_id
        rid = event.request_id
        claim_event, handler, ending = dispatch[name]
        if cid is None:
            if claim_event:
                _unnamed_claim_event(facts, event, name)
                continue
            t = None
        else:
            try:
                t = claims[cid]
            except KeyError:
                t = track(cid)
            if not t.evidence and name not in _NO_EVIDENCE:
                t.evidence = True
            if rid is not None and name != "active_request_refused":
                # a refusal is itself the outcome naming the claim; the common case, the
                # request's last carried claim again, is skipped inline
                held = carried.get(rid)
                if held is None or held[-1] is not t:
                    carry(facts, t, rid)
            if not t.head_seen and name not in _BEFORE_ACCEPTANCE:
                _head(t, event, name)
            if claim_event:
                if t.claim_events == 0:
                    t.first_seq = event.seq
                    order[cid] = None
                t.claim_events += 1
                if (event.object_id, event.cache_identity, event.request_token_map_id,
                        event.predicate_id) != t.last_identity:
                    _identity(t, event)
                if handler is not None:
                    handler(facts, t, event)
                if ending:
                    _ending(t, event, name)
                continue
        if handler is not None:
            handler(facts, t, event)
    how, head = acceptor.finish()
    if head is not None:  # the reading stopped inside a head window
        _head_closed(facts, head, settled=False)
    _end_stream(facts, how, last=True)
    return facts


def _head_closed(facts: StreamFacts, head: list[ClaimRun], *, settled: bool) -> None:
    """A head window closed (or the reading stopped in it): a failure its claim's ending
    there answers is closed; one whose claim did not end stays open (not yet, if the reading
    stopped)."""
    for run in head:
        failures = facts.claims[run.claim_id].failures
        if not failures.awaiting_head:
            continue
        if run.phase not in LIVE:
            failures.awaiting_head = False
        elif settled:
            failures.awaiting_head, failures.open_before = False, True


def _end_stream(facts: StreamFacts, how: StreamEnd, *, last: bool = False) -> None:
    """A stream of the file ended (the acceptor has checked its accepting conditions): its
    open restore cycles settled, its open failures judged, and (unless it is the *last*: the
    pass keeps its working state) everything kept per request dropped: requests, jobs and the
    lookups and failures kept by request are per stream."""
    for rid, held in facts.carried.items():  # SPEC §4.2: a carrier that never finished
        _unexplained(held, facts.explained.get(rid, set()))
    for t in facts.claims.values():
        _close(t)
        failures = t.failures
        if failures.pending:
            _failures_at_end(t, how, last=last)
        if not last:
            t.life.hits.clear()
            failures.failed_requests.clear()
    if not last:
        facts.forget_pass()


def _failures_at_end(t: ClaimTrack, how: StreamEnd, *, last: bool) -> None:
    """Failures of *t* still open where its stream ended (SPEC §9.1): cut off by a restart,
    answered only by the claim's ending at the next stream's head; where the reading stopped,
    still answerable while the claim is open (SPEC §4.3: an answered failure's record may come
    after its request's finish), unless its request finished before an outcome answered it or
    it names none; else open."""
    failures, live = t.failures, t.run.phase in LIVE
    still = [(rid, p) for rid, p in failures.pending.items() if p.open()]
    if how is StreamEnd.OPEN:
        failures.open_settled = bool(still) and (
            not live or any(rid is None or p.missed for rid, p in still))
        return
    if still:
        if how is StreamEnd.RESTARTED and live:
            failures.awaiting_head = True
        else:
            failures.open_before = True
    if not last:
        failures.pending.clear()


#: events that show nothing of a claim beyond its acceptance (control generic_counter_only)
_NO_EVIDENCE = frozenset({"claim_submitted", "claim_accepted", "request_started",
                          "generic_counter"})
#: events that may name a claim before its acceptance (SPEC §4.2)
_BEFORE_ACCEPTANCE = frozenset({"claim_submitted", "request_started"})

#: what the pass does with one event type: (claim event?, handler, ending?)
_Dispatch = tuple[bool, Callable[..., None] | None, bool]
_UNHANDLED: _Dispatch = (False, None, False)


def _head(t: ClaimTrack, e: Event, name: str) -> None:
    """SPEC §4.1: no event of the claim (store included) precedes ``claim_accepted``."""
    t.head_seen = True
    t.identity.head_accepted = name == "claim_accepted" and str(e.registration) == "pre_registered"
    t.identity.head_rejected = name == "claim_rejected"


def _unnamed_claim_event(facts: StreamFacts, e: Event, name: str) -> None:
    if name in ("claim_restore_failed", "claim_demoted", "claim_expired", "claim_harmed"):
        facts.name_failure(e, None, getattr(e, "outcome_claim_id", None))


def _ending(t: ClaimTrack, e: Event, name: str) -> None:
    life = t.life
    if life.end_seq is None:
        life.end_seq = e.seq
    if name in RELEASES:
        life.release_of.setdefault(name, e.seq)
        if life.first_release is None:
            life.first_release = e.seq


def _identity(t: ClaimTrack, e: Event) -> None:
    """A new identity tuple (the common case, the same as the claim's last, is skipped)."""
    identity = t.identity
    t.last_identity = (e.object_id, e.cache_identity, e.request_token_map_id, e.predicate_id)
    for name in IDENTITY_FIELDS:
        value = getattr(e, name)
        if value is None:
            identity.missing = True
            continue
        if identity.values.setdefault(name, value) != value:
            identity.ambiguous = True
    if identity.first_predicate_id is None and e.predicate_id is not None:
        identity.first_predicate_id = e.predicate_id


def _accepted(facts: StreamFacts, t: ClaimTrack, e: Event) -> None:
    identity = t.identity
    p = e.predicate
    defining = (*(getattr(e, f) for f in ACCEPTED_FIELDS), p.id, str(p.kind), p.blocks, p.start)
    if identity.accepted_seq is not None:
        if defining != identity.defining:
            identity.ambiguous = True
        return
    if str(e.protection_mode) == "best_effort":
        facts.best_effort = True
    identity.accepted_seq, identity.defining = e.seq, defining
    identity.registration, identity.mode = str(e.registration), str(e.protection_mode)
    identity.predicate_id = p.id
    identity.predicate = AcceptedPredicate.of(p, e.footprint_blocks)
    identity.owner_scope = e.owner_scope


def _materialized(facts: StreamFacts, t: ClaimTrack, e: Event) -> None:
    life, identity = t.life, t.identity
    if len(identity.required_values) < 2:
        identity.required_values.add(e.required)
    holds = t.evaluates(e)
    if holds and life.materialized_seq is None:
        life.materialized_seq = e.seq
    elif not holds:
        _loss(t, e)


def _loss(t: ClaimTrack, e: Event) -> None:
    life = t.life
    if life.materialized_seq is not None and life.first_loss is None:
        life.first_loss = e.seq


def _offloaded(facts: StreamFacts, t: ClaimTrack, e: Event) -> None:
    life = t.life
    if life.offload_seq is None:
        life.offload_seq = e.seq


def _restore_required(facts: StreamFacts, t: ClaimTrack, e: Event) -> None:
    life = t.life
    _leave_cycling(facts, t, life.cycle)
    _close(t)
    prev, life.last_required = life.last_required, e.seq
    if life.end_seq is not None:
        return  # no restore of a live claim: not a cycle
    off, store, hit = life.offload_seq, life.store_seq, life.hits.get(e.request_id)
    life.hits.clear()
    if store is not None and store >= (e.seq if off is None else off):
        store = None
    if hit is not None and hit <= max(prev, -1 if off is None else off):
        hit = None
    _forget_loads(facts, t, life.cycle)
    cy = life.cycle = Cycle(e.seq, required_label(e), e.request_id, life.materialized_seq, off,
                            store, hit, life.copy_digest)
    if e.request_id is not None:
        facts.cycling.setdefault(e.request_id, []).append(t)
    life.cycles += 1
    if life.first_cycle is None:
        life.first_cycle = cy
    if life.first_stored is None and store is not None:
        life.first_stored = cy


def _leave_cycling(facts: StreamFacts, t: ClaimTrack, closing: Cycle | None) -> None:
    """The cycle *closing* ends: its request no longer lists *t* (the lists' readers only act
    on a claim whose open cycle is the request's, so memory stays O(open cycles), not O(every
    request of the stream))."""
    if closing is None or closing.request_id is None:
        return
    held = facts.cycling.get(closing.request_id)
    if held is None:
        return
    for i, w in enumerate(held):
        if w is t:  # by identity: a track's fields are no key
            del held[i]
            break
    if not held:
        del facts.cycling[closing.request_id]


def _forget_loads(facts: StreamFacts, t: ClaimTrack, closed: Cycle | None) -> None:
    """A closed cycle's load jobs can no longer be voided for *t*: keep the job map to open
    cycles (memory O(open cycles' loads))."""
    if closed is None or not closed.loads:
        return
    for job, _ in closed.loads:
        if job is None or job not in facts.loaded_jobs:
            continue
        holders = facts.loaded_jobs[job]
        holders.pop(t.claim_id, None)
        if not holders:
            del facts.loaded_jobs[job]


_OBSERVATION = frozenset(OBSERVATION)


def _close(t: ClaimTrack) -> None:
    """Settle the open cycle: its verdicts are final once the next cycle begins."""
    life = t.life
    cy = life.cycle
    if cy is None:
        return
    life.cycle = None
    settled = cy.settled()
    load, restored, reused = settled
    score = (1 + (cy.materialized is not None) + (cy.offloaded is not None)
             + (cy.stored is not None) + (cy.hit is not None) + (load is not None)
             + (restored is not None) + (reused is not None)
             + (cy.digest is None or restored in (cy.verified or ())))  # content_verified
    if score > len(life.best):
        life.best = cy.observation()
    if score == len(_OBSERVATION) and len(life.full) < 2 and all(
            label != cy.label for _, label in life.full):
        life.full.append((cy.seq, cy.label))
    if restored is None:
        life.unrestored_cycle = True
    if cy.reuse_first is not None and (
            cy.restored_member is None or cy.reuse_first < cy.restored_member):
        life.restore_after_reuse = True


def _restored(facts: StreamFacts, t: ClaimTrack, e: Event) -> None:
    life, failures = t.life, t.failures
    if e.source == "fallback_recompute":
        failures.fallback = True
    f = failures.failure
    if f is not None:
        f.restored_after = True
    cy = life.cycle
    if cy is None:
        return
    g = e.generation
    if g is not None and g != cy.label:  # not a member of the cycle
        return
    if cy.restored_member is None:
        cy.restored_member = e.seq
    if life.end_seq is not None:
        return
    if cy.restore_any is None:
        cy.restore_any = e.seq
    if e.source == "offload_tier":
        if cy.offload_restores is None:
            cy.offload_restores = []
        cy.offload_restores.append(e.seq)
        if e.content_verified is True:
            if cy.verified is None:
                cy.verified = set()
            cy.verified.add(e.seq)
        if cy.restore_offload is None:
            cy.restore_offload = e.seq


def _reused(facts: StreamFacts, t: ClaimTrack, e: Event) -> None:
    life = t.life
    if not e.holds:
        _loss(t, e)
    cy = life.cycle
    if cy is None:
        return
    g = e.generation
    if g is not None and g != cy.label:  # not a member of the cycle
        return
    if cy.reuse_first is None:
        cy.reuse_first = e.seq
    mine, theirs = t.run.scope, facts.acceptor.scope()  # the scope of the event's request
    if mine is not None and theirs is not None and mine != theirs:
        cy.foreign_reuse = True
    if (e.holds and cy.reuse_ok is None and cy.restore_any is not None
            and life.end_seq is None):
        cy.reuse_ok = e.seq


def _restore_failed(facts: StreamFacts, t: ClaimTrack, e: Event) -> None:
    failures = t.failures
    facts.name_failure(e, t.claim_id, e.outcome_claim_id)
    failures.restore_failed = True
    if e.outcome_claim_id == t.claim_id:  # the failure's record (SPEC §4.3)
        pending = failures.pending.get(e.request_id)
        if pending is not None:
            pending.unrecorded = False
    f = failures.failure
    if f is None or f.restore_failed_checked:
        return
    f.restore_failed_checked = True
    cy = f.cycle
    if (t.life.end_seq is None and e.outcome_claim_id == t.claim_id and e.generation == cy.label
            and e.request_id == cy.request_id):
        f.restore_failed = e.seq


def _fail(facts: StreamFacts, t: ClaimTrack, e: Event) -> None:
    """A failure of *t*'s claim on *e*'s request (SPEC §4.2 Failures): open until an outcome
    answers it before the request's first finish and its record (or that ending) closes it;
    a ``kv_load_failed`` after an outcome answered an earlier failure there is that failure's
    record and opens none (SPEC §4.3). One naming no request is never answered."""
    rid = e.request_id
    failures = t.failures
    pending = failures.pending.get(rid)
    if pending is None:
        pending = failures.pending[rid] = Pending()
        if rid is not None:
            facts.pending_on.setdefault(rid, []).append(t)
    elif pending.answered and e.event == "kv_load_failed":
        return
    if rid is None:
        pending.missed = True
    else:
        pending.unanswered = pending.unrecorded = True


def _answer_refusal(facts: StreamFacts, e: Event) -> None:
    """SPEC §4.3: a refusal of the request naming the claim answers its failures there."""
    claim, rid = e.outcome_claim_id, e.request_id
    if e.arbiter == Arbiter.HARNESS:  # arbiter=harness never satisfies anything
        return
    t = None if claim is None or rid is None else facts.claims.get(claim)
    pending = None if t is None else t.failures.pending.get(rid)
    if pending is not None:
        pending.unanswered, pending.answered = False, True


def _answer_ending(t: ClaimTrack, e: Event) -> None:
    """SPEC §4.3: the mode's demotion, expiry or harm of the claim (naming the request or
    none) answers and closes its failures on that request."""
    rid = e.request_id
    for on, pending in t.failures.pending.items():
        if on is not None and rid in (None, on):
            pending.unanswered = pending.unrecorded = False
            pending.answered = True


def _named(facts: StreamFacts, t: ClaimTrack, e: Event) -> None:
    facts.name_failure(e, t.claim_id)
    _answer_ending(t, e)


def _harmed(facts: StreamFacts, t: ClaimTrack, e: Event) -> None:
    life = t.life
    facts.name_failure(e, t.claim_id)
    _answer_ending(t, e)
    if life.first_harm is None:
        life.first_harm = e.seq
    if e.cause in _STOP_CAUSES:
        if life.first_stop_harm is None:
            life.first_stop_harm = e.seq
    elif life.first_mode_harm is None:
        life.first_mode_harm = e.seq


_STOP_CAUSES = frozenset(c.value for c in StopCause)


def _lost(facts: StreamFacts, t: ClaimTrack, e: Event) -> None:
    _loss(t, e)


def _submitted(facts: StreamFacts, t: ClaimTrack, e: Event) -> None:
    identity = t.identity
    if e.owner_scope is not None and len(identity.submitted_scopes) < 2:
        identity.submitted_scopes.add(e.owner_scope)


_CLAIM_HANDLERS: dict[str, ClaimHandler] = {
    "claim_submitted": _submitted,
    "claim_accepted": _accepted,
    "claim_materialized": _materialized,
    "claim_offloaded": _offloaded,
    "claim_restore_required": _restore_required,
    "claim_restored": _restored,
    "claim_reused": _reused,
    "claim_restore_failed": _restore_failed,
    "claim_demoted": _named,
    "claim_expired": _named,
    "claim_harmed": _harmed,
    "claim_block_lost_after_release": _lost,
}

OtherHandler = Callable[[StreamFacts, "ClaimTrack | None", Event], None]


def carry(facts: StreamFacts, t: ClaimTrack, rid: str) -> None:
    """*rid* carries the claim of *t* from here to its first finish (SPEC §4.2 attribution;
    ruling: every request an event naming the claim names carries it, but by a refusal)."""
    carried = facts.carried.get(rid)
    if carried is None:  # not carrying anything yet (a finished request is never carried)
        if rid not in facts.finished:
            facts.carried[rid] = [t]
    elif carried[-1] is not t and not any(c is t for c in carried):
        carried.append(t)


def _unexplained(carried: Iterable[ClaimTrack], explained: set[str]) -> None:
    """A carrying request that did not finish served: each claim it carries that no failure or
    outcome on it named is unexplained spill-over (SPEC §4.2 attribution)."""
    for c in carried:
        if c.claim_id not in explained:
            c.failures.carrier_unexplained = True


def _finished(facts: StreamFacts, t: ClaimTrack | None, e: Event) -> None:
    rid = e.request_id
    if rid is None:
        return
    if rid in facts.finished:
        if facts.duplicate_finish is None:
            facts.duplicate_finish = (e.seq, rid)
        return
    facts.finished.add(rid)
    for w in facts.pending_on.pop(rid, ()):  # SPEC §4.3: the outcome precedes the finish
        pending = w.failures.pending.get(rid)
        if pending is not None and pending.unanswered:
            pending.unanswered, pending.missed = False, True
    carried, explained = facts.carried.pop(rid, ()), facts.explained.pop(rid, set())
    if e.status != "served":
        _unexplained(carried, explained)
    waiting = facts.awaiting.pop(rid, None)
    for w in waiting or ():
        _finish_of(w, rid, (e.seq, e.status))


def _finish_of(t: ClaimTrack, rid: str, finish: tuple[int, str | None]) -> None:
    conflicts = t.conflicts
    f = t.failures.failure
    if f is not None and f.refusal is not None and f.cycle.request_id == rid and f.finish is None:
        f.finish = finish
    if conflicts.conflict_request == rid and conflicts.conflict_finish is None:
        conflicts.conflict_finish = finish


def _generic(facts: StreamFacts, t: ClaimTrack | None, e: Event) -> None:
    for c in _concerned(facts, t, e):
        c.conflicts.counter = True


def _concerned(facts: StreamFacts, t: ClaimTrack | None, e: Event) -> list[ClaimTrack]:
    """The claims an event concerns: the one it names, and those its request carries."""
    carried = facts.carriers(e.request_id)
    if t is None:
        return carried
    return [t, *(c for c in carried if c is not t)]


def _gap(facts: StreamFacts, t: ClaimTrack | None, e: Event) -> None:
    if facts.gap is None:
        facts.gap = e.seq
    for c in facts.claims.values():  # SPEC §9.1: what the window hid of an open claim
        run = c.run
        if run.phase in LIVE or (run.phase in PRE and run.named_seq is not None):
            c.life.unseen = True


def _store_finished(facts: StreamFacts, t: ClaimTrack | None, e: Event) -> None:
    if not e.success:
        facts.name_failure(e, e.claim_id)
        if t is not None:  # SPEC §4.2: open until the claim's outcome on that request
            _fail(facts, t, e)
        return
    if t is None:  # an ordinary store: a control of the claims its request carries
        for c in facts.carriers(e.request_id):
            c.conflicts.unclaimed_store = True
    else:
        life = t.life
        life.stored, life.copy_digest, life.copy_medium = True, e.content_digest, e.to_tier
        if life.store_seq is None:
            life.store_seq = e.seq


def _lookup(facts: StreamFacts, t: ClaimTrack | None, e: Event) -> None:
    if t is not None and e.hit_tokens > 0:
        t.life.hits[e.request_id] = e.seq


def _load_finished(facts: StreamFacts, t: ClaimTrack | None, e: Event) -> None:
    if not e.success:
        _void_loads(facts, t, e)  # a job reported failed did not succeed, whatever else it said
        _load_failure(facts, t, e)
        return
    cy = None if t is None else t.life.cycle
    if t is not None and cy is not None and cy.member(e) and t.life.end_seq is None:
        if cy.loads is None:
            cy.loads = []
        cy.loads.append((e.job_id, e.seq))
        job = e.job_id
        if job is not None:
            facts.loaded_jobs.setdefault(job, {})[t.claim_id] = t
            if facts.failed_jobs.get(job, -1) > cy.seq:  # reported failed earlier in the cycle
                _void(cy, e)


def _load_failed(facts: StreamFacts, t: ClaimTrack | None, e: Event) -> None:
    if not e.invalid_block_ids:
        return  # a report of no invalid block is no failed load
    _void_loads(facts, t, e)
    _load_failure(facts, t, e)


def _void_loads(facts: StreamFacts, t: ClaimTrack | None, e: Event) -> None:
    """A failed load voids the claim's open cycle's loads of its job; one naming no claim, those
    of every cycle open on its request (a load its own job reports failed is no successful
    load, named or not)."""
    job = e.job_id
    if job is not None:  # the job it names, whoever loaded it (SPEC §4.2)
        facts.failed_jobs[job] = e.seq
        for holder in facts.loaded_jobs.get(job, {}).values():
            cy = holder.life.cycle
            if cy is not None and cy.loads and any(j == job for j, _ in cy.loads):
                _void(cy, e)
    if t is not None:
        _void(t.life.cycle, e)
    elif e.request_id is not None:
        for other in facts.cycling.get(e.request_id, ()):
            cy = other.life.cycle
            if cy is not None and cy.request_id == e.request_id:
                _void(cy, e)


def _void(cy: Cycle | None, e: Event) -> None:
    """SPEC §4.2: ``kv_load_failed`` (or a failed ``kv_load_finished``) voids the load job it
    names; without ``job_id``, every successful load of that request."""
    if cy is None:
        return
    if e.job_id is None:
        if e.request_id == cy.request_id:
            cy.voided_all = True
    else:
        if cy.voided_jobs is None:
            cy.voided_jobs = set()
        cy.voided_jobs.add(e.job_id)


def _load_failure(facts: StreamFacts, t: ClaimTrack | None, e: Event) -> None:
    facts.name_failure(e, e.claim_id)
    if t is None:
        return
    life, failures = t.life, t.failures
    failures.failed_load = True
    rid = e.request_id
    _fail(facts, t, e)
    if rid is not None and rid not in failures.failed_requests:
        failures.failed_requests.add(rid)
        facts.failed_on.setdefault(rid, []).append(t)
    cy = life.cycle
    if cy is None or not cy.member(e) or cy.request_id is None or rid != cy.request_id:
        return
    if cy.failed_load is None:
        cy.failed_load = e.seq
        f = failures.failure
        if f is None:
            failures.failure = FailureChain(cy, list(life.full))
            facts.failing.setdefault(rid, []).append(t)
        elif f.by_branch and f.cycle is cy and rid not in facts.finished:
            # a failed load before the finish is the failure; the branch before it was early
            failures.failure = FailureChain(cy, f.prior_full)
    if cy.injected_failure is None and e.injected:
        cy.injected_failure = e.seq


def _scheduler_failure(facts: StreamFacts, t: ClaimTrack | None, e: Event) -> None:
    facts.name_failure(e, e.claim_id)
    rid = e.request_id
    if t is not None:
        # SPEC §4.2: the branch is a failure like a failed load (one repeated after its
        # outcome is a failure again)
        _fail(facts, t, e)
    if e.policy == "recompute":
        if t is not None:
            t.failures.fallback = True
        elif rid is not None:
            for w in facts.failed_on.get(rid, ()):
                w.failures.fallback = True
        return
    if e.policy == "fail" and rid is not None:
        # SPEC §4.3: the failed job's kv_load_failed may come only after the finish, so the
        # branch can open the claim's failure cycle
        for w in [t] if t is not None else list(facts.cycling.get(rid, ())):
            cy = w.life.cycle
            if cy is not None and cy.request_id == rid and w.failures.failure is None:
                w.failures.failure = FailureChain(cy, list(w.life.full), by_branch=True)
                facts.failing.setdefault(rid, []).append(w)
    for w in facts.failing.get(rid or "", ()):
        f = w.failures.failure
        if f is not None and f.sched_fail is None and e.claim_id in (w.claim_id, None):
            f.sched_fail = e.seq


def _refused(facts: StreamFacts, t: ClaimTrack | None, e: Event) -> None:
    blocking = e.blocking_claim_ids
    facts.name_failure(e, e.claim_id, e.outcome_claim_id, *blocking)
    _answer_refusal(facts, e)
    for cid in claim_names(e.claim_id, e.outcome_claim_id, *blocking):
        named = facts.track(cid)
        if blocking != [cid] or e.outcome_claim_id != cid:  # it blocks only its outcome claim
            named.conflicts.smear = True
        if e.arbiter == "admission":
            named.conflicts.admission = True
    if len(blocking) == 1:
        _conflict(facts, facts.track(blocking[0]), e, refused=True)
    rid = e.request_id
    if rid is None or e.arbiter != "scheduler_boundary":
        return
    for w in facts.failing.get(rid, ()):
        f = w.failures.failure
        if (f is not None and f.refusal is None and e.claim_id in (w.claim_id, None)
                and e.outcome_claim_id == w.claim_id and blocking == [w.claim_id]):
            f.refusal = e.seq
            if rid in facts.finished:
                f.finished_early = True
            else:
                facts.await_finish(rid, w)


def _deferred(facts: StreamFacts, t: ClaimTrack | None, e: Event) -> None:
    blocking = e.blocking_claim_ids
    if blocking:
        own = () if e.claim_id is None else (e.claim_id,)
        facts.name_failure(e, *own, *blocking)
        for cid in {*own, *blocking}:  # a deferral that blames others smears too
            if blocking != [cid]:
                facts.track(cid).conflicts.smear = True
    if len(blocking) == 1:
        _conflict(facts, facts.track(blocking[0]), e, refused=False)


def _conflict(facts: StreamFacts, t: ClaimTrack, e: Event, *, refused: bool) -> None:
    """The first refusal or deferral naming exactly this live, resident claim (hard_protected)."""
    life, conflicts = t.life, t.conflicts
    if conflicts.conflict is not None or life.materialized_seq is None:
        return
    if refused and (e.outcome_claim_id != t.claim_id or e.claim_id != t.claim_id
                    or e.arbiter == Arbiter.HARNESS):
        return
    if (life.end_seq is not None or life.first_harm is not None
            or e.request_id in t.failures.failed_requests):
        return
    rid = conflicts.conflict_request = e.request_id
    conflicts.conflict, conflicts.conflict_refused = e.seq, refused
    if rid is None:
        return
    if rid in facts.finished:
        conflicts.conflict_early = True
    else:
        facts.await_finish(rid, t)


def _evicted(facts: StreamFacts, t: ClaimTrack | None, e: Event) -> None:
    """SPEC §4.1/§4.2: an eviction of a needed position is loss; an offloadable claim's only
    while no stored, offloaded copy is held (an eviction from the copy's medium loses it)."""
    if t is None or not t.needs(e.position):
        return
    life = t.life
    if t.identity.mode == "offloadable":
        if e.medium is not None and e.medium == life.copy_medium:
            life.stored = False
        elif life.stored and life.offload_seq is not None:
            return
    _loss(t, e)


_OTHER_HANDLERS: dict[str, OtherHandler] = {
    "request_finished": _finished,
    "generic_counter": _generic,
    "observation_gap": _gap,
    "kv_store_finished": _store_finished,
    "kv_lookup": _lookup,
    "kv_load_finished": _load_finished,
    "kv_load_failed": _load_failed,
    "scheduler_load_failure": _scheduler_failure,
    "active_request_refused": _refused,
    "active_request_deferred": _deferred,
    "block_evicted": _evicted,
}


def _dispatch_table() -> dict[str, _Dispatch]:
    """Every event kind of the schema (a plain dict: one subscript per event)."""
    table: dict[str, _Dispatch] = dict.fromkeys(EVENT_MODELS, _UNHANDLED)
    table.update((name, (False, handler, False)) for name, handler in _OTHER_HANDLERS.items())
    for name in CLAIM_EVENT_NAMES:
        table[name] = (True, _CLAIM_HANDLERS.get(name), name in PROMISE_ENDINGS)
    return table


_DISPATCH = _dispatch_table()
