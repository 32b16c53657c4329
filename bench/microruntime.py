"""Throughput of the MicroRuntime on a 1M-operation random workload.

An *operation* is one simulated block operation: a prefix-cache hit, an allocation, an
eviction or a release (``MicroRuntime.block_ops``). The workload is a seeded random stream of
requests over a Zipf-like set of prefixes (1-16 blocks each) in a 4096-block pool under
``hard_exclude`` with hard claims on some popular prefixes, so hits, LRU evictions, pinned
blocks and attributed refusals all occur. Figures are printed, never asserted.

    python bench/microruntime.py [--ops 1000000] [--seed 7]
"""

from __future__ import annotations

import argparse
import io
import random
import time

from residentkv.microruntime.runtime import MicroRuntime
from residentkv.microruntime.scenario import make_claim
from residentkv.trace.writer import EventWriter

POOL = 4096
OBJECTS = 3000
CLAIMS = 40


class NullSink(io.TextIOBase):
    """A text stream that discards everything (measures emission, not I/O)."""

    def write(self, s: str) -> int:
        return len(s)


def workload(seed: int, n: int) -> tuple[list[tuple[str, int]], dict[str, int]]:
    """*n* requests (object id, blocks), popular objects far more often than others; and
    each object's length."""
    rng = random.Random(seed)
    weights = [1.0 / (i + 1) ** 0.9 for i in range(OBJECTS)]
    objs = rng.choices(range(OBJECTS), weights=weights, k=n)
    length = {f"obj-{i}": rng.randint(1, 16) for i in range(OBJECTS)}
    return [(f"obj-{o}", length[f"obj-{o}"]) for o in objs], length


def run(
    requests: list[tuple[str, int]],
    length: dict[str, int],
    target_ops: int,
    writer: EventWriter | None,
) -> tuple[int, int, float]:
    """Run until *target_ops* block operations; (ops, requests, seconds)."""
    rt = MicroRuntime(POOL, "hard_exclude", writer=writer)
    for i in range(CLAIMS):
        obj = f"obj-{i * 7}"
        rt.submit_claim(make_claim(f"claim-{i}", object_id=obj, footprint=length[obj]))
    start = time.perf_counter()
    done = 0
    for i, (obj, blocks) in enumerate(requests):
        rt.request(f"r{i}", obj, blocks)
        done += 1
        if rt.block_ops >= target_ops:
            break
    elapsed = time.perf_counter() - start
    rt.close()
    return rt.block_ops, done, elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    requests, length = workload(args.seed, max(1000, args.ops // 4))
    modes: list[tuple[str, EventWriter | None]] = [
        ("no emission", None),
        ("emission to a null sink (validated)", EventWriter(NullSink(), source="microruntime")),
        ("emission to a null sink (unvalidated)",
         EventWriter(NullSink(), source="microruntime", validate=False)),
    ]
    print(f"MicroRuntime bench: pool {POOL} blocks, {OBJECTS} prefixes, {CLAIMS} hard claims, "
          f"target {args.ops:,} block operations, seed {args.seed}")
    for name, writer in modes:
        ops, reqs, secs = run(requests, length, args.ops, writer)
        events = writer.count if writer is not None else 0
        print(f"  {name:<38} {ops:>10,} ops  {reqs:>8,} requests  {secs:7.2f} s  "
              f"{ops / secs:>12,.0f} ops/s  {reqs / secs:>10,.0f} requests/s"
              + (f"  {events:,} events" if writer is not None else ""))


if __name__ == "__main__":
    main()
