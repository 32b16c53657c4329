"""The observer on hand-made batches in vLLM's format: chains, predicates, losses, gaps."""

from __future__ import annotations

from pathlib import Path

from residentkv.observe.observer import ClaimStatus
from residentkv.observe.synthetic import chain, removed, stored
from residentkv.observe.wire import AllBlocksCleared, Frame, KVEvent, KVEventBatch

from .obskit import (
    BS,
    OTHER,
    PREFIX,
    assert_gap_never_passes,
    claim_dict,
    lifecycle,
    loss_unreported,
    named,
    observed,
    open_observer,
)


def frame(seq: int, *events: KVEvent, ts: float = 0.0) -> Frame:
    return Frame(seq, KVEventBatch(ts=ts, events=list(events)))


def test_materialized_then_needed_block_evicted(tmp_path: Path) -> None:
    claims = observed(tmp_path, claim_dict("c-soft"))
    obs, writer, out = open_observer(tmp_path, claims)
    hashes = chain(PREFIX, BS)
    obs.on_frame(frame(0, stored(PREFIX[:2 * BS], BS), ts=10.0))
    assert obs.views["c-soft"].status is ClaimStatus.AT_RISK   # 2 of 3 footprint blocks
    obs.on_frame(frame(1, stored(PREFIX[2 * BS:3 * BS], BS, parent=hashes[1])))
    assert obs.views["c-soft"].status is ClaimStatus.HELD
    obs.on_frame(frame(2, removed([hashes[2]])))                # not needed by blocks=2
    obs.on_frame(frame(3, removed([hashes[1]]), ts=12.5))       # needed: position 1
    obs.finish()
    writer.close()
    mat = named(out, "claim_materialized")
    assert [(m["leading"], m["surviving"], m["holds"]) for m in mat] == [(2, 2, True)]
    ev = named(out, "block_evicted")
    assert [(e["position"], e["reason"], e["medium"], e["claim_id"]) for e in ev] == [
        (1, "runtime_removed", "GPU", "c-soft")]
    assert ev[0]["block_hash"] == format(hashes[1], "x")
    assert named(out, "observation_gap") == []
    assert obs.views["c-soft"].status is ClaimStatus.LOST
    assert named(out, "claim_accepted")[0]["seq"] < mat[0]["seq"]
    passed, missing = lifecycle(out, "c-soft")
    assert not passed and loss_unreported(missing)


def test_claim_held_to_the_end_is_not_lost(tmp_path: Path) -> None:
    claims = observed(tmp_path, claim_dict("c-soft"))
    obs, writer, out = open_observer(tmp_path, claims)
    obs.on_frame(frame(0, stored(PREFIX, BS)))
    obs.on_frame(frame(1, stored(OTHER, BS), removed(chain(OTHER, BS)[:1])))
    obs.finish()
    writer.close()
    assert named(out, "block_evicted") == []
    # nothing lost, nothing illegal: only the two restore generations a soft_priority
    # lifecycle asks for (SPEC §4), which an observer of KV events never shows
    assert lifecycle(out, "c-soft") == (
        False, ["failure_generation", "generations_ordered", "success_generation"])


def test_scattered_blocks_without_block_zero_do_not_materialize(tmp_path: Path) -> None:
    claims = observed(tmp_path, claim_dict("c-1", blocks=2, footprint=4))
    obs, writer, out = open_observer(tmp_path, claims)
    hashes = chain(PREFIX, BS)
    obs.on_frame(frame(0, stored(PREFIX, BS)))
    obs.on_frame(frame(1, removed([hashes[0]])))   # before: held; now leading 0
    obs.on_frame(frame(2, stored(PREFIX[BS:], BS, parent=hashes[0])))   # re-stored children
    writer.close()
    assert obs.views["c-1"].status is ClaimStatus.LOST
    assert [e["position"] for e in named(out, "block_evicted")] == [0]
    assert len(named(out, "claim_materialized")) == 1


def test_same_tokens_under_another_parent_are_not_the_claim(tmp_path: Path) -> None:
    claims = observed(tmp_path, claim_dict("c-1", blocks=1, footprint=2))
    obs, writer, _ = open_observer(tmp_path, claims)
    # block 1's tokens, but below an unrelated first block: another chain, another hash
    obs.on_frame(frame(0, stored(OTHER[:BS] + PREFIX[BS:2 * BS], BS)))
    obs.on_frame(frame(1, stored(PREFIX[BS:2 * BS], BS)))   # as a root: not position 1
    writer.close()
    assert obs.views["c-1"].tracked.present == []
    assert obs.views["c-1"].status is ClaimStatus.PENDING


def test_other_medium_is_not_the_device(tmp_path: Path) -> None:
    claims = observed(tmp_path, claim_dict("c-off", "offloadable"))
    obs, writer, out = open_observer(tmp_path, claims)
    hashes = chain(PREFIX, BS)
    obs.on_frame(frame(0, stored(PREFIX, BS, medium="CPU")))
    assert obs.views["c-off"].status is ClaimStatus.PENDING
    obs.on_frame(frame(1, stored(PREFIX, BS)))
    obs.on_frame(frame(2, removed(hashes[:2], medium="CPU")))   # the slower copy only
    assert obs.views["c-off"].status is ClaimStatus.HELD
    obs.on_frame(frame(3, removed(hashes[:1])))
    writer.close()
    assert [(e["position"], e["medium"]) for e in named(out, "block_evicted")] == [(0, "GPU")]


