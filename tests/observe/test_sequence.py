"""The sequence tracker: every transition of SPEC §9.2's subscription automaton, with traces."""

from __future__ import annotations

from pathlib import Path

from residentkv.observe.sequence import (
    TRANSITIONS,
    Apply,
    AskReplay,
    Cause,
    Ended,
    Gap,
    Phase,
    Received,
    Replayed,
    ReplayFailed,
    SequenceTracker,
    Unreadable,
)
from residentkv.observe.synthetic import chain, removed, stored

from .obskit import (
    BS,
    PREFIX,
    TOPIC,
    Run,
    assert_gap_never_passes,
    batch,
    claim_dict,
    gaps,
    key,
    named,
    observed,
)


def one_claim(tmp: Path, **kw: object) -> Run:
    return Run(tmp, observed(tmp, claim_dict("c-soft")), **kw)  # type: ignore[arg-type]


def test_every_phase_answers_every_input_it_can_meet() -> None:
    """The table is the automaton: a live source meets batches, unreadable messages and the
    end; a source catching up also meets the replay's answer or its failure."""
    assert {(p, t.__name__) for p, t in TRANSITIONS} == {
        (Phase.LIVE, "Received"), (Phase.LIVE, "Unreadable"), (Phase.LIVE, "Ended"),
        (Phase.CATCHING_UP, "Received"), (Phase.CATCHING_UP, "Unreadable"),
        (Phase.CATCHING_UP, "Replayed"), (Phase.CATCHING_UP, "ReplayFailed"),
        (Phase.CATCHING_UP, "Ended")}


def test_late_start_is_a_gap_and_never_passes(tmp_path: Path) -> None:
    run = one_claim(tmp_path).feed(batch(7, stored(PREFIX, BS)))
    out = run.close(end=False)
    assert gaps(out) == [("late_start", 0, 6)]
    assert named(out, "observation_gap")[0]["claim_id"] is None
    assert run.status("c-soft") == "unknown"
    assert_gap_never_passes(out, "c-soft")


def test_late_start_filled_from_batch_0_by_replay(tmp_path: Path) -> None:
    buffer = {0: batch(0, stored(PREFIX, BS)), 1: batch(1), 2: batch(2)}
    run = one_claim(tmp_path, replay=buffer).feed(buffer[2])
    out = run.close()
    assert run.asked == [0, 0]      # the window, then the tail from the epoch's oldest batch
    assert gaps(out) == [] and run.status("c-soft") == "held"


def test_sequence_jump_is_a_gap(tmp_path: Path) -> None:
    out = one_claim(tmp_path).feed(batch(0, stored(PREFIX, BS)), batch(1), batch(4)).close(
        end=False)
    assert gaps(out) == [("sequence_jump", 2, 3)]
    assert_gap_never_passes(out, "c-soft")


def test_replay_fills_a_jump_once_it_is_shown_to_continue_the_epoch(tmp_path: Path) -> None:
    hashes = chain(PREFIX, BS)
    buffer = {0: batch(0), 1: batch(1, stored(PREFIX, BS)), 2: batch(2, removed(hashes[:1])),
              3: batch(3)}
    run = one_claim(tmp_path, replay=buffer).feed(buffer[0], buffer[3])
    out = run.close()
    assert run.asked[0] == 0                     # from the anchor: batch 0 is compared
    assert gaps(out) == []
    assert [e["position"] for e in named(out, "block_evicted")] == [0]


def test_restarted_publisher_past_the_old_number_is_not_glued_by_replay(tmp_path: Path) -> None:
    """The publisher restarted (cache wiped) and is already past the old number: its replay
    buffer does not hold the batch applied before the jump as it was, so the window is a gap
    and the claim is not kept as held."""
    run = one_claim(tmp_path, replay={})
    run.feed(batch(0, stored(PREFIX, BS), ts=1.0), batch(1, ts=1.0))
    assert run.status("c-soft") == "held"
    run.buffer = {s: batch(s, ts=2.0) for s in range(10)}   # the new epoch's buffer
    run.feed(run.buffer[5])
    out = run.close()
    assert ("sequence_jump", 2, 4) in gaps(out)
    detail = named(out, "observation_gap")[0]["detail"]
    assert "cannot be shown to continue the same publisher epoch" in detail
    assert run.status("c-soft") == "unknown"


