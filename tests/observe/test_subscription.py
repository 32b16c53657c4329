"""The subscription over real ZeroMQ sockets, against a publisher speaking vLLM's wire format."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec
import pytest
import zmq

from residentkv.observe.observer import Observer
from residentkv.observe.subscriber import Subscription
from residentkv.observe.synthetic import SyntheticPublisher, chain, removed, stored

from .obskit import BS, PREFIX, claim_dict, named, observed, open_observer


@contextmanager
def running(sub: Subscription, obs: Observer) -> Iterator[threading.Event]:
    stop = threading.Event()
    thread = threading.Thread(target=sub.run, args=(obs, stop), daemon=True)
    thread.start()
    try:
        yield stop
    finally:
        stop.set()
        thread.join(10)


def wait_for(predicate: object, what: str) -> None:
    # a bound on waiting, never an assertion about time
    for _ in range(200):
        if callable(predicate) and predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what}")


def subscribed(pub: SyntheticPublisher, obs: Observer) -> None:
    """Publish empty batches until the subscription sees one (PUB drops before it joins)."""
    while True:
        pub.publish([])
        time.sleep(0.05)
        if obs.expected is not None:
            return


@contextmanager
def stream(tmp: Path, pub: SyntheticPublisher, sub: Subscription,
           replay: bool = False) -> Iterator[tuple[Observer, Path]]:
    """An observer of one claim fed by *sub*; on leaving, every batch *pub* sent was applied
    and the trace is closed."""
    claims = observed(tmp, claim_dict("c-soft"))
    obs, writer, out = open_observer(tmp, claims, replay=sub.replay if replay else None)
    try:
        with running(sub, obs):
            subscribed(pub, obs)
            yield obs, out
            last = pub.publish([])
            wait_for(lambda: obs.expected == last + 1, "the last batch")
    finally:
        sub.close()
        pub.close()
        obs.finish()
        writer.close()


def test_ipc_stream_with_a_dropped_batch_is_replayed(tmp_path: Path) -> None:
    ep, rep = f"ipc://{tmp_path}/ev.sock", f"ipc://{tmp_path}/replay.sock"
    pub = SyntheticPublisher(ep, replay_endpoint=rep)
    sub = Subscription(ep, topic=b"kv", replay_endpoint=rep)
    with stream(tmp_path, pub, sub, replay=True) as (_, out):
        pub.publish([stored(PREFIX, BS)])
        pub.publish([removed(chain(PREFIX, BS)[1:2])], drop=True)   # never sent: replayed
    # the subscription joined late (batch 0 may be lost): a late start, then no other gap
    reasons = [g["reason"] for g in named(out, "observation_gap")]
    assert "sequence_jump" not in reasons
    assert [e["position"] for e in named(out, "block_evicted")] == [1]


def test_tcp_publisher_connects_to_a_bound_observer(tmp_path: Path) -> None:
    sub = Subscription("tcp://127.0.0.1:0", bind=True, topic=b"kv")
    pub = SyntheticPublisher(sub.sub.getsockopt_string(zmq.LAST_ENDPOINT), bind=False)
    with stream(tmp_path, pub, sub) as (_, out):
        pub.publish([stored(PREFIX, BS)])
        dropped = pub.publish([], drop=True)                       # no replay endpoint: a gap
    jumps = [g for g in named(out, "observation_gap") if g["reason"] == "sequence_jump"]
    assert [(g["missed_from"], g["missed_to"]) for g in jumps] == [(dropped, dropped)]
    assert len(named(out, "claim_materialized")) == 1


def test_undecodable_payload_is_a_gap(tmp_path: Path) -> None:
    ep = f"ipc://{tmp_path}/ev.sock"
    pub = SyntheticPublisher(ep)
    with stream(tmp_path, pub, Subscription(ep, topic=b"kv")) as (_, out):
        seq = pub.seq
        pub.seq += 1
        pub.pub.send_multipart([b"kv", seq.to_bytes(8, "big"),
                                msgspec.msgpack.encode({"not": "a batch"})])
    bad = [g for g in named(out, "observation_gap") if g["reason"] == "undecodable_batch"]
    assert [(g["missed_from"], g["missed_to"]) for g in bad] == [(seq, seq)]


def test_a_dropped_subscription_is_a_gap(tmp_path: Path) -> None:
    ep = f"ipc://{tmp_path}/ev.sock"
    first = SyntheticPublisher(ep)
    sub = Subscription(ep, topic=b"kv")
    obs, writer, out = open_observer(tmp_path, observed(tmp_path, claim_dict("c-soft")))
    with running(sub, obs):
        subscribed(first, obs)
        seen = first.publish([])
        wait_for(lambda: obs.expected == seen + 1, "the first publisher's batches")
        first.close()                                   # the runtime's socket goes away
        wait_for(lambda: obs.dropped, "the disconnect")
        second = SyntheticPublisher(ep)                  # back, 2 batches later
        second.seq = seen + 3
        try:
            while obs.expected == seen + 1:              # until it joined again
                second.publish([])
                time.sleep(0.05)
        finally:
            second.close()
        wait_for(lambda: obs.dropped, "the second disconnect")
    sub.close()
    obs.finish()
    writer.close()
    drops = [g for g in named(out, "observation_gap") if g["reason"] == "subscription_dropped"]
    # down while seen+1, seen+2 (and whatever the second publisher sent before the subscription
    # joined it) were published; then down again at the end: open-ended
    assert len(drops) == 2
    assert drops[0]["missed_from"] == seen + 1 and drops[0]["missed_to"] >= seen + 2
    assert drops[1]["missed_from"] > drops[0]["missed_to"] and "missed_to" not in drops[1]


@pytest.mark.vllm
def test_vllm_own_structs_decode_into_the_mirror() -> None:
    from vllm.distributed import kv_events as v

    from residentkv.observe.wire import BlockRemoved, BlockStored, decode_frame

    batch = v.KVEventBatch(ts=1.5, events=[
        v.BlockStored(block_hashes=[2**64 - 1, 7], parent_block_hash=None, token_ids=[1, 2],
                      block_size=1, lora_id=None, medium="GPU", lora_name=None,
                      extra_keys=[None, ("salt",)], group_idx=0, session_id="s"),
        v.BlockRemoved(block_hashes=[b"\x01\x02"], medium="CPU", group_idx=0),
        v.AllBlocksCleared()], data_parallel_rank=0)
    parts = [b"kv", (9).to_bytes(8, "big"), msgspec.msgpack.Encoder().encode(batch)]
    frame = decode_frame(parts)
    assert frame.seq == 9 and frame.batch.ts == 1.5
    s, r, _ = frame.batch.events
    assert isinstance(s, BlockStored) and s.block_hashes == [2**64 - 1, 7]
    assert s.extra_keys == [None, ("salt",)] and s.session_id == "s"
    assert isinstance(r, BlockRemoved) and r.block_hashes == [b"\x01\x02"]
    assert r.medium == "CPU"
