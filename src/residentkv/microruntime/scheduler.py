"""Request scheduling: admit, defer or refuse active requests, run them and finish them.

A request needs the first ``blocks`` positions of an object's chain. Present positions are
prefix-cache hits; missing ones are allocated (free blocks first, then LRU eviction). When the
request fits only if protected claims give up blocks, the :class:`~.policies.Policy` decides:
refuse (attributed to the blocking claims), defer, demote or offload them. Request events are
emitted here; claims are the :class:`~.ledger.ClaimLedger`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from functools import partial

from residentkv.microruntime.chains import Chain, Chains
from residentkv.microruntime.emitter import Emitter
from residentkv.microruntime.ledger import ClaimLedger, ClaimRecord
from residentkv.microruntime.policies import Conflict, Decision, Policy, RuntimeView
from residentkv.model.lifecycle import ClaimState
from residentkv.model.vocabulary import Arbiter

FEASIBILITY_CONFLICT = "infeasible_preserve_resident_and_active"
FEASIBILITY_TOO_BIG = "infeasible_exceeds_pool"
FEASIBILITY_UNRESOLVED = "unresolved_at_end_of_run"
FEASIBILITY_RESTORE = "restore_failed"


class RequestState(StrEnum):
    """Where an active request is; the last three are terminal."""

    DEFERRED = "deferred"
    RUNNING = "running"
    SERVED = "served"
    REFUSED = "refused"


@dataclass(slots=True, eq=False)
class Request:
    """One active request and the blocks it holds while running."""

    id: str
    chain: Chain[ClaimRecord]
    blocks: int
    hold: bool
    state: RequestState = RequestState.DEFERRED
    deferred: bool = False
    held: list[int] = field(default_factory=list)
    written: list[int] = field(default_factory=list)
    last_blocking: tuple[str, ...] = ()


class Scheduler:
    """Active requests over the shared pool.

    :param chains: the pool and prefix chains.
    :param ledger: the claims that protect blocks and are told of every use and loss.
    :param policy: resolves capacity conflicts; decides whether writes are cached.
    :param emitter: where request and load events go.
    :param view: what the policy is shown while it resolves a conflict.
    :param block_size: tokens per block.
    :param fail_loads_of: claim ids whose restores fail (controlled, ``injected``).
    """

    def __init__(
        self,
        chains: Chains[ClaimRecord],
        ledger: ClaimLedger,
        policy: Policy,
        emitter: Emitter,
        view: RuntimeView,
        *,
        block_size: int,
        fail_loads_of: frozenset[str],
    ) -> None:
        self._chains = chains
        self._ledger = ledger
        self._policy = policy
        self._emit = emitter
        self._view = view
        self._block_size = block_size
        self._fail_loads_of = fail_loads_of
        self._requests: dict[str, Request] = {}
        self._running: dict[str, Request] = {}
        self._deferred: dict[str, Request] = {}
        self._retrying = False
        self._retry_again = False

    # -------------------------------------------------------------------------- public

    def start(
        self, request_id: str, object_id: str, blocks: int, hold: bool, owner_scope: str | None
    ) -> RequestState:
        """Start a request for *blocks* blocks of *object_id*'s chain and schedule it."""
        if request_id in self._requests:
            raise ValueError(f"request id {request_id!r} used twice")
        if blocks <= 0:
            raise ValueError("a request needs at least one block")
        req = Request(request_id, self._chains.chain(object_id), blocks, hold)
        self._requests[request_id] = req
        if self._emit.on:
            self._emit.request_started(request_id, blocks * self._block_size, owner_scope)
        self._schedule(req, depth=0)
        return req.state

    def finish(self, request_id: str) -> None:
        """Finish the request if it is running."""
        req = self._running.get(request_id)
        if req is not None:
            self._finish(req)

    def state(self, request_id: str) -> RequestState:
        """The request's state (KeyError if never started)."""
        return self._requests[request_id].state

    @property
    def waiting(self) -> bool:
        """Whether any request is deferred."""
        return bool(self._deferred)

    def finish_running(self) -> bool:
        """Finish every running request; True if requests are running again afterwards
        (finishing admitted deferred ones)."""
        for req in list(self._running.values()):
            self._finish(req)
        return bool(self._running)

    def refuse_waiting(self) -> None:
        """Refuse every deferred request: the run ends without resolving them."""
        for req in list(self._deferred.values()):
            named = self._ledger.nameable(req.last_blocking, req.chain.label)
            self._refuse(req, FEASIBILITY_UNRESOLVED, named, None, Arbiter.ADMISSION)

    def retry_deferred(self) -> None:
        """Schedule the deferred requests again (blocks or claims were freed)."""
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

    # ---------------------------------------------------------------------- scheduling

    def _schedule(self, req: Request, depth: int) -> None:
        c = req.chain.label  # the claim on the object, if any
        restoring = c is not None and c.offloaded and c.active
        n = max(req.blocks, c.footprint) if restoring and c is not None else req.blocks
        pool = self._chains.pool
        missing, hit_pinned, hit_evictable = self._chains.census(req.chain, n)
        if missing <= pool.available - hit_evictable:
            self._admit(req, n, c, restoring)
            return
        capacity = pool.capacity
        if n > capacity:
            self._refuse(req, FEASIBILITY_TOO_BIG, (), None, Arbiter.ADMISSION, n - capacity)
            return
        protected_other = self._ledger.protected - hit_pinned
        if n <= capacity - protected_other:
            self._defer(req, "waiting for running requests to free blocks", ())
            return
        self._resolve(req, n, n - (capacity - protected_other), c, depth)

    def _resolve(
        self, req: Request, n: int, shortfall: int, own: ClaimRecord | None, depth: int
    ) -> None:
        """The request fits only if protected claims give up blocks: ask the policy."""
        blocking = self._ledger.blocking(shortfall, own)
        req.last_blocking = blocking
        decision = self._policy.on_conflict(self._view, Conflict(req.id, n, shortfall, blocking))
        if depth == 0 and decision is Decision.DEMOTE:
            for cid in blocking:
                self._ledger.demote(cid, req.id)
            self._schedule(req, depth + 1)
        elif depth == 0 and decision is Decision.OFFLOAD:
            for cid in blocking:
                self._ledger.offload(cid, req.id)
            self._schedule(req, depth + 1)
        elif decision is Decision.DEFER:
            self._defer(req, "protected resident claims hold the blocks it needs",
                        self._ledger.nameable(blocking, own))
        else:
            named = self._ledger.nameable(blocking, own)
            outcome = named[0] if len(named) == 1 else None
            self._refuse(req, FEASIBILITY_CONFLICT, named, outcome, Arbiter.ADMISSION, shortfall)

    def _admit(self, req: Request, n: int, c: ClaimRecord | None, restoring: bool) -> None:
        live = c if c is not None and c.active else None
        first_write = live is not None and live.life.state is ClaimState.ACCEPTED
        self._deferred.pop(req.id, None)
        if self._emit.on:
            self._announce(req, n, c is not None)
        if restoring and c is not None:
            self._restore_required(c, req)
        # Hold positions 0..n-1 (hits, then allocations whose victims' loss the ledger
        # judges); a live claim hears of its new blocks.
        if live is None:
            req.held, req.written = self._chains.hold(req.chain, n, req.id, self._ledger.lost)
        else:
            wrote = partial(self._ledger.wrote, live, pin=live.pins)
            req.held, req.written = self._chains.hold(
                req.chain, n, req.id, self._ledger.lost, wrote, live.footprint
            )
        req.state = RequestState.RUNNING
        self._running[req.id] = req
        # Re-read: an eviction during allocation may have ended the claim (a soft claim harmed).
        if c is not None and c.active:
            self._ledger.touch(c)
            if restoring and not self._load(c, req):
                return
            self._ledger.use(c, req.id, first_write)
        if not req.hold:
            self._finish(req)

    def _announce(self, req: Request, n: int, claimed: bool) -> None:
        """The admission's events: admitted, and whether its writes will be cached."""
        self._emit.admitted(req.id, n)
        if not self._policy.admits_writes(claimed):
            self._emit.emit(
                "future_reuse_denied",
                request_id=req.id,
                reason=f"policy {self._policy.name}: this request's KV is not admitted "
                "to the prefix cache",
            )

    def _restore_required(self, c: ClaimRecord, req: Request) -> None:
        """The object is on the host tier: the lookup finds it there; the claim must restore."""
        tokens = c.footprint * self._block_size
        self._emit.lookup(c.id, req.id, tokens, c.generation)
        self._ledger.restore_required(c, req.id, tokens)

    def _load(self, c: ClaimRecord, req: Request) -> bool:
        """Copy the claim back from the host tier; False if the (injected) load failed."""
        job = self._emit.job("load")
        nbytes = c.footprint * self._block_size
        ids = {"claim_id": c.id, "request_id": req.id, "job_id": job,
               "generation": c.generation}
        self._emit.load_started(ids, nbytes)
        if c.id not in self._fail_loads_of:
            self._emit.load_succeeded(ids, nbytes)
            self._ledger.restored(c, req.id)
            return True
        blocks = c.chain.blocks
        invalid = sorted(blocks[p] for p in range(c.footprint) if p in blocks)
        self._emit.load_failed(ids, nbytes, invalid, self._block_size)
        self._running.pop(req.id, None)
        self._ledger.restore_failed(c, req.id, req.held, req.written)
        req.held = []
        self._refuse(req, FEASIBILITY_RESTORE, (c.id,), c.id, Arbiter.SCHEDULER_BOUNDARY)
        return False

    def _finish(self, req: Request) -> None:
        self._running.pop(req.id, None)
        c = req.chain.label  # the claim on the object, if any
        soft = c is not None and c.active and c.soft
        footprint = c.footprint if c is not None else 0
        drop = None if self._policy.admits_writes(c is not None) else set(req.written)
        self._chains.release(req.chain, req.held, drop, soft, footprint)
        req.held = []
        req.state = RequestState.SERVED
        if self._emit.on:
            self._emit.served(req.id)
        self.retry_deferred()

    def _defer(self, req: Request, reason: str, blocking: tuple[str, ...]) -> None:
        req.state = RequestState.DEFERRED
        self._deferred[req.id] = req
        if not req.deferred:
            req.deferred = True
            self._emit.deferred(req.id, reason, blocking)

    def _refuse(
        self,
        req: Request,
        feasibility: str,
        blocking: tuple[str, ...],
        outcome: str | None,
        arbiter: Arbiter,
        shortfall: int | None = None,
    ) -> None:
        self._deferred.pop(req.id, None)
        req.state = RequestState.REFUSED
        self._emit.refused(req.id, outcome, blocking, feasibility, arbiter, shortfall)
