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
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from pydantic import ValidationError
from vllm.logger import init_logger
from vllm.v1.request import RequestStatus

from residentkv.adapters.vllm.config import CLAIM_PARAM, CLAIM_REF_PARAM, ConnectorConfig
from residentkv.adapters.vllm.control import Operator
from residentkv.adapters.vllm.host_tier import SlotAllocator, combine_digests, format_digest
from residentkv.adapters.vllm.messages import (
    LoadFailure,
    LoadJob,
    ResidentConnectorMetadata,
    ResidentWorkerMetadata,
    StoreJob,
    WorkerFact,
)
from residentkv.adapters.vllm.metrics import ResidentClaimStats
from residentkv.adapters.vllm.server import NO_OUTCOME_CHANNEL, lacks_outcome_channel
from residentkv.model.claim import ProtectionMode, Registration, ResidentClaim
from residentkv.model.predicate import evaluate_predicate
from residentkv.model.vocabulary import OutcomeType

if TYPE_CHECKING:
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks, KVCacheManager
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.outputs import KVConnectorOutput
    from vllm.v1.request import Request

__all__ = ["CLAIM_PARAM", "CLAIM_REF_PARAM", "SchedulerSide", "worker_source"]

logger = init_logger(__name__)

DEVICE_TIER = "device"
HOST_TIER = "host"
WORKER = "residentkv.vllm.worker"  # an adapter emitter, never vLLM itself
#: released claim ids remembered, so a late reference to one is not named (see _intake_ref)
ENDED_KEPT = 10_000
_REF_KEYS = frozenset({"claim_id", "owner_scope"})

_SERVED = {RequestStatus.FINISHED_STOPPED, RequestStatus.FINISHED_LENGTH_CAPPED}

P = ParamSpec("P")
R = TypeVar("R")


def worker_source(ranks: list[int]) -> str:
    """The ``source`` of a worker fact: the emitter and the rank(s) it came from."""
    return f"{WORKER}/rank={','.join(str(r) for r in sorted(set(ranks)))}"


def _started_fields(named: Any) -> dict[str, Any]:
    """``request_started``'s owner and, for a request carrying a claim or a reference,
    ``claim_ref``: recorded before any decision, so the stream says which claim a request asked
    for even when its rejection does not name the claim."""
    if named is None:
        return {"owner_scope": None}
    owner = named.get("owner_scope") if isinstance(named, dict) else None
    cid = named.get("claim_id") if isinstance(named, dict) else None
    return {"owner_scope": owner if isinstance(owner, str) else None,
            "claim_ref": cid if isinstance(cid, str) and cid else None}


def _ref_problem(ref: Any) -> str | None:
    """What is wrong with a ``resident_claim_ref`` value, if anything."""
    if not isinstance(ref, dict):
        return f"must be an object {{claim_id, owner_scope}}, got {type(ref).__name__}"
    cid, owner = ref.get("claim_id"), ref.get("owner_scope")
    if not isinstance(cid, str) or not cid:
        return "claim_id must be a non-empty string"
    if not isinstance(owner, str) or not owner:
        # The owner is what keeps one tenant's reference off another tenant's claim.
        return "owner_scope must be a non-empty string"
    extra = sorted(str(k) for k in ref.keys() - _REF_KEYS)
    if extra:
        return f"unknown field(s) {', '.join(extra)} (a reference is claim_id and owner_scope)"
    return None


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
    digest: str | None = None  # content digest its store recorded; loads verify against it


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
    restore_required_ns: int | None = None
    reuse_dispatched: bool = False
    reused: bool = False
    pending_finish: tuple[RequestStatus, str | None] | None = None


