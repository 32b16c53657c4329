"""Counted presence over real ZeroMQ sockets: copies per (hash, group), sessions, unnamed media
and groups — a loss only when the claim's last copy can be gone, a gap when the wire cannot tell
(SPEC §9.2)."""

from __future__ import annotations

from pathlib import Path

from residentkv.observe.synthetic import chain, removed, stored

from .genuine import REPORT_FULL_SESSION, load
from .obskit import BS, OTHER, PREFIX, claim_dict, gaps, named
from .zmqkit import observe_over_zmq


def evicted(out: Path, claim: str) -> list[int]:
    return [e["position"] for e in named(out, "block_evicted") if e["claim_id"] == claim]


def ambiguous(out: Path) -> list[str]:
    return [g["detail"].split("'")[1] for g in named(out, "observation_gap")
            if g["reason"] == "presence_ambiguous"]


def test_genuine_vllm_report_of_a_hit_under_another_session(tmp_path: Path) -> None:
    """Real vLLM 0.32, replayed byte for byte: session sess-8 stores a prompt, sess-7 sends it
    again with kv_cache_report_mode full (vLLM re-publishes the blocks it hit, now under
    sess-7: one physical copy, two stores), then other prompts remove each block once. Whether
    a copy is left is unknown — and a copy under sess-8 is never sess-7's: no loss is written,
    the claims are possibly stored or possibly lost, each a gap."""
    header, messages = load(REPORT_FULL_SESSION)
    payloads = [payload for _, payload in messages]

    def watch(cid: str, **binding: str) -> tuple[Path, str]:
        (tmp_path / cid).mkdir()
        claim = claim_dict(cid, "offloadable", blocks=2, footprint=2, tokens=header["prompt"],
                           block_size=header["block_size"], **binding)
        w = observe_over_zmq(tmp_path / cid, [claim], *payloads)
        return w.out, w.obs.by_id[cid].status.value

    # the session's claim: its store may only report sess-8's copy, never certainly its own
    out, status = watch("s7", session_id="sess-7")
    assert evicted(out, "s7") == [] and named(out, "claim_materialized") == []
    assert ambiguous(out) == ["s7"] and status == "unknown"
    # a claim of any session: held on sess-8's copy, then possibly lost (one copy or two?)
    out, status = watch("any")
    assert evicted(out, "any") == [] and len(named(out, "claim_materialized")) == 1
    assert ambiguous(out) == ["any"] and status == "unknown"
    assert [g[0] for g in gaps(out)] == ["presence_ambiguous"]


def test_another_sessions_copy_never_keeps_a_session_claim_held(tmp_path: Path) -> None:
    """sess-7's chain, then a copy of its block 1 stored by sess-8, then one removal of block
    1: either copy may be the one removed, and the one left may be sess-8's."""
    hashes = chain(PREFIX, BS)
    claims = [claim_dict("s7", blocks=2, footprint=2, session_id="sess-7")]
    out = observe_over_zmq(
        tmp_path, claims, [stored(PREFIX[:2 * BS], BS, session="sess-7")],
        [stored(PREFIX[BS:2 * BS], BS, parent=hashes[0], session="sess-8")],
        [removed(hashes[1:2])]).out
    assert ambiguous(out) == ["s7"] and evicted(out, "s7") == []


def test_kv_cache_groups_are_each_claims_own(tmp_path: Path) -> None:
    """Claim x is stored in group 0 only; claim y in groups 0 and 1. Another claim's group
    never becomes x's need: x's removal in group 0 loses position 0 only, and a claim stored in
    group 0 after another claim's group-1 store still materializes."""
    x, y, z = PREFIX, OTHER, [t + 1000 for t in PREFIX]
    claims = [claim_dict("x", blocks=2, footprint=2, tokens=x),
              claim_dict("y", blocks=2, footprint=2, tokens=y),
              claim_dict("z", blocks=2, footprint=2, tokens=z)]
    out = observe_over_zmq(
        tmp_path, claims, [stored(x[:2 * BS], BS)],
        [stored(y[:2 * BS], BS, group=0), stored(y[:2 * BS], BS, group=1)],
        [stored(z[:2 * BS], BS)], [removed(chain(x, BS)[:1], group=0)]).out
    assert evicted(out, "x") == [0]
    assert {m["claim_id"] for m in named(out, "claim_materialized")} == {"x", "y", "z"}
    assert gaps(out) == []


def test_a_group_that_drops_a_block_the_claim_was_stored_in_is_a_loss(tmp_path: Path) -> None:
    """A hybrid model stores each block once per group; a group dropping one (a sliding
    window) is a loss unless the claim names the groups it needs."""
    hashes = chain(PREFIX, BS)
    both = [[stored(PREFIX[:2 * BS], BS, group=0), stored(PREFIX[:2 * BS], BS, group=1)]]
    out = observe_over_zmq(
        tmp_path, [claim_dict("all", blocks=2, footprint=2),
                   claim_dict("g0", blocks=2, footprint=2, kv_groups=[0])],
        *both, [removed(hashes[:1], group=1)]).out
    assert evicted(out, "all") == [0] and evicted(out, "g0") == []


def test_a_removal_that_names_no_medium_or_group_may_have_taken_the_copy(
        tmp_path: Path) -> None:
    """medium None: the removal may or may not concern the device — possibly lost, a gap.
    group None where the block has copies in two groups: either may be gone — a gap. group
    None where it has copies in one group only: that copy is gone — a loss."""
    def run(name: str, *last: object, groups: tuple[int, ...] = (0,)) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        first = [stored(PREFIX[:2 * BS], BS, group=g) for g in groups]
        return observe_over_zmq(folder, [claim_dict("c", blocks=2, footprint=2)], first,
                                list(last)).out

    hashes = chain(PREFIX, BS)
    no_medium = run("medium", removed(hashes[:1], medium=None))
    assert ambiguous(no_medium) == ["c"] and evicted(no_medium, "c") == []
    two_groups = run("groups", removed(hashes[:1], group=None), groups=(0, 1))
    assert ambiguous(two_groups) == ["c"] and evicted(two_groups, "c") == []
    one_group = run("group", removed(hashes[:1], group=None))
    assert ambiguous(one_group) == [] and evicted(one_group, "c") == [0]
