"""The streaming reader of the automaton table (:mod:`residentkv.model.automaton`).

One :class:`ClaimRun` per claim and one :class:`RequestRun` per request keep the running
answers every guard needs (the last cycle's label and request, the copy's tier, the highest
labels so far, ...), so a step costs one table lookup and the guards of one cell: each cell
with guards is compiled, once at import, into one function of its guards' expressions in row
order (:data:`_GUARD_EXPR`), so a step makes one call, not one per guard. Memory is
O(claims + requests): no event is kept. The reference semantics reads the same table over the
whole event list (:mod:`residentkv.trace.semantics.legal`); both must agree on every trace.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from residentkv.model.automaton import (
    CLAIM_TABLE,
    DECIDED_AGAIN,
    HEAD_ENDINGS,
    LIVE,
    PRE,
    REQUEST_TABLE,
    STAY,
    Cell,
    Guard,
    Phase,
    RequestPhase,
    Step,
    Violation,
    decide,
    failed_load,
    failure_chain_event,
    outcome_envelope_mismatch,
    proves,
    request_guard,
    short_copy,
    substrate_failure,
)
from residentkv.model.event_record import EventRecord, required_label
from residentkv.model.events import IDENTITY_FIELDS
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
    carriers: set[str | None] = field(default_factory=set)
    #: the seq and kind of the first event (a request_started or claim_submitted) that named
    #: the claim before it was decided, and that event's request's run (it shares the
    #: violation if the claim is never decided)
    named_seq: int | None = None
    named_kind: str = ""
    named_request: RequestRun | None = None
    submitted: bool = False
    submitted_scope: str | None = None
    scope: str | None = None
    definition: tuple[Any, ...] | None = None
    predicate: tuple[str, int, int, int] | None = None  # kind, blocks, start, footprint
    top_cycle_label: int = -1
    top_copy_label: int = -1
    store_tier: str | None = None
    offload_tier: str | None = None
    cycle_request: str | None = None
    cycle_label: int = -1
    #: the load jobs the open cycle's kv_load_started events started
    cycle_jobs: set[int | str | None] = field(default_factory=set)
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
            if self.named_request is not None:
                self.named_request.violate(step, settled=settled)
            self.live = self.live or not settled
        if not settled:
            self.live = self.live or self.phase in LIVE
            return
        # a request names the claim within its own stream: the next one starts afresh
        self.named_seq, self.named_kind, self.named_request = None, "", None
        self.carriers = set()

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

    def step(self, e: Event, scopes: dict[str, str | None],
             request: RequestRun | None = None) -> bool:
        """Feed one event that names this claim (*request*: the run of the request it names,
        which shares a violation of this step with every claim it names); True when it was
        illegal."""
        outcome, decider, teach = _COMPILED[self.phase][e.event]
        if decider is not None:
            outcome = decider(self, e, scopes)
        if outcome.__class__ is Violation:
            step = Step(e.seq, e.event, self.phase.value, outcome)
            self.own = earlier(self.own, step)
            self.record(step)
            if outcome in DECIDED_AGAIN:
                self.decided_again = True
            if request is not None:
                request.violate(step)
            return True
        if teach is not None:
            teach(self, e)
            if self.named_seq == e.seq and self.named_request is None:
                self.named_request = request
        if outcome is not STAY:
            self.phase = outcome
        return False

    def _needs(self, position: int | None) -> bool:
        p = self.predicate
        if position is None or p is None:
            return True  # an unknown position counts (fail closed)
        return p[2] <= position < p[2] + p[1]

    def _loss(self, e: Event) -> bool:
        """SPEC §4.1/§4.2: an observed loss (see :attr:`Guard.LOSS`)."""
        name = e.event
        if name == "claim_reused":
            return not e.holds
        if name == "claim_materialized":
            return not self._proves(e)
        if not self._needs(e.position):
            return False
        held = (self.mode == "offloadable" and self.store_tier is not None and self.offloaded
                and not self.copy_lost)
        return not held or (e.medium is not None and e.medium == self.store_tier)

    def _proves(self, e: Event) -> bool:
        p = self.predicate
        return p is not None and proves(p[0], p[1], p[2], p[3], e.leading, e.surviving)


@dataclass(slots=True, eq=False)
class RequestRun:
    """One request's automaton, with the claims it named (they share its violations)."""

    phase: RequestPhase = RequestPhase.NEW
    #: the first violation of the request's own run; of it or of a claim step on it; and
    #: the latter but for what only the reading's stop made
    own: Step | None = None
    violation: Step | None = None
    settled: Step | None = None
    claims: list[ClaimRun] = field(default_factory=list)
    #: the first failure-chain event of the request (it must finish in the stream)
    failure_seq: int | None = None
    failure_kind: str | None = None

    def step(self, e: Event) -> bool:
        """Feed one event that names this request; True when it was illegal."""
        name = e.event
        cell = _REQUEST_CELLS[self.phase][name]
        if self.failure_seq is None:
            failure = _FAILURE_CHECKS.get(name)
            if failure is not None and failure(e):
                self.failure_seq, self.failure_kind = e.seq, name
        if cell is _STAY_CELL:
            return False
        outcome = cell[0][1] if len(cell) == 1 else decide(cell, partial(request_guard, event=e))
        if outcome.__class__ is Violation:
            step = Step(e.seq, e.event, self.phase.value, outcome)
            self.own = earlier(self.own, step)
            self.violate(step)
            return True
        if outcome is not STAY:
            self.phase = outcome  # type: ignore[assignment]
        return False

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
            for run in self.claims:
                run.live = True

    def violate(self, step: Step, *, settled: bool = True) -> None:
        """A step of this request was illegal: every claim it names shares the violation."""
        self.violation = earlier(self.violation, step)
        if settled:
            self.settled = earlier(self.settled, step)
        for run in self.claims:
            run.record(step, settled=settled)

    def names(self, run: ClaimRun) -> None:
        """The request names *run*'s claim: it shares the request's violations."""
        claims = self.claims
        if claims and claims[-1] is run:
            return
        if all(c is not run for c in claims):
            self.claims.append(run)
            if self.violation is not None:
                run.violation = earlier(run.violation, self.violation)
                run.settled = earlier(run.settled, self.settled)


