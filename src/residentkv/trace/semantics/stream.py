"""The whole event list of one stream, seen from one claim: the vocabulary of the reference.

Everything here is a plain question about a list of events (quadratic is fine). The streaming
gates in :mod:`residentkv.trace.gates` are an optimisation of these definitions, never the other
way round.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from functools import cached_property
from itertools import count
from typing import Any, TypeVar

import msgspec
from pydantic import BaseModel

from residentkv.model.automaton import failed_load, proves
from residentkv.model.event_record import EventRecord, record_list, required_label
from residentkv.model.events import CLAIM_EVENT_NAMES, Envelope
from residentkv.trace.streams import StreamCursor, StreamEnd, StreamSpan
from residentkv.trace.tracker import ENDINGS

#: a v1 event: a pydantic model of residentkv.model.events, or its fast-decoded twin
Event = EventRecord

T = TypeVar("T")

NEVER = 1 << 64  # after every seq (SPEC §4.2: a seq is at most 2^63-1): "has not happened"



def first(events: Iterable[T], test: Callable[[T], bool] = lambda e: True) -> T | None:
    """The first event (or cycle) that passes *test*, or None."""
    return next((e for e in events if test(e)), None)


def seq_of(event: Event | None) -> int:
    return NEVER if event is None else int(event.seq)


def generation(event: Event) -> int | None:
    value = getattr(event, "generation", None)
    return None if value is None else int(value)


def injected_load_failure(event: Event) -> bool:
    return failed_load(event) and bool(getattr(event, "injected", False))


def failure_names(event: Event) -> tuple[str | None, ...] | None:
    """The claim names a failure or outcome event carries (SPEC §4.1 attribution), or None
    when the event is no failure or outcome at all.

    Store/load failures, the scheduler's failure branch, restore failures, refusals (and the
    claims a deferral blames, with its envelope claim), demotion, expiry and harm. ``None`` in
    the tuple is a missing name: the event names no claim in that field; an event whose names
    are all ``None`` is an unclaimed failure.
    """
    name = event.event
    if name in ("kv_store_finished", "kv_load_finished") and not event.success:
        return (event.claim_id,)
    if name == "kv_load_failed":
        return (event.claim_id,) if event.invalid_block_ids else None
    if name in ("scheduler_load_failure", "claim_demoted", "claim_expired", "claim_harmed"):
        return (event.claim_id,)
    if name == "claim_restore_failed":
        return (event.claim_id, event.outcome_claim_id)
    if name == "active_request_refused":
        return (event.claim_id, event.outcome_claim_id, *event.blocking_claim_ids)
    if name == "active_request_deferred":
        # blaming no claim is no claim outcome; one that blames some claim also names the claim
        # its envelope carries (a deferral of c-1's conflict blaming c-2 names both)
        blamed = tuple(event.blocking_claim_ids)
        own = (event.claim_id,) if event.claim_id is not None else ()
        return (*own, *blamed) if blamed else None
    return None


class Stream:
    """One file's events, in order, with the facts every claim shares.

    A file of several streams (SPEC §9.1) is read as one stream in which every event sits at
    its position (:mod:`residentkv.trace.streams`) and every request of a later stream has an
    id of its own (its id, a separator no request id of the file holds, and the stream's
    index): requests, their starts, finishes and scopes are per stream, claims span the file.
    What differs at a stream's end (vanished claims, the accepting conditions) is asked of
    :attr:`spans`.
    """

    def __init__(self, events: Sequence[Envelope] | Sequence[Event], well_formed: bool) -> None:
        self.events, self.spans = file_order(record_list(events))
        self.well_formed = well_formed
        #: the position of each later stream's opener
        self._openers = [s.opener or 0 for s in self.spans[1:]]

    def stream_of(self, position: int) -> int:
        """The index of the stream holding the event at *position*."""
        return bisect_right(self._openers, position)

    def stream_start(self, position: int) -> int:
        """The position where the stream of *position* begins (-1 for the first stream)."""
        k = self.stream_of(position)
        return -1 if k == 0 else self._openers[k - 1]

    def stream_stop(self, position: int) -> int:
        """The position of the next stream's opener after *position* (NEVER: none)."""
        k = self.stream_of(position)
        return self._openers[k] if k < len(self._openers) else NEVER

    @property
    def last_open(self) -> bool:
        """Whether the reading stopped in a stream with no close (what is open there is live)."""
        return bool(self.spans) and self.spans[-1].end is StreamEnd.OPEN

    @cached_property
    def claim_ids(self) -> list[str]:
        """Every claim id with a claim event, in order of first appearance."""
        seen: dict[str, None] = {}
        for e in self.events:
            if e.event in CLAIM_EVENT_NAMES and e.claim_id is not None:
                seen.setdefault(e.claim_id, None)
        return list(seen)

    @cached_property
    def duplicate_finish(self) -> Event | None:
        """The first ``request_finished`` of a request that had already finished."""
        finished: set[str] = set()
        for e in self.events:
            if e.event == "request_finished" and e.request_id is not None:
                if e.request_id in finished:
                    return e
                finished.add(e.request_id)
        return None

    def first_finish(self, request_id: str | None) -> Event | None:
        """The request's first ``request_finished``: the deadline of its outcome."""
        if request_id is None:
            return None
        return first(self.events, lambda e: e.event == "request_finished"
                     and e.request_id == request_id)

    def owner_scope(self, request_id: str | None, before: int) -> str | None:
        """The owner scope the request declared on its first ``request_started`` (SPEC §4.2:
        fixed at its first declaration), if that is before seq *before*; None when unknown."""
        started = first(self.events, lambda e: e.event == "request_started"
                        and e.request_id == request_id and request_id is not None)
        if started is None or started.seq >= before or started.owner_scope is None:
            return None
        return str(started.owner_scope)

    @cached_property
    def failures(self) -> list[tuple[Event, tuple[str | None, ...]]]:
        """Every failure or outcome event with the claim names it carries."""
        found = []
        for e in self.events:
            names = failure_names(e)
            if names is not None:
                found.append((e, names))
        return found

    @cached_property
    def accepted_claims(self) -> list[str]:
        """Claims with a ``claim_accepted``, in order of acceptance."""
        seen: dict[str, None] = {}
        for e in self.events:
            if e.event == "claim_accepted" and e.claim_id is not None:
                seen.setdefault(e.claim_id, None)
        return list(seen)


