"""The observer on hand-made batches in vLLM's format: chains, counted presence, bindings."""

from __future__ import annotations

from pathlib import Path

from residentkv.observe.summary import claim_line
from residentkv.observe.synthetic import chain, removed, stored
from residentkv.observe.wire import AllBlocksCleared

from .obskit import (
    BS,
    OTHER,
    PREFIX,
    Run,
    batch,
    claim_dict,
    gaps,
    lifecycle,
    loss_unreported,
    named,
    observed,
)


def test_materialized_then_needed_block_evicted(tmp_path: Path) -> None:
    run = Run(tmp_path, observed(tmp_path, claim_dict("c-soft")))
    hashes = chain(PREFIX, BS)
    run.feed(batch(0, stored(PREFIX[:2 * BS], BS), ts=10.0))
    assert run.status("c-soft") == "at_risk"                    # 2 of 3 footprint blocks
    run.feed(batch(1, stored(PREFIX[2 * BS:3 * BS], BS, parent=hashes[1])))
    assert run.status("c-soft") == "held"
    run.feed(batch(2, removed([hashes[2]])))                    # not needed by blocks=2
    run.feed(batch(3, removed([hashes[1]]), ts=12.5))           # needed: position 1
    assert run.status("c-soft") == "lost"
    out = run.close(end=False)
    mat = named(out, "claim_materialized")
    assert [(m["leading"], m["surviving"], m["holds"]) for m in mat] == [(2, 2, True)]
    ev = named(out, "block_evicted")
    assert [(e["position"], e["reason"], e["medium"], e["claim_id"]) for e in ev] == [
        (1, "runtime_removed", "GPU", "c-soft")]
    assert ev[0]["block_hash"] == format(hashes[1], "x")
    assert gaps(out) == []
    assert named(out, "claim_accepted")[0]["seq"] < mat[0]["seq"]
    passed, missing = lifecycle(out, "c-soft")
    assert not passed and loss_unreported(missing)
    view = run.obs.by_id["c-soft"]
    assert [f.value for f, _ in view.facts] == ["materialized", "lost"]
    assert [seq for _, seq in view.facts] == [0, 3]


def test_claim_held_to_the_end_is_not_lost(tmp_path: Path) -> None:
    run = Run(tmp_path, observed(tmp_path, claim_dict("c-soft")))
    run.feed(batch(0, stored(PREFIX, BS)),
             batch(1, stored(OTHER, BS), removed(chain(OTHER, BS)[:1])))
    out = run.close(end=False)
    assert named(out, "block_evicted") == []
    assert lifecycle(out, "c-soft") == (
        False, ["failure_generation", "generations_ordered", "success_generation"])


def test_scattered_blocks_without_block_zero_do_not_materialize(tmp_path: Path) -> None:
    run = Run(tmp_path, observed(tmp_path, claim_dict("c-1", blocks=2, footprint=4)))
    hashes = chain(PREFIX, BS)
    run.feed(batch(0, stored(PREFIX, BS)), batch(1, removed([hashes[0]])),
             batch(2, stored(PREFIX[BS:], BS, parent=hashes[0])))   # re-stored children
    out = run.close(end=False)
    assert run.status("c-1") == "lost"
    assert [e["position"] for e in named(out, "block_evicted")] == [0]
    assert len(named(out, "claim_materialized")) == 1


def test_same_tokens_under_another_parent_are_not_the_claim(tmp_path: Path) -> None:
    run = Run(tmp_path, observed(tmp_path, claim_dict("c-1", blocks=1, footprint=2)))
    run.feed(batch(0, stored(OTHER[:BS] + PREFIX[BS:2 * BS], BS)),
             batch(1, stored(PREFIX[BS:2 * BS], BS)))             # as a root: not position 1
    run.close(end=False)
    assert run.obs.by_id["c-1"].stored == 0 and run.status("c-1") == "pending"