def test_replay_from_another_epoch_at_the_live_end_is_a_gap(tmp_path: Path) -> None:
    buffer = {0: batch(0), 1: batch(1), 2: batch(2, ts=9.0)}    # live 2 differs
    run = one_claim(tmp_path, replay=buffer).feed(buffer[0], batch(2, ts=1.0))
    out = run.close()
    assert gaps(out)[0] == ("sequence_jump", 1, 1)
    assert "another publisher epoch" in named(out, "observation_gap")[0]["detail"]


def test_replay_that_lost_the_start_of_the_window_leaves_a_gap(tmp_path: Path) -> None:
    buffer = {4: batch(4), 5: batch(5), 6: batch(6)}           # 0..3 already dropped
    run = one_claim(tmp_path, replay=buffer).feed(batch(6))
    out = run.close()
    assert gaps(out) == [("late_start", 0, 3)]


def test_duplicate_delivery_is_not_a_restart(tmp_path: Path) -> None:
    b = batch(0, stored(PREFIX, BS))
    out = one_claim(tmp_path).feed(b, b, batch(1)).close(end=False)
    assert gaps(out) == []


def test_repeat_with_other_bytes_and_backwards_are_restarts(tmp_path: Path) -> None:
    run = one_claim(tmp_path).feed(batch(0, stored(PREFIX, BS)), batch(1), batch(1, ts=5.0))
    run.feed(batch(3), batch(0))
    out = run.close(end=False)
    assert [g[0] for g in gaps(out)] == ["publisher_restarted", "publisher_restarted",
                                         "sequence_jump", "publisher_restarted"]
    assert gaps(out)[:2] == [("publisher_restarted", 2, None), ("publisher_restarted", 0, 0)]
    assert run.obs.by_id["c-soft"].stored == 0              # the old cache is forgotten


def test_reconnect_without_replay_is_a_gap_even_when_the_numbers_continue(
        tmp_path: Path) -> None:
    run = one_claim(tmp_path).feed(batch(0, stored(PREFIX, BS)))
    run.drop().feed(batch(1))
    run.drop().feed(batch(5))
    out = run.close()
    assert gaps(out) == [("subscription_dropped", None, None),
                         ("subscription_dropped", 2, 4), ("unconfirmed_tail", 6, None)]


def test_reconnect_verified_by_replay_is_no_gap(tmp_path: Path) -> None:
    buffer = {0: batch(0, stored(PREFIX, BS)), 1: batch(1), 2: batch(2)}
    run = one_claim(tmp_path, replay=buffer).feed(buffer[0])
    run.drop().feed(buffer[1])
    run.drop().feed(buffer[2])
    out = run.close()
    assert gaps(out) == [] and run.status("c-soft") == "held"


def test_unreadable_messages_are_gaps(tmp_path: Path) -> None:
    run = one_claim(tmp_path).feed(batch(0, stored(PREFIX, BS)))
    run.feed(Unreadable(TOPIC, 1, Cause.UNDECODABLE_BATCH, "bad payload"), batch(2))
    run.feed(Unreadable(TOPIC, None, Cause.MALFORMED_MESSAGE, "4 frames"), batch(3))
    out = run.close(end=False)
    assert gaps(out) == [("undecodable_batch", 1, 1), ("malformed_message", None, None)]


def test_the_end_is_a_gap_unless_replay_closes_it(tmp_path: Path) -> None:
    out = one_claim(tmp_path).feed(batch(0)).close()
    assert gaps(out) == [("unconfirmed_tail", 1, None)]
    buffer = {0: batch(0), 1: batch(1, stored(PREFIX, BS))}    # 1 never arrived live
    run = one_claim(tmp_path, replay=buffer, name="t2.jsonl").feed(buffer[0])
    out = run.close()
    assert gaps(out) == [] and run.status("c-soft") == "held"


def test_nothing_received_live_is_a_gap_whatever_the_replay_says(tmp_path: Path) -> None:
    """With no live batch to compare, nothing ties the replay endpoint's answer to the
    subscribed publisher (another rank's, another server's): it is never asked, the tail is a
    gap — an empty answer and one holding a claim stored alike."""
    out = one_claim(tmp_path).close()
    assert gaps(out) == [("unconfirmed_tail", 0, None)]
    for name, buffer in (("t2.jsonl", {}), ("t3.jsonl", {0: batch(0, stored(PREFIX, BS))})):
        run = one_claim(tmp_path, replay=buffer, name=name)
        out = run.close()
        assert gaps(out) == [("unconfirmed_tail", 0, None)] and run.asked == []
        assert "nothing ties" in named(out, "observation_gap")[0]["detail"]
        assert run.status("c-soft") == "unknown"


