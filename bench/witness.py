"""Measure the vLLM witness in the in-process and the multiprocessing shape, in one run.

Figures, per shape: failed load -> claim-scoped refusal latency (the worker rank's time of the
failed copy, carried in ``kv_load_failed.ts_ns``, to the time the scheduler side wrote
``active_request_refused``) and the adapter's own share of it (vLLM's failure branch,
``scheduler_load_failure``, to the refusal), refused-request latency, the end-to-end cost of a
claimed reuse (restored from the host tier, every step's events written through) against the
same request without a claim; in-process only, the connector's host-tier code against a plain
torch copy of the same bytes: store + content digest and load + verification (what every claimed
store and restore runs), the bare copies, and the digest's own share of each. Ratios are taken
between figures of this one run.

Prints figures; asserts nothing about time. Targets are printed next to the measured values for
the reader, not enforced.

    python bench/witness.py [--runs 30] [--out bench-out] [--shapes inproc,mp]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from host_tier import describe, measure


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


def copy_ratios(blocks: int) -> dict[str, float]:
    """The connector's host-tier code against a plain torch copy of the same per-layer block
    slices, on the in-process engine's own KV tensors (its worker lives in this process):
    ``bench/host_tier.py``'s interleaved rounds -- the fused store+digest and load+verify a
    claimed store and restore run, and the two passes they replace."""
    from residentkv.adapters.vllm.worker import LOCAL_WORKERS

    worker = LOCAL_WORKERS[-1]
    pool, kv = worker.pool, worker.kv_caches
    assert pool is not None and kv is not None
    return measure(pool, kv, blocks)


def measure_shape(shape: str, runs: int, out: Path, load_mode: str) -> dict[str, Any]:
    from residentkv.adapters.vllm.witness import Witness

    w = Witness(out / f"_engine-{shape}", policy="fail", load_mode=load_mode, shape=shape)
    try:
        fail_to_refusal_us: list[float] = []
        branch_to_refusal_us: list[float] = []
        refused_ms: list[float] = []
        reuse_ms: list[float] = []
        cold_ms: list[float] = []
        mismatched = 0
        for i in range(runs):
            run = w.run("claimed_load_failure", i, out / shape)
            if not run.matched:  # a broken run is counted and reported, never timed
                mismatched += 1
                print(f"  [{shape}] run {i} did not match SPEC §9: {run.error or run.checks}")
                continue
            evs = events(run.trace)
            failed = first(evs, "kv_load_failed")
            refused = first(evs, "active_request_refused")
            fail_to_refusal_us.append((refused["ts_ns"] - failed["ts_ns"]) / 1e3)
            branch = first(evs, "scheduler_load_failure")
            branch_to_refusal_us.append((refused["ts_ns"] - branch["ts_ns"]) / 1e3)
            refused_ms.append(run.timings_ms["refused_request"])
        for i in range(runs):
            run = w.run("success_path", i, out / shape)
            if not run.matched:
                mismatched += 1
                print(f"  [{shape}] run {i} did not match SPEC §9: {run.error or run.checks}")
                continue
            reuse_ms.append(run.timings_ms["reuse_request"])
            cold_ms.append(run.timings_ms["no_claim_request"])
        figures: dict[str, Any] = {
            "runs_not_matching_spec": mismatched,
            "failed_load_to_refusal_us": {"p50": pct(fail_to_refusal_us, 0.5),
                                          "p95": pct(fail_to_refusal_us, 0.95)},
            "branch_to_refusal_us": {"p50": pct(branch_to_refusal_us, 0.5),
                                     "p95": pct(branch_to_refusal_us, 0.95)},
            "refused_request_ms": {"p50": pct(refused_ms, 0.5), "p95": pct(refused_ms, 0.95)},
            "claimed_reuse_ms_p50": pct(reuse_ms, 0.5),
            "no_claim_cold_ms_p50": pct(cold_ms, 0.5),
        }
        figures["reuse_vs_no_claim_ratio"] = (figures["claimed_reuse_ms_p50"]
                                              / figures["no_claim_cold_ms_p50"])
        if shape == "inproc":
            figures["host_pool_copy"] = {n: copy_ratios(n) for n in (2, 32)}
            w.reset()
        return figures
    finally:
        w.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="runs per scenario and shape")
    parser.add_argument("--out", default="bench-out", help="directory for traces and figures")
    parser.add_argument("--load-mode", choices=("async", "sync"), default="async")
    parser.add_argument("--shapes", default="inproc,mp",
                        help="comma-separated shapes; the first is the baseline of the ratio")
    args = parser.parse_args()
    out = Path(args.out)
    shapes = [s for s in args.shapes.split(",") if s]
    figures: dict[str, Any] = {"runs_per_scenario": args.runs, "load_mode": args.load_mode,
                               "shapes": {}}
    for shape in shapes:
        figures["shapes"][shape] = measure_shape(shape, args.runs, out, args.load_mode)
    base = figures["shapes"][shapes[0]]["failed_load_to_refusal_us"]["p50"]
    for shape in shapes[1:]:
        p50 = figures["shapes"][shape]["failed_load_to_refusal_us"]["p50"]
        figures["shapes"][shape]["refusal_p50_ratio_to_" + shapes[0]] = p50 / base
    out.mkdir(parents=True, exist_ok=True)
    (out / "figures.json").write_text(json.dumps(figures, indent=1), encoding="utf-8")

    print(f"vLLM witness bench: {args.runs} runs per scenario and shape, CPU, {args.load_mode} "
          "loads, every scheduler step's events written through before the step's hook returns")
    for shape, f in figures["shapes"].items():
        r = f["failed_load_to_refusal_us"]
        print(f"  [{shape}] runs not matching SPEC §9: {f['runs_not_matching_spec']}")
        print(f"  [{shape}] failed load (worker) -> active_request_refused written: "
              f"p50 {r['p50']:.0f} us, p95 {r['p95']:.0f} us")
        ratio_key = "refusal_p50_ratio_to_" + shapes[0]
        if ratio_key in f:
            print(f"  [{shape}]   ratio to {shapes[0]}: {f[ratio_key]:.2f}   (target <= 1.25)")
        b = f["branch_to_refusal_us"]
        print(f"  [{shape}]   of which vLLM's failure branch (scheduler_load_failure) -> refusal,"
              f" the adapter's own share: p50 {b['p50']:.1f} us, p95 {b['p95']:.1f} us")
        print(f"  [{shape}] refused request end to end: p50 {f['refused_request_ms']['p50']:.2f}"
              f" ms, p95 {f['refused_request_ms']['p95']:.2f} ms")
        print(f"  [{shape}] claimed reuse {f['claimed_reuse_ms_p50']:.2f} ms vs the same request"
              f" without a claim {f['no_claim_cold_ms_p50']:.2f} ms -> ratio "
              f"{f['reuse_vs_no_claim_ratio']:.3f}   (target <= 1.05)")
        for n, v in f.get("host_pool_copy", {}).items():
            print(describe(n, v, f"  [{shape}] "))
    print(f"  figures.json and traces in {out}")


if __name__ == "__main__":
    main()
