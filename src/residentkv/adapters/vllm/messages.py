"""What the two connector roles say to each other, once per engine step.

The scheduler side sends jobs (:class:`ResidentConnectorMetadata`, carried by vLLM's
``SchedulerOutput``); every worker rank sends back what it really did as :class:`WorkerFact`
records (:class:`ResidentWorkerMetadata`, carried by vLLM's ``KVConnectorOutput`` and
concatenated across tensor-parallel ranks by vLLM's output aggregator). Worker processes write no
events: the scheduler side is the only writer of the stream, so there is one ``seq`` counter in
every process layout. Everything here pickles (vLLM moves it between processes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorMetadata,
    KVConnectorWorkerMetadata,
)

__all__ = [
    "JobKind",
    "LoadFailure",
    "LoadJob",
    "ResidentConnectorMetadata",
    "ResidentWorkerMetadata",
    "StoreJob",
    "WorkerFact",
]

JobKind = str  # "store" | "load"


class LoadFailure(StrEnum):
    """Why a load failed, where a fixed word applies (``kv_load_failed.reason``)."""

    #: the bytes read back differ from the digest recorded at store (or no digest was kept)
    DIGEST_MISMATCH = "digest_mismatch"


@dataclass
class StoreJob:
    """Copy ``block_ids`` (device) into ``slots`` (host), on every rank."""

    job_id: int
    request_id: str
    claim_id: str | None
    block_ids: list[int]
    slots: list[int]
    generation: int | None = None
    identity: dict[str, str] | None = None
    predicate: Any = None  # PredicateSpec of the claim, for the materialization check
    digest: bool = False  # digest the stored blocks (the engine verifies content)


@dataclass
class LoadJob:
    """Copy ``slots`` (host) into ``block_ids`` (device) for a request about to run.

    ``inject`` and ``corrupt`` are the operator's failure injection, decided by the scheduler
    side when it planned the load (the rules live only there), so every rank fails the same
    job: ``inject`` skips the copy, ``corrupt`` flips bytes of the source slots in the host tier
    first. ``verify`` checks the bytes read back against the digests recorded at store (set
    when the store recorded one), before the load is reported to vLLM.
    """

    job_id: int
    request_id: str
    claim_id: str | None
    owner_scope: str | None
    block_ids: list[int]
    slots: list[int]
    generation: int | None = None
    async_load: bool = False
    lost: bool = False  # the planned source vanished: the load must fail
    inject: bool = False
    corrupt: bool = False
    verify: bool = False


@dataclass
class ResidentConnectorMetadata(KVConnectorMetadata):
    """This step's jobs, from the scheduler side to every worker rank."""

    stores: list[StoreJob] = field(default_factory=list)
    loads: list[LoadJob] = field(default_factory=list)


@dataclass
class WorkerFact:
    """What one worker rank really did with one job.

    Times are the rank's ``time.monotonic_ns()`` (CLOCK_MONOTONIC: one clock for every process
    of the host), so the scheduler can write the fact with the time it happened.
    """

    kind: JobKind
    job_id: int
    rank: int
    success: bool
    started_ns: int
    finished_ns: int
    nbytes: int = 0
    injected: bool = False
    invalid_block_ids: list[int] = field(default_factory=list)
    #: the claim predicate evaluated on the computed positions (store of a claim only):
    #: (surviving, leading, required, holds)
    materialized: tuple[int, int, int, bool] | None = None
    #: store: this rank's digest of the stored blocks (raw XXH3-128), when it made one
    digest: bytes | None = None
    #: load: the bytes read back were checked against the stored digests and matched
    verified: bool = False
    #: load: why it failed, where a fixed word applies
    reason: LoadFailure | None = None


@dataclass
class ResidentWorkerMetadata(KVConnectorWorkerMetadata):
    """This step's facts of one rank (or, after aggregation, of every rank)."""

    facts: list[WorkerFact] = field(default_factory=list)

    def aggregate(self, other: KVConnectorWorkerMetadata) -> KVConnectorWorkerMetadata:
        """Concatenate another rank's facts (vLLM's aggregator folds ranks in rank order)."""
        if not isinstance(other, ResidentWorkerMetadata):
            raise TypeError(f"cannot aggregate {type(other).__name__} into worker facts")
        return ResidentWorkerMetadata(self.facts + other.facts)