def test_other_medium_is_not_the_device(tmp_path: Path) -> None:
    run = Run(tmp_path, observed(tmp_path, claim_dict("c-off", "offloadable")))
    hashes = chain(PREFIX, BS)
    run.feed(batch(0, stored(PREFIX, BS, medium="CPU")))
    assert run.status("c-off") == "pending"
    run.feed(batch(1, stored(PREFIX, BS)), batch(2, removed(hashes[:2], medium="CPU")))
    assert run.status("c-off") == "held"
    run.feed(batch(3, removed(hashes[:1])))
    out = run.close(end=False)
    assert [(e["position"], e["medium"]) for e in named(out, "block_evicted")] == [(0, "GPU")]


def test_all_blocks_cleared_is_loss_of_everything(tmp_path: Path) -> None:
    run = Run(tmp_path, observed(tmp_path, claim_dict("c-a"), claim_dict("c-b", tokens=OTHER)))
    run.feed(batch(0, stored(PREFIX, BS), stored(OTHER[:BS], BS)), batch(1, AllBlocksCleared()))
    out = run.close(end=False)
    ev = named(out, "block_evicted")
    assert sorted((e["claim_id"], e["position"]) for e in ev) == [("c-a", 0), ("c-a", 1)]
    assert {e["reason"] for e in ev} == {"runtime_cleared"}
    assert run.status("c-b") == "pending"   # 1 block of 2 needed: nothing of it was lost


def test_learned_while_live_then_removed_then_cleared(tmp_path: Path) -> None:
    """vLLM's full report mode re-publishes a live chain; removal and AllBlocksCleared after it
    must neither crash (it raised StopIteration) nor report a copy that is not there."""
    run = Run(tmp_path, observed(tmp_path, claim_dict("c-1")))
    hashes = chain(PREFIX, BS)
    run.feed(batch(0, stored(PREFIX, BS)), batch(1, stored(PREFIX, BS)),   # a hit report
             batch(2, removed(hashes)), batch(3, removed(hashes)), batch(4, AllBlocksCleared()))
    out = run.close(end=False)
    assert [e["position"] for e in named(out, "block_evicted")] == [0, 1]
    assert run.status("c-1") == "unknown"      # the first removal was ambiguous: a gap


# ---------------------------------------------------------------------- counted presence
def test_second_physical_copy_keeps_the_claim(tmp_path: Path) -> None:
    """Two copies of a chain (the second below a known parent: a store, never a hit report):
    the claim is lost only when the last copy leaves."""
    run = Run(tmp_path, observed(tmp_path, claim_dict("c-1", blocks=1, footprint=2)))
    hashes = chain(PREFIX, BS)
    second = stored(PREFIX[BS:2 * BS], BS, parent=hashes[0])
    run.feed(batch(0, stored(PREFIX[:2 * BS], BS)), batch(1, second))
    run.feed(batch(2, removed(hashes[1:2])))                   # one copy of position 1 left
    assert run.status("c-1") == "held"
    run.feed(batch(3, removed(hashes[:1])))                    # position 0 (needed): gone
    out = run.close(end=False)
    assert [e["position"] for e in named(out, "block_evicted")] == [0]
    assert gaps(out) == []


def test_duplicate_root_store_is_ambiguous_not_a_loss(tmp_path: Path) -> None:
    """A second store of a live chain from its root is a second copy or a hit report: one
    removal is then neither held nor lost — a gap, never block_evicted."""
    run = Run(tmp_path, observed(tmp_path, claim_dict("c-1")))
    hashes = chain(PREFIX, BS)
    run.feed(batch(0, stored(PREFIX, BS)), batch(1, stored(PREFIX, BS)),
             batch(2, removed(hashes[:1])))
    out = run.close(end=False)
    run2 = Run(tmp_path, observed(tmp_path, claim_dict("c-1")), name="t2.jsonl")
    run2.feed(batch(0, stored(PREFIX, BS)), batch(1, stored(PREFIX, BS)),
              batch(2, removed(hashes[1:2]), removed(hashes[:1])))   # as vLLM: one per event
    assert named(out, "block_evicted") == []
    assert [g[0] for g in gaps(out)] == ["presence_ambiguous"]
    assert [g[0] for g in gaps(run2.close(end=False))] == ["presence_ambiguous"]
    assert run.status("c-1") == "unknown"
    line = claim_line(run.obs.by_id["c-1"])
    assert "possibly lost at batch 2" in line and "still held" not in line


