"""Decoding is bounded: out-of-range integers, malformed shapes, many-frame messages and pages
that are not token ids are gaps over real ZeroMQ sockets — never an exit, never a silent skip,
never a message held whole by the observer (SPEC §9.2)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import msgspec

from residentkv.observe.subscriber import Endpoint, Subscription
from residentkv.observe.synthetic import SyntheticPublisher, stored
from residentkv.observe.wire import Dialect

from .obskit import BS, OTHER, PREFIX, gaps, named
from .zmqkit import ipc, named_now, raw, wait_for, watching

U64, I64 = 2**64 - 1, 2**63 - 1
EDGES = (U64, 2**63, I64, -1, -(2**63))


def event(ev: Any, **fields: Any) -> dict[str, Any]:
    """*ev* as vLLM's map (every field, tagged), with *fields* set to any value."""
    return {"type": type(ev).__name__, **msgspec.structs.asdict(ev), **fields}


def payload(*events: dict[str, Any], ts: Any = 0.0, rank: Any = 0) -> bytes:
    return msgspec.msgpack.encode([ts, list(events), rank])


def claimed_root(**fields: Any) -> dict[str, Any]:
    return event(stored(PREFIX[:2 * BS], BS), **fields)


def test_integers_at_the_64_bit_edges_in_any_field_are_gaps_never_an_exit(
        tmp_path: Path) -> None:
    """The adversary's exit 101 (a token id of 2**64 - 1 in a claimed root) and every other
    integer field at the unsigned and signed 64-bit edges: a field the observer reads with a
    range (token ids once read, block size, KV-cache group, data-parallel rank) out of it is a
    gap; an opaque one (hashes, LoRA id, window, timestamp) is carried as it is."""
    ep, rep = ipc(tmp_path, "ev"), ipc(tmp_path, "replay")
    pub = SyntheticPublisher(ep, replay_endpoint=rep)
    sub = Subscription([Endpoint(ep, replay=rep, topic=b"kv")], end_budget_s=10)
    gap_at: set[int] = set()
    with watching(tmp_path, pub, sub) as w:
        def send(data: bytes, *, gap: bool) -> None:
            seq = pub.publish_payload(data)
            if gap:
                gap_at.add(seq)

        for v in EDGES:
            tokens = [PREFIX[0], v, *PREFIX[2:2 * BS]]          # the first token reads fine
            send(payload(claimed_root(token_ids=tokens)), gap=not 0 <= v <= I64)
            send(payload(claimed_root(block_size=v)), gap=True)
            send(payload(claimed_root(group_idx=v)), gap=True)
            send(payload(claimed_root(), rank=v), gap=True)
            send(payload(claimed_root(lora_id=v, kv_cache_spec_sliding_window=v), ts=v,
                         rank=0), gap=False)
            send(payload(claimed_root(block_hashes=[v, v ^ 1], parent_block_hash=None)),
                 gap=False)
            send(payload(event(stored(OTHER, BS), token_ids=[v] * len(OTHER))), gap=False)
        pub.publish([stored(PREFIX, BS)])                       # still observing
    undecodable = {g[1] for g in gaps(w.out) if g[0] == "undecodable_batch"}
    assert undecodable == gap_at
    assert w.obs.by_id["c-soft"].status.value == "unknown"
    assert named(w.out, "claim_materialized")                  # the last store was applied


def test_a_store_whose_shape_vllm_never_publishes_is_a_gap(tmp_path: Path) -> None:
    """Token ids that are not whole blocks of the hashes (more, fewer, no hashes), extra keys
    that are not one entry per block: which tokens are which block's is unknown — a gap."""
    good = stored(PREFIX[:2 * BS], BS)
    bad = [
        event(good, block_hashes=good.block_hashes[:1]),                    # 2 blocks, 1 hash
        event(good, token_ids=good.token_ids[:BS]),                         # 1 block, 2 hashes
        event(good, token_ids=[*good.token_ids, 1, 2]),                     # a partial block
        event(good, block_hashes=[]),                                       # tokens, no hash
        event(good, extra_keys=[None]),                                     # 1 entry, 2 blocks
        event(good, extra_keys=[None, None, ["x"]]),                        # 3 entries
    ]
    w_out = _observe(tmp_path, [payload(e) for e in bad])
    reasons = [g[0] for g in gaps(w_out)]
    assert reasons.count("undecodable_batch") == len(bad)
    assert any("token ids for" in g["detail"] for g in named(w_out, "observation_gap"))
    assert any("extra_keys holds" in g["detail"] for g in named(w_out, "observation_gap"))


def test_sglang_eagle_bigram_pages_of_a_claimed_root_are_a_gap(tmp_path: Path) -> None:
    """SGLang's EAGLE pages publish [t, t+1] pairs where the structs say token ids: a root's
    first element is read for every root, so such a page is a gap, never 'never stored'."""
    pairs = [[t, t + 1] for t in PREFIX[:BS]]
    page = {"type": "BlockStored", "block_hashes": [41], "parent_block_hash": None,
            "token_ids": pairs, "block_size": BS, "lora_id": None, "medium": "GPU"}
    w_out = _observe(tmp_path, [msgspec.msgpack.encode([0.0, [page], 0])], Dialect.SGLANG)
    assert [g[0] for g in gaps(w_out)] == ["undecodable_batch"]
    assert "first element is not an integer" in named(w_out, "observation_gap")[0]["detail"]


def _observe(tmp: Path, payloads: list[bytes], dialect: Dialect = Dialect.VLLM) -> Path:
    ep, rep = ipc(tmp, "ev"), ipc(tmp, "replay")
    pub = SyntheticPublisher(ep, replay_endpoint=rep, dialect=dialect)
    sub = Subscription([Endpoint(ep, replay=rep, topic=b"kv")], dialect=dialect,
                       end_budget_s=10)
    with watching(tmp, pub, sub) as w:
        for p in payloads:
            pub.publish_payload(p)
    return w.out


def test_a_message_of_many_frames_is_never_held_whole_by_the_observer(tmp_path: Path) -> None:
    """Every frame under the size limit, the message far over it (40 frames of 1 MiB): the
    frames past the format's three are dropped as they are read — the observer never holds
    more than one of them (ZeroMQ itself delivers a message only whole; the observer adds
    nothing to that) — and the message is a gap."""
    ep = ipc(tmp_path, "ev")
    pub = SyntheticPublisher(ep)
    frame = b"\0" * (1 << 20)
    with watching(tmp_path, pub, Subscription([Endpoint(ep, topic=b"kv")])) as w:
        tracemalloc.start()
        try:
            raw(pub, b"kv", pub.seq.to_bytes(8, "big"), b"x", *[frame] * 40)
            pub.seq += 1
            wait_for(lambda: named_now(w), "the malformed message's gap")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        pub.publish([stored(PREFIX, BS)])
    assert peak < 8 << 20
    malformed = [g for g in named(w.out, "observation_gap") if g["reason"] == "malformed_message"]
    assert len(malformed) == 1 and "a message of 43 frames" in malformed[0]["detail"]
    assert len(named(w.out, "claim_materialized")) == 1
