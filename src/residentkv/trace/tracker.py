"""One streaming pass over a trace that keeps, per claim, only the facts the gates need.

Memory is proportional to the number of claims (and the requests they touch): each claim keeps
the first ``seq`` of each milestone per restore generation, never a list of its events. The gates
in :mod:`residentkv.trace.gates` then judge these facts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from residentkv.errors import IllegalTransition
from residentkv.model.claim import ProtectionMode, Registration
from residentkv.model.events import CLAIM_EVENT_NAMES, IDENTITY_FIELDS
from residentkv.model.lifecycle import ClaimLifecycle, ClaimState

#: claim event -> lifecycle state it enters (claim_materialized only when the predicate holds)
_STATE_OF = {
    "claim_submitted": ClaimState.SUBMITTED,
    "claim_accepted": ClaimState.ACCEPTED,
    "claim_rejected": ClaimState.REJECTED,
    "claim_materialized": ClaimState.MATERIALIZED,
    "claim_offloaded": ClaimState.OFFLOADED,
    "claim_restore_required": ClaimState.RESTORE_REQUIRED,
    "claim_restored": ClaimState.RESTORED,
    "claim_reused": ClaimState.REUSED,
    "claim_restore_failed": ClaimState.FAILED_CLOSED,
    "claim_demoted": ClaimState.DEMOTED,
    "claim_expired": ClaimState.EXPIRED,
    "claim_released": ClaimState.RELEASED,
    "claim_harmed": ClaimState.HARMED,
}

_NAMED_CAP = 64

#: a v1 event: a pydantic model of residentkv.model.events, or its fast-decoded twin
Event = Any
ClaimHandler = Callable[["StreamFacts", "ClaimTrack", Event], None]


@dataclass(slots=True)
class Chain:
    """One restore generation of one claim: the first seq of each milestone."""

    generation: int
    restore_required: int
    request_id: str | None
    lookup_hit: int | None = None
    load_ok: int | None = None
    restored_offload: int | None = None
    restored_any: int | None = None
    restored_fallback: int | None = None
    reused_holds: int | None = None
    reused_before_restore: int | None = None
    load_failed: int | None = None
    load_failed_injected: bool = False
    sched_fail: int | None = None
    sched_recompute: int | None = None
    restore_failed_scoped: int | None = None
    refusal_any: int | None = None
    refusal_request: str | None = None
    refusal_attributed: int | None = None


@dataclass(slots=True)
class ClaimTrack:
    """What one pass learned about one claim."""

    claim_id: str
    event_count: int = 0
    first_event: str | None = None
    first_seq: int | None = None
    accepted_seq: int | None = None
    registration: Registration | None = None
    mode: ProtectionMode | None = None
    predicate_id: str | None = None
    predicate_blocks: int | None = None
    identity: dict[str, str] = field(default_factory=dict)
    identity_missing_seq: int | None = None
    last_identity: tuple[str | None, ...] | None = None
    ambiguous_seq: int | None = None
    required_values: set[int] = field(default_factory=set)
    materialized_seq: int | None = None
    store_ok_seq: int | None = None
    offloaded: list[tuple[int, int]] = field(default_factory=list)
    last_lookup_hit: int | None = None
    chains: dict[int, Chain] = field(default_factory=dict)
    current_gen: int | None = None
    last_restored_seq: int | None = None
    lifecycle: ClaimLifecycle | None = None
    illegal_seq: int | None = None
    illegal_message: str | None = None
    release_seq: dict[str, int] = field(default_factory=dict)
    first_loss_seq: int | None = None
    harm_seq: int | None = None
    failure_seq: int | None = None
    smear_seq: int | None = None
    admission_refusal_seq: int | None = None
    conflict_seq: int | None = None
    conflict_request: str | None = None


@dataclass(slots=True)
class StreamFacts:
    """Stream-wide facts: per-claim tracks plus what no single claim owns."""

    claims: dict[str, ClaimTrack] = field(default_factory=dict)
    finish_seq: dict[str, int] = field(default_factory=dict)
    generic_counters: int = 0
    unclaimed_store: int | None = None
    unclaimed_failure: int | None = None
    failure_named: set[str] = field(default_factory=set)
    failure_named_overflow: bool = False
    by_request: dict[str, list[str]] = field(default_factory=dict)
    #: requests whose finish matters: those hit by a load failure or named by a refusal
    watched: set[str] = field(default_factory=set)
    smeared_refusal: int | None = None
    derived: dict[str, Any] = field(default_factory=dict)

    def track(self, claim_id: str) -> ClaimTrack:
        t = self.claims.get(claim_id)
        if t is None:
            t = self.claims[claim_id] = ClaimTrack(claim_id)
        return t

    def name_failure(self, claim_id: str | None, seq: int) -> None:
        if claim_id is None:
            if self.unclaimed_failure is None:
                self.unclaimed_failure = seq
            return
        if len(self.failure_named) < _NAMED_CAP:
            self.failure_named.add(claim_id)
        elif claim_id not in self.failure_named:
            self.failure_named_overflow = True


def collect(events: Iterable[Event]) -> StreamFacts:
    """Run one pass over *events* (already in seq order) and return the facts.

    An event is a v1 pydantic model or its fast-decoded twin: both answer the same attribute
    names, and dispatch is on the event name.
    """
    facts = StreamFacts()
    claim_handlers, other_handlers = _CLAIM_HANDLERS, _OTHER_HANDLERS
    for event in events:
        name = event.event
        if name in CLAIM_EVENT_NAMES:
            _claim_event(facts, event, name, claim_handlers.get(name))
        else:
            handler = other_handlers.get(name)
            if handler is not None:
                handler(facts, event)
    return facts


def _claim_event(facts: StreamFacts, e: Event, name: str, handler: ClaimHandler | None) -> None:
    cid = e.claim_id
    if cid is None:
        return
    t = facts.track(cid)
    t.event_count += 1
    if t.first_event is None and name != "claim_submitted":
        t.first_event, t.first_seq = name, e.seq
    _identity(t, e)
    _transition(t, e, name)
    if handler is not None:
        handler(facts, t, e)


def _identity(t: ClaimTrack, e: Event) -> None:
    ident = (e.object_id, e.cache_identity, e.request_token_map_id, e.predicate_id)
    if ident == t.last_identity:
        return  # the common case: the same complete identity as the claim's last event
    t.last_identity = ident
    for name in IDENTITY_FIELDS:
        value = getattr(e, name)
        if value is None:
            if t.identity_missing_seq is None:
                t.identity_missing_seq = e.seq
            continue
        seen = t.identity.setdefault(name, value)
        if seen != value and t.ambiguous_seq is None:
            t.ambiguous_seq = e.seq


def _transition(t: ClaimTrack, e: Event, name: str) -> None:
    state = _STATE_OF.get(name)
    if state is None or (name == "claim_materialized" and not e.holds):
        return
    if t.lifecycle is None:
        t.lifecycle = ClaimLifecycle(t.claim_id, keep_history=False)
    try:
        t.lifecycle.advance(state)
    except IllegalTransition as err:
        if t.illegal_seq is None:
            t.illegal_seq, t.illegal_message = e.seq, err.message
        t.lifecycle.state = state


def _accepted(facts: StreamFacts, t: ClaimTrack, e: Event) -> None:
    if t.accepted_seq is None:
        t.accepted_seq = e.seq
        t.registration = e.registration
        t.mode = e.protection_mode
        t.predicate_id = e.predicate.id
        t.predicate_blocks = e.predicate.blocks


def _materialized(facts: StreamFacts, t: ClaimTrack, e: Event) -> None:
    t.required_values.add(e.required)
    if e.holds and t.materialized_seq is None:
        t.materialized_seq = e.seq


def _offloaded(facts: StreamFacts, t: ClaimTrack, e: Event) -> None:
    if len(t.offloaded) < 16:
        t.offloaded.append((e.generation, e.seq))


def _restore_required(facts: StreamFacts, t: ClaimTrack, e: Event) -> None:
    if e.generation not in t.chains:
        _unlink(facts, t, _chain(t, None))
        _prune(t)
        t.chains[e.generation] = Chain(e.generation, e.seq, e.request_id)
        if e.request_id is not None:
            facts.by_request.setdefault(e.request_id, []).append(t.claim_id)
    t.current_gen = e.generation
    chain = t.chains[e.generation]
    if chain.lookup_hit is None and t.last_lookup_hit is not None:
        # a lookup answers one restore: the next generation needs a lookup of its own
        chain.lookup_hit, t.last_lookup_hit = t.last_lookup_hit, None


def _unlink(facts: StreamFacts, t: ClaimTrack, chain: Chain | None) -> None:
    """A superseded chain no longer receives request-linked events: forget its request."""
    if chain is None or chain.request_id is None:
        return
    linked = facts.by_request.get(chain.request_id)
    if linked and t.claim_id in linked:
        linked.remove(t.claim_id)
        if not linked:
            del facts.by_request[chain.request_id]


def _complete_success(c: Chain) -> bool:
    return None not in (c.lookup_hit, c.load_ok, c.restored_offload, c.reused_holds) and (
        c.reused_before_restore is None)


_KEEP_CHAINS = 4


def _prune(t: ClaimTrack) -> None:
    """Keep the chains a gate can still choose: the first, the first complete success, the
    first failure, the first failure after that success, and the latest. Memory per claim
    stays bounded however many restore generations it goes through."""
    if len(t.chains) < _KEEP_CHAINS:
        return
    ordered = [t.chains[g] for g in sorted(t.chains)]
    success = next((c for c in ordered if _complete_success(c)), None)
    failure = next((c for c in ordered if c.load_failed is not None), None)
    later = next((c for c in ordered if success is not None and c.load_failed is not None
                  and c.generation > success.generation), None)
    keep = {id(c) for c in (ordered[0], success, failure, later, ordered[-1]) if c is not None}
    t.chains = {c.generation: c for c in ordered if id(c) in keep}


def _chain(t: ClaimTrack, generation: int | None) -> Chain | None:
    gen = t.current_gen if generation is None else generation
    return None if gen is None else t.chains.get(gen)


def _restored(facts: StreamFacts, t: ClaimTrack, e: Event) -> None:
    t.last_restored_seq = e.seq
    c = _chain(t, e.generation)
    if c is None:
        return
    if c.restored_any is None:
        c.restored_any = e.seq
    if e.source == "offload_tier" and c.restored_offload is None:
        c.restored_offload = e.seq
    if e.source == "fallback_recompute" and c.restored_fallback is None:
        c.restored_fallback = e.seq


def _reused(facts: StreamFacts, t: ClaimTrack, e: Event) -> None:
    c = _chain(t, e.generation)
    if c is None:
        return
    if c.restored_any is None and c.reused_before_restore is None:
        c.reused_before_restore = e.seq
    if e.holds and c.reused_holds is None:
        c.reused_holds = e.seq


def _restore_failed(facts: StreamFacts, t: ClaimTrack, e: Event) -> None:
    facts.name_failure(e.claim_id, e.seq)
    facts.name_failure(e.outcome_claim_id, e.seq)
    c = _chain(t, e.generation)
    scoped = c is not None and e.outcome_claim_id == t.claim_id and c.load_failed is not None
    if scoped and c is not None and c.restore_failed_scoped is None:
        c.restore_failed_scoped = e.seq


def _release(facts: StreamFacts, t: ClaimTrack, e: Event) -> None:
    t.release_seq.setdefault(e.event, e.seq)


def _harmed(facts: StreamFacts, t: ClaimTrack, e: Event) -> None:
    facts.name_failure(t.claim_id, e.seq)
    if t.harm_seq is None:
        t.harm_seq = e.seq


def _lost(facts: StreamFacts, t: ClaimTrack, e: Event) -> None:
    if t.first_loss_seq is None:
        t.first_loss_seq = e.seq


_CLAIM_HANDLERS: dict[str, ClaimHandler] = {
    "claim_accepted": _accepted,
    "claim_materialized": _materialized,
    "claim_offloaded": _offloaded,
    "claim_restore_required": _restore_required,
    "claim_restored": _restored,
    "claim_reused": _reused,
    "claim_restore_failed": _restore_failed,
    "claim_demoted": _release,
    "claim_expired": _release,
    "claim_harmed": _harmed,
    "claim_block_lost_after_release": _lost,
}


def _claim_of(facts: StreamFacts, e: Event) -> ClaimTrack | None:
    return facts.claims.get(e.claim_id) if e.claim_id is not None else None


def _finished(facts: StreamFacts, e: Event) -> None:
    # only watched requests: a finish before any failure or refusal orders nothing we judge
    if e.request_id is not None and e.request_id in facts.watched:
        facts.finish_seq.setdefault(e.request_id, e.seq)


def _generic(facts: StreamFacts, e: Event) -> None:
    facts.generic_counters += 1


def _store_finished(facts: StreamFacts, e: Event) -> None:
    if not e.success:
        return
    t = _claim_of(facts, e)
    if e.claim_id is None and facts.unclaimed_store is None:
        facts.unclaimed_store = e.seq
    if t is not None and t.store_ok_seq is None:
        t.store_ok_seq = e.seq


def _lookup(facts: StreamFacts, e: Event) -> None:
    t = _claim_of(facts, e)
    if t is not None and e.hit_tokens > 0:
        t.last_lookup_hit = e.seq


def _load_finished(facts: StreamFacts, e: Event) -> None:
    if not e.success:
        _load_failure(facts, e, e.injected)
        return
    t = _claim_of(facts, e)
    c = _chain(t, e.generation) if t is not None else None
    if c is not None and c.load_ok is None:
        c.load_ok = e.seq


def _load_failed(facts: StreamFacts, e: Event) -> None:
    _load_failure(facts, e, e.injected)


def _load_failure(facts: StreamFacts, e: Event, injected: bool) -> None:
    facts.name_failure(e.claim_id, e.seq)
    t = _claim_of(facts, e)
    generation = getattr(e, "generation", None)
    c = _chain(t, generation) if t is not None else None
    if t is not None and t.failure_seq is None:
        t.failure_seq = e.seq
    if c is not None and c.load_failed is None:
        c.load_failed, c.load_failed_injected = e.seq, injected
        if c.request_id is not None:
            facts.watched.add(c.request_id)
    if e.request_id is not None:
        facts.watched.add(e.request_id)


def _chains_for(facts: StreamFacts, e: Event) -> list[Chain]:
    """Open chains an event without a generation belongs to: by claim id, else by request id."""
    if e.claim_id is not None:
        # a named claim links by name only: a failure relabelled to another (or an unknown)
        # claim must not be attributed to this one through its request
        t = _claim_of(facts, e)
        c = _chain(t, None) if t is not None else None
        return [c] if c is not None else []
    if e.request_id is None:
        return []
    found = []
    for cid in facts.by_request.get(e.request_id, ()):
        c = _chain(facts.claims[cid], None)
        if c is not None and c.request_id == e.request_id:
            found.append(c)
    return found


def _scheduler_failure(facts: StreamFacts, e: Event) -> None:
    if e.claim_id is not None:
        facts.name_failure(e.claim_id, e.seq)
    for c in _chains_for(facts, e):
        if c.load_failed is None:
            continue
        if e.policy == "fail" and c.sched_fail is None:
            c.sched_fail = e.seq
        if e.policy == "recompute" and c.sched_recompute is None:
            c.sched_recompute = e.seq


def _refused(facts: StreamFacts, e: Event) -> None:
    facts.name_failure(e.outcome_claim_id, e.seq)
    for b in e.blocking_claim_ids:
        facts.name_failure(b, e.seq)
    if len(e.blocking_claim_ids) > 1 and facts.smeared_refusal is None:
        facts.smeared_refusal = e.seq
    if e.request_id is not None:
        facts.watched.add(e.request_id)
    named = {e.outcome_claim_id, e.claim_id, *e.blocking_claim_ids} - {None}
    for cid in named:
        t = facts.claims.get(cid)
        if t is None:
            continue
        _note_refusal(t, e)


def _note_conflict(t: ClaimTrack, e: Event) -> None:
    """An active request refused or deferred because of exactly this resident claim."""
    resident = t.materialized_seq is not None and t.harm_seq is None
    if resident and e.blocking_claim_ids == [t.claim_id] and t.conflict_seq is None:
        t.conflict_seq, t.conflict_request = e.seq, e.request_id


def _note_refusal(t: ClaimTrack, e: Event) -> None:
    _note_conflict(t, e)
    if e.blocking_claim_ids != [t.claim_id] and t.smear_seq is None:
        t.smear_seq = e.seq
    if e.arbiter == "admission" and t.admission_refusal_seq is None:
        t.admission_refusal_seq = e.seq
    c = _chain(t, None)
    if c is None or c.load_failed is None:
        return
    if c.refusal_any is None:
        c.refusal_any, c.refusal_request = e.seq, e.request_id or c.request_id
    attributed = (
        e.outcome_claim_id == t.claim_id
        and e.blocking_claim_ids == [t.claim_id]
        and e.arbiter == "scheduler_boundary"
    )
    if attributed and c.refusal_attributed is None:
        c.refusal_attributed = e.seq


def _deferred(facts: StreamFacts, e: Event) -> None:
    if len(e.blocking_claim_ids) > 1 and facts.smeared_refusal is None:
        facts.smeared_refusal = e.seq
    if e.request_id is not None:
        facts.watched.add(e.request_id)
    for cid in e.blocking_claim_ids:
        t = facts.claims.get(cid)
        if t is not None:
            _note_conflict(t, e)


def _evicted(facts: StreamFacts, e: Event) -> None:
    t = _claim_of(facts, e)
    if t is not None and t.first_loss_seq is None:
        t.first_loss_seq = e.seq


_OTHER_HANDLERS: dict[str, Callable[[StreamFacts, Event], None]] = {
    "request_finished": _finished,
    "generic_counter": _generic,
    "kv_store_finished": _store_finished,
    "kv_lookup": _lookup,
    "kv_load_finished": _load_finished,
    "kv_load_failed": _load_failed,
    "scheduler_load_failure": _scheduler_failure,
    "active_request_refused": _refused,
    "active_request_deferred": _deferred,
    "block_evicted": _evicted,
}