class ClaimView:
    """One claim within a stream: its events, acceptance, end and restore cycles."""

    def __init__(self, stream: Stream, claim_id: str) -> None:
        self.stream = stream
        self.id = claim_id
        #: every event whose envelope names the claim (store and load events included)
        self.own = [e for e in stream.events if e.claim_id == claim_id]
        self.claim_events = [e for e in self.own if e.event in CLAIM_EVENT_NAMES]
        self.accepted = first(self.claim_events, lambda e: e.event == "claim_accepted")

    def named(self, *names: str) -> list[Event]:
        """The claim's own events of the given types."""
        return [e for e in self.own if e.event in names]

    @cached_property
    def end(self) -> int:
        """Seq of the claim's first ending (released, expired, demoted, failed closed)."""
        return seq_of(first(self.claim_events, lambda e: e.event in ENDINGS))

    @cached_property
    def mode(self) -> str | None:
        return None if self.accepted is None else str(self.accepted.protection_mode)

    def evaluates(self, event: Event) -> bool:
        """Whether a ``claim_materialized`` shows the accepted predicate holding.

        SPEC §4.1: the gate evaluates the accepted predicate on the event's numbers; ``holds``
        is a claim to check, never evidence. Both must agree, and the numbers must be coherent
        (the leading run cannot exceed the surviving blocks), and the predicate must have been
        accepted before the event. A ``contiguous_range`` not
        starting at 0 holds only when the leading run covers it: the numbers show nothing else.
        """
        a = self.accepted
        if a is None or event.seq < a.seq:
            return False  # no accepted predicate yet: nothing to evaluate against
        if not event.holds:
            return False
        p = a.predicate
        return proves(str(p.kind), p.blocks, p.start or 0, a.footprint_blocks, event.leading,
                      event.surviving)

    def needs(self, position: int | None) -> bool:
        """Whether the predicate needs block *position* (unknown positions count: fail closed)."""
        if position is None or self.accepted is None:
            return True
        start = self.accepted.predicate.start or 0
        return bool(start <= position < start + self.accepted.predicate.blocks)

    @cached_property
    def materialized(self) -> Event | None:
        """The first ``claim_materialized`` whose numbers satisfy the accepted predicate."""
        return first(self.named("claim_materialized"), self.evaluates)

    @cached_property
    def losses(self) -> list[Event]:
        """Observable losses after the claim first materialized (SPEC §4.1).

        An eviction of a position the predicate needs (except for ``offloadable`` claims, which
        may move to a slower tier), an evaluation that no longer holds (``claim_materialized``
        or ``claim_reused``), or a block lost after release.
        """
        start = seq_of(self.materialized)
        return [e for e in self.own if e.seq > start and self._is_loss(e)]

    def _is_loss(self, e: Event) -> bool:
        if e.event == "block_evicted":
            return self.needs(getattr(e, "position", None)) and not self._copy_held(e)
        if e.event == "claim_materialized":
            return not self.evaluates(e)
        if e.event == "claim_reused":
            return not bool(e.holds)
        return bool(e.event == "claim_block_lost_after_release")

    def _copy_held(self, eviction: Event) -> bool:
        """SPEC §4.2: an offloadable claim's eviction is no loss while a stored, offloaded copy
        is held; an eviction from the medium the copy was written to loses the copy."""
        if self.mode != "offloadable":
            return False
        held, medium = False, None
        for e in self.own:
            if e.seq >= eviction.seq:
                break
            if e.event == "kv_store_finished" and e.success:
                held, medium = True, e.to_tier
            elif e.event == "block_evicted" and held and e.medium is not None and (
                    e.medium == medium) and self.needs(e.position):
                held = False
        if held and eviction.medium is not None and eviction.medium == medium:
            return False
        offloaded = any(e.event == "claim_offloaded" and e.seq < eviction.seq for e in self.own)
        return held and offloaded

    @property
    def scope(self) -> str | None:
        """SPEC §4.2: the owner scope on ``claim_accepted``, else on ``claim_submitted``."""
        a = self.accepted
        if a is not None and a.owner_scope is not None:
            return str(a.owner_scope)
        s = first(self.claim_events, lambda e: e.event == "claim_submitted")
        return None if s is None or s.owner_scope is None else str(s.owner_scope)

    @cached_property
    def carriers(self) -> dict[str, int]:
        """Each request that names the claim -> the seq from which it carries it: every
        request an event naming the claim names, but by a refusal (itself the outcome naming
        it) (SPEC §4.2 attribution; ruling: work done for a claim by a request — a store, an
        offload, a lookup — makes the request carry it). It carries it until its first
        finish."""
        since: dict[str, int] = {}
        for e in self.own:
            if e.request_id is not None and e.event != "active_request_refused":
                since.setdefault(e.request_id, e.seq)
        return since

    def carries(self, e: Event) -> bool:
        """Whether *e*'s request carries the claim at *e* (from its first event naming the
        claim to its first finish)."""
        since = self.carriers.get(e.request_id) if e.request_id is not None else None
        if since is None or e.seq < since:
            return False
        fin = self.stream.first_finish(e.request_id)
        return fin is None or e.seq < fin.seq

    @cached_property
    def failed_load_requests(self) -> list[tuple[int, str | None]]:
        """(seq, request) of every failed load of this claim."""
        return [(e.seq, e.request_id) for e in self.own if failed_load(e)]

    def failed_on(self, request_id: str | None, before: int) -> bool:
        """Whether a load of this claim failed on *request_id* before seq *before*."""
        return request_id is not None and any(
            s < before and r == request_id for s, r in self.failed_load_requests)

    @cached_property
    def cycles(self) -> list[Cycle]:
        """The claim's restore cycles, in seq order (see :class:`Cycle`)."""
        required = self.named("claim_restore_required")
        seqs = [e.seq for e in required]
        stops, prevs = [*seqs[1:], NEVER][:len(seqs)], [-1, *seqs][:len(seqs)]
        # a cycle ends with its stream (SPEC §9.1: nothing of it outlives its incarnation)
        return [Cycle(self, r, p, min(s, self.stream.stream_stop(r.seq)))
                for r, p, s in zip(required, prevs, stops, strict=True) if r.seq < self.end]


