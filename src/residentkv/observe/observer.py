"""The observer: a runtime's own KV event batches in, v1 claim events out.

:class:`Observer` is pure (no sockets, no clock but the batches' own ``ts``): the sequence
tracker (:mod:`residentkv.observe.sequence`) decides which batches continue the stream, and
the observer carries out its actions — apply a batch, write an ``observation_gap``, forget a
source's cache state. For each claim it writes ``claim_accepted`` when observation starts,
``claim_materialized`` whenever the claim's predicate comes to hold on the positions present on
the device medium, and ``block_evicted`` (``reason`` ``runtime_removed``, or
``runtime_cleared`` for ``AllBlocksCleared``) for every needed position whose last copy leaves
after the claim materialized. It never writes an outcome (harm, expiry, demotion, refusal): the
runtime published none, and a loss without one is what the gates must fail.

A claim lives in one source's cache (its *home*: the source where it materialized); another
data-parallel rank's copies never keep it alive. When a claim's predicate may hold but need not
(a needed position is *ambiguous*, :class:`~residentkv.observe.chains.Presence`) — a held claim
that may have lost its last copy, or a claim not held that may have one — the observer writes a
gap (``presence_ambiguous``) rather than guess.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from residentkv.model.integers import INT64_MAX
from residentkv.model.predicate import PredicateResult, evaluate_predicate
from residentkv.model.vocabulary import DEVICE_TIER
from residentkv.observe.chains import ChainIndex, Presence
from residentkv.observe.claims import ObservedClaim
from residentkv.observe.lazy import CLEARED, REMOVED, STORED
from residentkv.observe.sequence import Action, Apply, Cause, Forget, Gap, SourceKey
from residentkv.observe.wire import Batch, WireError, hash_hex

SOURCE = "residentkv.observer"
#: the runtimes' KV events name blocks by hash only; block_evicted.block_id says "not published"
NO_BLOCK_ID = -1

#: an event sink: ``emit(event, **fields)`` (the trace writer's ``emit``)
Emit = Callable[..., Any]


class ClaimStatus(StrEnum):
    """A claim as the live view shows it."""

    PENDING = "pending"     # not materialized yet
    HELD = "held"           # predicate holds, every footprint block stored
    AT_RISK = "at_risk"     # predicate holds, some footprint block already dropped
    LOST = "lost"           # materialized, then a needed block dropped
    UNKNOWN = "unknown"     # a gap: part of the stream was not seen, or could not be decided


class EvictionReason(StrEnum):
    """``block_evicted.reason`` values the observer writes."""

    RUNTIME_REMOVED = "runtime_removed"
    RUNTIME_CLEARED = "runtime_cleared"


class Fact(StrEnum):
    """What the observer saw happen to a claim."""

    MATERIALIZED = "materialized"
    LOST = "lost"
    AMBIGUOUS = "ambiguous"     # the claim's own presence could not be decided
    UNSEEN = "unseen"           # a gap: a window of the runtime's stream was not seen
    UNDECIDED = "undecided"     # a gap: the stream was seen, a claim's presence not decided


#: the facts that are a gap in the trace (every claim's state is unknown from there)
GAP_FACTS = (Fact.UNSEEN, Fact.UNDECIDED)


class Listener(Protocol):
    """Who else wants to know (live view, metrics)."""

    def status_changed(self, claim: ObservedClaim, old: ClaimStatus | None,
                       new: ClaimStatus) -> None: ...

    def lost(self, claim: ObservedClaim, held_for_s: float | None) -> None: ...

    def gap(self, reason: Cause) -> None: ...


@dataclass(eq=False)
class ClaimView:
    """The observer's facts about one claim; its status is derived from them."""

    claim: ObservedClaim
    #: (fact, the publisher's batch number it was seen in; None for a gap with no number)
    facts: list[tuple[Fact, int | None]] = field(default_factory=list)
    #: each position on the home source, as last evaluated (replaced whole, never changed
    #: in place: every claim not yet seen shares one row of ABSENT)
    positions: Sequence[Presence] = ()
    home: int | None = None
    held_since_ts: float | None = None
    notified: ClaimStatus | None = None
    last_change: float | None = None  # time.time() of the last status change (live view)

    def state_fact(self) -> Fact | None:
        """The last of materialized, lost and ambiguous (gaps aside)."""
        return next((f for f, _ in reversed(self.facts) if f not in GAP_FACTS), None)

    @property
    def holds(self) -> bool:
        """Materialized and not lost since (possibly ambiguous)."""
        for fact, _ in reversed(self.facts):
            if fact in (Fact.MATERIALIZED, Fact.LOST):
                return fact is Fact.MATERIALIZED
        return False

    @property
    def losses(self) -> int:
        return sum(1 for f, _ in self.facts if f is Fact.LOST)

    @property
    def stored(self) -> int:
        """Footprint positions present on the home source now."""
        return sum(1 for p in self.positions if p is Presence.PRESENT)

    @property
    def status(self) -> ClaimStatus:
        if any(f in GAP_FACTS for f, _ in self.facts):
            return ClaimStatus.UNKNOWN
        if not any(f is Fact.MATERIALIZED for f, _ in self.facts):
            return ClaimStatus.PENDING
        if not self.holds:
            return ClaimStatus.LOST
        if self.stored < len(self.claim.blocks):
            return ClaimStatus.AT_RISK
        return ClaimStatus.HELD

    def first(self, fact: Fact) -> int | None:
        """The batch number *fact* was first seen in (None: never, or not numbered)."""
        return next((seq for f, seq in self.facts if f is fact), None)

    def last(self, fact: Fact) -> int | None:
        return next((seq for f, seq in reversed(self.facts) if f is fact), None)


