"""The claim ledger: every resident claim, what it protects, and what its losses mean.

:class:`ClaimLedger` decides admission (explicitly: a claim that could not be kept is rejected,
never accepted and then lost), pins or soft-tiers a claim's device blocks, demotes, offloads,
restores and expires claims, and applies the contract's harm rule
(:func:`residentkv.model.lifecycle.classify_loss`) to every lost block. Claim states move
through :class:`~residentkv.model.lifecycle.ClaimLifecycle`, which refuses illegal
transitions. Every claim event is emitted here; requests are the scheduler's.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

from residentkv.errors import InternalError
from residentkv.microruntime.chains import Chain, Chains
from residentkv.microruntime.emitter import Emitter
from residentkv.microruntime.policies import Policy
from residentkv.model.claim import ProtectionMode, Registration, ResidentClaim
from residentkv.model.lifecycle import ClaimLifecycle, ClaimState, LossKind, classify_loss
from residentkv.model.predicate import PredicateResult, evaluate_predicate
from residentkv.model.vocabulary import DEVICE_TIER, HOST_TIER

S = ClaimState
#: states in which a claim's object can be reused (and offloaded)
REUSABLE = frozenset({S.MATERIALIZED, S.RESTORED, S.REUSED})


@dataclass(slots=True, eq=False)
class ClaimRecord:
    """One claim as the ledger tracks it. Read by the scheduler, changed only by the ledger."""

    claim: ResidentClaim
    chain: Chain[ClaimRecord]
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
        """The claim id."""
        return self.claim.claim_id

    @property
    def footprint(self) -> int:
        """Blocks the claim covers, from position 0."""
        return self.claim.footprint_blocks


def _record(claim: ResidentClaim, chain: Chain[ClaimRecord]) -> ClaimRecord:
    spec = claim.predicate
    return ClaimRecord(
        claim=claim,
        chain=chain,
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


class ClaimLedger:
    """Claims, their protection of device blocks, their ends, and the harm rule.

    :param chains: the pool and prefix chains the claims' objects live in.
    :param policy: decides which modes are accepted and which pin.
    :param emitter: where claim events (and evictions, stores) go.
    :param block_size: tokens per block; claims must name the same block size.
    :param host_blocks: capacity of the host tier for offloadable claims.
    """

    def __init__(
        self,
        chains: Chains[ClaimRecord],
        policy: Policy,
        emitter: Emitter,
        *,
        block_size: int,
        host_blocks: int,
    ) -> None:
        self._chains = chains
        self._policy = policy
        self._emit = emitter
        self._block_size = block_size
        self._host_blocks = host_blocks
        self._claims: dict[str, ClaimRecord] = {}
        self._pinning: dict[str, ClaimRecord] = {}
        self._expiries: list[tuple[float, int, str]] = []
        #: device blocks pinned by claims
        self.protected = 0
        self._reserved = 0  # device blocks promised to accepted pinning claims
        self._host_reserved = 0
        self._tick = 0
        #: the simulated clock
        self.now = 0.0

    # ------------------------------------------------------------------------- queries

    def get(self, claim_id: str) -> ClaimRecord:
        """The claim (KeyError if never submitted)."""
        return self._claims[claim_id]

    def can_offload(self, claim_id: str) -> bool:
        """Whether the claim can move to the host tier now (materialized, nothing referenced)."""
        c = self._claims.get(claim_id)
        if c is None or not c.active or c.claim.protection_mode is not ProtectionMode.OFFLOADABLE:
            return False
        if c.life.state not in REUSABLE:
            return False
        refs = self._chains.pool.refs
        return all(refs[b] == 0 for p, b in c.chain.blocks.items() if p < c.footprint)

    def blocking(self, shortfall: int, own: ClaimRecord | None) -> tuple[str, ...]:
        """The fewest pinned claims, least recently used first, whose blocks cover the
        shortfall: exactly the claims a request's refusal can be attributed to."""
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

    def nameable(self, blocking: tuple[str, ...], own: ClaimRecord | None) -> tuple[str, ...]:
        """The claims among *blocking* a refusal or deferral may name (SPEC §4.3): the
        request's own claim (it carries it), or a hard_protected claim resident now (the
        request conflicts with it); any other claim named there would be a smear."""
        return tuple(cid for cid in blocking if (own is not None and cid == own.id) or (
            (c := self._claims[cid]).active and c.pins
            and c.claim.protection_mode is ProtectionMode.HARD_PROTECTED))

    def next_expiry(self) -> float | None:
        """When the next claim expires (``None`` if none will)."""
        return self._expiries[0][0] if self._expiries else None

    def check(self) -> None:
        """Raise :class:`InternalError` unless the pool's pins are exactly the claims' pins."""
        pinned = sum(self._chains.pool.pinned)
        if pinned != self.protected:
            raise InternalError(f"{pinned} pinned blocks, {self.protected} counted")

    # ----------------------------------------------------------------------- admission

    def submit(self, claim: ResidentClaim) -> bool:
        """Accept *claim* if the policy can honour it and capacity allows; else reject it."""
        if claim.claim_id in self._claims:
            raise ValueError(f"claim id {claim.claim_id!r} submitted twice")
        c = _record(claim, self._chains.chain(claim.object_id))
        self._claims[claim.claim_id] = c
        self._move(c, S.SUBMITTED, "claim_submitted", owner_scope=claim.owner_scope)
        reason = self._refusal(c)
        if reason is not None:
            self._reject(c, reason)
            return False
        self._accept(c)
        return True

    def _refusal(self, c: ClaimRecord) -> str | None:
        """Why *c* cannot be accepted, or ``None``."""
        claim = c.claim
        mode = claim.protection_mode
        held = c.chain.label
        if claim.registration is Registration.POST_HOC:
            return "post_hoc registration: a claim must be named before use"
        if mode is ProtectionMode.BEST_EFFORT:
            return "best_effort is not a claim"
        if claim.cache_identity.block_size != self._block_size:
            return (
                f"cache identity block_size {claim.cache_identity.block_size} differs from "
                f"the runtime's {self._block_size}"
            )
        if held is not None and held.active:
            return f"object {c.chain.id!r} is already claimed by {held.id!r}"
        reason = self._policy.accepts(mode)
        if reason is None:
            reason = self._capacity_refusal(c)
        return reason

    def _capacity_refusal(self, c: ClaimRecord) -> str | None:
        mode = c.claim.protection_mode
        capacity = self._chains.pool.capacity
        if mode in self._policy.pinning and self._reserved + c.footprint > capacity:
            return (
                f"insufficient device capacity: footprint {c.footprint} + reserved "
                f"{self._reserved} > usable {capacity}"
            )
        if (
            mode is ProtectionMode.OFFLOADABLE
            and self._host_reserved + c.footprint > self._host_blocks
        ):
            return (
                f"insufficient host capacity: footprint {c.footprint} + reserved "
                f"{self._host_reserved} > host {self._host_blocks}"
            )
        return None

    def _reject(self, c: ClaimRecord, reason: str) -> None:
        if self._policy.denies_future_reuse():
            self._emit.emit("future_reuse_denied", claim_id=c.id, reason=reason)
        self._move(c, S.REJECTED, "claim_rejected", reason=reason)
        held = c.chain.label
        if held is None or not held.active:
            c.chain.label = c  # label the object's blocks with the rejected claim id

    def _accept(self, c: ClaimRecord) -> None:
        claim = c.claim
        mode = claim.protection_mode
        self._move(
            c, S.ACCEPTED, "claim_accepted",
            registration=claim.registration.value,
            protection_mode=mode.value,
            footprint_blocks=c.footprint,
            predicate=claim.predicate.model_dump(mode="json"),
            owner_scope=claim.owner_scope,
            expires_after_s=claim.expires_after_s,
        )
        c.active = True
        c.chain.label = c
        pinning = mode in self._policy.pinning
        if pinning:
            c.reserved = True
            self._reserved += c.footprint
        if mode is ProtectionMode.OFFLOADABLE:
            self._host_reserved += c.footprint
        blocks = c.chain.blocks
        c.missing = sum(1 for p in range(c.lo, c.hi) if p not in blocks)
        self._protect(c, pin=pinning, soft=mode is ProtectionMode.SOFT_PRIORITY)
        if c.missing == 0:
            self._materialize(c)
        if claim.expires_after_s is not None:
            heapq.heappush(
                self._expiries, (self.now + claim.expires_after_s, len(self._claims), c.id)
            )

    # ---------------------------------------------------------------------------- ends

    def release(self, claim_id: str, reason: str) -> bool:
        """The owner gives the claim up; False if it had already ended."""
        c = self._claims[claim_id]
        if not c.active:
            return False
        self._move(c, S.RELEASED, "claim_released", reason=reason)
        self.end(c)
        return True

    def expire_next(self, now: float) -> bool | None:
        """Pop the next expiry due by *now*, moving the clock to it: True if it ended a claim,
        False if the claim had already ended, ``None`` if nothing is due."""
        if not self._expiries or self._expiries[0][0] > now:
            return None
        at, _, claim_id = heapq.heappop(self._expiries)
        self.now = max(self.now, at)
        c = self._claims[claim_id]
        if not c.active:
            return False
        self._move(c, S.EXPIRED, "claim_expired", reason=f"expires_after_s elapsed at t={at:g}")
        self.end(c)
        return True

    def demote(self, claim_id: str, request_id: str) -> None:
        """Demote the claim for a conflicting request (if a policy has not ended it already)."""
        c = self._claims[claim_id]
        if not c.active:
            return
        self._move(
            c, S.DEMOTED, "claim_demoted",
            request_id=request_id,
            reason=f"capacity conflict with active request {request_id}",
        )
        self.end(c)

    def end(self, c: ClaimRecord) -> None:
        """The runtime no longer holds responsibility for *c* (ended or failed closed)."""
        c.active = False
        self._unprotect(c)
        if c.reserved:
            self._reserved -= c.footprint
            c.reserved = False
        if c.claim.protection_mode is ProtectionMode.OFFLOADABLE:
            self._host_reserved -= c.footprint
        c.offloaded = False

    # ------------------------------------------------------------------------ protection

    def _protect(self, c: ClaimRecord, *, pin: bool, soft: bool) -> None:
        c.pins = pin
        c.soft = soft
        if not (pin or soft):
            return
        pool = self._chains.pool
        for p, b in c.chain.blocks.items():
            if p >= c.footprint:
                continue
            if pin:
                if pool.refs[b] == 0:
                    pool.uncache(b)
                pool.pinned[b] = 1
                self.protected += 1
                c.pinned_count += 1
            elif b in pool.lru:
                del pool.lru[b]
                pool.lru_soft[b] = None
        if c.pinned_count:
            self._pinning[c.id] = c

    def _unprotect(self, c: ClaimRecord) -> None:
        pool = self._chains.pool
        blocks = c.chain.blocks
        if c.pins:
            for p in sorted(blocks, reverse=True):  # tail first, as requests release
                b = blocks[p]
                if p < c.footprint and pool.pinned[b]:
                    pool.pinned[b] = 0
                    self.protected -= 1
                    if pool.refs[b] == 0:
                        pool.cache(b, soft=False)
        elif c.soft:
            for p in sorted(blocks, reverse=True):
                b = blocks[p]
                if b in pool.lru_soft:
                    del pool.lru_soft[b]
                    pool.lru[b] = None
        c.pinned_count = 0
        c.pins = False
        c.soft = False
        self._pinning.pop(c.id, None)

    # ------------------------------------------------------------------- use by requests

    def wrote(self, c: ClaimRecord, block: int, position: int, pin: bool) -> None:
        """A request allocated *block* at *position* (inside the footprint) of *c*'s object."""
        if pin:
            self._chains.pool.pinned[block] = 1
            self.protected += 1
            c.pinned_count += 1
            self._pinning[c.id] = c
        if c.lo <= position < c.hi:
            c.missing -= 1

    def touch(self, c: ClaimRecord) -> None:
        """A request is using *c*'s object now (the least recently used claims block first)."""
        self._tick += 1
        c.last_use = self._tick

    def use(self, c: ClaimRecord, request_id: str, first_write: bool) -> None:
        """After an admission: the first write materializes the claim, later ones reuse it."""
        if first_write and c.life.state is S.ACCEPTED:
            if c.missing == 0:
                self._materialize(c, request_id)
        elif c.life.state in REUSABLE:
            self._move(
                c, S.REUSED, "claim_reused",
                request_id=request_id,
                generation=c.generation,
                holds=c.missing == 0,
            )

    def _materialize(self, c: ClaimRecord, request_id: str | None = None) -> None:
        result = self._evaluate(c)
        self._move(
            c, S.MATERIALIZED, "claim_materialized", request_id=request_id, tier=DEVICE_TIER,
            **result.model_dump(),
        )

    def _evaluate(self, c: ClaimRecord, extra: int | None = None) -> PredicateResult:
        present = [p for p in c.chain.blocks if p < c.footprint]
        if extra is not None:
            present.append(extra)
        return evaluate_predicate(c.claim.predicate, present)

    # ------------------------------------------------------------------------ host tier

    def offload(self, claim_id: str, request_id: str) -> None:
        """Move the claim's device blocks to the host tier (if it can go now)."""
        if not self.can_offload(claim_id):
            return
        c = self._claims[claim_id]
        c.generation += 1
        job = self._emit.job("store")
        chain = c.chain.blocks
        positions = sorted(p for p in chain if p < c.footprint)
        self._emit.stored(c.id, request_id, job, len(positions) * self._block_size, c.generation)
        self._move(
            c, S.OFFLOADED, "claim_offloaded",
            request_id=request_id,
            generation=c.generation,
            from_tier=DEVICE_TIER,
            to_tier=HOST_TIER,
            block_count=len(positions),
        )
        # The blocks moved to the host tier; nothing is lost, so no eviction is reported.
        pinned = self._chains.pool.pinned
        for p in positions:
            b = chain.pop(p)
            if pinned[b]:
                self.protected -= 1
            self._chains.free(b)
            if c.lo <= p < c.hi:
                c.missing += 1
        c.pinned_count = 0
        self._pinning.pop(c.id, None)
        c.offloaded = True

    def restore_required(self, c: ClaimRecord, request_id: str, tokens: int) -> None:
        """A request needs the offloaded claim back on the device."""
        self._move(
            c, S.RESTORE_REQUIRED, "claim_restore_required",
            request_id=request_id,
            generation=c.generation,
            from_tier=HOST_TIER,
            to_tier=DEVICE_TIER,
            tokens=tokens,
        )

    def restored(self, c: ClaimRecord, request_id: str) -> None:
        """The claim is back on the device."""
        c.offloaded = False
        self._move(
            c, S.RESTORED, "claim_restored", request_id=request_id, generation=c.generation,
            source="offload_tier",
        )

    def restore_failed(
        self, c: ClaimRecord, request_id: str, held: Sequence[int], written: Sequence[int]
    ) -> None:
        """The restore failed (injected): the claim fails closed and the request's blocks
        are abandoned — the loaded ones are invalid and dropped without being cached."""
        self._move(
            c, S.FAILED_CLOSED, "claim_restore_failed",
            request_id=request_id,
            generation=c.generation,
            reason="injected load failure",
            injected=True,
            outcome_type="refusal",
            outcome_claim_id=c.id,
        )
        pinned = self._chains.pool.pinned
        for b in written:
            if pinned[b]:
                pinned[b] = 0
                self.protected -= 1
                c.pinned_count -= 1
        self._chains.abandon(c.chain, held, written)
        self.end(c)

    # --------------------------------------------------------------------------- losses

    def evict_protected(self, claim_id: str, request_id: str | None) -> bool:
        """Evict the claim's last pinned, unreferenced block (broken test policies only)."""
        c = self._claims[claim_id]
        pool = self._chains.pool
        for p in sorted(c.chain.blocks, reverse=True):
            b = c.chain.blocks[p]
            if pool.pinned[b] and not pool.refs[b]:
                self.drop(b, request_id, "lru")
                return True
        return False

    def drop(self, block: int, request_id: str | None, reason: str) -> None:
        """Lose an unreferenced block that may be pinned or cached (faults, broken policies)."""
        pool = self._chains.pool
        was_pinned = bool(pool.pinned[block])
        if was_pinned:
            pool.pinned[block] = 0
            self.protected -= 1
            owner = self._chains.owner(block)
            c = owner.label if owner is not None else None
            if c is not None:
                c.pinned_count -= 1
                if c.pinned_count == 0:
                    self._pinning.pop(c.id, None)
        else:
            pool.uncache(block)
        hit = self._chains.unlink(block)
        if hit is not None:
            self.lost(block, *hit, request_id, reason, was_pinned)
        pool.put_free(block)

    def lost(
        self,
        block: int,
        chain: Chain[ClaimRecord],
        position: int,
        request_id: str | None,
        reason: str = "lru",
        protected: bool = False,
    ) -> None:
        """*block*, which backed *chain*'s *position*, lost its content: report it and what
        the loss means for the claim on the object (the harm rule)."""
        c = chain.label
        if c is not None and position >= c.footprint:
            c = None  # a block past the claim's footprint is no claimed block
        if self._emit.on:
            self._emit.block_evicted(
                c.id if c is not None else None, request_id, block, protected, reason, position
            )
        if c is not None:
            self._judge_loss(c, block, position, request_id, reason)

    def _judge_loss(
        self, c: ClaimRecord, block: int, p: int, request_id: str | None, reason: str
    ) -> None:
        before = c.missing == 0
        if c.lo <= p < c.hi and c.active:
            c.missing += 1
        kind = classify_loss(c.life.state, before, c.missing == 0)
        if kind is LossKind.HARM:
            self._move(
                c, S.HARMED, "claim_harmed",
                request_id=request_id,
                cause=f"{reason}: block {block} at position {p} lost",
                before=self._evaluate(c, extra=p).model_dump(),
                after=self._evaluate(c).model_dump(),
            )
            self.end(c)
        elif kind is LossKind.POST_RELEASE_LOSS:
            self._say(
                c, "claim_block_lost_after_release", request_id=request_id, block_id=block,
                position=p,
            )

    # ---------------------------------------------------------------------------- voice

    def _say(self, c: ClaimRecord, event: str, request_id: str | None = None,
             **fields: object) -> None:
        if self._emit.on:
            self._emit.claim(c.id, c.ident, event, request_id, **fields)

    def _move(self, c: ClaimRecord, state: ClaimState, event: str,
              request_id: str | None = None, **fields: object) -> None:
        """Announce *event*, then move the claim to *state* (an illegal move raises)."""
        if self._emit.on:
            self._emit.claim(c.id, c.ident, event, request_id, **fields)
        c.life.advance(state)
