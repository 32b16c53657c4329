"""MicroRuntime: a deterministic paged-KV runtime with prefix caching and resident claims.

One finite :class:`~residentkv.microruntime.pool.BlockPool` is shared by cached prefixes (ordered
block chains, one per object), resident claims and active requests. A
:class:`~residentkv.microruntime.policies.Policy` decides which claims can be accepted and what
happens on a capacity conflict. Every decision the runtime takes is emitted as a
``residentkv.event/v1`` event (``source: microruntime``) through the one
:class:`~residentkv.trace.writer.EventWriter`, so trace gates and litmus checks read simulated
runs exactly as they read real ones.

The harm rule is the contract's (:func:`residentkv.model.lifecycle.classify_loss`) and claim
states move through :class:`~residentkv.model.lifecycle.ClaimLifecycle`, which refuses illegal
transitions: the simulator cannot emit a lifecycle the contract forbids.

Without a writer nothing is formatted or validated, which is what the benchmark measures.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from residentkv.errors import InternalError
from residentkv.microruntime.policies import Conflict, Decision, Policy, make_policy
from residentkv.microruntime.pool import BlockPool
from residentkv.model.claim import ProtectionMode, Registration, ResidentClaim
from residentkv.model.lifecycle import ClaimLifecycle, ClaimState, LossKind, classify_loss
from residentkv.model.predicate import PredicateResult, evaluate_predicate
from residentkv.trace.writer import EventWriter, Provenance

S = ClaimState
DEVICE_TIER = "device"
HOST_TIER = "host"
FEASIBILITY_CONFLICT = "infeasible_preserve_resident_and_active"
FEASIBILITY_TOO_BIG = "infeasible_exceeds_pool"
FEASIBILITY_UNRESOLVED = "unresolved_at_end_of_run"
FEASIBILITY_RESTORE = "restore_failed"
_REUSABLE = frozenset({S.MATERIALIZED, S.RESTORED, S.REUSED})


class RequestState(StrEnum):
    """Where an active request is; the last three are terminal."""

    DEFERRED = "deferred"
    RUNNING = "running"
    SERVED = "served"
    REFUSED = "refused"


class _Object:
    """A reusable object (a prefix): an ordered chain of device blocks by position."""

    __slots__ = ("blocks", "claim", "id")

    def __init__(self, object_id: str) -> None:
        self.id = object_id
        self.blocks: dict[int, int] = {}
        self.claim: _Claim | None = None


@dataclass(slots=True, eq=False)
class _Claim:
    claim: ResidentClaim
    obj: _Object
    life: ClaimLifecycle
    ident: dict[str, str]
    lo: int
    hi: int
    active: bool = False  # accepted and not yet ended: the runtime holds responsibility
    pins: bool = False  # device blocks are excluded from eviction
    soft: bool = False  # device blocks are evicted only after unclaimed ones
    reserved: bool = False
    pinned_count: int = 0
    missing: int = 0  # predicate positions not on the device
    generation: int = 0
    offloaded: bool = False
    last_use: int = 0

    @property
    def id(self) -> str:
        return self.claim.claim_id

    @property
    def footprint(self) -> int:
        return self.claim.footprint_blocks


@dataclass(slots=True, eq=False)
class _Request:
    id: str
    obj: _Object
    blocks: int
    hold: bool
    state: RequestState = RequestState.DEFERRED
    deferred: bool = False
    held: list[int] = field(default_factory=list)
    written: list[int] = field(default_factory=list)
    last_blocking: tuple[str, ...] = ()


class MicroRuntime:
    """A deterministic block-pool runtime (SPEC §10).

    :param usable_blocks: device blocks in the pool.
    :param policy: a :class:`Policy` or its name.
    :param writer: where events go; ``None`` emits nothing (fast path).
    :param host_blocks: capacity of the host tier used by ``offload_resident``
        (default: as large as the device pool).
    :param block_size: tokens per block; claims must name the same block size.
    :param fail_loads_of: claim ids whose restores fail (controlled, ``injected``).
    """

    def __init__(
        self,
        usable_blocks: int,
        policy: Policy | str = "native",
        *,
        writer: EventWriter | None = None,
        host_blocks: int | None = None,
        block_size: int = 16,
        fail_loads_of: frozenset[str] | set[str] = frozenset(),
    ) -> None:
        self.pool = BlockPool(usable_blocks)
        self.policy = make_policy(policy) if isinstance(policy, str) else policy
        self.block_size = block_size
        self.host_blocks = usable_blocks if host_blocks is None else host_blocks
        self.fail_loads_of = frozenset(fail_loads_of)
        self.now = 0.0
        self._w = writer
        self._owner: list[_Object | None] = [None] * usable_blocks
        self._pos: list[int] = [0] * usable_blocks
        self._objects: dict[str, _Object] = {}
        self._claims: dict[str, _Claim] = {}
        self._pinning: dict[str, _Claim] = {}
        self._requests: dict[str, _Request] = {}
        self._running: dict[str, _Request] = {}
        self._deferred: dict[str, _Request] = {}
        self._expiries: list[tuple[float, int, str]] = []
        self._protected = 0  # device blocks pinned by claims
        self._reserved = 0  # device blocks promised to accepted pinning claims
        self._host_reserved = 0
        self._tick = 0
        self._job = 0
        self._retrying = False
        self._retry_again = False
        #: block operations performed (hits, allocations, evictions, releases) — for the bench.
        self.block_ops = 0

    # ------------------------------------------------------------------ public API: claims

    def submit_claim(self, claim: ResidentClaim) -> bool:
        """Submit *claim*; accept it only if the policy can honour it and capacity allows.

        The admission decision is explicit: a claim that could not be kept is rejected here,
        never accepted and then lost.
        """
        if claim.claim_id in self._claims:
            raise ValueError(f"claim id {claim.claim_id!r} submitted twice")
        obj = self._object(claim.object_id)
        spec = claim.predicate
        c = _Claim(
            claim=claim,
            obj=obj,
            life=ClaimLifecycle(claim.claim_id),
            ident={
                "object_id": claim.object_id,
                "cache_identity": claim.cache_identity_key,
                "request_token_map_id": claim.request_token_map_id,
                "predicate_id": spec.id,
            },
            lo=spec.start or 0,
            hi=spec.end,
        )
        self._claims[claim.claim_id] = c
        self._cemit(c, "claim_submitted", owner_scope=claim.owner_scope)
        c.life.advance(S.SUBMITTED)
        mode = claim.protection_mode
        pinning = mode in self.policy.pinning
        reason: str | None
        if claim.registration is Registration.POST_HOC:
            reason = "post_hoc registration: a claim must be named before use"
        elif mode is ProtectionMode.BEST_EFFORT:
            reason = "best_effort is not a claim"
        elif claim.cache_identity.block_size != self.block_size:
            reason = (
                f"cache identity block_size {claim.cache_identity.block_size} differs from "
                f"the runtime's {self.block_size}"
            )
        elif obj.claim is not None and obj.claim.active:
            reason = f"object {obj.id!r} is already claimed by {obj.claim.id!r}"
        else:
            reason = self.policy.accepts(mode)
        if reason is None and pinning and self._reserved + c.footprint > self.pool.capacity:
            reason = (
                f"insufficient device capacity: footprint {c.footprint} + reserved "
                f"{self._reserved} > usable {self.pool.capacity}"
            )
        if (
            reason is None
            and mode is ProtectionMode.OFFLOADABLE
            and self._host_reserved + c.footprint > self.host_blocks
        ):
            reason = (
                f"insufficient host capacity: footprint {c.footprint} + reserved "
                f"{self._host_reserved} > host {self.host_blocks}"
            )
        if reason is not None:
            if self.policy.denies_future_reuse() and self._w is not None:
                self._w.emit("future_reuse_denied", claim_id=c.id, reason=reason)
            self._cemit(c, "claim_rejected", reason=reason)
            c.life.advance(S.REJECTED)
            if obj.claim is None or not obj.claim.active:
                obj.claim = c  # label the object's blocks with the (rejected) claim id
            return False
        self._cemit(
            c,
            "claim_accepted",
            registration=claim.registration.value,
            protection_mode=mode.value,
            footprint_blocks=c.footprint,
            predicate=spec.model_dump(mode="json"),
            owner_scope=claim.owner_scope,
            expires_after_s=claim.expires_after_s,
        )
        c.life.advance(S.ACCEPTED)
        c.active = True
        obj.claim = c
        if pinning:
            c.reserved = True
            self._reserved += c.footprint
        if mode is ProtectionMode.OFFLOADABLE:
            self._host_reserved += c.footprint
        c.missing = sum(1 for p in range(c.lo, c.hi) if p not in obj.blocks)
        self._protect(c, pin=pinning, soft=mode is ProtectionMode.SOFT_PRIORITY)
        if c.missing == 0:
            self._materialize(c)
        if claim.expires_after_s is not None:
            heapq.heappush(
                self._expiries, (self.now + claim.expires_after_s, len(self._claims), c.id)
            )
        return True

    def release_claim(self, claim_id: str, reason: str = "released by owner") -> None:
        """The owner gives the claim up; later loss of its blocks is post-release loss."""
        c = self._claims[claim_id]
        if not c.active:
            return
        self._cemit(c, "claim_released", reason=reason)
        c.life.advance(S.RELEASED)
        self._end(c)
        self._retry_deferred()

    def can_offload(self, claim_id: str) -> bool:
        """Whether the claim can move to the host tier now (materialized, nothing referenced)."""
        c = self._claims.get(claim_id)
        if c is None or not c.active or c.claim.protection_mode is not ProtectionMode.OFFLOADABLE:
            return False
        if c.life.state not in _REUSABLE:
            return False
        refs = self.pool.refs
        return all(refs[b] == 0 for p, b in c.obj.blocks.items() if p < c.footprint)

    def check(self) -> None:
        """Raise :class:`InternalError` unless every block is in exactly one place and every
        non-free block backs exactly one chain position (the pool never over-allocates)."""
        self.pool.check()
        backed = sum(len(o.blocks) for o in self._objects.values())
        if backed != self.pool.capacity - len(self.pool.free):
            raise InternalError(
                f"{backed} chain positions but {self.pool.capacity - len(self.pool.free)} "
                "blocks in use"
            )
        for o in self._objects.values():
            for p, b in o.blocks.items():
                if self._owner[b] is not o or self._pos[b] != p:
                    raise InternalError(f"block {b} backs {o.id}[{p}] but is owned elsewhere")
        pinned = sum(self.pool.pinned)
        if pinned != self._protected:
            raise InternalError(f"{pinned} pinned blocks, {self._protected} counted")

    def claim_state(self, claim_id: str) -> ClaimState | None:
        """The claim's lifecycle state."""
        return self._claims[claim_id].life.state

    # ---------------------------------------------------------------- public API: requests

    def request(
        self,
        request_id: str,
        object_id: str,
        blocks: int,
        *,
        hold: bool = False,
        owner_scope: str | None = None,
    ) -> RequestState:
        """Start an active request that needs *blocks* blocks of *object_id*'s chain.

        Present positions are prefix-cache hits; missing ones are allocated (free blocks first,
        then LRU eviction). With ``hold`` the request keeps its blocks until :meth:`finish`.
        Returns the request's state after scheduling.
        """
        if request_id in self._requests:
            raise ValueError(f"request id {request_id!r} used twice")
        if blocks <= 0:
            raise ValueError("a request needs at least one block")
        req = _Request(request_id, self._object(object_id), blocks, hold)
        self._requests[request_id] = req
        if self._w is not None:
            self._w.emit(
                "request_started",
                request_id=request_id,
                prompt_tokens=blocks * self.block_size,
                owner_scope=owner_scope,
            )
        self._schedule(req, depth=0)
        return req.state

    def finish(self, request_id: str) -> None:
        """Finish a running request: its blocks become cached (or freed under no-admit)."""
        req = self._running.get(request_id)
        if req is not None:
            self._finish(req)

    def request_state(self, request_id: str) -> RequestState:
        """The request's state."""
        return self._requests[request_id].state

    def advance(self, now: float) -> None:
        """Move the simulated clock to *now*, expiring claims whose time has come."""
        while self._expiries and self._expiries[0][0] <= now:
            at, _, claim_id = heapq.heappop(self._expiries)
            self.now = max(self.now, at)
            c = self._claims[claim_id]
            if c.active:
                self._cemit(c, "claim_expired", reason=f"expires_after_s elapsed at t={at:g}")
                c.life.advance(S.EXPIRED)
                self._end(c)
                self._retry_deferred()
        self.now = max(self.now, now)

    def close(self) -> None:
        """Run to quiescence: finish running requests, let time pass while requests wait for
        an expiry, and refuse whatever can still not be served (every request ends)."""
        while True:
            # Finishing may admit deferred requests, which then run: loop until quiet.
            for req in list(self._running.values()):
                self._finish(req)
            if self._running:
                continue
            if self._deferred and self._expiries:
                self.advance(self._expiries[0][0])
                continue
            break
        for req in list(self._deferred.values()):
            blocking = req.last_blocking
            self._refuse(req, FEASIBILITY_UNRESOLVED, blocking, None, "admission")
        if self._w is not None:
            self._w.flush()

    def inject_block_loss(
        self, object_id: str, position: int, reason: str = "injected_fault"
    ) -> bool:
        """Lose one unreferenced device block (a fault no policy can prevent).

        A stimulus, not an outcome: the runtime still applies the harm rule and reports what
        the loss means for any claim on the object. Returns False if there was no such block.
        """
        obj = self._objects.get(object_id)
        b = obj.blocks.get(position) if obj is not None else None
        if b is None or self.pool.refs[b]:
            return False
        self._drop(b, None, reason)
        return True

    def evict_protected_block(self, claim_id: str, request_id: str | None) -> bool:
        """Evict the last pinned block of a claim. Exists so tests can build deliberately
        broken policies; no shipped policy calls it."""
        c = self._claims[claim_id]
        for p in sorted(c.obj.blocks, reverse=True):
            b = c.obj.blocks[p]
            if self.pool.pinned[b] and not self.pool.refs[b]:
                self._drop(b, request_id, "lru")
                return True
        return False

    # ------------------------------------------------------------------------ scheduling

    def _schedule(self, req: _Request, depth: int) -> None:
        obj = req.obj
        c = obj.claim
        restoring = c is not None and c.offloaded and c.active
        n = max(req.blocks, c.footprint) if restoring and c is not None else req.blocks
        pool = self.pool
        chain = obj.blocks
        hit_evictable = 0
        hit_pinned = 0
        missing = 0
        pinned = pool.pinned
        for p in range(n):
            b = chain.get(p)
            if b is None:
                missing += 1
            elif pinned[b]:
                hit_pinned += 1
            elif pool.refs[b] == 0:
                hit_evictable += 1
        if missing <= pool.available - hit_evictable:
            self._admit(req, n, restoring)
            return
        capacity = pool.capacity
        if n > capacity:
            self._refuse(req, FEASIBILITY_TOO_BIG, (), None, "admission", n - capacity)
            return
        protected_other = self._protected - hit_pinned
        if n <= capacity - protected_other:
            self._defer(req, "waiting for running requests to free blocks", ())
            return
        shortfall = n - (capacity - protected_other)
        blocking = self._blocking(shortfall, c)
        req.last_blocking = blocking
        decision = self.policy.on_conflict(self, Conflict(req.id, n, shortfall, blocking))
        if depth == 0 and decision is Decision.DEMOTE:
            for cid in blocking:
                if self._claims[cid].active:  # a policy may already have ended it
                    self._demote(self._claims[cid], req.id)
            self._schedule(req, depth + 1)
        elif depth == 0 and decision is Decision.OFFLOAD:
            for cid in blocking:
                if self.can_offload(cid):
                    self._offload(self._claims[cid], req.id)
            self._schedule(req, depth + 1)
        elif decision is Decision.DEFER:
            self._defer(req, "protected resident claims hold the blocks it needs", blocking)
        else:
            outcome = blocking[0] if len(blocking) == 1 else None
            self._refuse(req, FEASIBILITY_CONFLICT, blocking, outcome, "admission", shortfall)

    def _blocking(self, shortfall: int, own: _Claim | None) -> tuple[str, ...]:
        """The fewest pinned claims, least recently used first, whose blocks cover the
        shortfall: exactly the claims the request's refusal can be attributed to."""
        candidates = sorted(
            (c for c in self._pinning.values() if c is not own),
            key=lambda c: (c.last_use, c.id),
        )
        if own is not None and own.pinned_count:
            candidates.append(own)
        out: list[str] = []
        covered = 0
        for c in candidates:
            if covered >= shortfall:
                break
            out.append(c.id)
            covered += c.pinned_count
        return tuple(out)

    def _admit(self, req: _Request, n: int, restoring: bool) -> None:
        w = self._w
        obj = req.obj
        c = obj.claim
        claim_live = c is not None and c.active
        first_write = claim_live and c is not None and c.life.state is S.ACCEPTED
        self._deferred.pop(req.id, None)
        if w is not None:
            w.emit("active_request_admitted", request_id=req.id, blocks=n)
            if not self.policy.admits_writes(obj.claim is not None):
                w.emit(
                    "future_reuse_denied",
                    request_id=req.id,
                    reason=f"policy {self.policy.name}: this request's KV is not admitted "
                    "to the prefix cache",
                )
        if restoring and c is not None:
            tokens = c.footprint * self.block_size
            if w is not None:
                w.emit(
                    "kv_lookup",
                    claim_id=c.id,
                    request_id=req.id,
                    hit_tokens=tokens,
                    async_load=True,
                    generation=c.generation,
                )
            self._cemit(
                c,
                "claim_restore_required",
                request_id=req.id,
                generation=c.generation,
                from_tier=HOST_TIER,
                to_tier=DEVICE_TIER,
                tokens=tokens,
            )
            c.life.advance(S.RESTORE_REQUIRED)
        pool = self.pool
        refs = pool.refs
        pinned = pool.pinned
        owner = self._owner
        pos = self._pos
        chain = obj.blocks
        pin = claim_live and c is not None and c.pins
        footprint = c.footprint if c is not None and claim_live else 0
        # Reference every hit first, so that allocating the missing positions can never evict
        # a block this request is about to reuse.
        held = [-1] * n
        for p in range(n):
            b = chain.get(p, -1)
            if b >= 0:
                if refs[b] == 0 and not pinned[b]:
                    pool.uncache(b)
                refs[b] += 1
                held[p] = b
        written = req.written
        for p in range(n):
            if held[p] >= 0:
                continue
            b = pool.take_free()
            if b < 0:
                b = pool.pop_victim()
                self._lose(b, req.id, "lru", False)
            owner[b] = obj
            pos[b] = p
            chain[p] = b
            refs[b] = 1
            held[p] = b
            written.append(b)
            if p < footprint and c is not None:
                if pin:
                    pinned[b] = 1
                    self._protected += 1
                    c.pinned_count += 1
                    self._pinning[c.id] = c
                if c.lo <= p < c.hi:
                    c.missing -= 1
        req.held = held
        self.block_ops += n
        req.state = RequestState.RUNNING
        self._running[req.id] = req
        # Re-read: an eviction during allocation may have ended the claim (a soft claim harmed).
        if c is not None and c.active:
            self._tick += 1
            c.last_use = self._tick
            if restoring and not self._load(c, req):
                return
            if first_write and c.life.state is S.ACCEPTED:
                if c.missing == 0:
                    self._materialize(c, req.id)
            elif c.life.state in _REUSABLE:
                self._cemit(
                    c,
                    "claim_reused",
                    request_id=req.id,
                    generation=c.generation,
                    holds=c.missing == 0,
                )
                c.life.advance(S.REUSED)
        if not req.hold:
            self._finish(req)

    def _load(self, c: _Claim, req: _Request) -> bool:
        """Copy the claim back from the host tier; False if the (injected) load failed."""
        w = self._w
        self._job += 1
        job = f"load-{self._job}"
        nbytes = c.footprint * self.block_size
        ids: dict[str, Any] = {"claim_id": c.id, "request_id": req.id, "job_id": job,
                               "generation": c.generation}
        if w is not None:
            w.emit("kv_load_started", **ids, bytes=nbytes, from_tier=HOST_TIER, to_tier=DEVICE_TIER)
        if c.id in self.fail_loads_of:
            invalid = sorted(c.obj.blocks[p] for p in range(c.footprint) if p in c.obj.blocks)
            if w is not None:
                w.emit("kv_load_finished", **ids, bytes=nbytes, success=False, injected=True)
                w.emit("kv_load_failed", **ids, invalid_block_ids=invalid, injected=True)
                w.emit(
                    "scheduler_load_failure",
                    claim_id=c.id,
                    request_id=req.id,
                    policy="fail",
                    invalid_block_count=len(invalid),
                    failed_tokens=len(invalid) * self.block_size,
                    finish_status="FINISHED_ERROR",
                )
            self._cemit(
                c,
                "claim_restore_failed",
                request_id=req.id,
                generation=c.generation,
                reason="injected load failure",
                injected=True,
                outcome_type="refusal",
                outcome_claim_id=c.id,
            )
            c.life.advance(S.FAILED_CLOSED)
            # The loaded blocks are invalid: drop them without caching; other hits go back.
            self._running.pop(req.id, None)
            pool = self.pool
            for b in req.held:
                pool.refs[b] -= 1
            for b in req.written:
                if pool.pinned[b]:
                    pool.pinned[b] = 0
                    self._protected -= 1
                    c.pinned_count -= 1
                del c.obj.blocks[self._pos[b]]
                self._free_block(b)
            for b in reversed(req.held):
                if self._owner[b] is not None and pool.refs[b] == 0 and not pool.pinned[b]:
                    pool.cache(b, soft=False)
            req.held = []
            self._end(c)
            self._refuse(req, FEASIBILITY_RESTORE, (c.id,), c.id, "scheduler_boundary")
            return False
        if w is not None:
            w.emit("kv_load_finished", **ids, bytes=nbytes, success=True)
        c.offloaded = False
        self._cemit(
            c, "claim_restored", request_id=req.id, generation=c.generation, source="offload_tier"
        )
        c.life.advance(S.RESTORED)
        return True

    def _finish(self, req: _Request) -> None:
        self._running.pop(req.id, None)
        obj = req.obj
        c = obj.claim
        soft = c is not None and c.active and c.soft
        footprint = c.footprint if c is not None else 0
        drop = None if self.policy.admits_writes(c is not None) else set(req.written)
        pool = self.pool
        refs = pool.refs
        pinned = pool.pinned
        pos = self._pos
        # Tail first: the tail of a chain becomes the least recently used, so LRU eviction
        # takes tails before heads (as vLLM frees blocks) and prefixes keep their leading run.
        for b in reversed(req.held):
            refs[b] -= 1
            if refs[b] or pinned[b]:
                continue
            if drop is not None and b in drop:
                del obj.blocks[pos[b]]
                self._free_block(b)
            else:
                pool.cache(b, soft=soft and pos[b] < footprint)
        self.block_ops += len(req.held)
        req.held = []
        req.state = RequestState.SERVED
        if self._w is not None:
            self._w.emit(
                "request_finished", request_id=req.id, status="served", finish_reason="stop"
            )
        self._retry_deferred()

    def _defer(self, req: _Request, reason: str, blocking: tuple[str, ...]) -> None:
        req.state = RequestState.DEFERRED
        self._deferred[req.id] = req
        if not req.deferred:
            req.deferred = True
            if self._w is not None:
                self._w.emit(
                    "active_request_deferred",
                    request_id=req.id,
                    reason=reason,
                    blocking_claim_ids=list(blocking),
                )

    def _refuse(
        self,
        req: _Request,
        feasibility: str,
        blocking: tuple[str, ...],
        outcome: str | None,
        arbiter: str,
        shortfall: int | None = None,
    ) -> None:
        self._deferred.pop(req.id, None)
        req.state = RequestState.REFUSED
        if self._w is not None:
            # the envelope names the outcome claim (SPEC §4.1: they are equal)
            self._w.emit(
                "active_request_refused",
                claim_id=outcome,
                request_id=req.id,
                outcome_claim_id=outcome,
                blocking_claim_ids=list(blocking),
                feasibility=feasibility,
                arbiter=arbiter,
                shortfall=shortfall,
            )
            self._w.emit(
                "request_finished", request_id=req.id, status="refused", finish_reason="refused"
            )

    def _retry_deferred(self) -> None:
        # Re-entrant calls (a retried request finishing) only ask for one more pass.
        if self._retrying:
            self._retry_again = True
            return
        self._retrying = True
        try:
            again = True
            while again and self._deferred:
                self._retry_again = False
                for req in list(self._deferred.values()):
                    if req.state is RequestState.DEFERRED:
                        self._schedule(req, depth=0)
                again = self._retry_again
        finally:
            self._retrying = False

    # ---------------------------------------------------------------------- claim helpers

    def _protect(self, c: _Claim, *, pin: bool, soft: bool) -> None:
        c.pins = pin
        c.soft = soft
        if not (pin or soft):
            return
        pool = self.pool
        for p, b in c.obj.blocks.items():
            if p >= c.footprint:
                continue
            if pin:
                if pool.refs[b] == 0:
                    pool.uncache(b)
                pool.pinned[b] = 1
                self._protected += 1
                c.pinned_count += 1
            elif b in pool.lru:
                del pool.lru[b]
                pool.lru_soft[b] = None
        if c.pinned_count:
            self._pinning[c.id] = c

    def _unprotect(self, c: _Claim) -> None:
        pool = self.pool
        if c.pins:
            for p in sorted(c.obj.blocks, reverse=True):  # tail first, as in _finish
                b = c.obj.blocks[p]
                if p < c.footprint and pool.pinned[b]:
                    pool.pinned[b] = 0
                    self._protected -= 1
                    if pool.refs[b] == 0:
                        pool.cache(b, soft=False)
        elif c.soft:
            for p in sorted(c.obj.blocks, reverse=True):
                b = c.obj.blocks[p]
                if b in pool.lru_soft:
                    del pool.lru_soft[b]
                    pool.lru[b] = None
        c.pinned_count = 0
        c.pins = False
        c.soft = False
        self._pinning.pop(c.id, None)

    def _end(self, c: _Claim) -> None:
        """The runtime no longer holds responsibility for *c* (ended or failed closed)."""
        c.active = False
        self._unprotect(c)
        if c.reserved:
            self._reserved -= c.footprint
            c.reserved = False
        if c.claim.protection_mode is ProtectionMode.OFFLOADABLE:
            self._host_reserved -= c.footprint
        c.offloaded = False

    def _materialize(self, c: _Claim, request_id: str | None = None) -> None:
        result = self._evaluate(c)
        self._cemit(
            c, "claim_materialized", request_id=request_id, tier=DEVICE_TIER, **result.model_dump()
        )
        c.life.advance(S.MATERIALIZED)

    def _evaluate(self, c: _Claim, extra: int | None = None) -> PredicateResult:
        present = [p for p in c.obj.blocks if p < c.footprint]
        if extra is not None:
            present.append(extra)
        return evaluate_predicate(c.claim.predicate, present)

    def _demote(self, c: _Claim, request_id: str) -> None:
        self._cemit(
            c,
            "claim_demoted",
            request_id=request_id,
            reason=f"capacity conflict with active request {request_id}",
        )
        c.life.advance(S.DEMOTED)
        self._end(c)

    def _offload(self, c: _Claim, request_id: str) -> None:
        w = self._w
        c.generation += 1
        self._job += 1
        job = f"store-{self._job}"
        chain = c.obj.blocks
        positions = sorted(p for p in chain if p < c.footprint)
        nbytes = len(positions) * self.block_size
        if w is not None:
            stages: tuple[tuple[str, dict[str, Any]], ...] = (
                ("kv_store_started", {}),
                ("kv_store_finished", {"success": True}),
            )
            for event, extra in stages:
                w.emit(
                    event,
                    claim_id=c.id,
                    request_id=request_id,
                    job_id=job,
                    bytes=nbytes,
                    generation=c.generation,
                    from_tier=DEVICE_TIER,
                    to_tier=HOST_TIER,
                    **extra,
                )
        self._cemit(
            c,
            "claim_offloaded",
            request_id=request_id,
            generation=c.generation,
            from_tier=DEVICE_TIER,
            to_tier=HOST_TIER,
            block_count=len(positions),
        )
        c.life.advance(S.OFFLOADED)
        # The blocks moved to the host tier; nothing is lost, so no eviction is reported.
        for p in positions:
            b = chain.pop(p)
            if self.pool.pinned[b]:
                self._protected -= 1
            self._free_block(b)
            if c.lo <= p < c.hi:
                c.missing += 1
        c.pinned_count = 0
        self._pinning.pop(c.id, None)
        c.offloaded = True

    # ----------------------------------------------------------------------- block helpers

    def _free_block(self, b: int) -> None:
        self._owner[b] = None
        self.pool.put_free(b)

    def _drop(self, b: int, request_id: str | None, reason: str) -> None:
        """Lose an unreferenced block that may be pinned or cached (faults, broken policies)."""
        pool = self.pool
        was_pinned = bool(pool.pinned[b])
        if was_pinned:
            pool.pinned[b] = 0
            self._protected -= 1
            obj = self._owner[b]
            if obj is not None and obj.claim is not None:
                obj.claim.pinned_count -= 1
                if obj.claim.pinned_count == 0:
                    self._pinning.pop(obj.claim.id, None)
        else:
            pool.uncache(b)
        self._lose(b, request_id, reason, was_pinned)
        pool.put_free(b)

    def _lose(self, b: int, request_id: str | None, reason: str, protected: bool) -> None:
        """Forget block *b*'s content and report what the loss means (the harm rule)."""
        obj = self._owner[b]
        if obj is None:
            return
        p = self._pos[b]
        del obj.blocks[p]
        self._owner[b] = None
        self.block_ops += 1
        c = obj.claim
        if c is not None and p >= c.footprint:
            c = None  # a block past the claim's footprint is no claimed block
        if self._w is not None:
            self._w.emit(
                "block_evicted",
                claim_id=c.id if c is not None else None,
                request_id=request_id,
                block_id=b,
                protected=protected,
                reason=reason,
                position=p,
            )
        if c is None:
            return
        before = c.missing == 0
        if c.lo <= p < c.hi and c.active:
            c.missing += 1
        kind = classify_loss(c.life.state, before, c.missing == 0)
        if kind is LossKind.HARM:
            self._cemit(
                c,
                "claim_harmed",
                request_id=request_id,
                cause=f"{reason}: block {b} at position {p} lost",
                before=self._evaluate(c, extra=p).model_dump(),
                after=self._evaluate(c).model_dump(),
            )
            c.life.advance(S.HARMED)
            self._end(c)
        elif kind is LossKind.POST_RELEASE_LOSS:
            self._cemit(
                c, "claim_block_lost_after_release", request_id=request_id, block_id=b, position=p
            )

    # ------------------------------------------------------------------------------ misc

    def _object(self, object_id: str) -> _Object:
        obj = self._objects.get(object_id)
        if obj is None:
            obj = self._objects[object_id] = _Object(object_id)
        return obj

    def _cemit(self, c: _Claim, event: str, request_id: str | None = None, **fields: Any) -> None:
        if self._w is not None:
            self._w.emit(event, claim_id=c.id, request_id=request_id, **c.ident, **fields)



#: the simulator's emitter name: the lowering checker recognises it (exact, normalised) and
#: never lets a simulated trace grant anything
EMITTER = "residentkv.microruntime"


def provenance(stream_id: str | None = None) -> Provenance:
    """The ``stream_started`` provenance of a simulated stream (emitter and "runtime" are the
    simulator itself: no runtime release is ever claimed)."""
    from residentkv import __version__

    return Provenance(EMITTER, __version__, EMITTER, __version__, stream_id=stream_id)
