"""Benchmark: read + gate a 1,000,000-event trace with 10,000 interleaved claims.

Prints events/s, µs per event and peak RSS of the reading+gating process (measured in a fresh
child process so generation does not inflate it), next to the raw msgspec decode rate of the
same file (every line decoded, nothing validated) and the ratio gates ÷ raw decode, the figure
that says how much the gates cost over merely parsing. Nothing here asserts on time.

The trace is measured in two layouts of the same events: as residentkv's writer writes it
(each line the event's own msgspec encoding, defaults left out), and as another emitter might
(``json.dumps``, envelope keys first), which the reader checks for repeated keys by counting.

    python bench/trace_gates.py [--events 1000000] [--claims 10000] [--gates ...] [--repeat 3]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SCHEMA = "residentkv.event/v1"
PRED = {"id": "p", "kind": "leading_prefix_at_least", "blocks": 2}


def claim_events(i: int, cycles: int) -> Iterator[dict[str, Any]]:
    """One claim's legal life (SPEC §4.2): accept, materialize, offload, then *cycles*
    restore/reuse rounds, each on a request of its own; ``observation`` passes on it."""
    cid, req = f"c-{i}", f"r-{i}"
    ident = {"object_id": f"o-{i}", "cache_identity": "m|t|d|s|128|bf16|-",
             "request_token_map_id": f"tm-{i}", "predicate_id": "p"}
    yield {"event": "request_started", "claim_id": None, "request_id": req}
    yield {"event": "claim_accepted", "claim_id": cid, "request_id": req, **ident,
           "registration": "pre_registered", "protection_mode": "offloadable",
           "footprint_blocks": 2, "predicate": PRED}
    yield {"event": "claim_materialized", "claim_id": cid, "request_id": req, **ident,
           "surviving": 2, "leading": 2, "required": 2, "holds": True, "tier": "device"}
    yield {"event": "kv_store_finished", "claim_id": cid, "request_id": req, "job_id": i,
           "bytes": 4096, "success": True, "from_tier": "device", "to_tier": "host"}
    yield {"event": "claim_offloaded", "claim_id": cid, "request_id": req, **ident,
           "generation": 0, "from_tier": "device", "to_tier": "host", "block_count": 2}
    yield {"event": "request_finished", "claim_id": None, "request_id": req,
           "status": "served", "finish_reason": "length"}
    for g in range(cycles):
        r = f"{req}-{g}"
        yield {"event": "request_started", "claim_id": None, "request_id": r}
        yield {"event": "kv_lookup", "claim_id": cid, "request_id": r, "hit_tokens": 256,
               "async_load": True}
        yield {"event": "claim_restore_required", "claim_id": cid, "request_id": r, **ident,
               "generation": g, "from_tier": "host", "to_tier": "device", "tokens": 256}
        yield {"event": "kv_load_started", "claim_id": cid, "request_id": r, "job_id": g,
               "bytes": 4096, "from_tier": "host", "to_tier": "device"}
        yield {"event": "kv_load_finished", "claim_id": cid, "request_id": r, "job_id": g,
               "bytes": 4096, "success": True}
        yield {"event": "claim_restored", "claim_id": cid, "request_id": r, **ident,
               "generation": g, "source": "offload_tier"}
        yield {"event": "claim_reused", "claim_id": cid, "request_id": r, **ident,
               "generation": g, "holds": True}
        yield {"event": "request_finished", "claim_id": None, "request_id": r,
               "status": "served", "finish_reason": "length"}


def generate(path: Path, n_events: int, n_claims: int, layout: str = "writer") -> int:
    """Write the trace: through residentkv's EventWriter, or as ``json.dumps`` lines."""
    cycles = max(1, -(-(n_events // n_claims - 6) // 8))  # enough rounds to reach n_events
    streams = [claim_events(i, cycles) for i in range(n_claims)]
    records = itertools.islice(_interleaved(streams), n_events)
    if layout == "writer":
        from residentkv.trace.writer import EventWriter

        with EventWriter(path, source="bench", buffer_lines=4096) as writer:
            for e in records:
                writer.emit(**e)
            return writer.count
    seq = 0
    with path.open("w") as fh:
        for e in records:
            record = {"schema": SCHEMA, "seq": seq, "ts_ns": seq * 10, "source": "bench", **e}
            fh.write(json.dumps(record, separators=(",", ":")) + "\n")
            seq += 1
    return seq


def _interleaved(streams: list[Iterator[dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    """One event of each live claim in turn, until every claim's life is told."""
    while streams:
        alive = []
        for s in streams:
            e = next(s, None)
            if e is not None:
                alive.append(s)
                yield e
        streams = alive


def raw_decode(path: str) -> tuple[int, float]:
    """The floor: msgspec-decode every line of the file (no schema, no validation).

    Returns (lines, CPU seconds). Nothing is kept, so this adds nothing to the peak RSS.
    """
    import msgspec

    decode = msgspec.json.Decoder().decode
    lines, cpu = 0, time.process_time()
    with open(path, "rb") as fh:
        for line in fh:
            decode(line)
            lines += 1
    return lines, time.process_time() - cpu


def read_only(path: str) -> float:
    """CPU seconds of the validating reader alone (strict v1 decoding, no gates), read the way
    the gates read it."""
    from residentkv.trace.reader import TraceReader

    cpu = time.process_time()
    for _ in TraceReader(path, fast=True).event_chunks():
        pass
    return time.process_time() - cpu


def gate(path: str, gates: list[str], repeat: int) -> None:
    """Child process: raw decode, validating read, then read + gate, each *repeat* times
    interleaved, the fastest of each kept (noise from other tenants only ever adds time);
    print one JSON line."""
    from residentkv.trace.gates import check_trace

    decode_cpu = read_cpu = cpu = elapsed = float("inf")
    events = results = passed = 0
    for _ in range(repeat):
        lines, d = raw_decode(path)
        decode_cpu = min(decode_cpu, d)
        read_cpu = min(read_cpu, read_only(path))
        start, c = time.perf_counter(), time.process_time()
        check = check_trace(path, gates)
        elapsed = min(elapsed, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - c)
        events, results = check.events, len(check.results)
        passed = sum(r.passed for r in check.results)
        del check  # the peak RSS is that of one check, not of two alive at once
    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"events": events, "seconds": elapsed, "cpu": cpu,
                      "decode_lines": lines, "decode_cpu": decode_cpu, "read_cpu": read_cpu,
                      "rss_mib": rss_kib / 1024,
                      "results": results, "passed": passed}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--claims", type=int, default=10_000)
    ap.add_argument("--gates", default="observation,failure_outcome,lifecycle,attribution")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of each measurement; the fastest is reported")
    ap.add_argument("--layouts", default="writer,json",
                    help="trace layouts to measure: writer (residentkv's), json (json.dumps)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    gates = args.gates.split(",")
    if args.child:
        gate(args.child, gates, args.repeat)
        return
    print(f"gates: {', '.join(gates)}; each figure: the fastest of {args.repeat} interleaved runs")
    for layout in args.layouts.split(","):
        measure(layout, args, gates)


def measure(layout: str, args: argparse.Namespace, gates: list[str]) -> None:
    """Generate the trace in *layout*, gate it in a child process, print the figures."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.jsonl"
        t0 = time.perf_counter()
        n = generate(path, args.events, args.claims, layout)
        gen_s = time.perf_counter() - t0
        size_mib = os.path.getsize(path) / 2**20
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(path), "--gates", args.gates,
             "--repeat", str(args.repeat)],
            capture_output=True, text=True, check=True,
        ).stdout
        fig = json.loads(out.strip().splitlines()[-1])
    print(f"\n[{layout} layout] trace: {n:,} events, {args.claims:,} interleaved claims, "
          f"{size_mib:.0f} MiB (generated in {gen_s:.1f} s) -> {fig['results']:,} results, "
          f"{fig['passed']:,} passed")
    print(f"read+gate: {fig['seconds']:.2f} s wall, {fig['cpu']:.2f} s CPU -> "
          f"{fig['events'] / fig['seconds']:,.0f} events/s wall, "
          f"{fig['events'] / fig['cpu']:,.0f} events/s CPU, "
          f"{fig['cpu'] / fig['events'] * 1e6:.2f} µs/event CPU")
    decode_rate = fig["decode_lines"] / fig["decode_cpu"]
    gate_rate = fig["events"] / fig["cpu"]
    print(f"raw msgspec decode of the same file (no validation): {decode_rate:,.0f} events/s CPU")
    read_rate = fig["events"] / fig["read_cpu"]
    print(f"validating read alone (strict v1, no gates): {read_rate:,.0f} events/s CPU "
          f"({read_rate / decode_rate:.2f} of raw decode)")
    print(f"gates / raw decode: {gate_rate / decode_rate:.2f} "
          f"(the gates' own share: {fig['cpu'] - fig['read_cpu']:.2f} s CPU)")
    print(f"peak RSS of the gating process: {fig['rss_mib']:.0f} MiB")
    print("reference: the research artifact's analyzer needs ~4.5 µs/event "
          f"(ratio {4.5 / (fig['cpu'] / fig['events'] * 1e6):.2f}x; above 1 is faster)")


if __name__ == "__main__":
    main()
