"""The fleet run's numbers, ``summary.json`` and the printed table (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from residentkv.adapters.dynamo.promtext import Sample, parse, total

__all__ = ["claim_metrics", "format_table", "router_figures"]

CLAIM_SERIES = ("accepted", "rejected", "offloaded", "restored", "refused", "released",
                "fallback_recompute")


def claim_metrics(text: str) -> dict[str, float]:
    """A worker's ``vllm:residentkv_*`` figures from its Prometheus page."""
    samples = parse(text)
    out = {name: total(samples, f"vllm:residentkv_claims_{name}_total") for name in CLAIM_SERIES}
    out["host_tier_used_bytes"] = total(samples, "vllm:residentkv_host_tier_used_bytes")
    out["restore_latency_count"] = total(samples, "vllm:residentkv_restore_latency_seconds_count")
    out["restore_latency_sum_s"] = total(samples, "vllm:residentkv_restore_latency_seconds_sum")
    if not any(s.name.startswith("vllm:residentkv_") for s in samples):
        out["absent"] = 1.0
    return out


def _hist_mean(samples: Sequence[Sample], name: str) -> float | None:
    count = total(samples, f"{name}_count")
    return round(total(samples, f"{name}_sum") / count, 4) if count else None


def router_figures(text: str) -> dict[str, Any]:
    """The KV router's prefix-affinity figures from the frontend's Prometheus page."""
    s = parse(text)
    applied = "dynamo_component_kv_cache_events_applied"
    return {
        "kv_events_applied_ok": {kind: total(s, applied, event_type=kind, status="ok")
                                 for kind in ("stored", "removed", "cleared")},
        "kv_events_applied_not_ok": sum(x.value for x in s if x.name == applied
                                        and x.labels.get("status") != "ok"),
        "router_kv_hit_rate_mean": _hist_mean(s, "dynamo_component_router_kv_hit_rate"),
        "router_kv_hit_rate_count": total(s, "dynamo_component_router_kv_hit_rate_count"),
        "selected_cached_prefix_tokens_total": total(
            s, "dynamo_component_router_kv_selected_cached_prefix_tokens_total"),
        "best_eligible_cached_prefix_tokens_total": total(
            s, "dynamo_component_router_kv_best_eligible_cached_prefix_tokens_total"),
        "non_max_overlap_selections_total": total(
            s, "dynamo_component_router_non_max_overlap_selections_total"),
        "worker_reused_tokens_total": total(
            s, "dynamo_component_router_kv_worker_reused_tokens_total"),
        "frontend_cached_tokens_mean": _hist_mean(s, "dynamo_frontend_cached_tokens"),
    }


def format_table(verdicts: Sequence[Mapping[str, Any]], numbers: Mapping[str, Any]) -> str:
    """The scenario table, each failed check under its scenario, then the numbers."""
    lines = [f"{'scenario':<22} {'result':<8} checks", "-" * 60]
    for v in verdicts:
        checks = v["checks"]
        ok = sum(1 for x in checks.values() if x)
        lines.append(f"{v['scenario']:<22} {'HELD' if v['held'] else 'FAILED':<8} "
                     f"{ok}/{len(checks)}")
        lines += [f"    not met: {name}" for name, x in checks.items() if not x]
        lines += [f"    note: {n}" for n in v.get("notes", [])[:4]]
    lines.append("")
    lines += [f"{k}: {v}" for k, v in numbers.items()]
    return "\n".join(lines)
