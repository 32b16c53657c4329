"""Benchmark an engine start on a long-lived sink: reading the sink back as the journal.

A starting engine reads its sink (SPEC §9.1: every decided claim id, every claim left open) before
its first request. This writes a sink of N claims (about 10 events each, half of them released,
the rest left open as after a crash) and times ``read_journal`` against two baselines measured in
the same run on the same file: reading its lines, and decoding every line as JSON. Prints
figures only; asserts nothing about time.

Run: python bench/journal.py [--claims N]
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import msgspec

from residentkv.adapters.vllm.journal import read_journal

IDENT = '"object_id":"o","cache_identity":"ci","request_token_map_id":"m","predicate_id":"p"'
LIFE = (("request_started", ""), ("claim_accepted", ',"footprint_blocks":2'), ("kv_lookup", ""),
        ("claim_materialized", ',"surviving":2,"leading":2,"required":2,"holds":true'),
        ("kv_store_started", ""), ("kv_store_finished", ""), ("claim_offloaded", ""),
        ("request_finished", ""), ("claim_restore_required", ""), ("claim_restored", ""))


def write_sink(path: Path, claims: int) -> int:
    """A sink of *claims* claims' lives (the lines as the engine's writer lays them out)."""
    seq = 0
    with path.open("w", encoding="utf-8") as fh:
        fh.write('{"event":"stream_started","schema":"residentkv.event/v1","seq":0,"ts_ns":0,'
                 '"source":"s","claim_id":null,"request_id":null,"emitter":{"name":"x",'
                 '"version":"1"},"runtime":{"name":"vllm","version":"1"},"incarnation":"a"}\n')
        for c in range(claims):
            events = [*LIFE, *((("claim_released", ',"reason":"operator release"'),)
                               if c % 2 else ())]
            for event, extra in events:
                seq += 1
                fh.write(f'{{"event":"{event}","schema":"residentkv.event/v1","seq":{seq},'
                         f'"ts_ns":{seq},"source":"s","claim_id":"claim-{c}",'
                         f'"request_id":"r{c}",{IDENT}{extra}}}\n')
    return seq + 1


def timed(fn: object) -> float:
    start = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sink = Path(tmp) / "sink.jsonl"
        lines = write_sink(sink, args.claims)
        mib = sink.stat().st_size / 2**20

        def read_lines() -> None:
            with sink.open("rb") as fh:
                for _ in fh:
                    pass

        decode = msgspec.json.Decoder().decode

        def decode_all() -> None:
            with sink.open("rb") as fh:
                for line in fh:
                    decode(line)

        base = timed(read_lines)
        full = timed(decode_all)
        journal = None

        def read() -> None:
            nonlocal journal
            journal = read_journal(sink)

        took = timed(read)
        assert journal is not None
        print(f"sink: {lines:,} events, {mib:.0f} MiB, {args.claims:,} claims")
        print(f"read lines only:      {base:6.2f} s")
        print(f"decode every line:    {full:6.2f} s")
        print(f"read_journal:         {took:6.2f} s  ({took / lines * 1e6:.2f} µs/event; "
              f"{took / full:.2f} x decoding every line)")
        print(f"open claims found:    {len(journal.open):,}; decisions kept: "
              f"{len(journal.decisions):,}")
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"peak RSS:             {peak:.0f} MiB")


if __name__ == "__main__":
    main()