class Cycle:
    """One restore cycle: a ``claim_restore_required`` up to the claim's next one.

    Generation labels need only be distinct per cycle: ``seq`` orders the cycles, so
    descending labels are legal. An event that carries a generation belongs to the cycle only
    when its label is the cycle's; an event without one belongs to the cycle it falls in.
    Cycles that begin after the claim ended are no restore of a live claim and are not cycles.
    """

    def __init__(self, claim: ClaimView, required: Event, prev: int, stop: int) -> None:
        self.claim = claim
        self.required = required
        self.seq: int = required.seq
        self.label = required_label(required)
        self.request_id: str | None = required.request_id
        self.prev = prev
        self.stop = stop

    def members(self, *names: str) -> list[Event]:
        """The claim's own events of *names* inside this cycle (label-matched)."""
        return [e for e in self.claim.own if e.event in names and self.seq < e.seq < self.stop
                and generation(e) in (None, self.label)]

    def unclaimed(self, name: str) -> list[Event]:
        """Events of type *name* naming no claim, on the cycle's request, inside this cycle."""
        return [e for e in self.claim.stream.events if e.event == name and e.claim_id is None
                and e.request_id == self.request_id and self.seq < e.seq < self.stop]

    def within(self, name: str) -> list[Event]:
        """The claim's own events of type *name* inside this cycle, whatever their label."""
        return [e for e in self.claim.own if e.event == name and self.seq < e.seq < self.stop]


def file_order(events: Sequence[Event]) -> tuple[list[Event], list[StreamSpan]]:
    """*events* at their positions, each later stream's request ids made its own, and the
    file's streams."""
    cursor = StreamCursor()
    out: list[Event] = []
    sep = _separator(events)
    previous = -1
    for e in events:
        e = cursor.restart(e, previous) if cursor.opens(e) else cursor.enter(e)
        k = len(cursor.spans) - 1
        if k and e.request_id is not None:
            e = _with_request(e, f"{e.request_id}{sep}{k}")
        out.append(e)
        previous = e.seq
    cursor.finish()
    return out, cursor.spans


def _separator(events: Sequence[Event]) -> str:
    """A character no request id of *events* holds (so a renamed id is never another's)."""
    used = {ch for e in events if e.request_id is not None for ch in e.request_id}
    return next(chr(c) for c in count(0x2400) if chr(c) not in used)


def _with_request(event: Any, request_id: str) -> Any:
    if isinstance(event, BaseModel):
        return event.model_copy(update={"request_id": request_id})
    return msgspec.structs.replace(event, request_id=request_id)
