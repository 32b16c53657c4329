"""MicroRuntime semantics, each read back from the emitted trace."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from residentkv.microruntime.facts import Trace
from residentkv.microruntime.runtime import MicroRuntime, RequestState
from residentkv.microruntime.scenario import make_claim
from residentkv.model.claim import ProtectionMode as M
from residentkv.model.claim import Registration
from residentkv.model.events import IDENTITY_FIELDS
from residentkv.trace.gates import check_trace

Run = Callable[..., Trace]
OBJ = "prefix-resident"


def test_claim_that_cannot_fit_is_rejected_at_acceptance(run_traced: Run) -> None:
    def body(rt: MicroRuntime) -> None:
        assert rt.submit_claim(make_claim("c1", object_id="a", footprint=60))
        assert not rt.submit_claim(make_claim("c2", object_id="b", footprint=30))

    trace = run_traced(80, "hard_exclude", body)
    rejected = trace.first("claim_rejected", claim_id="c2")
    assert rejected is not None and "insufficient device capacity" in rejected["reason"]
    assert not trace.select("claim_accepted", claim_id="c2")


@pytest.mark.parametrize(
    ("policy", "mode"),
    [("native", M.HARD_PROTECTED), ("hard_exclude", M.DEMOTABLE), ("expiring", M.OFFLOADABLE),
     ("hard_exclude", M.BEST_EFFORT)],
)
def test_unsupported_modes_are_rejected(run_traced: Run, policy: str, mode: M) -> None:
    trace = run_traced(100, policy, lambda rt: rt.submit_claim(make_claim(mode=mode)))
    assert trace.select("claim_rejected") and not trace.select("claim_accepted")


def test_post_hoc_claims_are_rejected(run_traced: Run) -> None:
    claim = make_claim(registration=Registration.POST_HOC)
    trace = run_traced(100, "hard_exclude", lambda rt: rt.submit_claim(claim))
    assert "post_hoc" in trace.select("claim_rejected")[0]["reason"]


def test_every_claim_event_carries_one_identity(run_traced: Run) -> None:
    def body(rt: MicroRuntime) -> None:
        rt.submit_claim(make_claim(mode=M.DEMOTABLE))
        rt.request("r1", OBJ, 60)
        rt.request("r2", "other", 70)

    trace = run_traced(80, "demote_on_conflict", body)
    values = trace.identity_values("claim-resident")
    assert all(len(v) == 1 and None not in v for v in values.values())
    assert set(values) == set(IDENTITY_FIELDS)
    assert trace.lifecycle_legal("claim-resident")


def test_lru_takes_chain_tails_first(run_traced: Run) -> None:
    def body(rt: MicroRuntime) -> None:
        rt.request("r1", "a", 10)
        rt.request("r2", "b", 13)

    trace = run_traced(20, "native", body)
    assert [e["position"] for e in trace.select("block_evicted")] == [9, 8, 7]


def test_soft_priority_blocks_go_after_unclaimed_and_loss_is_harm(run_traced: Run) -> None:
    def body(rt: MicroRuntime) -> None:
        rt.submit_claim(make_claim(footprint=10, mode=M.SOFT_PRIORITY))
        rt.request("r1", OBJ, 10)
        rt.request("r2", "junk", 5)
        rt.request("r3", "big", 16)

    trace = run_traced(20, "hard_exclude", body)
    evicted = trace.select("block_evicted")
    # the 5 unclaimed blocks go first, then the claimed tail; the first claimed loss is harm
    assert [e["claim_id"] for e in evicted[:5]] == [None] * 5
    assert evicted[5]["claim_id"] == "claim-resident"
    harmed = trace.select("claim_harmed", claim_id="claim-resident")
    assert len(harmed) == 1 and harmed[0]["after"]["holds"] is False


def test_release_makes_later_loss_post_release(run_traced: Run) -> None:
    def body(rt: MicroRuntime) -> None:
        rt.submit_claim(make_claim())
        rt.request("r1", OBJ, 60)
        rt.release_claim("claim-resident")
        rt.request("r2", "other", 70)

    trace = run_traced(80, "hard_exclude", body)
    released = trace.first("claim_released")
    assert released is not None
    losses = trace.losses("claim-resident")
    assert len(losses) == 50 and all(e["seq"] > released["seq"] for e in losses)
    assert len(trace.select("claim_block_lost_after_release")) == 50
    assert not trace.select("claim_harmed")


def test_busy_pool_defers_then_serves(run_traced: Run) -> None:
    states: list[RequestState] = []

    def body(rt: MicroRuntime) -> None:
        states.append(rt.request("r1", "a", 8, hold=True))
        states.append(rt.request("r2", "b", 8))
        rt.finish("r1")
        states.append(rt.request_state("r2"))

    trace = run_traced(10, "native", body)
    assert states == [RequestState.RUNNING, RequestState.DEFERRED, RequestState.SERVED]
    deferred = trace.first("active_request_deferred", request_id="r2")
    assert deferred is not None and deferred["blocking_claim_ids"] == []


def test_request_larger_than_pool_is_refused_without_blame(run_traced: Run) -> None:
    trace = run_traced(10, "hard_exclude", lambda rt: rt.request("r", "a", 11))
    refused = trace.first("active_request_refused")
    assert refused is not None
    assert (refused["blocking_claim_ids"], refused["shortfall"], refused["outcome_claim_id"]) == (
        [], 1, None
    )


def test_blocking_names_only_the_claims_needed(run_traced: Run) -> None:
    def body(rt: MicroRuntime) -> None:
        rt.submit_claim(make_claim("old", object_id="a", footprint=30))
        rt.submit_claim(make_claim("new", object_id="b", footprint=30))
        rt.request("ra", "a", 30)
        rt.request("rb", "b", 30)
        rt.request("rx", "x", 50)

    trace = run_traced(100, "hard_exclude", body)
    refused = trace.first("active_request_refused", request_id="rx")
    assert refused is not None
    assert refused["blocking_claim_ids"] == ["old"] and refused["outcome_claim_id"] == "old"
    assert refused["shortfall"] == 10


def test_offload_then_restore_passes_the_observation_gate(tmp_path: Path, run_traced: Run) -> None:
    def body(rt: MicroRuntime) -> None:
        rt.submit_claim(make_claim(mode=M.OFFLOADABLE))
        rt.request("r1", OBJ, 60)
        rt.request("r2", "active", 70)
        # SPEC §4.2: a restore is by a request of the claim's owner scope
        rt.request("r3", OBJ, 60, owner_scope="tenant:a/session:1")

    trace = run_traced(80, "offload_resident", body)
    assert not trace.select("block_evicted", claim_id="claim-resident")
    assert trace.select("claim_restored", source="offload_tier")
    result = check_trace(trace.path, gates=["observation"], claim_id="claim-resident")
    assert [r.passed for r in result.results] == [True]


def test_injected_restore_failure_passes_the_failure_outcome_gate(run_traced: Run) -> None:
    def body(rt: MicroRuntime) -> None:
        rt.submit_claim(make_claim(mode=M.OFFLOADABLE))
        rt.request("r1", OBJ, 60)
        rt.request("r2", "active", 70)
        assert rt.request("r3", OBJ, 60,
                          owner_scope="tenant:a/session:1") is RequestState.REFUSED

    trace = run_traced(80, "offload_resident", body, fail_loads_of={"claim-resident"})
    assert not trace.select("claim_restored")
    result = check_trace(trace.path, gates=["failure_outcome"], claim_id="claim-resident")
    assert [r.passed for r in result.results] == [True]


def test_demotion_and_expiry_traces_pass_the_lifecycle_gate(run_traced: Run) -> None:
    for policy, mode in (("demote_on_conflict", M.DEMOTABLE), ("expiring", M.EXPIRING)):
        def body(rt: MicroRuntime, mode: M = mode) -> None:
            rt.submit_claim(make_claim(mode=mode))
            rt.request("r1", OBJ, 60)
            rt.request("r2", "active", 70)

        trace = run_traced(80, policy, body)
        result = check_trace(trace.path, gates=["lifecycle"], claim_id="claim-resident")
        assert [r.passed for r in result.results] == [True], policy


def test_expiry_waits_for_the_clock(run_traced: Run) -> None:
    def body(rt: MicroRuntime) -> None:
        rt.submit_claim(make_claim(mode=M.EXPIRING, expires_after_s=10))
        rt.request("r1", OBJ, 60)
        assert rt.request("r2", "active", 70) is RequestState.DEFERRED
        rt.advance(9.9)
        assert rt.request_state("r2") is RequestState.DEFERRED
        rt.advance(10)
        assert rt.request_state("r2") is RequestState.SERVED

    run_traced(80, "expiring", body)


def test_runtime_without_writer_behaves_the_same() -> None:
    rt = MicroRuntime(80, "hard_exclude")
    assert rt.submit_claim(make_claim())
    rt.request("r1", OBJ, 60)
    assert rt.request("r2", "active", 70) is RequestState.REFUSED
    rt.close()
    rt.pool.check()
    assert rt.block_ops > 0


def test_duplicate_ids_are_programming_errors() -> None:
    rt = MicroRuntime(10)
    rt.request("r", "a", 1)
    with pytest.raises(ValueError):
        rt.request("r", "a", 1)
    rt.submit_claim(make_claim(footprint=5))
    with pytest.raises(ValueError):
        rt.submit_claim(make_claim(footprint=5))


def test_runs_are_deterministic(tmp_path: Path) -> None:
    """Two runs of one scenario differ only in seq offset and ts_ns."""
    from residentkv.microruntime.facts import read_trace
    from residentkv.microruntime.scenario import Reference, run_reference

    def shape(path: Path) -> list[dict[str, object]]:
        events = read_trace(path).events
        base = events[0]["seq"]
        return [{**e, "seq": e["seq"] - base, "ts_ns": 0} for e in events]

    for policy in ("native", "hard_exclude", "expiring", "offload_resident"):
        a = run_reference(Reference(90, policy), tmp_path / f"{policy}-a.jsonl")
        b = run_reference(Reference(90, policy), tmp_path / f"{policy}-b.jsonl")
        assert shape(a) == shape(b), policy