# ------------------------------------------------------------------ compiled forms of the table
def _copy_tier(r: ClaimRun) -> str | None:
    return r.offload_tier if r.store_tier is None else r.store_tier


def _carrier_scope(r: ClaimRun, e: Event, scopes: dict[str, str | None]) -> bool:
    mine = e.owner_scope if e.owner_scope is not None else r.submitted_scope
    rid = e.request_id
    theirs = None if rid is None else scopes.get(rid)
    return mine is not None and theirs is not None and str(theirs) != str(mine)


def _short_copy(r: ClaimRun, e: Event) -> bool:
    p = r.predicate
    return p is None or short_copy(e.block_count, p[1])


#: every claim guard as a Python expression over the claim's running facts ``r``, the event
#: ``e`` and the requests' owner scopes ``s`` (see :class:`Guard`); each cell of the table is
#: compiled into one function of its guards' expressions, in row order (below)
_GUARD_EXPR: dict[Guard, str] = {
    Guard.FOREIGN_SCOPE: "r.scope is not None and (e.request_id is None"
                         " or s.get(e.request_id) != r.scope)",
    Guard.OTHER_REQUEST: "e.request_id != r.cycle_request",
    Guard.OTHER_LABEL: "(g := getattr(e, 'generation', None)) is not None and g != r.cycle_label",
    Guard.UNNAMED_FAILURE: "e.request_id is None and substrate_failure(e)",
    Guard.FAILED_LOAD: "failed_load(e)",
    Guard.SAME_TIER: "e.from_tier == e.to_tier",
    Guard.LABEL_BELOW: "(g := getattr(e, 'generation', None)) is not None"
                       " and g < r.top_cycle_label",
    Guard.LABEL_NOT_NEW: "(g := required_label(e)) <= r.top_cycle_label or g < r.top_copy_label",
    Guard.WRONG_TIER: "(c := _copy_tier(r)) is None or e.from_tier != c",
    Guard.FALLBACK: "e.source == 'fallback_recompute'",
    Guard.HOLDS_CONTRADICTED: "bool(e.holds) != r._proves(e)",
    Guard.PROVEN: "r._proves(e)",
    Guard.BEST_EFFORT: "str(e.protection_mode) == 'best_effort'",
    Guard.NOT_CARRIER: "any(c != e.request_id for c in r.carriers)",
    Guard.CHANGED_DEFINITION: "defining(e) != r.definition",
    Guard.LOSS: "r._loss(e)",
    Guard.NOT_OFFLOADED: "not r.offloaded",
    Guard.OUTCOME_ENVELOPE: "outcome_envelope_mismatch(e)",
    Guard.CARRIER_SCOPE: "_carrier_scope(r, e, s)",
    Guard.SHORT_COPY: "_short_copy(r, e)",
    Guard.LOAD_TIER: "(t := getattr(e, 'from_tier', None)) is not None and t != _copy_tier(r)",
    Guard.FOREIGN_JOB: "(j := getattr(e, 'job_id', None)) is not None and j not in r.cycle_jobs",
    Guard.EARLIER_INCARNATION: "r.across",
}
#: what the expressions call
_GUARD_NAMES: dict[str, Any] = {
    "substrate_failure": substrate_failure, "failed_load": failed_load,
    "required_label": required_label, "defining": defining,
    "outcome_envelope_mismatch": outcome_envelope_mismatch, "_copy_tier": _copy_tier,
    "_carrier_scope": _carrier_scope, "_short_copy": _short_copy}
