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


def copy_ratios(blocks: int, repeats: int = 200) -> dict[str, float]:
    """The connector's host-tier code against a plain torch copy of the same per-layer block
    slices, in this process (the in-process engine's worker): store + digest
    (``HostPool.store`` then ``seal``, what a claimed store runs), load + verify (``load`` then
    ``verify``, what a restore runs), the bare copies, and the digest's share of each."""
    import torch

    from residentkv.adapters.vllm.worker import LOCAL_WORKERS

    worker = LOCAL_WORKERS[-1]
    pool, kv = worker.pool, worker.kv_caches
    assert pool is not None and kv is not None
    ids, slots = list(range(1, blocks + 1)), list(range(blocks))

    def timed(fn: Any) -> float:
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter_ns()
            fn()
            times.append(float(time.perf_counter_ns() - t0))
        return pct(times, 0.5)

    src = [t[1:blocks + 1] for t in kv.values()]
    dst = [torch.empty_like(s) for s in src]
    nbytes = sum(s.numel() * s.element_size() for s in src)

    def plain() -> None:
        for d, s in zip(dst, src, strict=True):
            d.copy_(s)

    def store_digest() -> None:
        pool.store(kv, ids, slots)
        pool.seal(slots)

    def load_verify() -> None:
        pool.load(kv, slots, ids)
        if pool.verify(slots, ids):
            raise AssertionError("the bench's own restore did not verify")

    base = timed(plain)
    t = {"store": timed(lambda: pool.store(kv, ids, slots)),
         "load": timed(lambda: pool.load(kv, slots, ids)),
         "store_digest": timed(store_digest), "load_verify": timed(load_verify),
         "digest": timed(lambda: pool.seal(slots)), "verify": timed(lambda: pool.verify(slots,
                                                                                        ids))}
    out = {"plain_GBps": nbytes / base}
    for k, v in t.items():
        out[f"{k}_GBps"] = nbytes / v
    for k in ("store", "load", "store_digest", "load_verify"):
        out[f"{k}_ratio"] = base / t[k]
    out["digest_share_of_store"] = t["digest"] / t["store_digest"]
    out["verify_share_of_load"] = t["verify"] / t["load_verify"]
    return out


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
            print(f"  [{shape}] host tier, {n} blocks, vs plain torch copy {v['plain_GBps']:.2f} "
                  f"GB/s: store+digest {v['store_digest_GBps']:.2f} GB/s (ratio "
                  f"{v['store_digest_ratio']:.2f}), load+verify {v['load_verify_GBps']:.2f} GB/s"
                  f" (ratio {v['load_verify_ratio']:.2f})   (target >= 0.5)")
            print(f"  [{shape}]   bare copies: store {v['store_ratio']:.2f}, load "
                  f"{v['load_ratio']:.2f}; digest's own share: {v['digest_share_of_store']:.0%}"
                  f" of store+digest, {v['verify_share_of_load']:.0%} of load+verify "
                  f"(XXH3-128 at {v['digest_GBps']:.1f} / {v['verify_GBps']:.1f} GB/s)")
    print(f"  figures.json and traces in {out}")


if __name__ == "__main__":
    main()