def test_all_blocks_cleared_is_loss_of_everything(tmp_path: Path) -> None:
    claims = observed(tmp_path, claim_dict("c-a"), claim_dict("c-b", tokens=OTHER))
    obs, writer, out = open_observer(tmp_path, claims)
    obs.on_frame(frame(0, stored(PREFIX, BS), stored(OTHER[:BS], BS)))
    obs.on_frame(frame(1, AllBlocksCleared()))
    writer.close()
    ev = named(out, "block_evicted")
    assert sorted((e["claim_id"], e["position"]) for e in ev) == [("c-a", 0), ("c-a", 1)]
    assert {e["reason"] for e in ev} == {"runtime_cleared"}
    assert obs.index.live_blocks == 0
    # c-b never materialized (1 block of 2 needed): nothing of it was lost
    assert obs.views["c-b"].status is ClaimStatus.PENDING


def test_late_start_is_a_gap_and_never_passes(tmp_path: Path) -> None:
    claims = observed(tmp_path, claim_dict("c-soft"))
    obs, writer, out = open_observer(tmp_path, claims)
    obs.on_frame(frame(7, stored(PREFIX, BS)))
    obs.finish()
    writer.close()
    gaps = named(out, "observation_gap")
    assert [(g["reason"], g["missed_from"], g.get("missed_to"), g["claim_id"]) for g in gaps] == [
        ("late_start", 0, 6, None)]
    assert obs.views["c-soft"].status is ClaimStatus.UNKNOWN
    assert_gap_never_passes(out, "c-soft")


def test_sequence_jump_is_a_gap(tmp_path: Path) -> None:
    claims = observed(tmp_path, claim_dict("c-soft"))
    obs, writer, out = open_observer(tmp_path, claims)
    obs.on_frame(frame(0, stored(PREFIX, BS)))
    obs.on_frame(frame(1))
    obs.on_frame(frame(4))
    writer.close()
    assert [(g["reason"], g["missed_from"], g.get("missed_to"))
            for g in named(out, "observation_gap")] == [("sequence_jump", 2, 3)]
    assert_gap_never_passes(out, "c-soft")


def test_replay_fills_a_jump(tmp_path: Path) -> None:
    claims = observed(tmp_path, claim_dict("c-soft"))
    hashes = chain(PREFIX, BS)
    buffered = {1: frame(1, stored(PREFIX, BS)), 2: frame(2, removed(hashes[:1]))}
    asked: list[int] = []

    def replay(start: int) -> list[Frame]:
        asked.append(start)
        return [f for s, f in sorted(buffered.items()) if s >= start]

    obs, writer, out = open_observer(tmp_path, claims, replay=replay)
    obs.on_frame(frame(0))
    obs.on_frame(frame(3))
    writer.close()
    assert asked == [1]
    assert named(out, "observation_gap") == []
    assert [e["position"] for e in named(out, "block_evicted")] == [0]


def test_replay_that_lost_the_start_of_the_window_leaves_a_gap(tmp_path: Path) -> None:
    claims = observed(tmp_path, claim_dict("c-soft"))
    buffered = [frame(4), frame(5)]   # the publisher's buffer already dropped 1..3
    obs, writer, out = open_observer(
        tmp_path, claims, replay=lambda s: [f for f in buffered if f.seq >= s])
    obs.on_frame(frame(0))
    obs.on_frame(frame(6))
    writer.close()
    assert [(g["missed_from"], g.get("missed_to")) for g in named(out, "observation_gap")] == [
        (1, 3)]
    assert obs.expected == 7


def test_dropped_subscription(tmp_path: Path) -> None:
    claims = observed(tmp_path, claim_dict("c-soft"))
    obs, writer, out = open_observer(tmp_path, claims)
    obs.on_frame(frame(0))
    obs.on_disconnect()
    obs.on_frame(frame(1))          # back, nothing missed
    obs.on_disconnect()
    obs.on_frame(frame(5))          # back, 2..4 missed
    obs.on_disconnect()
    obs.finish()                    # still down at the end: open-ended
    writer.close()
    assert [(g["reason"], g["missed_from"], g.get("missed_to"))
            for g in named(out, "observation_gap")] == [
        ("subscription_dropped", 2, 4), ("subscription_dropped", 6, None)]


def test_publisher_restart_and_undecodable_batches(tmp_path: Path) -> None:
    claims = observed(tmp_path, claim_dict("c-soft"))
    obs, writer, out = open_observer(tmp_path, claims)
    obs.on_frame(frame(0, stored(PREFIX, BS)))
    obs.on_undecodable(1)
    obs.on_frame(frame(2))
    obs.on_frame(frame(0))          # numbering restarted
    writer.close()
    assert [g["reason"] for g in named(out, "observation_gap")] == [
        "undecodable_batch", "publisher_restarted"]
    assert obs.views["c-soft"].tracked.present == []
