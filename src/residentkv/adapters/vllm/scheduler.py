"""The scheduler role of the connector: claims in, placement, plans, and the one event stream.

It takes claims in from ``kv_transfer_params["resident_claim"]`` (a registration, or a reuse of
it) and reuse references from ``kv_transfer_params["resident_claim_ref"]``, accepts or rejects
them, owns the host-tier placement (:class:`~residentkv.adapters.vllm.host_tier.SlotAllocator`),
answers lookups, plans store and load jobs, and turns what the worker ranks report (their
:class:`~residentkv.adapters.vllm.messages.WorkerFact` records, aggregated by vLLM across
tensor-parallel ranks) and what vLLM's scheduler does into ordered events and claim outcomes.
It is the **only writer** of the engine's stream: worker facts are written here, in the order the
scheduler learns them, each with the worker's own time and a source naming its rank(s). A job
succeeded only if every rank succeeded; a failure on any rank is the job's failure.

Every hook vLLM calls runs under the operator's lock and ends by writing its events through to
the file (:meth:`~residentkv.adapters.vllm.control.Operator.end_step`).

The trace's ``request_finished`` is the client-visible finish. vLLM 0.32 finishes a request hit
by a failed load (``finish_requests`` -> ``request_finished``) *before* it hands that step's
connector output to ``update_connector_output``; both happen inside one scheduler step, before
the client sees the finish. A finish that still has open connector jobs is therefore held and
written after the step's worker facts have been turned into outcome events -- the ordering comes
from the scheduler side's own knowledge at vLLM's failure branch.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from pydantic import ValidationError
from vllm.logger import init_logger
from vllm.v1.request import RequestStatus

from residentkv.adapters.vllm.config import CLAIM_PARAM, CLAIM_REF_PARAM, ConnectorConfig
from residentkv.adapters.vllm.control import Operator
from residentkv.adapters.vllm.host_tier import SlotAllocator
from residentkv.adapters.vllm.messages import ResidentConnectorMetadata, ResidentWorkerMetadata
from residentkv.adapters.vllm.metrics import ResidentClaimStats
from residentkv.adapters.vllm.rules import (
    ClaimHit,
    ClaimRecord,
    Decision,
    Decisions,
    Finish,
    Hit,
    LoadFailure,
    LoadJob,
    LostHit,
    Outcome,
    Problem,
    Rejection,
    RequestState,
    Resolved,
    StoreJob,
    UnclaimedHit,
    UnclaimedKey,
    WorkerFact,
    acceptance_problem,
    decided_problem,
    held_claim_problem,
    loss_fields,
    resolve_ref,
    restorable_blocks,
    started_fields,
    stop_ending,
)
from residentkv.adapters.vllm.server import NO_OUTCOME_CHANNEL, lacks_outcome_channel
from residentkv.model.claim import ResidentClaim
from residentkv.model.predicate import evaluate_predicate
from residentkv.model.vocabulary import DEVICE_TIER, HOST_TIER, Arbiter, OutcomeType

if TYPE_CHECKING:
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks, KVCacheManager
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.outputs import KVConnectorOutput
    from vllm.v1.request import Request

__all__ = ["CLAIM_PARAM", "CLAIM_REF_PARAM", "SchedulerSide", "worker_source"]

logger = init_logger(__name__)

WORKER = "residentkv.vllm.worker"  # an adapter emitter, never vLLM itself

_SERVED = {RequestStatus.FINISHED_STOPPED, RequestStatus.FINISHED_LENGTH_CAPPED}

P = ParamSpec("P")
R = TypeVar("R")


def worker_source(ranks: list[int]) -> str:
    """The ``source`` of a worker fact: the emitter and the rank(s) it came from."""
    return f"{WORKER}/rank={','.join(str(r) for r in sorted(set(ranks)))}"


def _hook(fn: Callable[Concatenate[SchedulerSide, P], R]) -> Callable[
        Concatenate[SchedulerSide, P], R]:
    """Run a vLLM hook under the operator's lock; its events are on disk when it returns."""

    def wrapper(self: SchedulerSide, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self.op.lock:
            try:
                return fn(self, *args, **kwargs)
            finally:
                self.op.end_step()

    wrapper.__name__, wrapper.__doc__ = fn.__name__, fn.__doc__
    return wrapper


class SchedulerSide:
    """The scheduler role; see the module docstring."""

    def __init__(self, config: ConnectorConfig, op: Operator, *, block_size: int, policy: str,
                 bytes_per_block: int, num_slots: int, world_size: int,
                 model_names: set[str]) -> None:
        self.config = config
        self.op = op
        self.block_size = block_size
        self.policy = policy
        self.async_load = config.load_mode == "async"
        self.world_size = world_size
        #: bytes of one block across every rank (what one host-tier slot holds in total)
        self.block_bytes = bytes_per_block * world_size
        self.num_slots = num_slots
        self.model_names = model_names
        self.slots = SlotAllocator(num_slots)
        self.claims: dict[str, ClaimRecord] = {}
        self.reqs: dict[str, RequestState] = {}
        self.jobs: dict[int, StoreJob | LoadJob] = {}
        self._facts: dict[int, dict[int, WorkerFact]] = {}
        self._job_ids = itertools.count(1)
        self._planned_loads: list[LoadJob] = []
        self._request_objects: dict[str, Request] = {}
        self._unclaimed_jobs: dict[int, UnclaimedKey] = {}
        self.kv_cache_manager: KVCacheManager | None = None
        self.stats = ResidentClaimStats()
        self._gauged: int | None = None

    # ============================================================ intake

    @_hook
    def on_new_request(self, request: Request) -> None:
        """Record the request and take in its claim or claim reference, if it carries one."""
        rid = request.request_id
        state = RequestState(request_id=rid)
        self.reqs[rid] = state
        self._request_objects[rid] = request
        params = request.kv_transfer_params
        params = params if isinstance(params, dict) else {}
        raw, ref = params.get(CLAIM_PARAM), params.get(CLAIM_REF_PARAM)
        self.op.emit("request_started", request_id=rid, prompt_tokens=request.num_prompt_tokens,
                     **started_fields(ref if ref is not None else raw))
        carried = ref if ref is not None else raw
        if carried is not None and lacks_outcome_channel(rid, self.op.outcome_channel is not None):
            # Through the OpenAI server with no outcome middleware, a refusal would reach the
            # client as HTTP 500 and its retry would be served: fail closed, take no claim.
            self._reject(state, carried, Problem("no_outcome_channel", NO_OUTCOME_CHANNEL,
                                                 name_claim=False))
        elif raw is not None and ref is not None:
            # Which of the two would the client mean? Guessing could register a claim the
            # client only meant to reuse, so neither is taken.
            self._reject(state, raw, Problem("invalid", f"a request carries either {CLAIM_PARAM} "
                                             f"or {CLAIM_REF_PARAM}, not both", name_claim=False))
        elif raw is not None:
            self._intake(request, state, raw)
        elif ref is not None:
            self._intake_ref(state, ref)

    @property
    def decisions(self) -> Decisions:
        """Every claim id this engine's sink decided (the journal, across incarnations)."""
        return self.op.decisions

    def _reject(self, state: RequestState, raw: object, problem: Problem) -> None:
        sent = raw.get("claim_id") if isinstance(raw, dict) else None
        cid = sent if isinstance(sent, str) and sent and problem.name_claim else None
        if cid is not None and (cid in self.claims or self.decisions.get(cid) is not None):
            cid = None  # decided here already: naming it again would decide it twice
        elif cid is not None:
            self.decisions.record(cid, Decision(False, problem.reason))
        ident = {}
        if isinstance(raw, dict):
            for key in ("object_id", "request_token_map_id"):
                if isinstance(raw.get(key), str):
                    ident[key] = raw[key]
            pred = raw.get("predicate")
            if isinstance(pred, dict) and isinstance(pred.get("id"), str):
                ident["predicate_id"] = pred["id"]
        rec = self.op.emit("claim_rejected", claim_id=cid, request_id=state.request_id,
                           reason=problem.reason, **ident)
        self.stats.count("claims_rejected", problem.kind)
        state.rejected = Rejection(sent, problem.reason, rec["seq"])

    def _intake(self, request: Request, state: RequestState, raw: object) -> None:
        try:
            claim = ResidentClaim.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"]) or "claim"
            self._reject(state, raw, Problem(
                "invalid", f"invalid claim: {loc}: {first['msg']}"
                + (f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else "")))
            return
        known = self.claims.get(claim.claim_id)
        if known is not None:
            problem = held_claim_problem(known, claim)
            if problem is None:
                state.claim_id = claim.claim_id  # a reuse reference to an accepted claim
            else:
                self._reject(state, raw, problem)
            return
        past = self.decisions.get(claim.claim_id)
        if past is not None:
            # decided once, across incarnations: the decision or the loss, never a second
            # acceptance (and never a recompute reported as the claim held)
            self._reject(state, raw, decided_problem(claim.claim_id, past))
            return
        problem = acceptance_problem(
            claim, prompt_tokens=request.num_prompt_tokens,
            hashed_blocks=len(request.block_hashes), block_size=self.block_size,
            model_names=self.model_names, budgets=self.op.budgets,
            block_bytes=self.block_bytes, claims=self.claims)
        slots = None
        if problem is None:
            slots = self.slots.reserve_claim(claim.claim_id, claim.footprint_blocks)
            if slots is None:
                problem = Problem("host_tier_full",
                                  f"host tier full: needs {claim.footprint_blocks} block slots, "
                                  f"{self.slots.reclaimable_slots} of {self.num_slots} "
                                  "available")
        if problem is not None or slots is None:
            self._reject(state, raw, problem or Problem("host_tier_full", "host tier full"))
            return
        self._accept(request, state, claim, slots)

    def _intake_ref(self, state: RequestState, ref: object) -> None:
        """A reuse by reference (see :func:`~residentkv.adapters.vllm.rules.resolve_ref`)."""
        found = resolve_ref(ref, self.claims, self.decisions)
        if isinstance(found, Problem):
            self._reject(state, ref, found)
        else:
            state.claim_id = found

    def _accept(self, request: Request, state: RequestState, claim: ResidentClaim,
                slots: list[int]) -> None:
        identity = dict(zip(("object_id", "cache_identity", "request_token_map_id",
                             "predicate_id"), claim.identity, strict=True))
        deadline = None
        if claim.expires_after_s is not None:
            deadline = time.monotonic_ns() + int(claim.expires_after_s * 1e9)
        self.claims[claim.claim_id] = ClaimRecord(
            claim=claim, salt=request.cache_salt,
            hashes=tuple(request.block_hashes[: claim.footprint_blocks]), slots=slots,
            identity=identity, resident_request=request.request_id, deadline_ns=deadline)
        self.decisions.record(claim.claim_id, Decision(True))
        state.claim_id = claim.claim_id
        ev = self.op.emit("claim_accepted", claim_id=claim.claim_id, request_id=request.request_id,
                          registration=claim.registration.value,
                          protection_mode=claim.protection_mode.value,
                          footprint_blocks=claim.footprint_blocks,
                          predicate=claim.predicate.model_dump(mode="json"),
                          owner_scope=claim.owner_scope, expires_after_s=claim.expires_after_s,
                          **identity)
        self.stats.count("claims_accepted")
        state.last_outcome = Outcome("accepted", seq=ev["seq"])
        if deadline is not None:
            self.op.wake()  # the expiry clock runs even while the engine is idle

    # ============================================================ lookup / allocation

    def _unclaimed_key(self, request: Request, blocks: int) -> UnclaimedKey:
        return (request.cache_salt, tuple(request.block_hashes[:blocks]))

    def _find_hit(self, request: Request) -> ClaimHit | UnclaimedHit | None:
        state = self.reqs.get(request.request_id)
        if state is None:
            return None
        if state.claim_id is not None:
            rec = self.claims.get(state.claim_id)
            # Same owner (the claim reference is the owner's), same cache salt, same prefix.
            if rec is None or not rec.serves(request.cache_salt, request.block_hashes,
                                             request.num_prompt_tokens, self.block_size):
                return None
            return ClaimHit(rec.claim.claim_id, rec.claim.footprint_blocks)
        if state.rejected is not None:
            return None
        full = restorable_blocks(request.num_prompt_tokens, self.block_size)
        for n in range(min(full, len(request.block_hashes)), 0, -1):
            key = self._unclaimed_key(request, n)
            if self.slots.find_unclaimed(key) is not None:
                return UnclaimedHit(key, n)
        return None

    @_hook
    def get_num_new_matched_tokens(self, request: Request,
                                   num_computed_tokens: int) -> tuple[int | None, bool]:
        """Tokens the host tier can supply beyond the local prefix hit, and whether they are
        loaded asynchronously (``load_mode``)."""
        found = self._find_hit(request)
        if found is None:
            return 0, False
        hit = max(found.blocks * self.block_size - num_computed_tokens, 0)
        return hit, hit > 0 and self.async_load

    @_hook
    def update_state_after_alloc(self, request: Request, blocks: KVCacheBlocks,
                                 num_external_tokens: int) -> None:
        """vLLM accepted ``num_external_tokens`` from us: record the lookup and plan the load."""
        state = self.reqs.get(request.request_id)
        if state is None:
            return
        if num_external_tokens == 0:
            # vLLM calls again once an async load has landed, and after a reschedule; only the
            # first lookup of a request is a lookup.
            if not state.looked_up:
                state.looked_up = True
                if state.claim_id is not None or self.op.offload_unclaimed:
                    self.op.emit("kv_lookup", claim_id=state.claim_id,
                                 request_id=state.request_id, hit_tokens=0, async_load=False)
            return
        state.looked_up = True
        block_ids = list(blocks.get_block_ids()[0])
        found = self._find_hit(request)
        if found is None:
            # vLLM already counts these tokens as external; fail closed by failing the load, so
            # vLLM's own invalid-load path recomputes or fails the request.
            logger.error("ResidentClaimConnector: hit for %s vanished before allocation",
                         state.request_id)
            dst = block_ids[: -(-num_external_tokens // self.block_size)]
            self._plan_load(state, LoadJob(next(self._job_ids), state.request_id, None, None,
                                           dst, [], None, self.async_load, lost=True),
                            LostHit())
            return
        n = found.blocks
        first = (n * self.block_size - num_external_tokens) // self.block_size
        dst = block_ids[first:n]
        if isinstance(found, ClaimHit):
            ref = found.claim_id
            rec = self.claims[ref]
            rec.generation += 1
            self.op.emit("kv_lookup", claim_id=ref, request_id=state.request_id,
                         hit_tokens=num_external_tokens, async_load=self.async_load,
                         generation=rec.generation)
            self.op.emit("claim_restore_required", claim_id=ref, request_id=state.request_id,
                         generation=rec.generation, from_tier=HOST_TIER, to_tier=DEVICE_TIER,
                         tokens=num_external_tokens, **rec.identity)
            rec.cycle_open = True
            state.restore_required_ns = time.monotonic_ns()
            job = LoadJob(next(self._job_ids), state.request_id, ref, rec.claim.owner_scope, dst,
                          rec.slots[first:n], rec.generation, self.async_load,
                          verify=rec.digest is not None)
        else:
            entry = self.slots.find_unclaimed(found.key)
            assert entry is not None
            entry.pinned += 1
            self.op.emit("kv_lookup", request_id=state.request_id,
                         hit_tokens=num_external_tokens, async_load=self.async_load)
            job = LoadJob(next(self._job_ids), state.request_id, None, None, dst,
                          entry.slots[first:n], None, self.async_load,
                          verify=entry.digest is not None)
        # The injection decision is the operator's, taken here where the rules live, so every
        # worker rank fails (or corrupts) the same job.
        rule = self.op.take_injection(job.claim_id, job.owner_scope)
        job.inject = rule is not None and not rule.corrupts
        job.corrupt = rule is not None and rule.corrupts
        self._plan_load(state, job, found)

    def _plan_load(self, state: RequestState, job: LoadJob, hit: Hit) -> None:
        state.hit = hit
        state.open_jobs.add(job.job_id)
        self.jobs[job.job_id] = job
        self._planned_loads.append(job)

    @_hook
    def build_connector_meta(self, scheduler_output: SchedulerOutput) -> ResidentConnectorMetadata:
        """This step's loads (planned at allocation) and stores (claimed prefixes computed now)."""
        meta = ResidentConnectorMetadata(loads=self._planned_loads)
        self._planned_loads = []
        scheduled = scheduler_output.num_scheduled_tokens
        new_computed = {
            r.req_id: r.num_computed_tokens for r in scheduler_output.scheduled_new_reqs
        }
        cached = scheduler_output.scheduled_cached_reqs
        for i, rid in enumerate(cached.req_ids):
            new_computed[rid] = cached.num_computed_tokens[i]
        for rid, before in new_computed.items():
            state = self.reqs.get(rid)
            if state is None:
                continue
            if state.restored_gen is not None and not state.reused:
                state.reuse_dispatched = True  # computing on top of the restored prefix
            job = self._plan_store(state, before + scheduled.get(rid, 0))
            if job is not None:
                meta.stores.append(job)
        return meta

    def _plan_store(self, state: RequestState, computed_after: int) -> StoreJob | None:
        manager = self.kv_cache_manager
        assert manager is not None
        if state.claim_id is not None:
            rec = self.claims.get(state.claim_id)
            if (rec is None or rec.offloaded or rec.store_planned or rec.closed
                    or rec.resident_request != state.request_id):
                return None
            n = rec.claim.footprint_blocks
            if computed_after < n * self.block_size:
                return None
            block_ids = list(manager.get_block_ids(state.request_id)[0][:n])
            rec.store_planned = True
            job = StoreJob(next(self._job_ids), state.request_id, rec.claim.claim_id,
                           block_ids, list(rec.slots), rec.generation, rec.identity,
                           rec.claim.predicate, digest=self.op.verify_content)
        else:
            unclaimed = self._plan_unclaimed_store(state, computed_after)
            if unclaimed is None:
                return None
            job = unclaimed
        state.open_jobs.add(job.job_id)
        self.jobs[job.job_id] = job
        return job

    def _plan_unclaimed_store(self, state: RequestState, computed_after: int) -> StoreJob | None:
        if (not self.op.offload_unclaimed or state.rejected is not None or state.hit is not None
                or state.stored_unclaimed):
            return None
        req_obj = self._request_objects.get(state.request_id)
        manager = self.kv_cache_manager
        if req_obj is None or manager is None:
            return None
        n = restorable_blocks(req_obj.num_prompt_tokens, self.block_size)
        if n == 0 or computed_after < n * self.block_size:
            return None
        key = self._unclaimed_key(req_obj, n)
        state.stored_unclaimed = True
        if self.slots.has_unclaimed(key):
            return None
        slots = self.slots.place_unclaimed(key, n)
        if slots is None:
            return None
        block_ids = list(manager.get_block_ids(state.request_id)[0][:n])
        job = StoreJob(next(self._job_ids), state.request_id, None, block_ids, slots,
                       digest=self.op.verify_content)
        self._unclaimed_jobs[job.job_id] = key
        return job

    # ============================================================ outcomes

    @_hook
    def update_connector_output(self, connector_output: KVConnectorOutput) -> None:
        """Write the step's worker facts and turn them, and vLLM's invalid blocks, into
        ordered outcome events; then write finishes that were waiting for them."""
        meta = connector_output.kv_connector_worker_meta
        if isinstance(meta, ResidentWorkerMetadata):
            for fact in meta.facts:
                self._facts.setdefault(fact.job_id, {})[fact.rank] = fact
        invalid = set(connector_output.invalid_block_ids or ())
        touched: set[str] = set()
        for job_id in [j for j, f in self._facts.items() if len(f) >= self.world_size]:
            facts = [f for _, f in sorted(self._facts.pop(job_id).items())]
            job = self.jobs.pop(job_id, None)
            if job is None:
                continue
            res = Resolved.fold(facts)
            state = self.reqs.get(job.request_id)
            if state is not None:
                state.open_jobs.discard(job_id)
                touched.add(job.request_id)
            if isinstance(job, StoreJob):
                self._write_store(job, res)
                self._store_done(job, res, state)
            else:
                self._write_load(job, res)
                self._load_done(job, res, state, invalid)
        for state in self.reqs.values():
            if state.reuse_dispatched and not state.reused:
                self._emit_reused(state)
        for rid in list(touched) + [r for r, s in self.reqs.items() if s.pending_finish]:
            state = self.reqs.get(rid)
            if state is not None and state.pending_finish is not None and not state.open_jobs:
                finish, state.pending_finish = state.pending_finish, None
                self._write_finish(state, finish)

    def _write_store(self, job: StoreJob, res: Resolved) -> None:
        common: dict[str, Any] = {"claim_id": job.claim_id, "request_id": job.request_id,
                                  "source": worker_source(res.ranks)}
        if res.materialized is not None and job.identity is not None:
            surviving, leading, required, holds = res.materialized
            rec = self.claims.get(job.claim_id) if job.claim_id is not None else None
            if rec is not None:
                rec.materialized = res.materialized
            self.op.emit("claim_materialized", surviving=surviving, leading=leading,
                         required=required, holds=holds, tier=DEVICE_TIER,
                         ts_ns=res.started_ns, **job.identity, **common)
        tiers = {"from_tier": DEVICE_TIER, "to_tier": HOST_TIER, "generation": job.generation}
        self.op.emit("kv_store_started", job_id=job.job_id,
                     bytes=len(job.block_ids) * self.block_bytes, ts_ns=res.started_ns,
                     **tiers, **common)
        self.op.emit("kv_store_finished", job_id=job.job_id, bytes=res.nbytes,
                     success=res.success, ts_ns=res.finished_ns,
                     content_digest=res.digest if res.success else None, **tiers, **common)

    def _write_load(self, job: LoadJob, res: Resolved) -> None:
        common: dict[str, Any] = {"claim_id": job.claim_id, "request_id": job.request_id,
                                  "job_id": job.job_id, "generation": job.generation}
        self.op.emit("kv_load_started", bytes=len(job.block_ids) * self.block_bytes,
                     from_tier=HOST_TIER, to_tier=DEVICE_TIER, ts_ns=res.started_ns,
                     source=worker_source(res.ranks), **common)
        self.op.emit("kv_load_finished", bytes=res.nbytes, success=res.success,
                     injected=res.injected, ts_ns=res.finished_ns,
                     source=worker_source(res.ranks), **common)
        if not res.success:
            self.op.emit("kv_load_failed", invalid_block_ids=sorted(res.invalid),
                         injected=res.injected, ts_ns=res.finished_ns,
                         reason=res.reason.value if res.reason is not None else None,
                         source=worker_source(res.failed_ranks), **common)

    def _store_done(self, job: StoreJob, res: Resolved, state: RequestState | None) -> None:
        if job.claim_id is None:
            key = self._unclaimed_jobs.pop(job.job_id, None)
            if key is not None:
                if res.success:
                    self.slots.commit_unclaimed(key, res.digest)
                else:
                    self.slots.drop_unclaimed(key)
            return
        rec = self.claims.get(job.claim_id)
        if rec is None:
            return
        rec.store_planned = False
        if not res.success:
            return  # the claim stays materialized on the device only; no offload happened
        rec.offloaded = True
        rec.digest = res.digest
        ev = self.op.emit("claim_offloaded", claim_id=job.claim_id, request_id=job.request_id,
                          generation=rec.generation, from_tier=DEVICE_TIER, to_tier=HOST_TIER,
                          block_count=len(job.block_ids), **rec.identity)
        self.stats.count("claims_offloaded")
        if state is not None:
            state.last_outcome = Outcome("offloaded", seq=ev["seq"])

    def _load_done(self, job: LoadJob, res: Resolved, state: RequestState | None,
                   invalid: set[int]) -> None:
        hit = state.hit if state is not None else None
        if job.claim_id is None and isinstance(hit, UnclaimedHit):
            entry = self.slots.find_unclaimed(hit.key)
            if entry is not None:
                entry.pinned = max(entry.pinned - 1, 0)
        failed_blocks = sorted((invalid | res.invalid).intersection(job.block_ids))
        if res.success and not failed_blocks:
            self._restored(job, res, state)
            return
        if job.claim_id is None and isinstance(hit, UnclaimedHit):
            # A promise-free entry whose load failed is not offered again.
            self.slots.drop_unclaimed(hit.key)
        self._load_failed(job, res, state, failed_blocks)

    def _restored(self, job: LoadJob, res: Resolved, state: RequestState | None) -> None:
        rec = self.claims.get(job.claim_id) if job.claim_id is not None else None
        if rec is None or state is None:
            return
        # Verified only when the worker ranks checked the bytes against the store's digest:
        # a store without a digest (verification off) restores unverified, and says so.
        ev = self.op.emit("claim_restored", claim_id=job.claim_id, request_id=job.request_id,
                          generation=job.generation, source="offload_tier",
                          content_verified=job.verify and res.verified, **rec.identity)
        self.stats.count("claims_restored")
        if state.restore_required_ns is not None:
            self.stats.latency((time.monotonic_ns() - state.restore_required_ns) / 1e9)
        rec.cycle_open = False
        state.restored_gen = job.generation
        state.last_outcome = Outcome("restored", seq=ev["seq"])
        if not job.async_load:
            # A sync load fed this very step's forward: the prefix was reused already.
            self._emit_reused(state)

    def _load_failed(self, job: LoadJob, res: Resolved, state: RequestState | None,
                     failed_blocks: list[int]) -> None:
        # What vLLM did about it is visible here: a request it failed is already finished
        # (held finish, FINISHED_ERROR); one it rescheduled is still running.
        finished = state is not None and state.pending_finish is not None
        finish_status = (state.pending_finish.status
                         if state is not None and state.pending_finish is not None else None)
        policy = "fail" if finished else "recompute"
        if policy != self.policy:
            logger.warning("ResidentClaimConnector: observed %s behaviour under policy %s",
                           policy, self.policy)
        self.op.emit("scheduler_load_failure", claim_id=job.claim_id, request_id=job.request_id,
                     policy=policy, invalid_block_count=len(failed_blocks),
                     failed_tokens=len(failed_blocks) * self.block_size,
                     finish_status=finish_status)
        rec = self.claims.get(job.claim_id) if job.claim_id is not None else None
        if rec is None or state is None or job.lost:
            return
        if res.reason is LoadFailure.DIGEST_MISMATCH:
            reason = "restored content does not match its stored digest"
        else:
            reason = "injected load failure" if res.injected else "host-tier load failed"
        self._close(rec, reason)
        if finished:
            self.op.emit("claim_restore_failed", claim_id=job.claim_id, request_id=job.request_id,
                         generation=job.generation, reason=reason, injected=res.injected,
                         outcome_type=OutcomeType.REFUSAL.value, outcome_claim_id=job.claim_id,
                         **rec.identity)
            ev = self.op.emit("active_request_refused", claim_id=job.claim_id,
                              request_id=job.request_id, outcome_claim_id=job.claim_id,
                              blocking_claim_ids=[job.claim_id],
                              feasibility="restore_failed_request_failed",
                              arbiter=Arbiter.SCHEDULER_BOUNDARY)
            self.stats.count("claims_refused")
            state.last_outcome = Outcome("refused", reason, ev["seq"])
        else:
            # Served by recompute: the promise was not kept even though the client gets tokens.
            ev = self.op.emit("claim_restore_failed", claim_id=job.claim_id,
                              request_id=job.request_id, generation=job.generation,
                              reason=reason + "; request rescheduled for recompute",
                              injected=res.injected, outcome_type=OutcomeType.HARM.value,
                              outcome_claim_id=job.claim_id, **rec.identity)
            state.fallback = True
            state.last_outcome = Outcome("fallback_recompute", reason, ev["seq"])

    def _emit_reused(self, state: RequestState) -> None:
        if state.claim_id is None or state.restored_gen is None or state.reused:
            return
        rec = self.claims.get(state.claim_id)
        if rec is None:
            return
        holds = evaluate_predicate(rec.claim.predicate, range(rec.claim.footprint_blocks)).holds
        ev = self.op.emit("claim_reused", claim_id=state.claim_id, request_id=state.request_id,
                          generation=state.restored_gen, holds=holds, **rec.identity)
        state.reused = True
        state.last_outcome = Outcome("restored", seq=ev["seq"])

    def _close(self, rec: ClaimRecord, reason: str) -> None:
        # A failed-closed claim makes no further promise, so its host copy is let go.
        rec.closed = True
        rec.offloaded = False
        rec.cycle_open = False
        self.slots.release_claim(rec.claim.claim_id)
        self.decisions.record(rec.claim.claim_id, Decision(True, f"failed closed ({reason})"))

    # ============================================================ endings

    def _busy(self, claim_id: str) -> bool:
        """Whether a running request carries the claim (its restore cycle, reuse or store
        may still name it: an ending now would come before them)."""
        return any(s.claim_id == claim_id for s in self.reqs.values())

    def _end(self, rec: ClaimRecord, event: str, reason: str) -> None:
        """Write the claim's ending, then let its host slots go (the KV leaves after it)."""
        cid = rec.claim.claim_id
        self.claims.pop(cid, None)
        if not rec.closed:
            self.op.emit(event, claim_id=cid, reason=reason, **rec.identity)
            word = "released" if event == "claim_released" else "expired"
            self.stats.count(f"claims_{word}")
            self.decisions.record(cid, Decision(True, f"{word} ({reason})"))
        self.slots.release_claim(cid)

    def _end_when_idle(self, rec: ClaimRecord, event: str, reason: str) -> None:
        if self._busy(rec.claim.claim_id):
            rec.ending = rec.ending or (event, reason)  # written when its requests finish
        else:
            self._end(rec, event, reason)

    def release_claim(self, claim_id: str, reason: str) -> bool:
        """End an accepted claim on the operator's behalf (``claim_released``), freeing its
        host slots -- once no running request carries it. Returns whether the claim was live.
        Caller holds the operator's lock."""
        rec = self.claims.get(claim_id)
        if rec is None:
            return False
        live = not rec.closed and rec.ending is None
        self._end_when_idle(rec, "claim_released", reason)
        return live

    def expire_due(self, now_ns: int) -> int | None:
        """Expire every claim whose duration has passed (``claim_expired``, then its slots
        are freed; after its running requests finish, if any); the next deadline, if any.
        Caller holds the operator's lock."""
        nxt = None
        for rec in list(self.claims.values()):
            due = rec.deadline_ns
            if due is None or rec.closed or rec.ending is not None:
                continue
            if due <= now_ns:
                self._end_when_idle(rec, "claim_expired",
                                    f"expires_after_s={rec.claim.expires_after_s:g} elapsed")
            else:
                nxt = due if nxt is None else min(nxt, due)
        return nxt

    def _settle(self, claim_id: str | None) -> None:
        """A request carrying *claim_id* finished: write an ending that waited for it."""
        rec = self.claims.get(claim_id) if claim_id is not None else None
        if rec is not None and rec.ending is not None and not self._busy(claim_id or ""):
            self._end(rec, *rec.ending)

    def close_stream(self, reason: str, *, lost: bool) -> None:
        """The stream closes (*lost*: the engine stops, its host tier with it): requests still
        running finish here, then every live claim ends -- harm when it lost KV that
        materialized, else a release -- and nothing is held any more. Caller holds the
        operator's lock."""
        for state in list(self.reqs.values()):
            if state.claim_id is not None and state.rejected is None:
                state.last_outcome = Outcome("engine_stopped", f"engine stopped ({reason})")
            state.open_jobs.clear()
            self._write_finish(state, Finish(reason, False, reason))
        for rec in list(self.claims.values()):
            cid = rec.claim.claim_id
            if rec.closed:
                self.claims.pop(cid, None)
                continue
            event = stop_ending(held_materialized=rec.held_materialized,
                                cycle_open=rec.cycle_open, lost=lost)
            if event == "claim_harmed":
                self.claims.pop(cid, None)
                self.op.emit(event, claim_id=cid, cause=reason,
                             **loss_fields(rec.materialized, rec.claim.footprint_blocks),
                             **rec.identity)
                self.stats.count("claims_harmed")
                self.decisions.record(cid, Decision(True, f"harmed ({reason})"))
                self.slots.release_claim(cid)
            else:
                self._end(rec, event, reason if not lost else
                          f"{reason}: the claim was never materialized")
        self.jobs.clear()
        self._planned_loads.clear()

    # ============================================================ finishes

    @_hook
    def request_finished(self, request: Request,
                         block_ids: list[int]) -> tuple[bool, dict[str, Any] | None]:
        """vLLM finished the request: write its finish now, or after this step's connector
        output if that output still has to be turned into outcome events."""
        state = self.reqs.get(request.request_id)
        if state is None:
            return False, None
        reason = request.get_finished_reason()
        reason_s = str(reason) if reason is not None else None
        if state.open_jobs:
            state.pending_finish = Finish(request.status.name, request.status in _SERVED,
                                          reason_s)
            # vLLM 0.32 drops kv_transfer_params of FINISHED_ERROR outputs anyway; the final
            # outcome is in the trace, in the operator's record and in the server middleware.
            return False, self._params(state)
        return False, self._write_finish(
            state, Finish(request.status.name, request.status in _SERVED, reason_s))

    def _params(self, state: RequestState) -> dict[str, Any] | None:
        params = state.params()
        return None if params is None else {CLAIM_PARAM: params}

    def live_outcome(self, match: Callable[[str], bool]) -> dict[str, Any] | None:
        """The current claim outcome of the last running request whose id *match* accepts."""
        found = [s for r, s in self.reqs.items() if match(r)]
        params = self._params(found[-1]) if found else None
        return params[CLAIM_PARAM] if params is not None else None

    def _write_finish(self, state: RequestState, finish: Finish) -> dict[str, Any] | None:
        if finish.served and state.reuse_dispatched:
            self._emit_reused(state)
        rec = self.claims.get(state.claim_id) if state.claim_id is not None else None
        if state.fallback and finish.served and rec is not None:
            self.op.emit("claim_restored", claim_id=state.claim_id, request_id=state.request_id,
                         generation=rec.generation, source="fallback_recompute", **rec.identity)
            self.stats.count("claims_fallback_recompute")
        if finish.served:
            trace_status = "served"
        elif state.last_outcome.kind == "refused":
            trace_status = "refused"
        else:
            trace_status = "error"
        self.op.emit("request_finished", request_id=state.request_id, status=trace_status,
                     finish_reason=finish.reason)
        params = self._params(state)
        if params is not None:
            self.op.record_outcome(state.request_id, params[CLAIM_PARAM])
        self.reqs.pop(state.request_id, None)
        self._request_objects.pop(state.request_id, None)
        self._settle(state.claim_id)
        return params

    # ============================================================ metrics

    @_hook
    def take_stats(self) -> ResidentClaimStats | None:
        """This interval's claim metrics (None when nothing changed)."""
        used = (self.num_slots - self.slots.free_slots) * self.block_bytes
        if used != self._gauged:
            self.stats.gauge("host_tier_used_bytes", used)
            self.stats.gauge("host_tier_capacity_bytes", self.num_slots * self.block_bytes)
            self._gauged = used
        if self.stats.is_empty():
            return None
        stats, self.stats = self.stats, ResidentClaimStats()
        return stats
