"""Benchmark: generate and judge ≥ 5,000 trace mutants.

Parents are generated streams of many claims (each restored and reused, the last one failing
with an attributed refusal), so there are thousands of distinct single mutations. Prints
mutants/s for generation and for judging (all four gates per mutant), and the kill count.
Nothing here asserts on time.

    python bench/mutants.py [--mutants 5000] [--claims 40] [--parents 5]
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

from residentkv.suite import trace_mutants

SCHEMA = "residentkv.event/v1"
PRED = {"id": "p", "kind": "leading_prefix_at_least", "blocks": 2}


def many_claims(n: int, prefix: str = "c") -> list[dict[str, Any]]:
    """n claims in one stream: the first n-1 restored and reused, the last one failing."""
    events: list[dict[str, Any]] = []

    def add(event: str, claim: str | None, request: str | None, **fields: Any) -> None:
        record = {"schema": SCHEMA, "seq": len(events), "ts_ns": len(events), "source": "bench",
                  "event": event, "claim_id": claim, "request_id": request}
        if event.startswith("claim_") and claim:
            record.update(object_id=f"o-{claim}", cache_identity="m|t|d|s|128|bf16|-",
                          request_token_map_id=f"tm-{claim}", predicate_id="p")
        events.append({**record, **fields})

    for i in range(n):
        c, r = f"{prefix}-{i}", f"r-{i}"
        add("claim_accepted", c, r, registration="pre_registered",
            protection_mode="offloadable", footprint_blocks=2, predicate=PRED)
        add("claim_materialized", c, r, surviving=2, leading=2, required=2, holds=True,
            tier="device")
        add("kv_store_finished", c, r, job_id=i, bytes=1, success=True, from_tier="device",
            to_tier="host")
        add("claim_offloaded", c, r, generation=0, from_tier="device", to_tier="host",
            block_count=2)
    for i in range(n):
        c, r = f"{prefix}-{i}", f"reuse-{i}"
        add("kv_lookup", c, r, hit_tokens=256, async_load=True)
        add("claim_restore_required", c, r, generation=0, from_tier="host", to_tier="device",
            tokens=256)
        if i < n - 1:
            add("kv_load_finished", c, r, job_id=n + i, success=True)
            add("claim_restored", c, r, generation=0, source="offload_tier")
            add("claim_reused", c, r, generation=0, holds=True)
            add("request_finished", None, r, status="served", finish_reason="length")
            continue
        add("kv_load_failed", c, r, invalid_block_ids=[0, 1], injected=True)
        add("scheduler_load_failure", c, r, policy="fail", invalid_block_count=2,
            failed_tokens=256, finish_status="FINISHED_ERROR")
        add("claim_restore_failed", c, r, generation=0, reason="injected", injected=True,
            outcome_type="refusal", outcome_claim_id=c)
        add("active_request_refused", c, r, outcome_claim_id=c, blocking_claim_ids=[c],
            feasibility="restore_failed", arbiter="scheduler_boundary")
        add("request_finished", None, r, status="error", finish_reason="error")
    return events


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mutants", type=int, default=5000)
    ap.add_argument("--claims", type=int, default=40)
    ap.add_argument("--parents", type=int, default=5)
    args = ap.parse_args()
    parents = [many_claims(args.claims, f"p{k}") for k in range(args.parents)]
    t0 = time.perf_counter()
    pool = [pair for k, events in enumerate(parents)
            for pair in trace_mutants.mutants_of(f"bench-{k}", events)]
    gen_s = time.perf_counter() - t0
    sample = random.Random(0).sample(pool, min(args.mutants, len(pool)))
    t1 = time.perf_counter()
    killed = sum(trace_mutants.judge(m, passed).killed for m, passed in sample)
    judge_s = time.perf_counter() - t1
    print(f"parents: {args.parents} traces of {len(parents[0])} events and {args.claims} claims "
          f"-> {len(pool):,} distinct single mutations")
    print(f"generation: {len(pool):,} mutants in {gen_s:.2f} s "
          f"({len(pool) / gen_s:,.0f} mutants/s)")
    print(f"judging (4 gates each): {len(sample):,} mutants in {judge_s:.2f} s "
          f"({len(sample) / judge_s:,.0f} mutants/s); killed {killed:,}, "
          f"survived {len(sample) - killed:,}")
    print(f"total for {len(sample):,} mutants: {gen_s + judge_s:.1f} s")


if __name__ == "__main__":
    main()
