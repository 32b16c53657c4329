"""The observer on real, unpatched vLLM (plain OpenAI server, no residentkv connector)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from residentkv.observe.scenario import OFFLOADABLE, SOFT, run_observed_vllm
from residentkv.trace.gates import check_trace

from .obskit import assert_gap_never_passes, lifecycle, loss_unreported, named

pytestmark = pytest.mark.vllm


def _provenance(trace: Path) -> dict[str, object]:
    first = json.loads(trace.read_text(encoding="utf-8").splitlines()[0])
    assert first["event"] == "stream_started"
    return {"emitter": first["emitter"]["name"], "runtime": first["runtime"]["name"]}


def test_claimed_prefixes_evicted_with_no_outcome(tmp_path: Path) -> None:
    run = run_observed_vllm(tmp_path)
    trace = run.trace
    assert _provenance(trace) == {"emitter": "residentkv-observer", "runtime": "vllm-cpu"}
    # the publisher found at /kv_event_sources; its replay endpoint closed the tail: no gap
    assert named(trace, "observation_gap") == []
    mat = {e["claim_id"]: e for e in named(trace, "claim_materialized")}
    # materialized on real positions: both prompts' two full blocks were stored
    for cid in (SOFT, OFFLOADABLE):
        assert (mat[cid]["leading"], mat[cid]["surviving"], mat[cid]["holds"]) == (2, 2, True)
    evicted = named(trace, "block_evicted")
    for cid in (SOFT, OFFLOADABLE):
        mine = [e for e in evicted if e["claim_id"] == cid]
        assert sorted(e["position"] for e in mine) == [0, 1]
        assert all(e["reason"] == "runtime_removed" and e["medium"] == "GPU" for e in mine)
        assert all(e["seq"] > mat[cid]["seq"] for e in mine)
    # nothing but what the runtime published: no outcome of any kind
    kinds = {json.loads(line)["event"] for line in trace.read_text().splitlines()}
    assert kinds == {"stream_started", "claim_accepted", "claim_materialized",
                     "block_evicted"}
    passed, missing = lifecycle(trace, SOFT)
    assert not passed and loss_unreported(missing)
    assert not check_trace(trace, ["lifecycle"], OFFLOADABLE).passed
    assert run.observer_exit == 1                            # the verdict failed


def test_late_start_is_never_a_pass(tmp_path: Path) -> None:
    run = run_observed_vllm(tmp_path, late_start=True, replay=False)
    gaps = named(run.trace, "observation_gap")
    # batches before the start, and (without a replay endpoint) the unconfirmed end
    assert [g["reason"] for g in gaps] == ["late_start", "unconfirmed_tail"]
    assert gaps[0]["missed_from"] == 0
    for cid in (SOFT, OFFLOADABLE):
        assert not check_trace(run.trace, ["lifecycle"], cid).passed
        assert_gap_never_passes(run.trace, cid)


def test_late_start_filled_by_the_replay_endpoint(tmp_path: Path) -> None:
    run = run_observed_vllm(tmp_path, late_start=True, replay=True)
    assert named(run.trace, "observation_gap") == []
    assert {e["claim_id"] for e in named(run.trace, "claim_materialized")} == {
        SOFT, OFFLOADABLE}
    assert {e["claim_id"] for e in named(run.trace, "block_evicted")} == {SOFT, OFFLOADABLE}
