"""ResidentClaimConnector: ResidentClaims carried through real offload/load in unpatched vLLM.

One class, two roles (vLLM constructs it once per role):

- **scheduler side** -- takes claims in from ``kv_transfer_params["resident_claim"]``, validates
  and accepts or rejects them, owns the host-tier placement (:class:`SlotAllocator`), answers
  lookups, plans store/load jobs, and turns what the worker and vLLM's scheduler report into
  claim lifecycle events and claim-scoped outcomes;
- **worker side** -- copies the planned blocks between vLLM's paged KV cache and the host tier
  (:class:`HostPool`): stores after the forward that computed them, loads either through vLLM's
  asynchronous-load protocol (the request waits in ``WAITING_FOR_REMOTE_KVS``, completion is
  reported by ``get_finished``; default) or synchronously before the forward that reads them.
  It applies the operator's failure injection and reports each job's result and the blocks
  whose load failed (``get_block_ids_with_load_errors``).

Every event comes from something vLLM actually did: a copy that ran, a hit vLLM accepted in
``update_state_after_alloc``, a finish vLLM announced in ``request_finished``, the invalid blocks
vLLM handed back in ``update_connector_output``. Nothing is synthesized.

The trace's ``request_finished`` is the client-visible finish. vLLM 0.32 finishes a request hit
by a failed load (``finish_requests`` -> ``request_finished``) *before* it hands that step's
connector output to ``update_connector_output``; both happen inside one scheduler step, before
the client sees the finish. So a finish that still has unresolved connector work in this step is
held and written after the step's connector output has been turned into outcome events.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
    KVConnectorRole,
    KVConnectorWorkerMetadata,
)
from vllm.logger import init_logger
from vllm.v1.request import RequestStatus

from residentkv.adapters.vllm.config import ConnectorConfigError, parse_connector_config
from residentkv.adapters.vllm.control import Operator, install
from residentkv.adapters.vllm.host_tier import HostPool, SlotAllocator
from residentkv.model.claim import ProtectionMode, Registration, ResidentClaim
from residentkv.model.predicate import evaluate_predicate

if TYPE_CHECKING:
    import torch
    from vllm.config import VllmConfig
    from vllm.forward_context import ForwardContext
    from vllm.v1.attention.backend import AttentionMetadata
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.outputs import KVConnectorOutput
    from vllm.v1.request import Request

__all__ = ["ResidentClaimConnector"]

logger = init_logger(__name__)

DEVICE_TIER = "device"
HOST_TIER = "host"
WORKER = "residentkv.vllm.worker"  # an adapter emitter, never vLLM itself
CLAIM_PARAM = "resident_claim"

_SERVED = {RequestStatus.FINISHED_STOPPED, RequestStatus.FINISHED_LENGTH_CAPPED}


# ---------------------------------------------------------------- scheduler <-> worker messages


@dataclass
class StoreJob:
    """Copy ``block_ids`` (device) into ``slots`` (host)."""

    job_id: int
    request_id: str
    claim_id: str | None
    block_ids: list[int]
    slots: list[int]
    generation: int | None = None
    identity: dict[str, str] | None = None
    predicate: Any = None  # PredicateSpec of the claim, for the materialization check


@dataclass
class LoadJob:
    """Copy ``slots`` (host) into ``block_ids`` (device) for a request about to run."""

    job_id: int
    request_id: str
    claim_id: str | None
    owner_scope: str | None
    block_ids: list[int]
    slots: list[int]
    generation: int | None = None
    async_load: bool = False
    lost: bool = False  # the planned source vanished: the load must fail


@dataclass
class ResidentConnectorMetadata(KVConnectorMetadata):
    """This step's jobs, from the scheduler side to the worker side."""

    stores: list[StoreJob] = field(default_factory=list)
    loads: list[LoadJob] = field(default_factory=list)


@dataclass
class JobResult:
    """What the worker really did with one job."""

    job_id: int
    kind: str  # "store" | "load"
    success: bool
    injected: bool = False
    nbytes: int = 0


@dataclass
class ResidentWorkerMetadata(KVConnectorWorkerMetadata):
    """This step's job results, from the worker side back to the scheduler side."""

    results: list[JobResult] = field(default_factory=list)

    def aggregate(self, other: KVConnectorWorkerMetadata) -> KVConnectorWorkerMetadata:
        assert isinstance(other, ResidentWorkerMetadata)
        return ResidentWorkerMetadata(self.results + other.results)


