"""ResidentClaimConnector: ResidentClaims carried through real offload/load in unpatched vLLM.

vLLM constructs the connector once per role, like its ``OffloadingConnector``: in the scheduler
process with ``KVConnectorRole.SCHEDULER`` and in each worker rank with ``KVConnectorRole.WORKER``.
This class checks the configuration and hands every call to the role object:

- :class:`~residentkv.adapters.vllm.scheduler.SchedulerSide` -- claims, placement, plans,
  outcomes, and the engine's one event stream;
- :class:`~residentkv.adapters.vllm.worker.WorkerSide` -- the copies, reported back as
  rank-tagged facts in the connector's worker metadata.

Every event comes from something vLLM actually did: a copy that ran, a hit vLLM accepted in
``update_state_after_alloc``, a finish vLLM announced in ``request_finished``, the invalid blocks
vLLM handed back in ``update_connector_output``. Nothing is synthesized.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
    KVConnectorRole,
    KVConnectorWorkerMetadata,
)

from residentkv.adapters.vllm.config import ConnectorConfigError, parse_connector_config
from residentkv.adapters.vllm.control import install
from residentkv.adapters.vllm.messages import ResidentConnectorMetadata
from residentkv.adapters.vllm.metrics import ResidentClaimPromMetrics, ResidentClaimStats
from residentkv.adapters.vllm.scheduler import SchedulerSide
from residentkv.adapters.vllm.worker import WorkerSide

if TYPE_CHECKING:
    import torch
    from vllm.config import VllmConfig
    from vllm.distributed.kv_transfer.kv_connector.v1.metrics import (
        KVConnectorPromMetrics,
        KVConnectorStats,
        PromMetric,
        PromMetricT,
    )
    from vllm.forward_context import ForwardContext
    from vllm.v1.attention.backend import AttentionMetadata
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks, KVCacheManager
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.outputs import KVConnectorOutput
    from vllm.v1.request import Request

__all__ = ["ResidentClaimConnector"]


def _model_names(vllm_config: VllmConfig) -> set[str]:
    model_cfg = vllm_config.model_config
    names = {str(model_cfg.model)}
    served = getattr(model_cfg, "served_model_name", None)
    if isinstance(served, str):
        names.add(served)
    elif served:
        names.update(str(s) for s in served)
    return names


class ResidentClaimConnector(KVConnectorBase_V1):
    """A vLLM v1 KV connector that binds ResidentClaims to real host-tier offload and load."""

    def __init__(self, vllm_config: VllmConfig, role: KVConnectorRole,
                 kv_cache_config: KVCacheConfig) -> None:
        super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        transfer = self._kv_transfer_config
        config = parse_connector_config(dict(transfer.kv_connector_extra_config or {}))
        self.config = config
        if transfer.kv_role != "kv_both":
            raise ConnectorConfigError(
                f"ResidentClaimConnector needs kv_role='kv_both' (it stores and loads), "
                f"got {transfer.kv_role!r}")
        parallel = vllm_config.parallel_config
        if parallel.pipeline_parallel_size != 1:
            raise ConnectorConfigError("ResidentClaimConnector supports tensor parallelism only "
                                       f"(pipeline_parallel_size={parallel.pipeline_parallel_size})")
        block_size = vllm_config.cache_config.block_size
        groups = kv_cache_config.kv_cache_groups
        if len(groups) != 1:
            raise ConnectorConfigError("ResidentClaimConnector supports models with one KV cache "
                                       f"group (this model has {len(groups)})")
        hash_bs = kv_cache_config.hash_block_size
        if hash_bs is not None and hash_bs != block_size:
            raise ConnectorConfigError(
                f"ResidentClaimConnector needs prefix-hash blocks equal to KV blocks "
                f"(hash_block_size={hash_bs}, block_size={block_size})")
        # one rank's bytes of one block: the scheduler sees the per-worker cache config
        bytes_per_block = int(groups[0].kv_cache_spec.page_size_bytes) * len(groups[0].layer_names)
        num_slots = config.host_tier_bytes // bytes_per_block
        if num_slots < 1:
            raise ConnectorConfigError(
                f"host_tier_bytes={config.host_tier_bytes} holds no KV block "
                f"(one block is {bytes_per_block} bytes per rank on this model)")
        self.scheduler_side: SchedulerSide | None = None
        self.worker_side: WorkerSide | None = None
        if role == KVConnectorRole.SCHEDULER:
            op = install(config)
            self.scheduler_side = SchedulerSide(
                config, op, block_size=block_size, policy=transfer.kv_load_failure_policy,
                bytes_per_block=bytes_per_block, num_slots=num_slots,
                world_size=parallel.tensor_parallel_size, model_names=_model_names(vllm_config))
            op.scheduler = self.scheduler_side
            if config.control_socket:
                from residentkv.adapters.vllm.control_socket import serve_control

                serve_control(config.control_socket, op)
        else:
            self.worker_side = WorkerSide(kv_cache_config.num_blocks, num_slots, bytes_per_block)

    # -------------------------------------------------------------- role access

    @property
    def sched(self) -> SchedulerSide:
        """The scheduler role (raises in a worker process)."""
        if self.scheduler_side is None:
            raise RuntimeError("scheduler-side call on a worker-role ResidentClaimConnector")
        return self.scheduler_side

    @property
    def worker(self) -> WorkerSide:
        """The worker role (raises in the scheduler process)."""
        if self.worker_side is None:
            raise RuntimeError("worker-side call on a scheduler-role ResidentClaimConnector")
        return self.worker_side

    def _meta(self) -> ResidentConnectorMetadata:
        meta = self._get_connector_metadata()
        assert isinstance(meta, ResidentConnectorMetadata)
        return meta

    # -------------------------------------------------------------- worker role

    def register_kv_caches(self, kv_caches: dict[str, torch.Tensor]) -> None:
        """Allocate this rank's host pool shaped like its KV tensors."""
        self.worker.register_kv_caches(kv_caches)

    def start_load_kv(self, forward_context: ForwardContext, **kwargs: Any) -> None:
        """Run this step's planned loads (sync: before the forward; async: after its launch,
        completion reported by get_finished)."""
        self.worker.start_loads(self._meta().loads)

    def wait_for_layer_load(self, layer_name: str) -> None:
        """Loads are complete when start_load_kv returns."""
        return

    def save_kv_layer(self, layer_name: str, kv_layer: torch.Tensor,
                      attn_metadata: AttentionMetadata, **kwargs: Any) -> None:
        """Stores copy whole blocks of every layer after the forward, in wait_for_save."""
        return

    def wait_for_save(self) -> None:
        """Run this step's stores: the forward has written the blocks."""
        if self.has_connector_metadata():
            self.worker.run_stores(self._meta().stores)

    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None, set[str] | None]:
        """Async loads whose copy completed, with their failed blocks in the same pass."""
        return None, self.worker.finished()

    def get_block_ids_with_load_errors(self) -> set[int]:
        """Blocks whose load failed on this rank."""
        return self.worker.load_errors()

    def build_connector_worker_meta(self) -> KVConnectorWorkerMetadata | None:
        """This rank's facts of this step, for the scheduler side."""
        return self.worker.take_metadata()

    # -------------------------------------------------------------- scheduler role

    def bind_kv_cache_manager(self, kv_cache_manager: KVCacheManager) -> None:
        """Keep vLLM's cache manager: stores read the blocks a request holds."""
        super().bind_kv_cache_manager(kv_cache_manager)
        if self.scheduler_side is not None:
            self.scheduler_side.kv_cache_manager = kv_cache_manager

    def on_new_request(self, request: Request) -> None:
        """Record the request and take in its claim, if it carries one."""
        self.sched.on_new_request(request)

    def get_num_new_matched_tokens(self, request: Request,
                                   num_computed_tokens: int) -> tuple[int | None, bool]:
        """Tokens the host tier can supply beyond the local prefix hit."""
        return self.sched.get_num_new_matched_tokens(request, num_computed_tokens)

    def update_state_after_alloc(self, request: Request, blocks: KVCacheBlocks,
                                 num_external_tokens: int) -> None:
        """vLLM accepted the hit: record the lookup and plan the load."""
        self.sched.update_state_after_alloc(request, blocks, num_external_tokens)

    def build_connector_meta(self, scheduler_output: SchedulerOutput) -> KVConnectorMetadata:
        """This step's loads and stores for every worker rank."""
        return self.sched.build_connector_meta(scheduler_output)

    def update_connector_output(self, connector_output: KVConnectorOutput) -> None:
        """The ranks' facts and vLLM's invalid blocks, turned into ordered events."""
        self.sched.update_connector_output(connector_output)

    def request_finished(self, request: Request,
                         block_ids: list[int]) -> tuple[bool, dict[str, Any] | None]:
        """vLLM finished the request: its finish and claim outcome."""
        return self.sched.request_finished(request, block_ids)

    def get_kv_connector_stats(self) -> KVConnectorStats | None:
        """Claim metrics of the last interval (scheduler role only)."""
        if self.scheduler_side is None:
            return None
        return self.scheduler_side.take_stats()

    def shutdown(self) -> None:
        """vLLM stops the engine gracefully (its workers, and the host tier, are gone by now):
        the live claims end (``claim_harmed``, cause ``shutdown``) and the stream closes."""
        if self.scheduler_side is not None:
            self.scheduler_side.op.close()

    @classmethod
    def build_kv_connector_stats(cls, data: dict[str, Any] | None = None) -> KVConnectorStats:
        """Rebuild a stats payload in the front-end process."""
        return ResidentClaimStats(data=dict(data)) if data else ResidentClaimStats()

    @classmethod
    def build_prom_metrics(cls, vllm_config: VllmConfig,
                           metric_types: dict[type[PromMetric], type[PromMetricT]],
                           labelnames: list[str],
                           per_engine_labelvalues: dict[int, list[object]],
                           ) -> KVConnectorPromMetrics:
        """The claim metrics on vLLM's ``/metrics``."""
        return ResidentClaimPromMetrics(vllm_config, metric_types, labelnames,
                                        per_engine_labelvalues)
