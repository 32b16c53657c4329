"""The worker role of the connector: copies between vLLM's paged KV cache and the host tier.

One instance per worker rank (one process each under vLLM's multiprocessing executor). It runs
the jobs the scheduler side planned -- stores after the forward that computed the blocks, loads
either through vLLM's asynchronous-load protocol (the request waits in
``WAITING_FOR_REMOTE_KVS``, completion is reported by ``get_finished``; default) or synchronously
before the forward that reads them -- and reports what it did as rank-tagged
:class:`~residentkv.adapters.vllm.rules.WorkerFact` records in the connector's worker
metadata. It writes no events and reads no operator state: the scheduler side is the only writer,
and the failure injection arrives already decided in the job.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from vllm.logger import init_logger

from residentkv.adapters.vllm.host_tier import HostPool
from residentkv.adapters.vllm.messages import ResidentWorkerMetadata
from residentkv.adapters.vllm.rules import LoadFailure, LoadJob, StoreJob, WorkerFact
from residentkv.model.predicate import evaluate_predicate

if TYPE_CHECKING:
    import torch

__all__ = ["LOCAL_WORKERS", "WorkerSide", "tensor_parallel_rank"]

logger = init_logger(__name__)

#: the worker roles whose KV caches live in this process (an in-process engine's one worker;
#: the benchmark times their copy code against a plain torch copy)
LOCAL_WORKERS: list[WorkerSide] = []


def tensor_parallel_rank() -> int:
    """This process's tensor-parallel rank (0 when vLLM's groups are not initialised)."""
    try:
        from vllm.distributed.parallel_state import get_tensor_model_parallel_rank

        return int(get_tensor_model_parallel_rank())
    except (AssertionError, RuntimeError, ImportError):
        return 0


class WorkerSide:
    """Per-rank copy engine; see the module docstring."""

    def __init__(self, num_blocks: int, num_slots: int, bytes_per_block: int) -> None:
        self.num_blocks = num_blocks
        self.num_slots = num_slots
        self.bytes_per_block = bytes_per_block
        self.rank = 0
        self.kv_caches: dict[str, torch.Tensor] | None = None
        self.pool: HostPool | None = None
        self._facts: list[WorkerFact] = []
        self._load_errors: set[int] = set()
        self._inflight: dict[str, WorkerFact] = {}

    def register_kv_caches(self, kv_caches: dict[str, torch.Tensor]) -> None:
        """Allocate the host pool shaped like this rank's per-layer, block-first KV tensors."""
        for name, kv in kv_caches.items():
            if kv.shape[0] != self.num_blocks:
                raise ValueError(
                    f"ResidentClaimConnector expects block-first KV tensors; layer {name} has "
                    f"shape {tuple(kv.shape)} for {self.num_blocks} blocks"
                )
        self.rank = tensor_parallel_rank()
        self.kv_caches = kv_caches
        self.pool = HostPool(kv_caches, self.num_slots)
        if self.pool.bytes_per_block != self.bytes_per_block:
            raise ValueError(
                f"KV block size mismatch on rank {self.rank}: scheduler counts "
                f"{self.bytes_per_block} bytes, tensors hold {self.pool.bytes_per_block}"
            )
        LOCAL_WORKERS.append(self)

    # ------------------------------------------------------------------ loads

    def start_loads(self, loads: list[LoadJob]) -> None:
        """Run this step's planned loads (sync: complete now; async: reported by finished())."""
        for job in loads:
            fact = self._copy_in(job)
            if job.async_load:
                self._inflight[job.request_id] = fact
            else:
                self._report(fact)

    def _copy_in(self, job: LoadJob) -> WorkerFact:
        started = time.monotonic_ns()
        ok, nbytes, verified, reason = False, 0, False, None
        invalid = sorted(job.block_ids)
        if job.lost or job.inject:
            # Not copied: the destination blocks hold no valid KV, and vLLM is told so through
            # get_block_ids_with_load_errors().
            pass
        else:
            assert self.pool is not None and self.kv_caches is not None
            try:
                if job.corrupt:
                    self.pool.corrupt(job.slots)
                if job.verify:
                    # Before the load is reported, so vLLM never computes on these blocks
                    # unless their bytes are the ones stored; the blocks that differ are a
                    # failed load like any other.
                    nbytes, bad = self.pool.load_verified(self.kv_caches, job.slots,
                                                          job.block_ids)
                    ok = verified = not bad
                    if bad:
                        reason, invalid = LoadFailure.DIGEST_MISMATCH, sorted(bad)
                else:
                    nbytes = self.pool.load(self.kv_caches, job.slots, job.block_ids)
                    ok = True
            except Exception as exc:  # a real copy failure is reported like any failed load
                ok = verified = False
                logger.error("ResidentClaimConnector: load job %s failed on rank %s: %s",
                             job.job_id, self.rank, exc)
        return WorkerFact("load", job.job_id, self.rank, ok, started, time.monotonic_ns(),
                          nbytes=nbytes,
                          injected=(job.inject or job.corrupt) and not job.lost,
                          invalid_block_ids=[] if ok else invalid, verified=verified,
                          reason=reason)

    def _report(self, fact: WorkerFact) -> None:
        self._load_errors.update(fact.invalid_block_ids)
        self._facts.append(fact)

    def finished(self) -> set[str] | None:
        """Async loads whose copy completed (successfully or not), reported in this pass with
        their failed blocks, as the connector API requires."""
        done = set(self._inflight)
        for rid in sorted(done):
            self._report(self._inflight.pop(rid))
        return done or None

    def load_errors(self) -> set[int]:
        """Blocks whose load failed (sync loads report in the step they fail)."""
        errors, self._load_errors = self._load_errors, set()
        return errors

    # ------------------------------------------------------------------ stores

    def run_stores(self, stores: list[StoreJob]) -> None:
        """Copy this step's stores out: the forward has written the blocks."""
        for job in stores:
            self._facts.append(self._store(job))

    def _store(self, job: StoreJob) -> WorkerFact:
        materialized = None
        if job.claim_id is not None and job.predicate is not None:
            # The forward that just ran computed these positions; evaluate the claim's
            # predicate on them before they leave the device.
            r = evaluate_predicate(job.predicate, range(len(job.block_ids)))
            materialized = (r.surviving, r.leading, r.required, r.holds)
        started = time.monotonic_ns()
        assert self.pool is not None and self.kv_caches is not None
        digest = None
        try:
            if job.digest:
                copied, digest = self.pool.store_sealed(self.kv_caches, job.block_ids,
                                                        job.slots)
            else:
                copied = self.pool.store(self.kv_caches, job.block_ids, job.slots)
            ok = True
        except Exception as exc:
            logger.error("ResidentClaimConnector: store job %s failed on rank %s: %s",
                         job.job_id, self.rank, exc)
            copied, ok = 0, False
        return WorkerFact("store", job.job_id, self.rank, ok, started, time.monotonic_ns(),
                          nbytes=copied, materialized=materialized, digest=digest)

    # ------------------------------------------------------------------ to the scheduler

    def take_metadata(self) -> ResidentWorkerMetadata | None:
        """This step's facts for the scheduler side (None when there are none)."""
        if not self._facts:
            return None
        facts, self._facts = self._facts, []
        return ResidentWorkerMetadata(facts)

    def describe(self) -> dict[str, Any]:
        """A small status record (rank, pool size) for logs and tests."""
        return {"rank": self.rank, "num_slots": self.num_slots,
                "bytes_per_block": self.bytes_per_block}
