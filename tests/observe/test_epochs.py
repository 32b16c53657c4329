"""A replay is accepted only when it is shown to continue the subscribed publisher's epoch —
over real ZeroMQ sockets, with publishers speaking vLLM's wire format (SPEC §9.2)."""

from __future__ import annotations

import time
from pathlib import Path

import msgspec

from residentkv.observe.subscriber import Endpoint, Subscription
from residentkv.observe.synthetic import SyntheticPublisher, chain, removed, stored
from residentkv.observe.wire import AllBlocksCleared

from .obskit import BS, PREFIX, gaps, named
from .zmqkit import Watch, ipc, wait_for, watching


def test_a_foreign_replay_endpoint_never_speaks_for_an_idle_publisher(tmp_path: Path) -> None:
    """The subscribed publisher sends nothing; the replay endpoint is another publisher's,
    whose buffer holds the claim stored. Nothing live ties the two: the endpoint is never
    asked, and the whole run is one gap."""
    idle = SyntheticPublisher(ipc(tmp_path, "ev"))
    other = SyntheticPublisher(ipc(tmp_path, "other"), replay_endpoint=ipc(tmp_path, "replay"))
    other.publish([stored(PREFIX, BS)], drop=True)
    sub = Subscription([Endpoint(ipc(tmp_path, "ev"), replay=ipc(tmp_path, "replay"),
                                 topic=b"kv")], end_budget_s=10)
    w = Watch(tmp_path, sub)
    try:
        wait_for(lambda: sub.connected, "the connection to the idle publisher")
        out = w.close()
    finally:
        idle.close()
        other.close()
    assert gaps(out) == [("unconfirmed_tail", 0, None)]
    assert "nothing ties" in named(out, "observation_gap")[0]["detail"]
    assert named(out, "claim_materialized") == []


def test_a_restart_repeating_one_batch_byte_for_byte_is_not_the_same_epoch(
        tmp_path: Path) -> None:
    """The publisher stores the claim, then sends one batch; it restarts (its first batch, a
    clear, unseen) and numbers on with that same batch, byte for byte, at the same number.
    The replay holds it — but not the batch before it: the reconnect is a gap, and the claim
    is not carried over as held."""
    ep, rep = ipc(tmp_path, "ev"), ipc(tmp_path, "replay")
    first = SyntheticPublisher(ep, replay_endpoint=rep)
    sub = Subscription([Endpoint(ep, replay=rep, topic=b"kv")], end_budget_s=10)
    w = Watch(tmp_path, sub)
    try:
        w.joined(first)
        first.publish([stored(PREFIX, BS)])
        same = first.publish([], ts=1000.0)
        w.applied(same)
        first.close()
        wait_for(lambda: not sub.connected, "the disconnect")
        second = SyntheticPublisher(ep, replay_endpoint=rep)
        try:
            second.publish([AllBlocksCleared()], drop=True)        # its seq 0, never seen
            while second.seq < same:
                second.publish([], drop=True)
            second.publish([], ts=1000.0, drop=True)                # the same bytes, same seq
            while not w.obs.gaps:
                second.publish([])
                time.sleep(0.05)
            out = w.close()
        finally:
            second.close()
    finally:
        if w.thread.is_alive():
            w.close()
    gap = named(out, "observation_gap")[0]
    assert gap["reason"] == "subscription_dropped"
    assert "cannot be shown to continue the same publisher epoch" in gap["detail"]
    assert w.obs.by_id["c-soft"].status.value == "unknown"


def test_a_stream_of_another_rank_is_never_filled_with_this_ranks_batches(
        tmp_path: Path) -> None:
    """One publisher's batches say rank 0, then one says no rank: a stream of its own, which
    starts late; the replay's answer holds rank 0's batches, never that stream's history."""
    ep, rep = ipc(tmp_path, "ev"), ipc(tmp_path, "replay")
    pub = SyntheticPublisher(ep, replay_endpoint=rep)
    sub = Subscription([Endpoint(ep, replay=rep, topic=b"kv")], end_budget_s=10)
    with watching(tmp_path, pub, sub) as w:
        pub.publish([stored(PREFIX, BS)])
        pub.publish([removed(chain(PREFIX, BS))])
        late = pub.publish_payload(msgspec.msgpack.encode([0.0, [], None]))
    materialized = named(w.out, "claim_materialized")
    assert len(materialized) == 1                  # rank 0's store, applied once
    assert ("late_start", 0, late - 1) in gaps(w.out)
