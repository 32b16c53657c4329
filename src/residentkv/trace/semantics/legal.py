"""The reference reading of the automaton (SPEC §4.2): replay the table over whole event lists.

A claim's run is every event whose envelope names it, in seq order; a request's run is every
event that names it. Each guard is answered by asking the events the run accepted so far (and
the whole stream, for a request's owner scope) — quadratic and obvious. Where each stream of a
file ends (SPEC §9.1) the accepting conditions are asked, and a claim left open vanishes. The
streaming tracker (:mod:`residentkv.trace.acceptor`) keeps running answers instead; the two
must agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from residentkv.model.automaton import (
    CLAIM_TABLE,
    HEAD_ENDINGS,
    LIVE,
    PRE,
    REQUEST_TABLE,
    STAY,
    Guard,
    Outcome,
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
from residentkv.model.event_record import claim_names
from residentkv.trace.acceptor import defining, earlier
from residentkv.trace.semantics.stream import NEVER, Event, Stream, first, generation
from residentkv.trace.streams import CLOSER, OPENER, StreamEnd

__all__ = ["Stream", "Window", "claim_found", "claim_run", "claim_steps", "claim_violation",
           "head_answered", "head_windows", "phase_at", "request_cut_live", "request_found",
           "request_run"]


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
    found = list(claim_found(stream, claim_id))
    for rid in _requests_naming(stream, claim_id):
        found += request_found(stream, rid)
        # an illegal step of any claim on a request that names this claim is this claim's too
        # (a claim's vanishing is its own: it names no request)
        for other in claim_names(*(e.claim_id for e in stream.events if e.request_id == rid)):
            for step, done in claim_found(stream, other):
                if (step.violation is not Violation.VANISHED
                        and _event_at(stream, step.seq).request_id == rid):
                    found.append((step, done))
    return found


def _requests_naming(stream: Stream, claim_id: str) -> set[str]:
    return {e.request_id for e in stream.events
            if e.claim_id == claim_id and e.request_id is not None}


def _event_at(stream: Stream, seq: int) -> Event:
    memo = _memo(stream)
    if ("seqs", "") not in memo:
        memo["seqs", ""] = {e.seq: e for e in stream.events}
    at: dict[int, Event] = memo["seqs", ""]
    return at[seq]


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
    for e in mine:
        outcome = decide(REQUEST_TABLE[state, e.event], partial(_request_guard, e))
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
        if e.claim_id != claim_id:
            continue
        outcome: Outcome = decide(CLAIM_TABLE[state, e.event],
                                  partial(_claim_guard, e, history, stream))
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


def _request_guard(e: Event, g: Guard) -> bool:
    return request_guard(g, e)


def _claim_guard(e: Event, history: list[Event], stream: Stream, g: Guard) -> bool:
    return _holds(g, e, history, stream)


def _named(history: list[Event], *names: str) -> list[Event]:
    return [h for h in history if h.event in names]


def _accepted(history: list[Event]) -> Event | None:
    return first(history, lambda h: h.event == "claim_accepted")


def claim_scope(history: list[Event]) -> str | None:
    """SPEC §4.2: the owner scope on the claim's ``claim_accepted``, else on its
    ``claim_submitted``."""
    a = _accepted(history)
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


def _proves(history: list[Event], e: Event) -> bool:
    a = _accepted(history)
    if a is None:
        return False
    p = a.predicate
    return proves(str(p.kind), p.blocks, p.start or 0, a.footprint_blocks, e.leading,
                  e.surviving)


def _needs(history: list[Event], position: int | None) -> bool:
    a = _accepted(history)
    if position is None or a is None:
        return True
    start = a.predicate.start or 0
    return bool(start <= position < start + a.predicate.blocks)


def _loss(e: Event, history: list[Event]) -> bool:
    """SPEC §4.1/§4.2: a reuse that does not hold, a materialization the numbers no longer
    prove, or an eviction of a needed position while no stored, offloaded copy is held (only
    an offloadable claim holds one; an eviction from the copy's medium loses it)."""
    if e.event == "claim_reused":
        return not e.holds
    if e.event == "claim_materialized":
        return not _proves(history, e)
    if not _needs(history, e.position):
        return False
    a = _accepted(history)
    stores = [i for i, h in enumerate(history) if h.event == "kv_store_finished" and h.success]
    if a is None or str(a.protection_mode) != "offloadable" or not stores:
        return True
    tier = history[stores[-1]].to_tier
    lost = any(h.event == "block_evicted" and h.medium is not None and h.medium == tier
               and _needs(history, h.position) for h in history[stores[-1]:])
    offloaded = any(h.event == "claim_offloaded" for h in history)
    return lost or not offloaded or (e.medium is not None and e.medium == tier)


def _copy(history: list[Event]) -> Event | None:
    """The claim's stored copy: the last successful store, else the last offload."""
    stores = [h for h in _named(history, "kv_store_finished") if h.success]
    offloads = _named(history, "claim_offloaded")
    return stores[-1] if stores else (offloads[-1] if offloads else None)


def _holds(g: Guard, e: Event, history: list[Event], stream: Stream) -> bool:
    """Answer guard *g* for event *e* from the accepted history (SPEC §4.2, sentence by
    sentence)."""
    gen = generation(e)
    cycles = _named(history, "claim_restore_required")
    cycle = cycles[-1] if cycles else None
    if g is Guard.BEST_EFFORT:
        return str(e.protection_mode) == "best_effort"
    if g is Guard.NOT_CARRIER:  # a request names the claim within its own stream
        start = stream.stream_start(e.seq)
        return any(h.request_id != e.request_id for h in _named(history, "request_started")
                   if h.seq > start)
    if g is Guard.EARLIER_INCARNATION:
        start = stream.stream_start(e.seq)
        return any(h.seq < start for h in _named(history, "claim_accepted"))
    if g is Guard.CHANGED_DEFINITION:
        a = _accepted(history)
        return a is not None and defining(a) != defining(e)
    if g is Guard.HOLDS_CONTRADICTED:
        return bool(e.holds) != _proves(history, e)
    if g is Guard.PROVEN:
        return _proves(history, e)
    if g is Guard.SAME_TIER:
        return bool(e.from_tier == e.to_tier)
    if g is Guard.LABEL_BELOW:
        return gen is not None and any(gen < generation(h) for h in cycles)  # type: ignore[operator]
    if g is Guard.LABEL_NOT_NEW:
        copies = _named(history, "kv_store_started", "kv_store_finished", "claim_offloaded")
        return any(generation(h) >= gen for h in cycles) or any(  # type: ignore[operator]
            generation(h) is not None and generation(h) > gen for h in copies)  # type: ignore[operator]
    if g is Guard.WRONG_TIER:
        copy = _copy(history)
        return copy is None or e.from_tier != copy.to_tier
    if g is Guard.LOAD_TIER:
        tier = getattr(e, "from_tier", None)
        copy = _copy(history)
        return tier is not None and (copy is None or tier != copy.to_tier)
    if g is Guard.OUTCOME_ENVELOPE:
        return outcome_envelope_mismatch(e)
    if g is Guard.CARRIER_SCOPE:
        mine = e.owner_scope if e.owner_scope is not None else claim_scope(history)
        theirs = request_scope(stream, e.request_id, e.seq)
        return mine is not None and theirs is not None and theirs != str(mine)
    if g is Guard.SHORT_COPY:
        a = _accepted(history)
        return a is None or short_copy(e.block_count, a.predicate.blocks)
    if g is Guard.FOREIGN_JOB:
        job = getattr(e, "job_id", None)
        opened = [i for i, h in enumerate(history) if h.event == "claim_restore_required"]
        started = {h.job_id for h in history[opened[-1]:] if h.event == "kv_load_started"} \
            if opened else set()
        return job is not None and job not in started
    if g is Guard.FOREIGN_SCOPE:
        mine = claim_scope(history)
        return mine is not None and request_scope(stream, e.request_id, e.seq) != mine
    if g is Guard.OTHER_REQUEST:
        return cycle is None or e.request_id != cycle.request_id
    if g is Guard.OTHER_LABEL:
        return gen is not None and (cycle is None or gen != generation(cycle))
    if g is Guard.UNNAMED_FAILURE:
        return e.request_id is None and substrate_failure(e)
    if g is Guard.FAILED_LOAD:
        return failed_load(e)
    if g is Guard.FALLBACK:
        return bool(e.source == "fallback_recompute")
    if g is Guard.LOSS:
        return _loss(e, history)
    if g is Guard.NOT_OFFLOADED:
        return not _named(history, "claim_offloaded")
    raise ValueError(f"guard {g} is not a claim guard")  # pragma: no cover
