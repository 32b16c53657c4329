"""The observer: a runtime's own KV event batches in, v1 claim events out.

:class:`Observer` is pure (no sockets): the subscriber hands it decoded frames. For each claim it
writes ``claim_accepted`` when observation starts, ``claim_materialized`` whenever the claim's
predicate comes to hold on the positions stored on the device medium, and ``block_evicted``
(``reason`` ``runtime_removed``, or ``runtime_cleared`` for ``AllBlocksCleared``) for every
needed position the runtime drops after the claim materialized. It never writes an outcome
(harm, expiry, demotion, refusal): the runtime published none, and a loss without one is what
the gates must fail.

Batches are numbered by the publisher. A batch that was not seen — a jump in the numbers, a
first batch numbered above 0, a subscription that dropped, a batch that could not be decoded —
is asked from the replay endpoint when one is configured; what it cannot supply becomes an
``observation_gap`` event, and every claim's state becomes unknown (never a pass).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from residentkv.model.predicate import evaluate_predicate
from residentkv.model.vocabulary import DEVICE_TIER
from residentkv.observe.chains import ChainIndex, Change, Tracked
from residentkv.observe.claims import ObservedClaim
from residentkv.observe.wire import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    Frame,
    KVEvent,
    hash_hex,
)
from residentkv.trace.writer import EventWriter

SOURCE = "residentkv.observer"
#: vLLM's KV events name blocks by hash only; block_evicted.block_id says "not published"
NO_BLOCK_ID = -1


class ClaimStatus(StrEnum):
    """A claim as the live view shows it."""

    PENDING = "pending"     # not materialized yet
    HELD = "held"           # predicate holds, every footprint block stored
    AT_RISK = "at_risk"     # predicate holds, some footprint block already dropped
    LOST = "lost"           # materialized, then a needed block dropped
    UNKNOWN = "unknown"     # part of the runtime's history was not seen


class GapReason(StrEnum):
    """Why an ``observation_gap`` was written."""

    LATE_START = "late_start"
    SEQUENCE_JUMP = "sequence_jump"
    SUBSCRIPTION_DROPPED = "subscription_dropped"
    PUBLISHER_RESTARTED = "publisher_restarted"
    UNDECODABLE_BATCH = "undecodable_batch"


class EvictionReason(StrEnum):
    """``block_evicted.reason`` values the observer writes."""

    RUNTIME_REMOVED = "runtime_removed"
    RUNTIME_CLEARED = "runtime_cleared"


class Listener(Protocol):
    """Who else wants to know (live view, metrics)."""

    def status_changed(self, claim: ObservedClaim, old: ClaimStatus | None,
                       new: ClaimStatus) -> None: ...

    def lost(self, claim: ObservedClaim, held_for_s: float | None) -> None: ...

    def gap(self, reason: GapReason) -> None: ...


#: replay(start_seq) -> the buffered frames from start_seq on (possibly fewer, never invented)
Replay = Callable[[int], Iterable[Frame]]


@dataclass(eq=False)
class ClaimView:
    """The observer's running picture of one claim."""

    tracked: Tracked
    status: ClaimStatus = ClaimStatus.PENDING
    holds: bool = False
    materialized: bool = False
    held_since: float | None = None  # runtime's batch ts of the last materialization
    losses: int = 0
    last_change: float | None = None  # time.time() of the last status change
    unknown: bool = False

    @property
    def claim(self) -> ObservedClaim:
        return self.tracked.claim


