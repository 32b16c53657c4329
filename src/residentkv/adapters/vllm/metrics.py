"""Claim metrics through vLLM's own connector metrics API.

The scheduler side counts what it writes to the stream (claims accepted, rejected by reason,
offloaded, restored, refused, released, served by fallback recompute), the host tier's bytes in
use and capacity, and each restore's latency (``claim_restore_required`` to ``claim_restored``).
vLLM asks for these every step (``get_kv_connector_stats``), ships them to the front-end process
with its scheduler stats and hands them to :class:`ResidentClaimPromMetrics`, which vLLM builds
through ``build_prom_metrics``: they appear on the OpenAI server's ``/metrics``.

The payload is a plain dict of str keys and numbers, so it survives vLLM's IPC serialization.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from prometheus_client import Counter, Gauge, Histogram
from vllm.config import VllmConfig
from vllm.distributed.kv_transfer.kv_connector.v1.metrics import (
    KVConnectorPromMetrics,
    KVConnectorStats,
    PromMetric,
    PromMetricT,
)

__all__ = ["COUNTERS", "GAUGES", "HISTOGRAM", "ResidentClaimPromMetrics", "ResidentClaimStats"]

PREFIX = "vllm:residentkv_"
#: counter key -> (Prometheus name, help). ``claims_rejected`` is labelled by reason.
COUNTERS: dict[str, tuple[str, str]] = {
    "claims_accepted": (PREFIX + "claims_accepted", "ResidentClaims accepted"),
    "claims_rejected": (PREFIX + "claims_rejected", "ResidentClaims rejected, by reason"),
    "claims_offloaded": (PREFIX + "claims_offloaded", "claim offloads to the host tier"),
    "claims_restored": (PREFIX + "claims_restored",
                        "claim restores from the host tier (fallback recompute not counted)"),
    "claims_refused": (PREFIX + "claims_refused",
                       "active requests refused because their claim's restore failed"),
    "claims_released": (PREFIX + "claims_released", "claims released by the operator"),
    "claims_expired": (PREFIX + "claims_expired", "claims expired after their duration"),
    "claims_harmed": (PREFIX + "claims_harmed",
                      "claims whose KV was lost with the engine (graceful stop)"),
    "claims_fallback_recompute": (PREFIX + "claims_fallback_recompute",
                                  "claims served by recompute after a failed restore (harm)"),
}
GAUGES: dict[str, tuple[str, str]] = {
    "host_tier_used_bytes": (PREFIX + "host_tier_used_bytes",
                             "host-tier bytes reserved by claims or holding unclaimed entries"),
    "host_tier_capacity_bytes": (PREFIX + "host_tier_capacity_bytes",
                                 "host-tier capacity in bytes (all ranks)"),
}
HISTOGRAM = (PREFIX + "restore_latency_seconds",
             "claim restore latency: restore required to restored")
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
_REASON_SEP = "|"


@dataclass
class ResidentClaimStats(KVConnectorStats):
    """One interval of claim metrics: ``{"counters": {key[|reason]: n}, "gauges": {key: v},
    "restore_latency_s": [seconds, ...]}``."""

    def __post_init__(self) -> None:
        if "counters" not in self.data:
            self.reset()

    def reset(self) -> None:
        """Start a new, empty interval."""
        self.data = {"counters": {}, "gauges": {}, "restore_latency_s": []}

    def count(self, key: str, reason: str | None = None, n: int = 1) -> None:
        """Add *n* to a counter (``reason`` labels ``claims_rejected``)."""
        name = key if reason is None else f"{key}{_REASON_SEP}{reason}"
        counters: dict[str, int] = self.data["counters"]
        counters[name] = counters.get(name, 0) + n

    def gauge(self, key: str, value: float) -> None:
        """Record the latest value of a gauge."""
        self.data["gauges"][key] = value

    def latency(self, seconds: float) -> None:
        """Record one restore latency."""
        self.data["restore_latency_s"].append(seconds)

    def aggregate(self, other: KVConnectorStats) -> KVConnectorStats:
        """Sum counters, keep the latest gauges, concatenate latencies."""
        if not isinstance(other, ResidentClaimStats) or other.is_empty():
            return self
        for name, n in other.data["counters"].items():
            self.data["counters"][name] = self.data["counters"].get(name, 0) + n
        self.data["gauges"].update(other.data["gauges"])
        self.data["restore_latency_s"].extend(other.data["restore_latency_s"])
        return self

    def reduce(self) -> dict[str, int | float]:
        """A flat summary for vLLM's periodic log line."""
        out: dict[str, int | float] = dict(self.data["counters"])
        out.update(self.data["gauges"])
        lat = sorted(self.data["restore_latency_s"])
        if lat:
            out["restore_latency_p50_ms"] = lat[len(lat) // 2] * 1e3
        return out

    def is_empty(self) -> bool:
        """Whether nothing was recorded in this interval."""
        return not (self.data["counters"] or self.data["gauges"]
                    or self.data["restore_latency_s"])


class ResidentClaimPromMetrics(KVConnectorPromMetrics):
    """Registers the claim metrics with vLLM's Prometheus registry and records each interval."""

    def __init__(
        self,
        vllm_config: VllmConfig,
        metric_types: dict[type[PromMetric], type[PromMetricT]],
        labelnames: list[str],
        per_engine_labelvalues: dict[int, list[object]],
    ) -> None:
        super().__init__(vllm_config, metric_types, labelnames, per_engine_labelvalues)
        # vLLM hands its (multiprocess-aware) subclasses of these three prometheus types
        counter_cls = cast("type[Counter]", self._counter_cls)
        gauge_cls = cast("type[Gauge]", self._gauge_cls)
        histogram_cls = cast("type[Histogram]", self._histogram_cls)
        self._counters = {
            key: counter_cls(
                name=name, documentation=doc,
                labelnames=labelnames + (["reason"] if key == "claims_rejected" else []))
            for key, (name, doc) in COUNTERS.items()
        }
        self._gauges = {
            key: gauge_cls(name=name, documentation=doc, labelnames=labelnames,
                                 multiprocess_mode="mostrecent")
            for key, (name, doc) in GAUGES.items()
        }
        self._histogram = histogram_cls(name=HISTOGRAM[0], documentation=HISTOGRAM[1],
                                              labelnames=labelnames, buckets=_BUCKETS)

    def observe(self, transfer_stats_data: dict[str, Any], engine_idx: int = 0) -> None:
        """Record one interval's payload for engine *engine_idx*."""
        labels = self.per_engine_labelvalues[engine_idx]
        for name, n in transfer_stats_data.get("counters", {}).items():
            key, _, reason = name.partition(_REASON_SEP)
            metric = self._counters.get(key)
            if metric is None:
                continue  # a newer connector's counter: nothing to record it in
            child = metric.labels(*labels, reason) if reason else metric.labels(*labels)
            child.inc(n)
        for key, value in transfer_stats_data.get("gauges", {}).items():
            if key in self._gauges:
                self._gauges[key].labels(*labels).set(value)
        hist = self._histogram.labels(*labels)
        for seconds in transfer_stats_data.get("restore_latency_s", []):
            hist.observe(seconds)