def test_sequence_numbers_are_unsigned_64_bit(tmp_path: Path) -> None:
    """A jump to 2**64-2 is one gap at once (never a loop over the window), written with its
    numbers in words where they do not fit the trace's signed 64-bit fields."""
    run = one_claim(tmp_path).feed(batch(0), batch(2**64 - 2))
    out = run.close()
    gap = named(out, "observation_gap")[0]
    assert (gap["reason"], gap.get("missed_from"), gap.get("missed_to")) == (
        "sequence_jump", None, None)
    assert f"batches 1..{2**64 - 3}" in gap["detail"]


def test_sources_are_keyed_by_topic_and_rank() -> None:
    tracker = SequenceTracker(lambda k: False, [TOPIC])
    assert tracker.step(Received(batch(0, rank=0))) == [Apply(batch(0, rank=0))]
    assert tracker.step(Received(batch(0, rank=1))) == [Apply(batch(0, rank=1))]
    actions = tracker.step(Received(batch(3, rank=1)))
    assert [a for a in actions if isinstance(a, Gap)] == [
        Gap(key(1), Cause.SEQUENCE_JUMP, 1, 2)]
    assert tracker.step(Received(batch(1, rank=0))) == [Apply(batch(1, rank=0))]


def test_an_answer_to_an_abandoned_request_is_ignored() -> None:
    tracker = SequenceTracker(lambda k: True, [TOPIC])
    tracker.step(Received(batch(0)))
    assert tracker.step(Received(batch(3))) == [AskReplay(key(), 0)]
    failed = tracker.step(ReplayFailed(key(), 0, "timeout"))
    assert [type(a).__name__ for a in failed] == ["Gap", "Forget", "Apply"]
    assert tracker.step(Replayed(key(), 0, [batch(0), batch(1), batch(2)], True)) == []
    assert tracker.step(Ended()) == [AskReplay(key(), 3)]


def test_held_batches_are_bounded(monkeypatch: object) -> None:
    import residentkv.observe.sequence as seq

    setattr(seq, "MAX_HELD", 3)  # noqa: B010 - the bound is module data
    try:
        tracker = SequenceTracker(lambda k: True, [TOPIC])
        tracker.step(Received(batch(0)))
        tracker.step(Received(batch(5)))                     # asks replay, holds from here
        out = []
        for s in range(6, 10):
            out += tracker.step(Received(batch(s)))
        assert [type(a).__name__ for a in out][:2] == ["Gap", "Forget"]
        assert sum(isinstance(a, Apply) for a in out) == 5   # 5 (the trigger) and 6..9
    finally:
        setattr(seq, "MAX_HELD", 10_000)  # noqa: B010


def test_a_reconnect_that_continues_its_numbers_is_a_gap_with_no_range(tmp_path: Path) -> None:
    """The connection dropped between batch 1 and batch 2; the replay cannot show the
    publisher did not restart meanwhile (it holds other bytes for batch 1). No number was
    missed: the gap names none — never a range from 2 to 1."""
    other = {0: batch(0, stored(PREFIX, BS)), 1: batch(1, ts=5.0), 2: batch(2)}
    run = one_claim(tmp_path, replay=other).feed(batch(0, stored(PREFIX, BS)), batch(1))
    run.drop().feed(other[2])
    out = run.close(end=False)
    gap = named(out, "observation_gap")[0]
    assert (gap["reason"], gap.get("missed_from"), gap.get("missed_to")) == (
        "subscription_dropped", None, None)
    assert "between batch 1 and batch 2" in gap["detail"]


def test_a_batch_repeated_over_a_new_connection_is_a_new_publisher(tmp_path: Path) -> None:
    """Byte for byte the batch last applied, but after the connection dropped: a publisher
    never resends a batch over a new connection, so its numbering started again."""
    run = one_claim(tmp_path).feed(batch(0, stored(PREFIX, BS)), batch(1))
    run.drop().feed(batch(1))
    out = run.close(end=False)
    assert gaps(out)[0][0] == "publisher_restarted"
    assert run.status("c-soft") == "unknown"
