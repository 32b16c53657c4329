"""What the two connector roles say to each other, once per engine step.

The scheduler side sends jobs (:class:`ResidentConnectorMetadata`, carried by vLLM's
``SchedulerOutput``); every worker rank sends back what it really did as
:class:`~residentkv.adapters.vllm.rules.WorkerFact`
records (:class:`ResidentWorkerMetadata`, carried by vLLM's ``KVConnectorOutput`` and
concatenated across tensor-parallel ranks by vLLM's output aggregator). Worker processes write no
events: the scheduler side is the only writer of the stream, so there is one ``seq`` counter in
every process layout. Everything here pickles (vLLM moves it between processes). The jobs and
facts themselves are plain records of :mod:`~residentkv.adapters.vllm.rules`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorMetadata,
    KVConnectorWorkerMetadata,
)

from residentkv.adapters.vllm.rules import LoadJob, StoreJob, WorkerFact

__all__ = ["ResidentConnectorMetadata", "ResidentWorkerMetadata"]


@dataclass
class ResidentConnectorMetadata(KVConnectorMetadata):
    """This step's jobs, from the scheduler side to every worker rank."""

    stores: list[StoreJob] = field(default_factory=list)
    loads: list[LoadJob] = field(default_factory=list)


@dataclass
class ResidentWorkerMetadata(KVConnectorWorkerMetadata):
    """This step's facts of one rank (or, after aggregation, of every rank)."""

    facts: list[WorkerFact] = field(default_factory=list)

    def aggregate(self, other: KVConnectorWorkerMetadata) -> KVConnectorWorkerMetadata:
        """Concatenate another rank's facts (vLLM's aggregator folds ranks in rank order)."""
        if not isinstance(other, ResidentWorkerMetadata):
            raise TypeError(f"cannot aggregate {type(other).__name__} into worker facts")
        return ResidentWorkerMetadata(self.facts + other.facts)