_ALWAYS = Guard.ALWAYS
#: the table by state, then by event kind (one lookup less per event than the pair key)
STAY_CELL = _STAY_CELL = ((Guard.ALWAYS, STAY),)
CLAIM_CELLS = _CLAIM_CELLS = {
    p: {k: (_STAY_CELL if c == _STAY_CELL else c) for (q, k), c in CLAIM_TABLE.items()
        if q is p} for p in Phase}
REQUEST_CELLS = _REQUEST_CELLS = {
    p: {k: (_STAY_CELL if c == _STAY_CELL else c) for (q, k), c in REQUEST_TABLE.items()
        if q is p} for p in RequestPhase}
#: event kinds a failure chain may hold (``failure_chain_event`` decides)
FAILURE_KINDS = _FAILURE_KINDS = frozenset({
    "kv_load_finished", "kv_load_failed", "scheduler_load_failure", "claim_restore_failed",
    "active_request_refused"})


def _load_finished_failed(e: Event) -> bool:
    return not getattr(e, "success", True)


#: kind -> whether an event of it is part of a failure chain (``failure_chain_event``, asked
#: of its kind alone)
_FAILURE_CHECKS: dict[str, Callable[[Event], bool]] = {
    **dict.fromkeys(_FAILURE_KINDS, failure_chain_event),
    "kv_load_finished": _load_finished_failed}
#: event kinds whose legal step teaches a guard something (see ``ClaimRun._apply``)
TEACHING = _TEACHING = frozenset({"request_started", "claim_submitted", "claim_accepted",
                       "kv_store_started", "kv_store_finished", "claim_offloaded",
                       "block_evicted", "claim_restore_required", "kv_load_started"})
#: state -> kinds whose step must run (not a plain "stay", or it teaches a guard something);
#: the pass skips the others inline
CLAIM_STEPS: dict[Phase, frozenset[str]] = {
    p: frozenset(k for k, c in cells.items() if c is not _STAY_CELL or k in _TEACHING)
    for p, cells in _CLAIM_CELLS.items()}