@dataclass
class _Resolved:
    """One job's facts from every rank, folded: success only if every rank succeeded."""

    success: bool
    injected: bool
    nbytes: int
    started_ns: int
    finished_ns: int
    ranks: list[int]
    failed_ranks: list[int]
    invalid: set[int]
    materialized: tuple[int, int, int, bool] | None
    digest: str | None = None  # store: over every rank's share, in rank order
    verified: bool = False  # load: every rank checked its bytes against the stored digests
    reason: LoadFailure | None = None  # load: why a rank failed, where a fixed word applies

    @classmethod
    def fold(cls, facts: list[WorkerFact]) -> _Resolved:
        mats = [f.materialized for f in facts if f.materialized is not None]
        mat = None
        if mats:
            # Every rank evaluates the same positions; the claim holds only if it holds on all.
            surviving, leading, required, _ = mats[0]
            mat = (surviving, leading, required, all(m[3] for m in mats))
        shares = [f.digest for f in facts if f.digest is not None]
        digest = None
        if shares and len(shares) == len(facts):
            # one rank: its digest; several: one digest over theirs, in rank order
            digest = format_digest(shares[0] if len(shares) == 1 else combine_digests(shares))
        return cls(
            success=all(f.success for f in facts), injected=any(f.injected for f in facts),
            nbytes=sum(f.nbytes for f in facts),
            started_ns=min(f.started_ns for f in facts),
            finished_ns=max(f.finished_ns for f in facts), ranks=[f.rank for f in facts],
            failed_ranks=[f.rank for f in facts if not f.success],
            invalid={b for f in facts for b in f.invalid_block_ids}, materialized=mat,
            digest=digest, verified=all(f.verified for f in facts),
            reason=next((f.reason for f in facts if f.reason is not None), None))


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
        self.claims: dict[str, _Claim] = {}
        self._ended: OrderedDict[str, None] = OrderedDict()
        self.reqs: dict[str, _Req] = {}
        self.jobs: dict[int, StoreJob | LoadJob] = {}
        self._facts: dict[int, dict[int, WorkerFact]] = {}
        self._job_ids = itertools.count(1)
        self._planned_loads: list[LoadJob] = []
        self._request_objects: dict[str, Request] = {}
        self._unclaimed_jobs: dict[int, Any] = {}
        self.kv_cache_manager: KVCacheManager | None = None
        self.stats = ResidentClaimStats()
        self._gauged: int | None = None

    # ============================================================ intake

    @_hook
    def on_new_request(self, request: Request) -> None:
        """Record the request and take in its claim or claim reference, if it carries one."""
        rid = request.request_id
        state = _Req(request_id=rid)
        self.reqs[rid] = state
        self._request_objects[rid] = request
        params = request.kv_transfer_params
        params = params if isinstance(params, dict) else {}
        raw, ref = params.get(CLAIM_PARAM), params.get(CLAIM_REF_PARAM)
        self.op.emit("request_started", request_id=rid, prompt_tokens=request.num_prompt_tokens,
                     **_started_fields(ref if ref is not None else raw))
        carried = ref if ref is not None else raw
        if carried is not None and lacks_outcome_channel(rid, self.op.outcome_channel is not None):
            # Through the OpenAI server with no outcome middleware, a refusal would reach the
            # client as HTTP 500 and its retry would be served: fail closed, take no claim.
            self._reject(state, carried, "no_outcome_channel", NO_OUTCOME_CHANNEL,
                         name_claim=False)
        elif raw is not None and ref is not None:
            # Which of the two would the client mean? Guessing could register a claim the
            # client only meant to reuse, so neither is taken.
            self._reject(state, raw, "invalid", f"a request carries either {CLAIM_PARAM} or "
                         f"{CLAIM_REF_PARAM}, not both", name_claim=False)
        elif raw is not None:
            self._intake(request, state, raw)
        elif ref is not None:
            self._intake_ref(state, ref)

    def _reject(self, state: _Req, raw: Any, kind: str, reason: str, *,
                name_claim: bool = True) -> None:
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
        self.stats.count("claims_rejected", kind)
        state.rejected = {"claim_id": raw.get("claim_id") if isinstance(raw, dict) else None,
                          "outcome": "rejected", "reason": reason, "seq": rec["seq"]}

    def _intake(self, request: Request, state: _Req, raw: Any) -> None:
        try:
            claim = ResidentClaim.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"]) or "claim"
            self._reject(state, raw, "invalid", f"invalid claim: {loc}: {first['msg']}"
                         + (f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""))
            return
        known = self.claims.get(claim.claim_id)
        if known is not None:
            if known.claim != claim:
                # Naming the accepted claim here would smear another submission's rejection
                # onto it; the reason carries the id instead.
                self._reject(state, raw, "conflict", f"claim_id {claim.claim_id!r} is already "
                             "bound to a different claim", name_claim=False)
            elif known.closed:
                self._reject(state, raw, "failed_closed",
                             f"claim {claim.claim_id!r} has failed closed", name_claim=False)
            else:
                state.claim_id = claim.claim_id  # a reuse reference to an accepted claim
            return
        problem = self._acceptance_problem(request, claim)
        slots = None
        if problem is None:
            slots = self.slots.reserve_claim(claim.claim_id, claim.footprint_blocks)
            if slots is None:
                problem = ("host_tier_full",
                           f"host tier full: needs {claim.footprint_blocks} block slots, "
                           f"{self.slots.reclaimable_slots} of {self.num_slots} available")
        if problem is not None or slots is None:
            kind, reason = problem or ("host_tier_full", "host tier full")
            self._reject(state, raw, kind, reason)
            return
        self._accept(request, state, claim, slots)

    def _intake_ref(self, state: _Req, ref: Any) -> None:
        """A reuse by reference: it can only reuse a claim this engine holds for that owner;
        it never registers one."""
        problem = _ref_problem(ref)
        if problem is not None:
            # Unnamed: a malformed request must not leave a rejection on a claim it may name.
            self._reject(state, ref, "invalid", f"invalid claim reference: {problem}",
                         name_claim=False)
            return
        cid, owner = ref["claim_id"], ref["owner_scope"]
        known = self.claims.get(cid)
        if known is None:
            # Named on an engine that never held the claim: its only event here says it was
            # asked for and is not held. A claim this engine held and released keeps its
            # finished lifecycle clean, like the conflict and failed_closed paths.
            released = cid in self._ended
            self._reject(state, ref, "not_held", f"not held: claim {cid!r} is not held by "
                         "this engine" + (" (released)" if released else ""),
                         name_claim=not released)
        elif known.claim.owner_scope != owner:
            # Another owner's request: naming the claim would put that request's rejection on
            # the holder's claim (the conflict path's rule); the reason names the id. The
            # holder's owner_scope is not disclosed.
            self._reject(state, ref, "conflict", f"claim_id {cid!r} is bound to another "
                         "owner_scope", name_claim=False)
        elif known.closed:
            self._reject(state, ref, "failed_closed", f"claim {cid!r} has failed closed",
                         name_claim=False)
        else:
            state.claim_id = cid

    def _accept(self, request: Request, state: _Req, claim: ResidentClaim,
                slots: list[int]) -> None:
        identity = dict(zip(("object_id", "cache_identity", "request_token_map_id",
                             "predicate_id"), claim.identity, strict=True))
        self.claims[claim.claim_id] = _Claim(
            claim=claim, salt=request.cache_salt,
            hashes=tuple(request.block_hashes[: claim.footprint_blocks]), slots=slots,
            identity=identity, resident_request=request.request_id)
        state.claim_id = claim.claim_id
        ev = self.op.emit("claim_accepted", claim_id=claim.claim_id, request_id=request.request_id,
                          registration=claim.registration.value,
                          protection_mode=claim.protection_mode.value,
                          footprint_blocks=claim.footprint_blocks,
                          predicate=claim.predicate.model_dump(mode="json"),
                          owner_scope=claim.owner_scope, expires_after_s=claim.expires_after_s,
                          **identity)
        self.stats.count("claims_accepted")
        state.last_outcome = ("accepted", None, ev["seq"])

    def _acceptance_problem(self, request: Request,
                            claim: ResidentClaim) -> tuple[str, str] | None:
        if claim.registration is not Registration.PRE_REGISTERED:
            return ("registration",
                    "registration post_hoc: a claim named after the fact cannot be accepted")
        if claim.protection_mode is not ProtectionMode.OFFLOADABLE:
            return ("protection_mode", f"protection_mode {claim.protection_mode.value} is not "
                    "offered by this connector (it lowers offloadable only)")
        ci = claim.cache_identity
        if ci.block_size != self.block_size:
            return ("block_size", f"cache_identity.block_size {ci.block_size} != engine block "
                    f"size {self.block_size}")
        if ci.model_id not in self.model_names:
            return ("model", f"cache_identity.model_id {ci.model_id!r} is not served by this "
                    "engine")
        # vLLM always computes the last prompt token, so only blocks before it can be restored.
        full = max(request.num_prompt_tokens - 1, 0) // self.block_size
        if claim.footprint_blocks > full:
            return ("footprint", f"footprint_blocks {claim.footprint_blocks} exceeds the {full} "
                    "full prompt blocks of the request")
        if len(request.block_hashes) < claim.footprint_blocks:
            return ("footprint", "the request's prefix block hashes are not available")
        budget = self.config.per_owner_claim_blocks
        if budget is not None:
            held = sum(c.claim.footprint_blocks for c in self.claims.values()
                       if c.claim.owner_scope == claim.owner_scope and not c.closed)
            if held + claim.footprint_blocks > budget:
                return ("budget", f"owner {claim.owner_scope!r} claim budget exceeded: holds "
                        f"{held} blocks, asks {claim.footprint_blocks}, budget {budget}")
        return None

    # ============================================================ lookup / allocation

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
            # Same owner (the claim reference is the owner's), same cache salt, same prefix.
            n = rec.claim.footprint_blocks
            if (request.cache_salt != rec.salt
                    or tuple(request.block_hashes[:n]) != rec.hashes
                    or n > max(request.num_prompt_tokens - 1, 0) // self.block_size):
                return None
            return ("claim", rec.claim.claim_id), n
        if state.rejected is not None:
            return None
        full = max(request.num_prompt_tokens - 1, 0) // self.block_size
        for n in range(min(full, len(request.block_hashes)), 0, -1):
            key = self._unclaimed_key(request, n)
            if self.slots.find_unclaimed(key) is not None:
                return ("unclaimed", key), n
        return None

    @_hook
    def get_num_new_matched_tokens(self, request: Request,
                                   num_computed_tokens: int) -> tuple[int | None, bool]:
        """Tokens the host tier can supply beyond the local prefix hit, and whether they are
        loaded asynchronously (``load_mode``)."""
        found = self._find_hit(request)
        if found is None:
            return 0, False
        hit = max(found[1] * self.block_size - num_computed_tokens, 0)
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
                            ("lost", None))
            return
        (kind, ref), n = found
        first = (n * self.block_size - num_external_tokens) // self.block_size
        dst = block_ids[first:n]
        if kind == "claim":
            rec = self.claims[ref]
            rec.generation += 1
            self.op.emit("kv_lookup", claim_id=ref, request_id=state.request_id,
                         hit_tokens=num_external_tokens, async_load=self.async_load,
                         generation=rec.generation)
            self.op.emit("claim_restore_required", claim_id=ref, request_id=state.request_id,
                         generation=rec.generation, from_tier=HOST_TIER, to_tier=DEVICE_TIER,
                         tokens=num_external_tokens, **rec.identity)
            state.restore_required_ns = time.monotonic_ns()
            job = LoadJob(next(self._job_ids), state.request_id, ref, rec.claim.owner_scope, dst,
                          rec.slots[first:n], rec.generation, self.async_load,
                          verify=rec.digest is not None)
        else:
            entry = self.slots.find_unclaimed(ref)
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
        self._plan_load(state, job, (kind, ref))

    def _plan_load(self, state: _Req, job: LoadJob, hit: tuple[str, Any]) -> None:
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

    def _plan_store(self, state: _Req, computed_after: int) -> StoreJob | None:
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

    def _plan_unclaimed_store(self, state: _Req, computed_after: int) -> StoreJob | None:
        if (not self.op.offload_unclaimed or state.rejected is not None or state.hit is not None
                or state.stored_unclaimed):
            return None
        req_obj = self._request_objects.get(state.request_id)
        manager = self.kv_cache_manager
        if req_obj is None or manager is None:
            return None
        n = max(req_obj.num_prompt_tokens - 1, 0) // self.block_size
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
            res = _Resolved.fold(facts)
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
                status, reason = state.pending_finish
                state.pending_finish = None
                self._write_finish(state, status, reason)

    def _write_store(self, job: StoreJob, res: _Resolved) -> None:
        common: dict[str, Any] = {"claim_id": job.claim_id, "request_id": job.request_id,
                                  "source": worker_source(res.ranks)}
        if res.materialized is not None and job.identity is not None:
            surviving, leading, required, holds = res.materialized
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

    def _write_load(self, job: LoadJob, res: _Resolved) -> None:
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

    def _store_done(self, job: StoreJob, res: _Resolved, state: _Req | None) -> None:
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
            state.last_outcome = ("offloaded", None, ev["seq"])

    def _load_done(self, job: LoadJob, res: _Resolved, state: _Req | None,
                   invalid: set[int]) -> None:
        if job.claim_id is None and state is not None and state.hit is not None:
            entry = (self.slots.find_unclaimed(state.hit[1])
                     if state.hit[0] == "unclaimed" else None)
            if entry is not None:
                entry.pinned = max(entry.pinned - 1, 0)
        failed_blocks = sorted((invalid | res.invalid).intersection(job.block_ids))
        if res.success and not failed_blocks:
            self._restored(job, res, state)
            return
        if job.claim_id is None and state is not None and state.hit is not None \
                and state.hit[0] == "unclaimed":
            # A promise-free entry whose load failed is not offered again.
            self.slots.drop_unclaimed(state.hit[1])
        self._load_failed(job, res, state, failed_blocks)

    def _restored(self, job: LoadJob, res: _Resolved, state: _Req | None) -> None:
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
        state.restored_gen = job.generation
        state.last_outcome = ("restored", None, ev["seq"])
        if not job.async_load:
            # A sync load fed this very step's forward: the prefix was reused already.
            self._emit_reused(state)

    def _load_failed(self, job: LoadJob, res: _Resolved, state: _Req | None,
                     failed_blocks: list[int]) -> None:
        # What vLLM did about it is visible here: a request it failed is already finished
        # (held finish, FINISHED_ERROR); one it rescheduled is still running.
        finished = state is not None and state.pending_finish is not None
        finish_status = (state.pending_finish[0].name
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
        self._close(rec)
        if finished:
            self.op.emit("claim_restore_failed", claim_id=job.claim_id, request_id=job.request_id,
                         generation=job.generation, reason=reason, injected=res.injected,
                         outcome_type=OutcomeType.REFUSAL.value, outcome_claim_id=job.claim_id,
                         **rec.identity)
            ev = self.op.emit("active_request_refused", claim_id=job.claim_id,
                              request_id=job.request_id, outcome_claim_id=job.claim_id,
                              blocking_claim_ids=[job.claim_id],
                              feasibility="restore_failed_request_failed",
                              arbiter="scheduler_boundary")
            self.stats.count("claims_refused")
            state.last_outcome = ("refused", reason, ev["seq"])
        else:
            # Served by recompute: the promise was not kept even though the client gets tokens.
            ev = self.op.emit("claim_restore_failed", claim_id=job.claim_id,
                              request_id=job.request_id, generation=job.generation,
                              reason=reason + "; request rescheduled for recompute",
                              injected=res.injected, outcome_type=OutcomeType.HARM.value,
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
        host slots. Returns whether the claim was live. Caller holds the operator's lock."""
        rec = self.claims.pop(claim_id, None)
        if rec is None:
            return False
        self._ended[claim_id] = None
        while len(self._ended) > ENDED_KEPT:
            self._ended.popitem(last=False)
        if not rec.closed:
            self.op.emit("claim_released", claim_id=claim_id, reason=reason, **rec.identity)
            self.stats.count("claims_released")
        self.slots.release_claim(claim_id)
        return not rec.closed

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
            state.pending_finish = (request.status, reason_s)
            # vLLM 0.32 drops kv_transfer_params of FINISHED_ERROR outputs anyway; the final
            # outcome is in the trace, in the operator's record and in the server middleware.
            return False, self._params(state)
        return False, self._write_finish(state, request.status, reason_s)

    def _params(self, state: _Req) -> dict[str, Any] | None:
        if state.rejected is not None:
            return {CLAIM_PARAM: dict(state.rejected)}
        if state.claim_id is None:
            return None
        outcome, reason, seq = state.last_outcome
        return {CLAIM_PARAM: {"claim_id": state.claim_id, "outcome": outcome, "reason": reason,
                              "seq": seq}}

    def live_outcome(self, match: Callable[[str], bool]) -> dict[str, Any] | None:
        """The current claim outcome of the last running request whose id *match* accepts."""
        found = [s for r, s in self.reqs.items() if match(r)]
        params = self._params(found[-1]) if found else None
        return params[CLAIM_PARAM] if params is not None else None

    def _write_finish(self, state: _Req, status: RequestStatus,
                      reason: str | None) -> dict[str, Any] | None:
        if status in _SERVED and state.reuse_dispatched:
            self._emit_reused(state)
        rec = self.claims.get(state.claim_id) if state.claim_id is not None else None
        if state.fallback and status in _SERVED and rec is not None:
            self.op.emit("claim_restored", claim_id=state.claim_id, request_id=state.request_id,
                         generation=rec.generation, source="fallback_recompute", **rec.identity)
            self.stats.count("claims_fallback_recompute")
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
            self.op.record_outcome(state.request_id, params[CLAIM_PARAM])
        self.reqs.pop(state.request_id, None)
        self._request_objects.pop(state.request_id, None)
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
