"""Measure the host tier's digested store and verified load against a plain torch copy of the
same bytes, in one run.

Per block count, in rounds of calls made in turn (one call of each path, then the next, so
load on the machine falls on all of them alike): a plain torch copy of the same per-layer
block slices (the baseline), the fused pass a claimed store and restore run
(``HostPool.store_sealed``, ``HostPool.load_verified``), and the two passes they replace
(``store`` then ``seal``, ``load`` then ``verify``). A round's ratio is its plain copy's median
time over the path's median time; the figures are the medians over rounds, with their range.
The fused and the two-pass digests are compared on every round (a difference stops the
bench).

Standalone, the KV tensors are shaped like the witness engine's (2 layers; per layer and block
2 KV heads x 128 tokens x K and V of 32 dims, float32: 64 KiB); ``bench/witness.py`` runs the
same measurement on the engine's own tensors. Prints figures; asserts nothing about time.

    python bench/host_tier.py [--blocks 2,32] [--rounds 7] [--repeats 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

#: the witness engine's KV layout per layer: (blocks, KV heads, block tokens, 2 x head dims)
WITNESS_LAYER_SHAPE = (2, 128, 64)
WITNESS_LAYERS = 2


def measure(pool: Any, kv: dict[str, Any], blocks: int, rounds: int = 7,
            repeats: int = 200) -> dict[str, float]:
    """Ratios to a plain torch copy of the same bytes (medians over interleaved rounds) and
    throughputs, for *blocks* device blocks 1.. and host slots 0.. of *pool*."""
    import torch

    ids, slots = list(range(1, blocks + 1)), list(range(blocks))
    src = [t[1:blocks + 1] for t in kv.values()]
    dst = [torch.empty_like(s) for s in src]
    nbytes = sum(s.numel() * s.element_size() for s in src)

    def plain() -> None:
        for d, s in zip(dst, src, strict=True):
            d.copy_(s)

    def two_pass_store() -> bytes:
        pool.store(kv, ids, slots)
        return bytes(pool.seal(slots))

    def two_pass_load() -> list[int]:
        pool.load(kv, slots, ids)
        return list(pool.verify(slots, ids))

    paths: dict[str, Callable[[], object]] = {
        "plain": plain,
        "fused_store": lambda: pool.store_sealed(kv, ids, slots),
        "two_pass_store": two_pass_store,
        "fused_load": lambda: pool.load_verified(kv, slots, ids),
        "two_pass_load": two_pass_load,
    }
    ratios: dict[str, list[float]] = {name: [] for name in paths if name != "plain"}
    plain_ns: list[float] = []
    for _ in range(rounds):
        if pool.store_sealed(kv, ids, slots)[1] != two_pass_store():
            raise AssertionError("the fused store's digest differs from the two passes'")
        if pool.load_verified(kv, slots, ids)[1] or two_pass_load():
            raise AssertionError("the bench's own restore did not verify")
        times: dict[str, list[int]] = {name: [] for name in paths}
        for _ in range(repeats):
            for name, fn in paths.items():  # every path in turn, call by call
                t0 = time.perf_counter_ns()
                fn()
                times[name].append(time.perf_counter_ns() - t0)
        base = statistics.median(times["plain"])
        plain_ns.append(base)
        for name, values in ratios.items():
            values.append(base / statistics.median(times[name]))
    out = {"bytes": float(nbytes), "plain_GBps": nbytes / statistics.median(plain_ns)}
    for name, values in ratios.items():
        out[f"{name}_ratio"] = statistics.median(values)
        out[f"{name}_ratio_min"] = min(values)
        out[f"{name}_ratio_max"] = max(values)
    return out


def describe(blocks: int, figures: dict[str, float], prefix: str = "") -> str:
    """Two lines for one block count: the fused paths against the plain copy, and the
    two-pass code they replace, measured in the same rounds."""
    f = figures
    return (f"{prefix}host tier, {blocks} blocks ({f['bytes'] / 2**20:.2f} MiB), plain torch "
            f"copy {f['plain_GBps']:.1f} GB/s: store+digest ratio {f['fused_store_ratio']:.2f} "
            f"({f['fused_store_ratio_min']:.2f}-{f['fused_store_ratio_max']:.2f}), load+verify "
            f"ratio {f['fused_load_ratio']:.2f} ({f['fused_load_ratio_min']:.2f}-"
            f"{f['fused_load_ratio_max']:.2f})   (target >= 0.6)\n"
            f"{prefix}  the two passes in the same rounds: store+seal "
            f"{f['two_pass_store_ratio']:.2f}, load+verify {f['two_pass_load_ratio']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", default="2,32", help="comma-separated block counts")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    import torch

    from residentkv.adapters.vllm.host_tier import HostPool

    counts = [int(b) for b in args.blocks.split(",") if b]
    num_blocks = max(counts) + 2
    gen = torch.Generator().manual_seed(0)
    kv = {f"layer{n}": torch.randn(num_blocks, *WITNESS_LAYER_SHAPE, generator=gen)
          for n in range(WITNESS_LAYERS)}
    pool = HostPool(kv, num_slots=max(counts))
    fused = pool._fused
    print(f"host tier bench: torch {torch.__version__}, {torch.get_num_threads()} torch "
          f"threads, fused pass {'on' if fused is not None else 'UNAVAILABLE (two passes)'}"
          + (f", team through the OpenMP runtime: {'yes' if fused.gomp_parallel else 'no'}"
             if fused is not None else "")
          + f"; load average {os.getloadavg()[0]:.2f}")
    for n in counts:
        print(describe(n, measure(pool, kv, n, args.rounds, args.repeats), "  "))
    print(f"  load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
