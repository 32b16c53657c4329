"""The subscription over real ZeroMQ sockets: a publisher speaking vLLM's wire format byte for
byte, and vLLM's own publisher class in-process."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
import zmq

from residentkv.observe.subscriber import Endpoint, Subscription
from residentkv.observe.synthetic import SyntheticPublisher, chain, removed, stored

from .obskit import BS, PREFIX, gaps, named
from .zmqkit import Watch, ipc, named_now, raw, wait_for, watching


def test_ipc_stream_with_a_dropped_batch_is_replayed(tmp_path: Path) -> None:
    ep, rep = ipc(tmp_path, "ev"), ipc(tmp_path, "replay")
    pub = SyntheticPublisher(ep, replay_endpoint=rep)
    sub = Subscription([Endpoint(ep, replay=rep, topic=b"kv")], end_budget_s=10)
    with watching(tmp_path, pub, sub) as w:
        pub.publish([stored(PREFIX, BS)])
        pub.publish([removed(chain(PREFIX, BS)[1:2])], drop=True)   # never sent: replayed
    # the subscription joined late, but replay reaches back to batch 0 and closes the tail
    assert gaps(w.out) == []
    assert [e["position"] for e in named(w.out, "block_evicted")] == [1]


def test_tcp_publisher_connects_to_a_bound_observer(tmp_path: Path) -> None:
    sub = Subscription([Endpoint("tcp://127.0.0.1:0", bind=True, topic=b"kv")])
    pub = SyntheticPublisher(sub.subs[0][0].getsockopt_string(zmq.LAST_ENDPOINT), bind=False)
    with watching(tmp_path, pub, sub) as w:
        pub.publish([stored(PREFIX, BS)])
        dropped = pub.publish([], drop=True)                       # no replay endpoint: a gap
    assert ("sequence_jump", dropped, dropped) in gaps(w.out)
    assert len(named(w.out, "claim_materialized")) == 1


def test_malformed_and_undecodable_messages_are_gaps_and_never_stop_it(tmp_path: Path) -> None:
    ep = ipc(tmp_path, "ev")
    pub = SyntheticPublisher(ep)
    nested = b"\x93\xcb" + b"\x00" * 8 + b"\x91\x81\xa4type\xabBlockStored" + b"\x91" * 5000
    with watching(tmp_path, pub, Subscription([Endpoint(ep, topic=b"kv")])) as w:
        raw(pub, b"kv", (pub.seq).to_bytes(8, "big"))                       # two frames
        raw(pub, b"kv", (pub.seq).to_bytes(4, "big"), b"x")                 # a 4-byte seq
        raw(pub, b"kv", (2**64 - 1).to_bytes(8, "big"), b"x")               # the end marker
        bad = pub.seq
        pub.seq += 1
        raw(pub, b"kv", bad.to_bytes(8, "big"), msgspec.msgpack.encode({"not": "a batch"}))
        deep = pub.seq
        pub.seq += 1
        raw(pub, b"kv", deep.to_bytes(8, "big"), nested)                    # nested too deep
        raw(pub, b"kv2", (pub.seq).to_bytes(8, "big"), b"x")                # another topic
        pub.publish([stored(PREFIX, BS)])                                   # still observing
    reasons = [g[0] for g in gaps(w.out)]
    assert reasons.count("malformed_message") == 3
    assert ("undecodable_batch", bad, bad) in gaps(w.out)
    assert ("undecodable_batch", deep, deep) in gaps(w.out)
    assert len(named(w.out, "claim_materialized")) == 1


def test_an_oversized_message_is_refused_unread_and_is_a_gap(tmp_path: Path) -> None:
    ep = ipc(tmp_path, "ev")
    pub = SyntheticPublisher(ep)
    sub = Subscription([Endpoint(ep, topic=b"kv")], max_message_bytes=64 * 1024)
    with watching(tmp_path, pub, sub) as w:
        big = pub.publish([stored(list(range(200_000)), 4)])               # ~ 1 MB
        view = w.obs.by_id["c-soft"]
        for _ in range(200):                 # until the rejoined subscription sees a store
            pub.publish([stored(PREFIX, BS)])
            time.sleep(0.05)
            if view.facts and view.facts[-1][0].value == "materialized":
                break
    assert any(g[1] is not None and g[1] <= big and (g[2] is None or g[2] >= big)
               for g in gaps(w.out))
    assert len(named(w.out, "claim_materialized")) == 1


def test_a_dropped_subscription_is_a_gap(tmp_path: Path) -> None:
    ep = ipc(tmp_path, "ev")
    first = SyntheticPublisher(ep)
    sub = Subscription([Endpoint(ep, topic=b"kv")])
    w = Watch(tmp_path, sub)
    w.joined(first)
    w.applied(first.publish([stored(PREFIX, BS)]))
    first.close()                                        # the runtime's socket goes away
    wait_for(lambda: not sub.connected, "the disconnect")
    second = SyntheticPublisher(ep)                      # back, numbering from 0 again
    try:
        # until the new connection shows in a gap (a late start of the first connection, from
        # ZeroMQ's slow joiner, is not it)
        while not [g for g in named_now(w) if g["reason"] != "late_start"]:
            second.publish([])
            time.sleep(0.05)
    finally:
        second.close()
    out = w.close()
    # (a first batch seen above 0 is a late start: ZeroMQ drops what is sent before it joins)
    reasons = [g[0] for g in gaps(out) if g[0] != "late_start"]
    assert reasons[0] in ("publisher_restarted", "subscription_dropped")
    assert w.obs.by_id["c-soft"].status.value == "unknown"


def test_a_silent_replay_endpoint_does_not_hold_the_deadline(tmp_path: Path) -> None:
    """The replay endpoint never answers; the run still ends at its deadline (bounded here by a
    generous watchdog, not measured) with the window and the tail as gaps."""
    ep, rep = ipc(tmp_path, "ev"), ipc(tmp_path, "replay")
    ctx = zmq.Context.instance()
    silent = ctx.socket(zmq.ROUTER)
    silent.bind(rep)
    pub = SyntheticPublisher(ep)
    sub = Subscription([Endpoint(ep, replay=rep, topic=b"kv")])   # the default end budget
    w = Watch(tmp_path, sub)
    try:
        w.joined(pub)
        pub.publish([], drop=True)
        pub.publish([])                                   # a jump: replay asked, never answered
        time.sleep(0.3)
        out = w.close()
    finally:
        pub.close()
        silent.close(linger=0)
    assert [g[0] for g in gaps(out)][-2:] == ["sequence_jump", "unconfirmed_tail"]
    # the run ended while the request was outstanding, not after the replay's own timeout
    assert "the run ended before the replay endpoint answered" in \
        named(out, "observation_gap")[-2]["detail"]


# ---------------------------------------------------------------------- vLLM's own publisher
@pytest.mark.vllm
def test_vllm_publisher_restart_and_replay(tmp_path: Path) -> None:
    """vLLM's ZmqEventPublisher in-process: a late start filled by its replay buffer, then a
    restart of the publisher (a new instance numbering from 0, its cache gone) is a gap."""
    from vllm.distributed import kv_events as v

    def batch_of(*events: Any) -> Any:
        return v.KVEventBatch(ts=time.time(), events=list(events))

    def vstored(tokens: list[int]) -> Any:
        mirror = stored(tokens, BS)
        return v.BlockStored(block_hashes=mirror.block_hashes, parent_block_hash=None,
                             token_ids=mirror.token_ids, block_size=BS, lora_id=None,
                             medium="GPU", lora_name=None, group_idx=0)

    ep, rep = ipc(tmp_path, "ev"), ipc(tmp_path, "replay")
    first = v.ZmqEventPublisher(0, endpoint=ep, replay_endpoint=rep, topic="kv")
    first.publish(batch_of(vstored(PREFIX)))             # before the observer listens
    time.sleep(0.2)
    sub = Subscription([Endpoint(ep, replay=rep, topic=b"kv")], end_budget_s=10)
    w = Watch(tmp_path, sub)
    try:
        while not sub.tracker.sources:
            first.publish(batch_of())
            time.sleep(0.05)
        wait_for(lambda: w.obs.by_id["c-soft"].status.value == "held", "the replayed store")
        first.shutdown()
        second = v.ZmqEventPublisher(0, endpoint=ep, replay_endpoint=rep, topic="kv")
        try:
            wait_for(lambda: not sub.connected or len(sub.connected) == 1, "the restart")
            for _ in range(100):
                second.publish(batch_of())
                time.sleep(0.05)
                if w.obs.gaps:
                    break
        finally:
            out = w.close()
            second.shutdown()
    finally:
        if w.thread.is_alive():
            w.close()
    reasons = [g[0] for g in gaps(out)]
    assert reasons and reasons[0] in ("publisher_restarted", "subscription_dropped",
                                      "sequence_jump")
    assert "late_start" not in reasons                   # batch 0 came from the replay
    assert len(named(out, "claim_materialized")) == 1
    assert w.obs.by_id["c-soft"].status.value == "unknown"


@pytest.mark.vllm
def test_vllm_own_structs_decode_into_the_mirror() -> None:
    from vllm.distributed import kv_events as v

    from residentkv.observe.intake import decode_payload
    from residentkv.observe.lazy import LazyBlockRemoved, LazyBlockStored
    from residentkv.observe.wire import Dialect, KVEventBatch

    batch = v.KVEventBatch(ts=1.5, events=[
        v.BlockStored(block_hashes=[2**64 - 1, 7], parent_block_hash=None, token_ids=[1, 2],
                      block_size=1, lora_id=None, medium="GPU", lora_name=None,
                      extra_keys=[None, ("salt",)], group_idx=0, session_id="s"),
        v.BlockRemoved(block_hashes=[b"\x01\x02"], medium="CPU", group_idx=0),
        v.AllBlocksCleared()], data_parallel_rank=0)
    payload = msgspec.msgpack.Encoder().encode(batch)
    mirror = msgspec.msgpack.decode(payload, type=KVEventBatch)
    assert msgspec.msgpack.encode(mirror) == payload           # field for field, byte for byte
    got = decode_payload(Dialect.VLLM, b"kv", 9, payload)      # the hot path's twins
    assert got.seq == 9 and got.ts == 1.5 and got.rank == 0
    s, r, _ = got.events
    assert isinstance(s, LazyBlockStored) and s.block_hashes == [2**64 - 1, 7]
    assert s.tokens() == [1, 2] and s.first_token() == 1 and s.session_id == "s"
    assert s.stored_under(s.extra(), 1, False, None, None) is False   # block 1: a salt key
    assert isinstance(r, LazyBlockRemoved) and r.block_hashes == [b"\x01\x02"]
    assert r.medium == "CPU"


@pytest.mark.vllm
def test_the_mirror_has_vllms_fields() -> None:
    from vllm.distributed import kv_events as v

    from residentkv.observe import lazy, wire

    twins = {"BlockStored": lazy.LazyBlockStored, "BlockRemoved": lazy.LazyBlockRemoved,
             "AllBlocksCleared": lazy.LazyAllBlocksCleared, "KVEventBatch": lazy.LazyBatch}
    for name in ("BlockStored", "BlockRemoved", "AllBlocksCleared", "KVEventBatch"):
        theirs, mine = getattr(v, name), getattr(wire, name)
        assert twins[name].__struct_fields__ == theirs.__struct_fields__, name
        assert mine.__struct_fields__ == theirs.__struct_fields__, name
        assert mine.__struct_defaults__ == theirs.__struct_defaults__, name
        assert mine.__struct_config__.tag == theirs.__struct_config__.tag, name
        assert mine.__struct_config__.array_like == theirs.__struct_config__.array_like, name
        assert mine.__struct_config__.omit_defaults == theirs.__struct_config__.omit_defaults
