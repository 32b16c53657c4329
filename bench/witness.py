"""Measure the vLLM witness: outcome latency, refused-request latency, host-tier bandwidth and the
end-to-end cost of a claimed reuse, from N runs per scenario in one process on real vLLM.

Prints figures; asserts nothing about time. Targets (SPEC §12 / issue #7) are printed next to
the measured values for the reader, not enforced.

    python bench/witness.py [--runs 30] [--out bench-out]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any


def pct(values: list[float], q: float) -> float:
    data = sorted(values)
    if not data:
        return float("nan")
    k = (len(data) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (k - lo)


def events(path: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def first(evs: list[dict[str, Any]], name: str, **match: Any) -> dict[str, Any]:
    for e in evs:
        if e["event"] == name and all(e.get(k) == v for k, v in match.items()):
            return e
    raise LookupError(f"no {name} {match}")


def plain_copy_gbps(worker: Any, nbytes_blocks: int, repeats: int = 200) -> float:
    """A plain torch copy of the same bytes (same per-layer block shapes) in this process."""
    import torch

    layers = list(worker.kv_caches.values())
    src = [kv[:nbytes_blocks].clone() for kv in layers]
    dst = [torch.empty_like(s) for s in src]
    total = sum(s.numel() * s.element_size() for s in src)
    best = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        for d, s in zip(dst, src, strict=True):
            d.copy_(s)
        best.append(time.perf_counter_ns() - t0)
    return total / pct([float(b) for b in best], 0.5)  # bytes per ns == GB/s


def direct_copy_gbps(worker: Any, blocks: int, repeats: int = 200) -> tuple[float, float]:
    """HostPool.store / HostPool.load -- the connector's copy code -- timed without events.

    Run last: the load writes into device blocks, so the prefix cache is reset afterwards.
    """
    pool, kv = worker.pool, worker.kv_caches
    ids, slots = list(range(1, blocks + 1)), list(range(blocks))
    res = []
    for fn, a, b in ((pool.store, ids, slots), (pool.load, slots, ids)):
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter_ns()
            nbytes = fn(kv, a, b)
            times.append(float(time.perf_counter_ns() - t0))
        res.append(nbytes / pct(times, 0.5))
    return res[0], res[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="runs per scenario (>= 30)")
    parser.add_argument("--out", default="bench-out", help="directory for traces and figures")
    parser.add_argument("--load-mode", choices=("async", "sync"), default="async")
    args = parser.parse_args()
    from residentkv.adapters.vllm.witness import Witness

    out = Path(args.out)
    w = Witness(out / "_engine", policy="fail", load_mode=args.load_mode)
    fail_to_outcome_us: list[float] = []
    branch_to_outcome_us: list[float] = []
    refused_ms: list[float] = []
    store_gbps: list[float] = []
    load_gbps: list[float] = []
    reuse_ms: list[float] = []
    cold_ms: list[float] = []
    local_hit_ms: list[float] = []
    mismatched = 0

    for i in range(args.runs):
        run = w.run("claimed_load_failure", i, out)
        mismatched += not run.matched
        evs = events(run.trace)
        failed = first(evs, "kv_load_failed")
        branch = first(evs, "scheduler_load_failure")
        refused = first(evs, "active_request_refused")
        fail_to_outcome_us.append((refused["ts_ns"] - failed["ts_ns"]) / 1e3)
        branch_to_outcome_us.append((refused["ts_ns"] - branch["ts_ns"]) / 1e3)
        refused_ms.append(run.timings_ms["refused_request"])

    blocks = 2
    for i in range(args.runs):
        run = w.run("success_path", i, out)
        mismatched += not run.matched
        evs = events(run.trace)
        for kind, sink in (("store", store_gbps), ("load", load_gbps)):
            start = first(evs, f"kv_{kind}_started")
            done = first(evs, f"kv_{kind}_finished", job_id=start["job_id"])
            sink.append(done["bytes"] / (done["ts_ns"] - start["ts_ns"]))
        reuse_ms.append(run.timings_ms["reuse_request"])
        cold_ms.append(run.timings_ms["no_claim_request"])
        # The same prompt once more, no claim, its prefix now in vLLM's own prefix cache.
        (_,), ms = w.generate([w.prompt("success_path", i)], [None])
        local_hit_ms.append(ms)

    plain = plain_copy_gbps(w.op.worker, blocks)
    sizes = {}
    for n in (blocks, 32):
        st, ld = direct_copy_gbps(w.op.worker, n)
        base = plain_copy_gbps(w.op.worker, n)
        sizes[n] = {"store_GBps": st, "load_GBps": ld, "plain_GBps": base,
                    "store_ratio": st / base, "load_ratio": ld / base}
    w.reset()
    p50 = {k: pct(v, 0.5) for k, v in {
        "fail_to_outcome_us": fail_to_outcome_us, "branch_to_outcome_us": branch_to_outcome_us,
        "refused_ms": refused_ms, "store_gbps": store_gbps, "load_gbps": load_gbps,
        "reuse_ms": reuse_ms, "cold_ms": cold_ms, "local_hit_ms": local_hit_ms}.items()}
    figures = {
        "runs_per_scenario": args.runs,
        "load_mode": args.load_mode,
        "runs_not_matching_spec": mismatched,
        "failed_load_to_refusal_us": {"p50": p50["fail_to_outcome_us"],
                                      "p95": pct(fail_to_outcome_us, 0.95)},
        "scheduler_branch_to_refusal_us": {"p50": p50["branch_to_outcome_us"],
                                           "p95": pct(branch_to_outcome_us, 0.95)},
        "refused_request_ms": {"p50": p50["refused_ms"], "p95": pct(refused_ms, 0.95)},
        "store_GBps_p50": p50["store_gbps"], "load_GBps_p50": p50["load_gbps"],
        "plain_torch_copy_GBps": plain,
        "store_ratio_to_plain_copy": p50["store_gbps"] / plain,
        "load_ratio_to_plain_copy": p50["load_gbps"] / plain,
        "claimed_reuse_ms_p50": p50["reuse_ms"],
        "no_claim_cold_ms_p50": p50["cold_ms"],
        "no_claim_local_prefix_hit_ms_p50": p50["local_hit_ms"],
        "reuse_vs_no_claim_cold_ratio": p50["reuse_ms"] / p50["cold_ms"],
        "reuse_vs_no_claim_local_hit_ratio": p50["reuse_ms"] / p50["local_hit_ms"],
        "host_pool_copy_by_blocks": sizes,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "figures.json").write_text(json.dumps(figures, indent=1), encoding="utf-8")

    f = figures
    print(f"vLLM witness bench: {args.runs} runs per scenario, one in-process engine (CPU), "
          f"{args.load_mode} loads")
    print(f"  runs not matching SPEC §9: {mismatched}")
    print("  failed load reported to vLLM (kv_load_failed) -> active_request_refused:")
    print(f"    p50 {f['failed_load_to_refusal_us']['p50']:.0f} us, "
          f"p95 {f['failed_load_to_refusal_us']['p95']:.0f} us")
    print("  vLLM failure branch (scheduler_load_failure) -> active_request_refused:")
    print(f"    p50 {f['scheduler_branch_to_refusal_us']['p50']:.1f} us, "
          f"p95 {f['scheduler_branch_to_refusal_us']['p95']:.1f} us   (target p50 <= 200 us)")
    print(f"  refused request end to end: p50 {f['refused_request_ms']['p50']:.2f} ms, "
          f"p95 {f['refused_request_ms']['p95']:.2f} ms")
    print(f"  host-tier store, trace-derived (kv_store_started -> kv_store_finished, includes one"
          f" event's validation and serialization): {f['store_GBps_p50']:.2f} GB/s, ratio "
          f"{f['store_ratio_to_plain_copy']:.2f} to a plain copy ({plain:.2f} GB/s)")
    print("  (a load's started -> finished window also holds the rest of the worker pass, so"
          " load bandwidth is measured on the copy code below)")
    for n, v in sizes.items():
        print(f"  HostPool copy code alone, {n} blocks ({n * w.op.worker.bytes_per_block} B): "
              f"store {v['store_GBps']:.2f} GB/s, load {v['load_GBps']:.2f} GB/s vs plain copy "
              f"{v['plain_GBps']:.2f} GB/s -> ratios {v['store_ratio']:.2f} / "
              f"{v['load_ratio']:.2f}   (target >= 0.5)")
    print(f"  claimed reuse {f['claimed_reuse_ms_p50']:.2f} ms vs no-claim cold "
          f"{f['no_claim_cold_ms_p50']:.2f} ms -> ratio {f['reuse_vs_no_claim_cold_ratio']:.3f}"
          "   (target <= 1.05)")
    print(f"  claimed reuse vs no-claim local prefix-cache hit "
          f"{f['no_claim_local_prefix_hit_ms_p50']:.2f} ms -> ratio "
          f"{f['reuse_vs_no_claim_local_hit_ratio']:.3f}")
    print(f"  figures.json and traces in {out}")


if __name__ == "__main__":
    main()
