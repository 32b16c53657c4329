"""The litmus suite passes, and deliberately broken policies make the relevant item fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from residentkv.microruntime.facts import read_trace
from residentkv.microruntime.litmus import judge_l6, run_item, run_litmus
from residentkv.microruntime.policies import (
    Conflict,
    Decision,
    DemoteOnConflict,
    Expiring,
    HardExclude,
    Native,
)
from residentkv.microruntime.results import ITEMS
from residentkv.microruntime.runtime import MicroRuntime


class EvictsOneProtectedBlock(HardExclude):
    """hard_exclude that takes one protected block before refusing."""

    def on_conflict(self, runtime: MicroRuntime, conflict: Conflict) -> Decision:
        runtime.evict_protected_block(conflict.blocking_claim_ids[0], conflict.request_id)
        return Decision.REFUSE


class MisattributingHardExclude(HardExclude):
    """Refuses, but demotes the claim first (so the refusal names a claim it no longer has)."""

    def on_conflict(self, runtime: MicroRuntime, conflict: Conflict) -> Decision:
        return Decision.DEMOTE


class EvictsBeforeDemoting(DemoteOnConflict):
    """Loses a block of the claim, then demotes it."""

    def on_conflict(self, runtime: MicroRuntime, conflict: Conflict) -> Decision:
        runtime.evict_protected_block(conflict.blocking_claim_ids[0], conflict.request_id)
        return Decision.DEMOTE


class EvictsBeforeExpiry(Expiring):
    """Loses a block of the claim while deferring until the expiry."""

    def on_conflict(self, runtime: MicroRuntime, conflict: Conflict) -> Decision:
        runtime.evict_protected_block(conflict.blocking_claim_ids[0], conflict.request_id)
        return Decision.DEFER


class ProtectsEverything(Native):
    """A 'native' runtime that secretly refuses instead of evicting (nothing is evicted)."""

    pinning = Native.pinning

    def on_conflict(self, runtime: MicroRuntime, conflict: Conflict) -> Decision:
        return Decision.REFUSE

    def accepts(self, mode):  # type: ignore[no-untyped-def]
        return None


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    results = run_litmus(tmp_path_factory.mktemp("litmus"))
    return {r.id: r for r in results}


def test_every_item_passes(suite: dict[str, object]) -> None:
    assert list(suite) == list(ITEMS)
    failed = {k: r.checks for k, r in suite.items() if not r.passed}  # type: ignore[attr-defined]
    assert not failed


def test_items_carry_evidence_seqs(suite: dict[str, object]) -> None:
    for item in ("L1", "L3", "L4", "L5", "L6", "L7"):
        evidence = suite[item].evidence  # type: ignore[attr-defined]
        assert evidence and all(isinstance(s, int) for v in evidence.values() for s in v)


@pytest.mark.parametrize(
    ("item", "policy_name", "policy", "check"),
    [
        ("L3", "hard_exclude", EvictsOneProtectedBlock(), "resident_blocks_kept"),
        ("L3", "hard_exclude", MisattributingHardExclude(), "refusal_attributed"),
        ("L7", "hard_exclude", EvictsOneProtectedBlock(), "claim_held_at_outcome"),
        ("L4", "demote_on_conflict", EvictsBeforeDemoting(), "claim_demoted_precedes_every_loss"),
        ("L5", "expiring", EvictsBeforeExpiry(), "claim_expired_precedes_every_loss"),
        ("L1", "native", ProtectsEverything(), "resident_blocks_evicted"),
    ],
)
def test_broken_policy_fails_its_litmus(
    tmp_path: Path, item: str, policy_name: str, policy: object, check: str
) -> None:
    result = run_item(item, tmp_path, {policy_name: policy})  # type: ignore[dict-item]
    assert result.status == "fail"
    assert result.checks[check] is False, result.checks


def test_l6_fails_when_the_lost_block_is_not_block_0(tmp_path: Path) -> None:
    path = tmp_path / "l6.jsonl"
    from residentkv.microruntime.litmus import run_l6_scenario

    run_l6_scenario(path)
    # Rewrite the fault to hit the tail instead: the predicate (leading 8) then still holds.
    text = path.read_text().replace('"position":0', '"position":59')
    path.write_text(text)
    result = judge_l6(read_trace(path))
    assert result.status == "fail" and result.checks["block_0_lost"] is False


def test_unreadable_trace_fails(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"not": "an event"}\n')
    assert judge_l6(read_trace(path)).status == "fail"


def test_c1_reads_the_lowering_checker(suite: dict[str, object]) -> None:
    c1 = suite["C1"]
    assert c1.status == "pass", c1.detail  # type: ignore[attr-defined]
    assert "rejected_mapping" in c1.detail and "approximation_substrate" in c1.detail  # type: ignore[attr-defined]


def test_c1_not_run_counts_as_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "residentkv.lowering.check", None)
    result = run_item("C1", tmp_path)
    assert result.status == "not_run" and not result.passed
    assert result.detail.startswith("not run: lowering checker unavailable")