class Observer:
    """Turns frames into v1 events through *writer* (which already wrote ``stream_started``)."""

    def __init__(self, claims: Sequence[ObservedClaim], writer: EventWriter, *,
                 device_medium: str | None = "GPU", replay: Replay | None = None,
                 listeners: Sequence[Listener] = ()) -> None:
        self.index = ChainIndex(list(claims), device_medium)
        self.views = {t.claim.claim_id: ClaimView(t) for t in self.index.tracked}
        self._by_tracked = {id(v.tracked): v for v in self.views.values()}
        self.writer = writer
        self.device_medium = device_medium
        self.replay = replay
        self.listeners = list(listeners)
        self.expected: int | None = None
        self.dropped = False
        self.batches = 0
        self.kv_events = 0
        self.gaps = 0
        self._ts = 0.0

    # ---------------------------------------------------------------------- lifecycle
    def start(self) -> None:
        """Write ``claim_accepted`` for every claim: observation starts now."""
        for v in self.views.values():
            c = v.claim.claim
            self._emit_claim("claim_accepted", v, registration=c.registration.value,
                             protection_mode=c.protection_mode.value,
                             footprint_blocks=c.footprint_blocks,
                             predicate=c.predicate.model_dump(mode="json"),
                             owner_scope=c.owner_scope, expires_after_s=c.expires_after_s)
            self._set_status(v, ClaimStatus.PENDING)

    def finish(self) -> None:
        """End of observation: a subscription still down leaves an open-ended gap."""
        if self.dropped:
            self._gap(GapReason.SUBSCRIPTION_DROPPED, self.expected, None)
        self.writer.flush()

    # ---------------------------------------------------------------------- input
    def on_frame(self, frame: Frame) -> None:
        """One batch from the subscription, in arrival order."""
        self._catch_up(frame.seq)
        self._apply(frame)

    def on_undecodable(self, seq: int) -> None:
        """Batch *seq* arrived but is not in the runtime's format: its content is unknown."""
        if self.expected is not None and seq < self.expected:
            return  # a stray copy of a batch already applied
        self._catch_up(seq)
        self._gap(GapReason.UNDECODABLE_BATCH, seq, seq)
        self.expected = seq + 1

    def on_disconnect(self) -> None:
        """The subscription dropped: whatever is published until it is back is not seen."""
        self.dropped = True

    # ---------------------------------------------------------------------- internals
    def _catch_up(self, seq: int) -> None:
        """Before batch *seq* is applied: account for every batch before it not yet seen."""
        exp = self.expected
        if exp is None:
            if seq > 0:
                self._fill(0, seq - 1, GapReason.LATE_START)
        elif seq > exp:
            reason = GapReason.SUBSCRIPTION_DROPPED if self.dropped else GapReason.SEQUENCE_JUMP
            self._fill(exp, seq - 1, reason)
        elif seq < exp:
            # numbering restarted: the runtime restarted, and its cache with it, unseen
            self._gap(GapReason.PUBLISHER_RESTARTED, None, None)
            self.index.forget_live()
            if seq > 0:
                self._fill(0, seq - 1, GapReason.LATE_START)
        self.dropped = False

    def _fill(self, first: int, last: int, reason: GapReason) -> None:
        """Batches *first*..*last* were missed: replay what the publisher still buffers, and
        write a gap for every run of batches it cannot supply."""
        got: dict[int, Frame] = {}
        if self.replay is not None:
            got = {f.seq: f for f in self.replay(first) if first <= f.seq <= last}
        if not got:
            self._gap(reason, first, last)
            return
        run_start: int | None = None
        for s in range(first, last + 1):
            if s in got:
                if run_start is not None:
                    self._gap(reason, run_start, s - 1)
                    run_start = None
                self._apply(got[s])
            elif run_start is None:
                run_start = s
        if run_start is not None:
            self._gap(reason, run_start, last)

    def _gap(self, reason: GapReason, missed_from: int | None, missed_to: int | None) -> None:
        self.gaps += 1
        self.writer.emit("observation_gap", source=SOURCE, reason=reason.value,
                         missed_from=missed_from, missed_to=missed_to)
        for v in self.views.values():
            v.unknown = True
            self._set_status(v, ClaimStatus.UNKNOWN)
        for listener in self.listeners:
            listener.gap(reason)

    def _apply(self, frame: Frame) -> None:
        self.batches += 1
        self._ts = frame.batch.ts
        for ev in frame.batch.events:
            self.kv_events += 1
            self._event(ev)
        self.expected = frame.seq + 1

    def _event(self, ev: KVEvent) -> None:
        if isinstance(ev, BlockStored):
            changes = list(self.index.stored(ev))
            reason = EvictionReason.RUNTIME_REMOVED
        elif isinstance(ev, BlockRemoved):
            changes = list(self.index.removed(ev))
            reason = EvictionReason.RUNTIME_REMOVED
        elif isinstance(ev, AllBlocksCleared):
            changes = list(self.index.cleared())
            reason = EvictionReason.RUNTIME_CLEARED
        else:
            return
        if not changes:
            return
        touched: dict[int, ClaimView] = {}
        for ch in changes:
            v = self._by_tracked[id(ch.tracked)]
            touched[id(v)] = v
            if not ch.present:
                self._evicted(v, ch, reason)
        for v in touched.values():
            self._evaluate(v)

    def _evicted(self, v: ClaimView, ch: Change, reason: EvictionReason) -> None:
        """A needed position left the device medium after the claim materialized."""
        if not v.materialized or ch.position not in v.claim.needed:
            return
        self.writer.emit("block_evicted", claim_id=v.claim.claim_id, source=SOURCE,
                         block_id=NO_BLOCK_ID, protected=False, reason=reason.value,
                         position=ch.position, medium=self.device_medium,
                         block_hash=hash_hex(ch.block_hash))

    def _evaluate(self, v: ClaimView) -> None:
        present = v.tracked.present
        result = evaluate_predicate(v.claim.claim.predicate, present)
        if result.holds and not v.holds:
            self._emit_claim("claim_materialized", v, surviving=result.surviving,
                             leading=result.leading, required=result.required, holds=True,
                             tier=DEVICE_TIER)
            v.materialized = True
            v.held_since = self._ts
        elif v.holds and not result.holds:
            v.losses += 1
            held = None if v.held_since is None else max(0.0, self._ts - v.held_since)
            for listener in self.listeners:
                listener.lost(v.claim, held)
        v.holds = result.holds
        if not v.materialized:
            status = ClaimStatus.PENDING
        elif not result.holds:
            status = ClaimStatus.LOST
        elif len(present) < len(v.claim.blocks):
            status = ClaimStatus.AT_RISK
        else:
            status = ClaimStatus.HELD
        self._set_status(v, ClaimStatus.UNKNOWN if v.unknown else status)

    def _set_status(self, v: ClaimView, new: ClaimStatus) -> None:
        old = v.status if v.last_change is not None else None
        if old == new:
            return
        v.status = new
        v.last_change = time.time()
        for listener in self.listeners:
            listener.status_changed(v.claim, old, new)

    def _emit_claim(self, event: str, v: ClaimView, **fields: Any) -> None:
        c = v.claim.claim
        identity = dict(zip(("object_id", "cache_identity", "request_token_map_id",
                             "predicate_id"), c.identity, strict=True))
        self.writer.emit(event, claim_id=c.claim_id, source=SOURCE, **identity, **fields)