# ---------------------------------------------------------------- scheduler-side bookkeeping


@dataclass
class _Claim:
    claim: ResidentClaim
    salt: str | None
    hashes: tuple[Any, ...]
    slots: list[int]
    identity: dict[str, str]
    resident_request: str
    generation: int = 0
    offloaded: bool = False
    store_planned: bool = False
    closed: bool = False  # failed_closed: no further restores are attempted


@dataclass
class _Req:
    request_id: str
    claim_id: str | None = None
    rejected: dict[str, Any] | None = None
    hit: tuple[str, Any] | None = None  # ("claim", claim_id) | ("unclaimed", key)
    stored_unclaimed: bool = False
    open_jobs: set[int] = field(default_factory=set)
    last_outcome: tuple[str, str | None, int | None] = ("accepted", None, None)
    fallback: bool = False
    looked_up: bool = False
    restored_gen: int | None = None
    reuse_dispatched: bool = False
    reused: bool = False
    pending_finish: tuple[RequestStatus, str | None] | None = None


class ResidentClaimConnector(KVConnectorBase_V1):
    """A vLLM v1 KV connector that binds ResidentClaims to real host-tier offload and load."""

    def __init__(
        self,
        vllm_config: VllmConfig,
        role: KVConnectorRole,
        kv_cache_config: KVCacheConfig,
    ) -> None:
        super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        transfer = self._kv_transfer_config
        self.config = parse_connector_config(dict(transfer.kv_connector_extra_config or {}))
        if transfer.kv_role != "kv_both":
            raise ConnectorConfigError(
                f"ResidentClaimConnector needs kv_role='kv_both' (it stores and loads), "
                f"got {transfer.kv_role!r}"
            )
        self.op: Operator = install(self.config)
        self.block_size = vllm_config.cache_config.block_size
        self.policy = transfer.kv_load_failure_policy
        self.async_load = self.config.load_mode == "async"
        groups = kv_cache_config.kv_cache_groups
        if len(groups) != 1:
            raise ConnectorConfigError(
                "ResidentClaimConnector supports models with one KV cache group "
                f"(this model has {len(groups)})"
            )
        hash_bs = kv_cache_config.hash_block_size
        if hash_bs is not None and hash_bs != self.block_size:
            raise ConnectorConfigError(
                f"ResidentClaimConnector needs prefix-hash blocks equal to KV blocks "
                f"(hash_block_size={hash_bs}, block_size={self.block_size})"
            )
        spec = groups[0].kv_cache_spec
        self.bytes_per_block = int(spec.page_size_bytes) * len(groups[0].layer_names)
        self.num_slots = self.config.host_tier_bytes // self.bytes_per_block
        if self.num_slots < 1:
            raise ConnectorConfigError(
                f"host_tier_bytes={self.config.host_tier_bytes} holds no KV block "
                f"(one block is {self.bytes_per_block} bytes on this model)"
            )
        model_cfg = vllm_config.model_config
        names = {str(model_cfg.model)}
        served = getattr(model_cfg, "served_model_name", None)
        if isinstance(served, str):
            names.add(served)
        elif served:
            names.update(str(s) for s in served)
        self.model_names = names

        # scheduler side
        self.slots = SlotAllocator(self.num_slots)
        self.claims: dict[str, _Claim] = {}
        self.reqs: dict[str, _Req] = {}
        self.jobs: dict[int, StoreJob | LoadJob] = {}
        self._job_ids = itertools.count(1)
        self._planned_loads: list[LoadJob] = []
        self._request_objects: dict[str, Request] = {}
        self._unclaimed_jobs: dict[int, Any] = {}
        if role == KVConnectorRole.SCHEDULER:
            self.op.scheduler = self
        else:
            self.op.worker = self

        # worker side
        self.kv_caches: dict[str, torch.Tensor] | None = None
        self.pool: HostPool | None = None
        self._results: list[JobResult] = []
        self._load_errors: set[int] = set()
        self._inflight: dict[str, tuple[LoadJob, tuple[bool, bool, int]]] = {}

    # ============================================================ worker side

    def register_kv_caches(self, kv_caches: dict[str, torch.Tensor]) -> None:
        """Allocate the host pool shaped like the engine's per-layer, block-first KV tensors."""
        num_blocks = self._kv_cache_config.num_blocks
        for name, kv in kv_caches.items():
            if kv.shape[0] != num_blocks:
                raise ValueError(
                    f"ResidentClaimConnector expects block-first KV tensors; layer {name} has "
                    f"shape {tuple(kv.shape)} for {num_blocks} blocks"
                )
        self.kv_caches = kv_caches
        self.pool = HostPool(kv_caches, self.num_slots)
        if self.pool.bytes_per_block != self.bytes_per_block:
            raise ValueError(
                f"KV block size mismatch: scheduler counts {self.bytes_per_block} bytes, "
                f"tensors hold {self.pool.bytes_per_block}"
            )

    def start_load_kv(self, forward_context: ForwardContext, **kwargs: Any) -> None:
        """Run this step's planned loads.

        Sync loads complete here, before the forward that reads them. Async loads belong to
        requests vLLM parks in ``WAITING_FOR_REMOTE_KVS``; vLLM calls this after launching the
        step's forward, the copy is issued here and its completion is reported by
        get_finished(). (A copy thread was tried: on CPU it waits for the GIL behind vLLM's
        polling loop for milliseconds, so the copy is issued inline.)"""
        meta = self._get_connector_metadata()
        assert isinstance(meta, ResidentConnectorMetadata)
        for job in meta.loads:
            self.op.emit("kv_load_started", claim_id=job.claim_id, request_id=job.request_id,
                         source=WORKER, job_id=job.job_id, generation=job.generation,
                         bytes=len(job.block_ids) * self.bytes_per_block,
                         from_tier=HOST_TIER, to_tier=DEVICE_TIER)
            # The injection decision is taken when the load starts, on the worker, from the
            # operator's rules only.
            injected = self.op.take_injection(job.claim_id, job.owner_scope) is not None
            if job.async_load:
                self._inflight[job.request_id] = (job, self._copy_in(job, injected))
            else:
                self._report_load(job, *self._copy_in(job, injected))

    def _copy_in(self, job: LoadJob, injected: bool) -> tuple[bool, bool, int]:
        """Copy one job's host slots into its device blocks: (success, injected, bytes)."""
        if job.lost:
            return False, False, 0
        if injected:
            # The copy is not performed: the destination blocks hold no valid KV, and vLLM is
            # told so through get_block_ids_with_load_errors().
            return False, True, 0
        assert self.pool is not None and self.kv_caches is not None
        try:
            return True, False, self.pool.load(self.kv_caches, job.slots, job.block_ids)
        except Exception as exc:  # a real copy failure is reported like any failed load
            logger.error("ResidentClaimConnector: load job %s failed: %s", job.job_id, exc)
            return False, False, 0

    def _report_load(self, job: LoadJob, ok: bool, injected: bool, nbytes: int) -> None:
        common = {"claim_id": job.claim_id, "request_id": job.request_id, "source": WORKER,
                  "job_id": job.job_id, "generation": job.generation}
        self.op.emit("kv_load_finished", bytes=nbytes, success=ok, injected=injected, **common)
        if not ok:
            self._load_errors.update(job.block_ids)
            self.op.emit("kv_load_failed", invalid_block_ids=sorted(job.block_ids),
                         injected=injected, **common)
        self._results.append(JobResult(job.job_id, "load", ok, injected=injected, nbytes=nbytes))

    def get_finished(
        self, finished_req_ids: set[str]
    ) -> tuple[set[str] | None, set[str] | None]:
        """Report async loads whose copy has completed (successfully or not).

        A completed load's job result, its failed blocks and its request id are all handed to
        vLLM in this same pass, as the connector API requires for async loads."""
        done = set(self._inflight)
        for rid in sorted(done):
            job, result = self._inflight.pop(rid)
            self._report_load(job, *result)
        return None, done or None

    def wait_for_layer_load(self, layer_name: str) -> None:
        """Loads are complete when start_load_kv returns."""
        return

    def save_kv_layer(
        self,
        layer_name: str,
        kv_layer: torch.Tensor,
        attn_metadata: AttentionMetadata,
        **kwargs: Any,
    ) -> None:
        """Stores copy whole blocks of every layer after the forward, in wait_for_save."""
        return

    def wait_for_save(self) -> None:
        """Run this step's stores: the forward has written the blocks, copy them out."""
        if not self.has_connector_metadata():
            return
        meta = self._get_connector_metadata()
        assert isinstance(meta, ResidentConnectorMetadata)
        for job in meta.stores:
            self._run_store(job)

    def _run_store(self, job: StoreJob) -> None:
        common = {"claim_id": job.claim_id, "request_id": job.request_id, "source": WORKER}
        if job.claim_id is not None and job.predicate is not None and job.identity is not None:
            # The forward that just ran computed these positions; evaluate the claim's
            # predicate on them before they leave the device.
            result = evaluate_predicate(job.predicate, range(len(job.block_ids)))
            self.op.emit("claim_materialized", surviving=result.surviving,
                         leading=result.leading, required=result.required, holds=result.holds,
                         tier=DEVICE_TIER, **job.identity, **common)
        nbytes = len(job.block_ids) * self.bytes_per_block
        self.op.emit("kv_store_started", job_id=job.job_id, bytes=nbytes,
                     from_tier=DEVICE_TIER, to_tier=HOST_TIER, generation=job.generation,
                     **common)
        assert self.pool is not None and self.kv_caches is not None
        try:
            copied = self.pool.store(self.kv_caches, job.block_ids, job.slots)
            ok = True
        except Exception as exc:
            logger.error("ResidentClaimConnector: store job %s failed: %s", job.job_id, exc)
            copied, ok = 0, False
        self.op.emit("kv_store_finished", job_id=job.job_id, bytes=copied, success=ok,
                     from_tier=DEVICE_TIER, to_tier=HOST_TIER, generation=job.generation,
                     **common)
        self._results.append(JobResult(job.job_id, "store", ok, nbytes=copied))

    def get_block_ids_with_load_errors(self) -> set[int]:
        """Blocks whose load failed this step (sync loads report in the step they fail)."""
        errors, self._load_errors = self._load_errors, set()
        return errors

    def build_connector_worker_meta(self) -> KVConnectorWorkerMetadata | None:
        """Hand this step's job results to the scheduler side."""
        if not self._results:
            return None
        results, self._results = self._results, []
        return ResidentWorkerMetadata(results)

    def shutdown(self) -> None:
        """Flush the event stream when vLLM shuts the connector down."""
        self.op.flush()

    # ============================================================ scheduler side: intake

    def on_new_request(self, request: Request) -> None:
        """Record the request and take in its claim, if it carries one."""
        rid = request.request_id
        state = _Req(request_id=rid)
        self.reqs[rid] = state
        self._request_objects[rid] = request
        params = request.kv_transfer_params or {}
        raw = params.get(CLAIM_PARAM) if isinstance(params, dict) else None
        owner = raw.get("owner_scope") if isinstance(raw, dict) else None
        self.op.emit("request_started", request_id=rid, prompt_tokens=request.num_prompt_tokens,
                     owner_scope=owner if isinstance(owner, str) else None)
        if raw is None:
            return
        self._intake(request, state, raw)

    def _reject(self, state: _Req, raw: Any, reason: str, *, name_claim: bool = True) -> None:
        cid = raw.get("claim_id") if isinstance(raw, dict) else None
        cid = cid if isinstance(cid, str) and cid and name_claim else None
        ident = {}
        if isinstance(raw, dict):
            for key in ("object_id", "request_token_map_id"):
                if isinstance(raw.get(key), str):
                    ident[key] = raw[key]
            pred = raw.get("predicate")
            if isinstance(pred, dict) and isinstance(pred.get("id"), str):
                ident["predicate_id"] = pred["id"]
        rec = self.op.emit("claim_rejected", claim_id=cid, request_id=state.request_id,
                           reason=reason, **ident)
        state.rejected = {"claim_id": raw.get("claim_id") if isinstance(raw, dict) else None,
                          "outcome": "rejected", "reason": reason, "seq": rec["seq"]}

    def _intake(self, request: Request, state: _Req, raw: Any) -> None:
        try:
            claim = ResidentClaim.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"]) or "claim"
            self._reject(state, raw, f"invalid claim: {loc}: {first['msg']}"
                         + (f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""))
            return

        known = self.claims.get(claim.claim_id)
        if known is not None:
            if known.claim != claim:
                # Naming the accepted claim here would smear another submission's rejection
                # onto it; the reason carries the id instead.
                self._reject(state, raw, f"claim_id {claim.claim_id!r} is already bound to a "
                             "different claim", name_claim=False)
            elif known.closed:
                self._reject(state, raw, f"claim {claim.claim_id!r} has failed closed",
                             name_claim=False)
            else:
                state.claim_id = claim.claim_id  # a reuse reference to an accepted claim
            return

        reason = self._acceptance_problem(request, claim)
        if reason is None:
            slots = self.slots.reserve_claim(claim.claim_id, claim.footprint_blocks)
            if slots is None:
                reason = (f"host tier full: needs {claim.footprint_blocks} block slots, "
                          f"{self.slots.reclaimable_slots} of {self.num_slots} available")
        if reason is not None:
            self._reject(state, raw, reason)
            return
        identity = dict(zip(("object_id", "cache_identity", "request_token_map_id",
                             "predicate_id"), claim.identity, strict=True))
        rec = _Claim(claim=claim, salt=request.cache_salt,
                     hashes=tuple(request.block_hashes[: claim.footprint_blocks]), slots=slots,
                     identity=identity, resident_request=request.request_id)
        self.claims[claim.claim_id] = rec
        state.claim_id = claim.claim_id
        ev = self.op.emit("claim_accepted", claim_id=claim.claim_id, request_id=request.request_id,
                          registration=claim.registration.value,
                          protection_mode=claim.protection_mode.value,
                          footprint_blocks=claim.footprint_blocks,
                          predicate=claim.predicate.model_dump(mode="json"),
                          owner_scope=claim.owner_scope, expires_after_s=claim.expires_after_s,
                          **identity)
        state.last_outcome = ("accepted", None, ev["seq"])

    def _acceptance_problem(self, request: Request, claim: ResidentClaim) -> str | None:
        if claim.registration is not Registration.PRE_REGISTERED:
            return "registration post_hoc: a claim named after the fact cannot be accepted"
        if claim.protection_mode is not ProtectionMode.OFFLOADABLE:
            return (f"protection_mode {claim.protection_mode.value} is not offered by this "
                    "connector (it lowers offloadable only)")
        ci = claim.cache_identity
        if ci.block_size != self.block_size:
            return (f"cache_identity.block_size {ci.block_size} != engine block size "
                    f"{self.block_size}")
        if ci.model_id not in self.model_names:
            return f"cache_identity.model_id {ci.model_id!r} is not served by this engine"
        # vLLM always computes the last prompt token, so only blocks before it can be restored.
        full = max(request.num_prompt_tokens - 1, 0) // self.block_size
        if claim.footprint_blocks > full:
            return (f"footprint_blocks {claim.footprint_blocks} exceeds the {full} full prompt "
                    f"blocks of the request")
        if len(request.block_hashes) < claim.footprint_blocks:
            return "the request's prefix block hashes are not available"
        budget = self.config.per_owner_claim_blocks
        if budget is not None:
            held = sum(c.claim.footprint_blocks for c in self.claims.values()
                       if c.claim.owner_scope == claim.owner_scope and not c.closed)
            if held + claim.footprint_blocks > budget:
                return (f"owner {claim.owner_scope!r} claim budget exceeded: holds {held} "
                        f"blocks, asks {claim.footprint_blocks}, budget {budget}")
        return None

    # ============================================================ scheduler side: lookup/alloc

    def _unclaimed_key(self, request: Request, blocks: int) -> tuple[Any, ...]:
        return (request.cache_salt, tuple(request.block_hashes[:blocks]))

    def _find_hit(self, request: Request) -> tuple[tuple[str, Any], int] | None:
        state = self.reqs.get(request.request_id)
        if state is None:
            return None
        if state.claim_id is not None:
            rec = self.claims.get(state.claim_id)
            if rec is None or not rec.offloaded or rec.closed:
                return None
            claim = rec.claim
            # Same owner (the claim reference is the owner's), same cache salt, same prefix.
            n = claim.footprint_blocks
            if (request.cache_salt != rec.salt
                    or tuple(request.block_hashes[:n]) != rec.hashes
                    or n > max(request.num_prompt_tokens - 1, 0) // self.block_size):
                return None
            return ("claim", claim.claim_id), n
        if state.rejected is not None:
            return None
        full = max(request.num_prompt_tokens - 1, 0) // self.block_size
        for n in range(min(full, len(request.block_hashes)), 0, -1):
            key = self._unclaimed_key(request, n)
            if self.slots.find_unclaimed(key) is not None:
                return ("unclaimed", key), n
        return None

    def get_num_new_matched_tokens(
        self, request: Request, num_computed_tokens: int
    ) -> tuple[int | None, bool]:
        """Tokens the host tier can supply beyond the local prefix hit, and whether they are
        loaded asynchronously (``load_mode``)."""
        found = self._find_hit(request)
        if found is None:
            return 0, False
        _, blocks = found
        hit = max(blocks * self.block_size - num_computed_tokens, 0)
        return hit, hit > 0 and self.async_load

    def update_state_after_alloc(
        self, request: Request, blocks: KVCacheBlocks, num_external_tokens: int
    ) -> None:
        """vLLM accepted ``num_external_tokens`` from us: record the lookup and plan the load."""
        state = self.reqs.get(request.request_id)
        if state is None:
            return
        if num_external_tokens == 0:
            # vLLM calls again once an async load has landed, and after a reschedule; only the
            # first lookup of a request is a lookup.
            if state.looked_up:
                return
            state.looked_up = True
            if state.claim_id is not None or self.op.offload_unclaimed:
                self.op.emit("kv_lookup", claim_id=state.claim_id, request_id=state.request_id,
                             hit_tokens=0, async_load=False)
            return
        state.looked_up = True
        found = self._find_hit(request)
        if found is None:
            # vLLM already counts these tokens as external; fail closed by failing the load, so
            # vLLM's own invalid-load path recomputes or fails the request.
            logger.error("ResidentClaimConnector: hit for %s vanished before allocation",
                         state.request_id)
            dst = list(blocks.get_block_ids()[0])[: -(-num_external_tokens // self.block_size)]
            job = LoadJob(next(self._job_ids), state.request_id, None, None, dst, [],
                          None, self.async_load, lost=True)
            state.hit = ("lost", None)
            state.open_jobs.add(job.job_id)
            self.jobs[job.job_id] = job
            self._planned_loads.append(job)
            return
        (kind, ref), n = found
        block_ids = list(blocks.get_block_ids()[0])
        first = (n * self.block_size - num_external_tokens) // self.block_size
        dst = block_ids[first:n]
        job_id = next(self._job_ids)
        if kind == "claim":
            rec = self.claims[ref]
            rec.generation += 1
            gen = rec.generation
            self.op.emit("kv_lookup", claim_id=ref, request_id=state.request_id,
                         hit_tokens=num_external_tokens, async_load=self.async_load,
                         generation=gen)
            self.op.emit("claim_restore_required", claim_id=ref, request_id=state.request_id,
                         generation=gen, from_tier=HOST_TIER, to_tier=DEVICE_TIER,
                         tokens=num_external_tokens, **rec.identity)
            job = LoadJob(job_id, state.request_id, ref, rec.claim.owner_scope, dst,
                          rec.slots[first:n], gen, self.async_load)
        else:
            entry = self.slots.find_unclaimed(ref)
            assert entry is not None
            entry.pinned += 1
            self.op.emit("kv_lookup", request_id=state.request_id,
                         hit_tokens=num_external_tokens, async_load=self.async_load)
            job = LoadJob(job_id, state.request_id, None, None, dst, entry.slots[first:n],
                          None, self.async_load)
        state.hit = (kind, ref)
        state.open_jobs.add(job_id)
        self.jobs[job_id] = job
        self._planned_loads.append(job)

    def build_connector_meta(self, scheduler_output: SchedulerOutput) -> KVConnectorMetadata:
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
            after = before + scheduled.get(rid, 0)
            job = self._plan_store(state, after)
            if job is not None:
                meta.stores.append(job)
        return meta

    def _plan_store(self, state: _Req, computed_after: int) -> StoreJob | None:
        manager = self._kv_cache_manager
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
                           rec.claim.predicate)
        elif (self.op.offload_unclaimed and state.rejected is None and state.hit is None
              and not state.stored_unclaimed):
            req_obj = self._request_objects.get(state.request_id)
            if req_obj is None:
                return None
            n = max(req_obj.num_prompt_tokens - 1, 0) // self.block_size
            if n == 0 or computed_after < n * self.block_size:
                return None
            key = self._unclaimed_key(req_obj, n)
            if self.slots.has_unclaimed(key):
                state.stored_unclaimed = True
                return None
            slots = self.slots.place_unclaimed(key, n)
            state.stored_unclaimed = True
            if slots is None:
                return None
            block_ids = list(manager.get_block_ids(state.request_id)[0][:n])
            job = StoreJob(next(self._job_ids), state.request_id, None, block_ids, slots)
            self._unclaimed_jobs[job.job_id] = key
        else:
            return None
        state.open_jobs.add(job.job_id)
        self.jobs[job.job_id] = job
        return job

    # ============================================================ scheduler side: outcomes

    def update_connector_output(self, connector_output: KVConnectorOutput) -> None:
        """Turn the worker's job results and vLLM's invalid blocks into ordered events."""
        meta = connector_output.kv_connector_worker_meta
        results = meta.results if isinstance(meta, ResidentWorkerMetadata) else []
        invalid = set(connector_output.invalid_block_ids or ())
        touched: set[str] = set()
        for res in results:
            job = self.jobs.pop(res.job_id, None)
            if job is None:
                continue
            state = self.reqs.get(job.request_id)
            if state is not None:
                state.open_jobs.discard(job.job_id)
                touched.add(job.request_id)
            if isinstance(job, StoreJob):
                self._store_done(job, res, state)
            else:
                self._load_done(job, res, state, invalid)
        for state in self.reqs.values():
            if state.reuse_dispatched and not state.reused:
                self._emit_reused(state)
        for rid in list(touched) + [r for r, s in self.reqs.items() if s.pending_finish]:
            state = self.reqs.get(rid)
            if state is not None and state.pending_finish is not None and not state.open_jobs:
                status, reason = state.pending_finish
                state.pending_finish = None
                self._write_finish(state, status, reason)

    def _store_done(self, job: StoreJob, res: JobResult, state: _Req | None) -> None:
        if job.claim_id is None:
            key = self._unclaimed_jobs.pop(job.job_id, None)
            if key is not None:
                if res.success:
                    self.slots.commit_unclaimed(key)
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
        ev = self.op.emit("claim_offloaded", claim_id=job.claim_id, request_id=job.request_id,
                          generation=rec.generation, from_tier=DEVICE_TIER, to_tier=HOST_TIER,
                          block_count=len(job.block_ids), **rec.identity)
        if state is not None:
            state.last_outcome = ("offloaded", None, ev["seq"])

    def _load_done(self, job: LoadJob, res: JobResult, state: _Req | None,
                   invalid: set[int]) -> None:
        if job.claim_id is None:
            key = state.hit[1] if state is not None and state.hit else None
            entry = self.slots.find_unclaimed(key) if key is not None else None
            if entry is not None:
                entry.pinned = max(entry.pinned - 1, 0)
        failed_blocks = sorted(invalid.intersection(job.block_ids))
        if res.success and not failed_blocks:
            if job.claim_id is not None and state is not None:
                rec = self.claims[job.claim_id]
                ev = self.op.emit("claim_restored", claim_id=job.claim_id,
                                  request_id=job.request_id, generation=job.generation,
                                  source="offload_tier", **rec.identity)
                state.restored_gen = job.generation
                state.last_outcome = ("restored", None, ev["seq"])
                if not job.async_load:
                    # A sync load fed this very step's forward: the prefix was reused already.
                    self._emit_reused(state)
            return
        if job.claim_id is None and state is not None and state.hit is not None \
                and state.hit[0] == "unclaimed":
            # A promise-free entry whose load failed is not offered again.
            self.slots.drop_unclaimed(state.hit[1])
        # The load failed. What vLLM did about it is visible here: a request it failed is
        # already finished (held finish, FINISHED_ERROR); one it rescheduled is still running.
        finished = state is not None and state.pending_finish is not None
        finish_status = state.pending_finish[0].name if finished and state else None
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
        reason = "injected load failure" if res.injected else "host-tier load failed"
        if finished:
            self._close(rec)
            self.op.emit("claim_restore_failed", claim_id=job.claim_id, request_id=job.request_id,
                         generation=job.generation, reason=reason, injected=res.injected,
                         outcome_type="refusal", outcome_claim_id=job.claim_id, **rec.identity)
            ev = self.op.emit("active_request_refused", claim_id=job.claim_id,
                              request_id=job.request_id, outcome_claim_id=job.claim_id,
                              blocking_claim_ids=[job.claim_id],
                              feasibility="restore_failed_request_failed",
                              arbiter="scheduler_boundary")
            state.last_outcome = ("refused", reason, ev["seq"])
        else:
            # Served by recompute: the promise was not kept even though the client gets tokens.
            self._close(rec)
            ev = self.op.emit("claim_restore_failed", claim_id=job.claim_id,
                              request_id=job.request_id, generation=job.generation,
                              reason=reason + "; request rescheduled for recompute",
                              injected=res.injected, outcome_type="harm",
                              outcome_claim_id=job.claim_id, **rec.identity)
            state.fallback = True
            state.last_outcome = ("fallback_recompute", reason, ev["seq"])

    def _emit_reused(self, state: _Req) -> None:
        if state.claim_id is None or state.restored_gen is None or state.reused:
            return
        rec = self.claims.get(state.claim_id)
        if rec is None:
            return
        holds = evaluate_predicate(rec.claim.predicate, range(rec.claim.footprint_blocks)).holds
        ev = self.op.emit("claim_reused", claim_id=state.claim_id, request_id=state.request_id,
                          generation=state.restored_gen, holds=holds, **rec.identity)
        state.reused = True
        state.last_outcome = ("restored", None, ev["seq"])

    def _close(self, rec: _Claim) -> None:
        # A failed-closed claim makes no further promise, so its host copy is let go.
        rec.closed = True
        rec.offloaded = False
        self.slots.release_claim(rec.claim.claim_id)

    def release_claim(self, claim_id: str, reason: str) -> bool:
        """End an accepted claim on the operator's behalf (``claim_released``), freeing its
        host slots. Call only while the engine is idle. Returns whether the claim was live."""
        rec = self.claims.pop(claim_id, None)
        if rec is None:
            return False
        if not rec.closed:
            self.op.emit("claim_released", claim_id=claim_id, reason=reason, **rec.identity)
        self.slots.release_claim(claim_id)
        return not rec.closed

    def request_finished(
        self, request: Request, block_ids: list[int]
    ) -> tuple[bool, dict[str, Any] | None]:
        """vLLM finished the request: write its finish now, or after this step's connector
        output if that output still has to be turned into outcome events."""
        state = self.reqs.get(request.request_id)
        if state is None:
            return False, None
        reason = request.get_finished_reason()
        reason_s = str(reason) if reason is not None else None
        if state.open_jobs:
            state.pending_finish = (request.status, reason_s)
            # vLLM 0.32 drops kv_transfer_params of FINISHED_ERROR outputs anyway; the final
            # outcome is in the trace and in operator().outcomes.
            return False, self._params(state)
        params = self._write_finish(state, request.status, reason_s)
        return False, params

    def _params(self, state: _Req) -> dict[str, Any] | None:
        if state.rejected is not None:
            return {CLAIM_PARAM: dict(state.rejected)}
        if state.claim_id is None:
            return None
        outcome, reason, seq = state.last_outcome
        return {CLAIM_PARAM: {"claim_id": state.claim_id, "outcome": outcome, "reason": reason,
                              "seq": seq}}

    def _write_finish(self, state: _Req, status: RequestStatus,
                      reason: str | None) -> dict[str, Any] | None:
        if status in _SERVED and state.reuse_dispatched:
            self._emit_reused(state)
        if state.fallback and status in _SERVED and state.claim_id is not None:
            rec = self.claims[state.claim_id]
            gen = rec.generation
            self.op.emit("claim_restored", claim_id=state.claim_id, request_id=state.request_id,
                         generation=gen, source="fallback_recompute", **rec.identity)
        if status in _SERVED:
            trace_status = "served"
        elif state.last_outcome[0] == "refused":
            trace_status = "refused"
        else:
            trace_status = "error"
        self.op.emit("request_finished", request_id=state.request_id, status=trace_status,
                     finish_reason=reason)
        params = self._params(state)
        if params is not None:
            self.op.outcomes[state.request_id] = params[CLAIM_PARAM]
        self.reqs.pop(state.request_id, None)
        self._request_objects.pop(state.request_id, None)
        return params
