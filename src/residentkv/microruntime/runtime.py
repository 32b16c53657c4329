"""MicroRuntime: a deterministic paged-KV runtime with prefix caching and resident claims.

One finite :class:`~residentkv.microruntime.pool.BlockPool` is shared by cached prefixes (ordered
block chains, one per object), resident claims and active requests. A
:class:`~residentkv.microruntime.policies.Policy` decides which claims can be accepted and what
happens on a capacity conflict. Every decision the runtime takes is emitted as a
``residentkv.event/v1`` event (``source: microruntime``) through the one
:class:`~residentkv.trace.writer.EventWriter`, so trace gates and litmus checks read simulated
runs exactly as they read real ones.

:class:`MicroRuntime` is the public face of four rooms, each with one job:

* :mod:`~.chains` — the block pool and the prefix chains its blocks back;
* :mod:`~.ledger` — claims: admission, protection, ends and the harm rule
  (:func:`residentkv.model.lifecycle.classify_loss`), claim states moving through
  :class:`~residentkv.model.lifecycle.ClaimLifecycle`, which refuses illegal transitions: the
  simulator cannot emit a lifecycle the contract forbids;
* :mod:`~.scheduler` — active requests: admit, defer, refuse, run, finish;
* :mod:`~.emitter` — every event, formatted only when there is a writer.

Without a writer nothing is formatted or validated, which is what the benchmark measures.
"""

from __future__ import annotations

from residentkv.microruntime.chains import Chains
from residentkv.microruntime.emitter import Emitter
from residentkv.microruntime.ledger import ClaimLedger, ClaimRecord
from residentkv.microruntime.policies import Policy, make_policy
from residentkv.microruntime.pool import BlockPool
from residentkv.microruntime.scheduler import RequestState, Scheduler
from residentkv.model.claim import ResidentClaim
from residentkv.model.lifecycle import ClaimState
from residentkv.trace.writer import EventWriter

__all__ = ["MicroRuntime", "RequestState"]


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
        self.policy = make_policy(policy) if isinstance(policy, str) else policy
        self.block_size = block_size
        self.host_blocks = usable_blocks if host_blocks is None else host_blocks
        self.fail_loads_of = frozenset(fail_loads_of)
        self._emit = Emitter(writer)
        self._chains: Chains[ClaimRecord] = Chains(usable_blocks)
        self._ledger = ClaimLedger(self._chains, self.policy, self._emit,
                                   block_size=block_size, host_blocks=self.host_blocks)
        self._scheduler = Scheduler(self._chains, self._ledger, self.policy, self._emit, self,
                                    block_size=block_size, fail_loads_of=self.fail_loads_of)

    @property
    def pool(self) -> BlockPool:
        """The device block pool."""
        return self._chains.pool

    @property
    def now(self) -> float:
        """The simulated clock."""
        return self._ledger.now

    @property
    def block_ops(self) -> int:
        """Block operations performed (hits, allocations, evictions, releases) — for the bench."""
        return self._chains.ops

    # ------------------------------------------------------------------ public API: claims

    def submit_claim(self, claim: ResidentClaim) -> bool:
        """Submit *claim*; accept it only if the policy can honour it and capacity allows.

        The admission decision is explicit: a claim that could not be kept is rejected here,
        never accepted and then lost.
        """
        return self._ledger.submit(claim)

    def release_claim(self, claim_id: str, reason: str = "released by owner") -> None:
        """The owner gives the claim up; later loss of its blocks is post-release loss."""
        if self._ledger.release(claim_id, reason):
            self._scheduler.retry_deferred()

    def can_offload(self, claim_id: str) -> bool:
        """Whether the claim can move to the host tier now (materialized, nothing referenced)."""
        return self._ledger.can_offload(claim_id)

    def check(self) -> None:
        """Raise :class:`InternalError` unless every block is in exactly one place and every
        non-free block backs exactly one chain position (the pool never over-allocates)."""
        self._chains.check()
        self._ledger.check()

    def claim_state(self, claim_id: str) -> ClaimState | None:
        """The claim's lifecycle state."""
        return self._ledger.get(claim_id).life.state

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
        return self._scheduler.start(request_id, object_id, blocks, hold, owner_scope)

    def finish(self, request_id: str) -> None:
        """Finish a running request: its blocks become cached (or freed under no-admit)."""
        self._scheduler.finish(request_id)

    def request_state(self, request_id: str) -> RequestState:
        """The request's state."""
        return self._scheduler.state(request_id)

    def advance(self, now: float) -> None:
        """Move the simulated clock to *now*, expiring claims whose time has come."""
        while (ended := self._ledger.expire_next(now)) is not None:
            if ended:
                self._scheduler.retry_deferred()
        self._ledger.now = max(self._ledger.now, now)

    def close(self) -> None:
        """Run to quiescence: finish running requests, let time pass while requests wait for
        an expiry, and refuse whatever can still not be served (every request ends)."""
        while True:
            # Finishing may admit deferred requests, which then run: loop until quiet.
            if self._scheduler.finish_running():
                continue
            at = self._ledger.next_expiry()
            if self._scheduler.waiting and at is not None:
                self.advance(at)
                continue
            break
        self._scheduler.refuse_waiting()
        self._emit.flush()

    # ------------------------------------------------------------------ public API: faults

    def inject_block_loss(
        self, object_id: str, position: int, reason: str = "injected_fault"
    ) -> bool:
        """Lose one unreferenced device block (a fault no policy can prevent).

        A stimulus, not an outcome: the runtime still applies the harm rule and reports what
        the loss means for any claim on the object. Returns False if there was no such block.
        """
        chain = self._chains.find(object_id)
        b = chain.blocks.get(position) if chain is not None else None
        if b is None or self.pool.refs[b]:
            return False
        self._ledger.drop(b, None, reason)
        return True

    def evict_protected_block(self, claim_id: str, request_id: str | None) -> bool:
        """Evict the last pinned block of a claim. Exists so tests can build deliberately
        broken policies; no shipped policy calls it."""
        return self._ledger.evict_protected(claim_id, request_id)