def test_hybrid_group_drop_is_not_a_loss_of_a_claim_that_needs_group_0(tmp_path: Path) -> None:
    claims = observed(tmp_path, claim_dict("c-0", kv_groups=[0]),
                      claim_dict("c-all", tokens=PREFIX))
    run = Run(tmp_path, claims)
    hashes = chain(PREFIX, BS)
    run.feed(batch(0, stored(PREFIX, BS, group=0), stored(PREFIX, BS, group=1)))
    assert run.status("c-0") == "held" and run.status("c-all") == "held"
    run.feed(batch(1, removed(hashes[:2], group=1)))           # the sliding-window group moves
    out = run.close(end=False)
    assert run.status("c-0") == "held"                         # group 0 still holds its KV
    # a claim that names no group needs every group the runtime stored it in
    assert run.status("c-all") == "lost"
    assert {e["claim_id"] for e in named(out, "block_evicted")} == {"c-all"}


# ---------------------------------------------------------------------- bindings
def test_another_salt_or_lora_or_session_is_not_the_claim(tmp_path: Path) -> None:
    claims = observed(
        tmp_path, claim_dict("c-plain"),
        claim_dict("c-salted", tokens=PREFIX, cache_salt="s-1"),
        claim_dict("c-lora", tokens=PREFIX, lora_name="adapter-a"),
        claim_dict("c-session", tokens=PREFIX, session_id="sess-7"))
    run = Run(tmp_path, claims)
    run.feed(batch(0, stored(PREFIX, BS, salt="s-2")),               # another tenant's salt
             batch(1, stored(PREFIX, BS, lora="adapter-b")),          # another adapter
             batch(2, stored(PREFIX, BS, session="sess-8")))          # another session
    assert {c: run.status(c) for c in ("c-plain", "c-salted", "c-lora", "c-session")} == {
        "c-plain": "held", "c-salted": "pending", "c-lora": "pending", "c-session": "pending"}
    run.feed(batch(3, stored(PREFIX, BS, salt="s-1")), batch(4, stored(PREFIX, BS,
                                                                      lora="adapter-a")))
    run.close(end=False)
    assert run.status("c-salted") == "held" and run.status("c-lora") == "held"
    assert run.status("c-session") == "pending"


def test_multimodal_extra_keys_are_not_the_claim(tmp_path: Path) -> None:
    run = Run(tmp_path, observed(tmp_path, claim_dict("c-1")))
    ev = stored(PREFIX, BS)
    ev.extra_keys = [(("img-1", 0),), None, None, None]              # an image in block 0
    run.feed(batch(0, ev))
    run.close(end=False)
    assert run.status("c-1") == "pending"


def test_data_parallel_ranks_are_separate_caches(tmp_path: Path) -> None:
    run = Run(tmp_path, observed(tmp_path, claim_dict("c-1")))
    hashes = chain(PREFIX, BS)
    run.feed(batch(0, stored(PREFIX, BS), rank=0), batch(0, stored(PREFIX, BS), rank=1))
    assert run.status("c-1") == "held"
    run.feed(batch(1, removed(hashes[:1]), rank=0))           # its home rank drops it
    out = run.close(end=False)
    assert run.status("c-1") == "lost"
    assert [e["position"] for e in named(out, "block_evicted")] == [0]