class Observer:
    """Carries out the sequence tracker's actions and writes v1 events through *emit* (a
    writer that already wrote ``stream_started``)."""

    def __init__(self, claims: Sequence[ObservedClaim], emit: Emit, *,
                 device_medium: str | None = "GPU", listeners: Sequence[Listener] = ()) -> None:
        self.index = ChainIndex(list(claims), device_medium)
        unseen: dict[int, tuple[Presence, ...]] = {}
        self.views = [ClaimView(c, positions=unseen.setdefault(
            len(c.blocks), (Presence.ABSENT,) * len(c.blocks))) for c in self.index.claims]
        self.by_id = {v.claim.claim_id: v for v in self.views}
        self.emit = emit
        self.device_medium = device_medium
        self.listeners = list(listeners)
        self._sources: dict[SourceKey, int] = {}
        self.batches = 0
        self.kv_events = 0
        self.gaps = 0
        self._batch: Batch | None = None

    # -------------------------------------------------------------------------- lifecycle
    def start(self) -> None:
        """Write ``claim_accepted`` for every claim: observation starts now."""
        for v in self.views:
            c = v.claim.claim
            self._emit_claim("claim_accepted", v, registration=c.registration.value,
                             protection_mode=c.protection_mode.value,
                             footprint_blocks=c.footprint_blocks,
                             predicate=c.predicate.model_dump(mode="json"),
                             owner_scope=c.owner_scope, expires_after_s=c.expires_after_s)
            self._notify(v)

    def act(self, actions: Iterable[Action]) -> None:
        """Carry out the tracker's actions in order."""
        for a in actions:
            if isinstance(a, Apply):
                self.apply(a.batch)
            elif isinstance(a, Gap):
                self.gap(a.cause, a.first, a.last, _describe(a))
            elif isinstance(a, Forget):
                self.forget(a.key)

    # -------------------------------------------------------------------------- actions
    def apply(self, batch: Batch) -> None:
        """Apply one batch that continues its source's stream."""
        self.batches += 1
        self._batch = batch
        sid = self._source(batch.topic, batch.rank)
        index = self.index
        # looked up once per batch: most events are stores no claim needs, whose whole cost
        # is this loop and one lookup in the index
        stored, removed, by_removal = index.stored, index.removed, EvictionReason.RUNTIME_REMOVED
        self.kv_events += len(batch.events)
        for ev in batch.events:
            kind = type(ev)
            try:
                if kind in STORED:
                    touched = stored(sid, ev)
                    reason = by_removal
                elif kind in REMOVED:
                    touched = removed(sid, ev)
                    reason = by_removal
                elif kind in CLEARED:
                    touched = index.cleared(sid)
                    reason = EvictionReason.RUNTIME_CLEARED
                else:
                    continue
            except WireError as e:
                # a field read only now (a claimed chain's token ids) does not decode: the
                # rest of this batch is unseen, and so is the cache state it leaves
                self.gap(Cause.UNDECODABLE_BATCH, batch.seq, batch.seq,
                         f"batch {batch.seq}: {e}")
                self.forget((batch.topic, batch.rank))
                return
            if touched:
                self._touched(touched, sid, reason)

    def gap(self, cause: Cause, first: int | None, last: int | None, detail: str) -> None:
        """Write an ``observation_gap``: every claim's state is unknown from here."""
        self.gaps += 1
        exact = all(n is None or n <= INT64_MAX for n in (first, last))
        self.emit("observation_gap", source=SOURCE, reason=cause.value,
                  missed_from=first if exact else None, missed_to=last if exact else None,
                  detail=detail or None)
        # an unseen window is told from its first missed batch; an undecided presence at the
        # batch that showed it
        if cause is Cause.PRESENCE_AMBIGUOUS:
            fact, seq = Fact.UNDECIDED, None if self._batch is None else self._batch.seq
        else:
            fact, seq = Fact.UNSEEN, first
        for v in self.views:
            v.facts.append((fact, seq))
            self._notify(v)
        for listener in self.listeners:
            listener.gap(cause)

    def forget(self, key: SourceKey | None) -> None:
        """Drop what is known of *key*'s cache (every source for None)."""
        sid = None if key is None else self._sources.get(key)
        if key is not None and sid is None:
            return
        self.index.forget(sid)
        for v in self.views:
            if sid is None or v.home == sid:
                v.home = None
                v.positions = (Presence.ABSENT,) * len(v.positions)

    # -------------------------------------------------------------------------- claims
    def _source(self, topic: bytes, rank: int | None) -> int:
        key = (topic, rank)
        sid = self._sources.get(key)
        if sid is None:
            sid = self._sources[key] = len(self._sources)
        return sid

    def _touched(self, touched: Sequence[int], sid: int, reason: EvictionReason) -> None:
        for ci in dict.fromkeys(touched):          # each claim once, in the order touched
            self._evaluate(self.views[ci], ci, sid, reason)

    def _evaluate(self, v: ClaimView, ci: int, sid: int, reason: EvictionReason) -> None:
        holds = v.holds                         # the facts change only after the last read
        if v.home is not None and v.home != sid and holds:
            return                              # held on its home source: this one is not it
        states = self.index.positions(ci, sid)
        pred = v.claim.claim.predicate
        present: list[int] = []
        ambiguous: list[int] = []
        for p, s in enumerate(states):
            if s is Presence.PRESENT:
                present.append(p)
            elif s is Presence.AMBIGUOUS:
                ambiguous.append(p)
        certain = evaluate_predicate(pred, present)
        possible = evaluate_predicate(pred, present + ambiguous) if ambiguous else certain
        if v.home != sid:
            if certain.holds:
                v.home, v.positions = sid, states
                self._materialized(v, certain)
            elif possible.holds and not holds:
                self._ambiguous(v, ambiguous, held=False)
            return
        if any(f is Fact.MATERIALIZED for f, _ in v.facts):
            for p in v.claim.needed:
                if v.positions[p] is not Presence.ABSENT and states[p] is Presence.ABSENT:
                    self._evicted(v, ci, p, reason)
        v.positions = states
        if certain.holds:
            if not holds:
                self._materialized(v, certain)
        elif holds and not possible.holds:
            self._lost(v)
        elif possible.holds:
            self._ambiguous(v, ambiguous, held=holds)
        self._notify(v)

    def _materialized(self, v: ClaimView, result: PredicateResult) -> None:
        self._emit_claim("claim_materialized", v, surviving=result.surviving,
                         leading=result.leading, required=result.required, holds=True,
                         tier=DEVICE_TIER)
        b = self._batch
        v.facts.append((Fact.MATERIALIZED, None if b is None else b.seq))
        v.held_since_ts = b.ts if b is not None and math.isfinite(b.ts) else None
        self._notify(v)

    def _lost(self, v: ClaimView) -> None:
        b = self._batch
        v.facts.append((Fact.LOST, None if b is None else b.seq))
        # the runtime's own clock, when it reads as one (a stamp that is not a finite time, or
        # that goes back, measures nothing)
        held = None if b is None or v.held_since_ts is None or not math.isfinite(b.ts) \
            or b.ts < v.held_since_ts else b.ts - v.held_since_ts
        for listener in self.listeners:
            listener.lost(v.claim, held)

    def _ambiguous(self, v: ClaimView, positions: list[int], *, held: bool) -> None:
        """The predicate may hold but need not: a gap, said once until it resolves."""
        if v.state_fact() is Fact.AMBIGUOUS:
            return
        b = self._batch
        v.facts.append((Fact.AMBIGUOUS, None if b is None else b.seq))
        may = ("may have lost their last copy" if held else
               "may hold a copy of the claim's, or none")
        self.gap(Cause.PRESENCE_AMBIGUOUS, None, None,
                 f"claim {v.claim.claim_id!r}: position(s) {positions} {may}: a store of a "
                 "chain from its root that is already present is either a second physical copy "
                 "or the runtime's report of a prefix-cache hit, a removal names no session "
                 "(nor, here, perhaps its medium or group), and the wire does not say which "
                 "copy it was")

    def _evicted(self, v: ClaimView, ci: int, position: int, reason: EvictionReason) -> None:
        """A needed position's last copy left the device medium after materialization."""
        hashes = self.index.hashes[ci][position]
        self.emit("block_evicted", claim_id=v.claim.claim_id, source=SOURCE,
                  block_id=NO_BLOCK_ID, protected=False, reason=reason.value,
                  position=position, medium=self.device_medium,
                  block_hash=hash_hex(hashes[-1]) if hashes else None)

    def _notify(self, v: ClaimView) -> None:
        new = v.status
        if new == v.notified:
            return
        old, v.notified = v.notified, new
        v.last_change = time.time()
        for listener in self.listeners:
            listener.status_changed(v.claim, old, new)

    def _emit_claim(self, event: str, v: ClaimView, **fields: Any) -> None:
        self.emit(event, claim_id=v.claim.claim_id, source=SOURCE, **v.claim.event_identity,
                  **fields)


def _describe(gap: Gap) -> str:
    """The gap's source and exact window in words (the window may not fit a signed 64-bit
    trace field)."""
    parts = []
    if gap.key is not None:
        topic, rank = gap.key
        parts.append(f"topic {topic.decode('utf-8', 'replace')!r}"
                     + (f", data-parallel rank {rank}" if rank is not None else ""))
    if gap.first is not None or gap.last is not None:
        first = "?" if gap.first is None else str(gap.first)
        last = "the end" if gap.last is None else str(gap.last)
        parts.append(f"batches {first}..{last}")
    if gap.detail:
        parts.append(gap.detail)
    return "; ".join(parts)