REQUEST_STEPS: dict[RequestPhase, frozenset[str]] = {
    p: frozenset(k for k, c in cells.items() if c is not _STAY_CELL or k in _FAILURE_KINDS)
    for p, cells in _REQUEST_CELLS.items()}
# ------------------------------------------------------------- what a legal step teaches
def _teach_started(r: ClaimRun, e: Event) -> None:
    if r.phase in (Phase.START, Phase.SUBMITTED):
        r.carriers.add(e.request_id)
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
        p = e.predicate
        r.predicate = (str(p.kind), p.blocks, p.start or 0, e.footprint_blocks)
        r.scope = e.owner_scope if e.owner_scope is not None else r.submitted_scope
        r.mode = str(e.protection_mode)


def _teach_copy_label(r: ClaimRun, e: Event) -> None:
    gen = getattr(e, "generation", None)
    if gen is not None and gen > r.top_copy_label:
        r.top_copy_label = gen


def _teach_store_finished(r: ClaimRun, e: Event) -> None:
    _teach_copy_label(r, e)
    if e.success:
        r.store_tier, r.copy_lost = e.to_tier, False


def _teach_offloaded(r: ClaimRun, e: Event) -> None:
    _teach_copy_label(r, e)
    r.offload_tier, r.offloaded = e.to_tier, True


def _teach_evicted(r: ClaimRun, e: Event) -> None:
    if e.medium is not None and e.medium == r.store_tier and r._needs(e.position):
        r.copy_lost = True


def _teach_restore_required(r: ClaimRun, e: Event) -> None:
    r.top_cycle_label = r.cycle_label = required_label(e)
    r.cycle_request = e.request_id
    r.cycle_jobs = set()


def _teach_load_started(r: ClaimRun, e: Event) -> None:
    if e.job_id is not None:
        r.cycle_jobs.add(e.job_id)


Teach = Callable[[ClaimRun, Event], None]
#: what a legal step of each teaching kind tells the guards
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
}
assert frozenset(_TEACH) == _TEACHING


# ------------------------------------------------------------------ the compiled claim table
Decider = Callable[[ClaimRun, Event, dict[str, str | None]], Any]


def _decider(cell: Cell) -> Decider | None:
    """The cell as one function: the first row whose guard holds decides; None for a cell of
    one ALWAYS row. The guards' expressions are inlined in row order (one call per step
    instead of one per guard)."""
    *guarded, (last, default) = cell
    assert last is _ALWAYS, "every cell ends with an ALWAYS row"
    if not guarded:
        return None
    names = {**_GUARD_NAMES, "default": default}
    body = ["def decide(r, e, s):"]
    for i, (guard, outcome) in enumerate(guarded):
        names[f"o{i}"] = outcome
        body += [f"    if {_GUARD_EXPR[guard]}:", f"        return o{i}"]
    body.append("    return default")
    where = f"<automaton cell: {', '.join(g.value for g, _ in guarded)}>"
    exec(compile("\n".join(body), where, "exec"), names)
    decide: Decider = names["decide"]
    return decide


#: state -> kind -> (the outcome of a cell of one ALWAYS row, else the cell's decider, and what
#: a legal step of the kind teaches)
_COMPILED: dict[Phase, dict[str, tuple[Any, Decider | None, Teach | None]]] = {
    p: {k: (cell[-1][1], _decider(cell), _TEACH.get(k)) for k, cell in cells.items()}
    for p, cells in _CLAIM_CELLS.items()}


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
    #: it opened the next stream: how the previous one ended (the caller ends it)
    ended: StreamEnd | None = None


class Incarnations:
    """The automaton's side of a file of several streams (SPEC §9.1): a pass hands it the
    file's first event, every opener and closer, and every event while :attr:`slow` (a later
    stream's, or one of a head window); it places each at its position, makes the claims open
    at a ``stream_closed`` vanish, and keeps the head window of a stream opened after another.
    Ending a stream's requests and claims (:func:`end_stream`) and forgetting what is kept per
    request are the caller's."""

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
        run the pass keeps."""
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
