"""Hand-written traces that combine defects (issue 10, classes 1-8).

Each trace is wrong by SPEC §2/§4/§4.1 although every single defect in it is subtle; the gates
of the previous release passed every one. Both the reference semantics and the streaming gates
must fail it, with the requirement the defect breaks among the missing ids, and agree exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from residentkv.trace.gates import GateResult, check_trace
from residentkv.trace.reader import TraceReader
from residentkv.trace.semantics import reference_results
from tracekit import (
    PRED,
    Trace,
    claimed_load_failure,
    hard_protected_conflict,
    ident,
    success_path,
    two_claim_attribution,
)

Events = list[dict[str, Any]]


def at(events: Events, event: str, claim: str | None = None, nth: int = 0) -> int:
    hits = [i for i, e in enumerate(events)
            if e["event"] == event and (claim is None or e["claim_id"] == claim)]
    return hits[nth]


def like(events: Events, i: int, **fields: Any) -> dict[str, Any]:
    """A copy of event *i* with *fields* changed (seqs are renumbered when written)."""
    return {**events[i], **fields}


def judge(t: Trace, tmp_path: Path, gate: str, claim: str) -> tuple[GateResult, GateResult]:
    """(streaming, reference) results of *gate* for *claim*; they must agree."""
    for i, e in enumerate(t.events):
        e["seq"] = i
    path = t.write(tmp_path / "t.jsonl")
    check = check_trace(path, [gate], claim)
    (streaming,) = check.results
    reader = TraceReader(path, fast=True)
    events = list(reader.events())
    well_formed = reader.problem_count == 0
    (reference,) = reference_results(events, [gate], claim, well_formed=well_formed)
    assert (streaming.passed, streaming.missing, streaming.controls) == (
        reference.passed, reference.missing, reference.controls)
    return streaming, reference


def refusal(claim: str, request: str, arbiter: str = "scheduler_boundary",
            outcome: str | None = None, blocking: list[str] | None = None,
            envelope: str | None = "same") -> dict[str, Any]:
    return {"schema": "residentkv.event/v1", "seq": 0, "ts_ns": 1, "source": "test",
            "event": "active_request_refused",
            "claim_id": claim if envelope == "same" else envelope, "request_id": request,
            "outcome_claim_id": outcome or claim, "blocking_claim_ids": blocking or [claim],
            "feasibility": "restore_failed", "arbiter": arbiter}


def finished(request: str, status: str = "error") -> dict[str, Any]:
    return {"schema": "residentkv.event/v1", "seq": 0, "ts_ns": 1, "source": "test",
            "event": "request_finished", "claim_id": None, "request_id": request,
            "status": status, "finish_reason": status}


def started(request: str, owner_scope: str | None = None) -> dict[str, Any]:
    return {"schema": "residentkv.event/v1", "seq": 0, "ts_ns": 1, "source": "test",
            "event": "request_started", "claim_id": None, "request_id": request,
            "prompt_tokens": 300, "owner_scope": owner_scope}


def claim_event(event: str, claim: str | None, request: str | None, **fields: Any) -> dict[
        str, Any]:
    return {"schema": "residentkv.event/v1", "seq": 0, "ts_ns": 1, "source": "test",
            "event": event, "claim_id": claim, "request_id": request,
            **ident(claim or "c-1"), **fields}


def evicted(claim: str, position: int | None) -> dict[str, Any]:
    return {"schema": "residentkv.event/v1", "seq": 0, "ts_ns": 1, "source": "test",
            "event": "block_evicted", "claim_id": claim, "request_id": None, "block_id": 7,
            "protected": False, "reason": "lru", "position": position}


# ---------------------------------------------------------------------------- the traces
def class1_refusal_of_another_request() -> Trace:
    """The failed request gets no refusal; a later request is refused naming the claim."""
    t = claimed_load_failure()
    ev = t.events
    ref = ev.pop(at(ev, "active_request_refused"))
    ev += [started("r-3"), {**ref, "request_id": "r-3"}, finished("r-3", "refused")]
    return t


def class2_duplicate_finish() -> Trace:
    """vLLM's order: the request finishes before the failure is reported; a second finish of
    the same request after the refusal makes the refusal look timely."""
    t = claimed_load_failure()
    ev = t.events
    ev.insert(at(ev, "kv_load_finished"), finished("r-2"))
    return t


def class3_timing_by_another_refusal() -> Trace:
    """An early harness refusal meets the deadline; the attributed one comes after the finish."""
    t = claimed_load_failure()
    ev = t.events
    i = at(ev, "active_request_refused")
    real = ev.pop(i)
    ev.insert(i, refusal("c-1", "r-2", arbiter="harness"))
    ev.append(real)
    return t


def class4_reuse_after_release() -> Trace:
    t = success_path()
    t.events.insert(at(t.events, "request_finished") + 1,
                    claim_event("claim_released", "c-1", None, reason="done"))
    return t


def class4_success_after_failed_closed() -> Trace:
    t = Trace().started("r-1").accept("c-1", "r-1").resident("c-1", "r-1").finished("r-1")
    t.started("r-2").restore_fails("c-1", "r-2", generation=0).finished("r-2", "error", "error")
    return t.started("r-3").restore_ok("c-1", "r-3", generation=1, job=2).finished("r-3")


def class4_reuse_between_fallback_and_offload_restore() -> Trace:
    t = success_path()
    ev = t.events
    i = at(ev, "claim_restored")
    ev[i:i] = [like(ev, i, source="fallback_recompute"),
               claim_event("claim_reused", "c-1", "r-2", generation=0, holds=True)]
    return t


def class4_load_success_then_invalid() -> Trace:
    t = success_path()
    ev = t.events
    i = at(ev, "kv_load_finished")
    ev.insert(i + 1, {**ev[i], "event": "kv_load_failed", "invalid_block_ids": [0, 1],
                      "injected": False, "success": None, "bytes": None})
    for k in ("success", "bytes"):
        ev[i + 1].pop(k)
    return t


def class4_holds_contradicts_numbers() -> Trace:
    t = success_path()
    i = at(t.events, "claim_materialized")
    t.events[i] = like(t.events, i, leading=1, surviving=2)
    return t


def class4_reaccepted_with_another_predicate() -> Trace:
    t = success_path()
    ev = t.events
    i = at(ev, "claim_materialized")
    ev.insert(i + 1, like(ev, at(ev, "claim_accepted"), footprint_blocks=1,
                          predicate={**PRED, "blocks": 1}))
    return t


def class4_store_before_acceptance() -> Trace:
    """The claim is submitted, its KV stored, and only then accepted."""
    t = success_path()
    ev = t.events
    for name in ("kv_store_started", "kv_store_finished"):
        moved = ev.pop(at(ev, name))
        ev.insert(at(ev, "claim_accepted"), moved)
    ev.insert(at(ev, "kv_store_started"), claim_event("claim_submitted", "c-1", "r-1"))
    return t


def class4_reuse_by_another_tenant() -> Trace:
    t = success_path()
    ev = t.events
    ev[at(ev, "claim_accepted")]["owner_scope"] = "tenant:a/session:1"
    ev[at(ev, "request_started", nth=1)]["owner_scope"] = "tenant:b/session:9"
    return t


def class5_hard_silent_eviction() -> Trace:
    t = hard_protected_conflict()
    t.events.insert(at(t.events, "request_started", nth=1), evicted("c-h", 0))
    return t


def class5_soft_silent_eviction() -> Trace:
    t = Trace().started("r-1").accept("c-s", "r-1", mode="soft_priority")
    t.add("claim_materialized", "c-s", "r-1", surviving=2, leading=2, required=2, holds=True,
          tier="device").finished("r-1")
    t.events.append(evicted("c-s", 1))
    return t


def class5_expiring_loss_by_evaluation() -> Trace:
    t = Trace().started("r-1").accept("c-e", "r-1", mode="expiring", expires_after_s=30.0)
    t.add("claim_materialized", "c-e", "r-1", surviving=2, leading=2, required=2, holds=True,
          tier="device").finished("r-1")
    t.add("claim_materialized", "c-e", None, surviving=1, leading=0, required=2, holds=False,
          tier="device")
    return t.add("claim_expired", "c-e", None, reason="ttl 30 s elapsed")


def class5_non_target_silent_loss() -> Trace:
    """The served non-target is later evaluated without its leading block: unreported loss."""
    t = two_claim_attribution()
    t.events.insert(at(t.events, "request_finished", nth=2) + 1, claim_event(
        "claim_materialized", "c-b", None, surviving=1, leading=0, required=2, holds=False,
        tier="device"))
    return t


def class6_pruned_open_obligation() -> Trace:
    """A non-target restore that never completes, pushed out by later generations."""
    t = Trace().started("r-1").accept("c-a", "r-1").resident("c-a", "r-1", job=0)
    t.finished("r-1").started("r-2").accept("c-b", "r-2").resident("c-b", "r-2", job=1)
    t.finished("r-2")
    t.started("r-b0").restore_ok("c-b", "r-b0", generation=0, job=10).finished("r-b0")
    t.started("r-b1").restore_required("c-b", "r-b1", generation=1)
    t.finished("r-b1")
    for g in range(2, 9):
        t.started(f"r-b{g}").restore_ok("c-b", f"r-b{g}", generation=g, job=10 + g)
        t.finished(f"r-b{g}")
    return t.started("r-4").restore_fails("c-a", "r-4", job=3).finished("r-4", "error", "error")


def class7_unnamed_harm() -> Trace:
    t = two_claim_attribution()
    t.events.append(claim_event("claim_harmed", None, None, cause="evicted", before={
        "surviving": 2, "leading": 2, "required": 2, "holds": True}, after={
        "surviving": 1, "leading": 0, "required": 2, "holds": False}))
    return t


def class7_unnamed_restore_failure() -> Trace:
    t = two_claim_attribution()
    t.events.append(claim_event("claim_restore_failed", None, "r-3", generation=0,
                                reason="?", injected=False, outcome_type="refusal",
                                outcome_claim_id=None))
    return t


def class8_refusal_names_another_claim() -> Trace:
    t = hard_protected_conflict()
    i = at(t.events, "active_request_refused")
    t.events[i] = like(t.events, i, outcome_claim_id="c-other")
    return t


def class8_conflict_after_release() -> Trace:
    t = hard_protected_conflict()
    t.events.insert(at(t.events, "request_started", nth=1),
                    claim_event("claim_released", "c-h", None, reason="done"))
    return t


def class8_own_restore_failure_as_conflict() -> Trace:
    t = Trace().started("r-1").accept("c-h", "r-1", mode="hard_protected")
    t.resident("c-h", "r-1").finished("r-1")
    return t.started("r-2").restore_fails("c-h", "r-2").finished("r-2", "refused", "error")


def class8_deferral_of_another_conflict_blames_the_target() -> Trace:
    """A hard claim's capacity conflict deferred with the *target* as the blocking claim, before
    the target even exists, then the target's clean failure: the deferral names c-h (its
    envelope) and blames c-1, so attribution of c-1 is not clean (found by make fuzz-gates)."""
    t = Trace().started("r-0").accept("c-h", "r-0", mode="hard_protected")
    t.add("claim_materialized", "c-h", "r-0", surviving=2, leading=2, required=2, holds=True,
          tier="device").finished("r-0")
    t.started("r-9").add("active_request_deferred", "c-h", "r-9", reason="capacity",
                         blocking_claim_ids=["c-1"]).finished("r-9")
    t.events += claimed_load_failure("c-1").events
    return t


CASES: list[tuple[int, Callable[[], Trace], str, str, str]] = [
    (1, class1_refusal_of_another_request, "failure_outcome", "c-1", "refusal_attributed"),
    (1, class1_refusal_of_another_request, "failure_outcome", "c-1", "outcome_before_finish"),
    (2, class2_duplicate_finish, "failure_outcome", "c-1", "trace_well_formed"),
    (2, class2_duplicate_finish, "failure_outcome", "c-1", "outcome_before_finish"),
    (3, class3_timing_by_another_refusal, "failure_outcome", "c-1", "outcome_before_finish"),
    (4, class4_reuse_after_release, "observation", "c-1", "restore_required"),
    (4, class4_success_after_failed_closed, "observation", "c-1", "restored_from_offload"),
    (4, class4_reuse_between_fallback_and_offload_restore, "observation", "c-1",
     "reused_after_restore"),
    (4, class4_load_success_then_invalid, "observation", "c-1", "load_succeeded"),
    (4, class4_holds_contradicts_numbers, "observation", "c-1", "materialized"),
    (4, class4_reaccepted_with_another_predicate, "observation", "c-1", "stable_identity"),
    (4, class4_store_before_acceptance, "observation", "c-1",
     "claim_accepted_before_lifecycle"),
    (4, class4_reuse_by_another_tenant, "observation", "c-1", "reused_after_restore"),
    (5, class5_hard_silent_eviction, "lifecycle", "c-h", "no_harm"),
    (5, class5_soft_silent_eviction, "lifecycle", "c-s", "legal_transitions"),
    (5, class5_expiring_loss_by_evaluation, "lifecycle", "c-e", "expiry_before_loss"),
    (5, class5_non_target_silent_loss, "attribution", "c-a", "non_targets_served"),
    (6, class6_pruned_open_obligation, "attribution", "c-a", "non_targets_served"),
    (7, class7_unnamed_harm, "attribution", "c-a", "failures_name_only_target"),
    (7, class7_unnamed_restore_failure, "attribution", "c-a", "failures_name_only_target"),
    (8, class8_refusal_names_another_claim, "lifecycle", "c-h", "conflict_attributed"),
    (8, class8_conflict_after_release, "lifecycle", "c-h", "conflict_attributed"),
    (8, class8_own_restore_failure_as_conflict, "lifecycle", "c-h", "conflict_attributed"),
    (8, class8_deferral_of_another_conflict_blames_the_target, "attribution", "c-1",
     "failures_name_only_target"),
]


@pytest.mark.parametrize(("cls", "build", "gate", "claim", "requirement"), CASES,
                         ids=[f"class{c[0]}-{c[1].__name__}-{c[4]}" for c in CASES])
def test_combined_defect_fails_with_the_broken_requirement(
    cls: int, build: Callable[[], Trace], gate: str, claim: str, requirement: str,
    tmp_path: Path,
) -> None:
    streaming, reference = judge(build(), tmp_path, gate, claim)
    assert not reference.passed and requirement in reference.missing, reference.missing
    assert not streaming.passed and requirement in streaming.missing, streaming.missing


@pytest.mark.parametrize("build", [class7_unnamed_harm, class7_unnamed_restore_failure])
def test_an_unnamed_failure_of_no_request_fires_no_control(build: Callable[[], Trace],
                                                           tmp_path: Path) -> None:
    # SPEC §9.1: negative controls fire only for events that concern the judged claim; these
    # name no claim and no request that carries one (attribution still fails, CASES above)
    for claim in ("c-a", "c-b"):
        streaming, _ = judge(build(), tmp_path, "attribution", claim)
        assert not streaming.controls["unclaimed_failure"]


def test_an_unnamed_failure_fires_unclaimed_failure_for_the_claim_its_request_carries(
        tmp_path: Path) -> None:
    t = two_claim_attribution()
    i = at(t.events, "request_finished", nth=3)  # r-4's, which restores the target c-a
    t.events.insert(i, {**like(t.events, at(t.events, "kv_load_failed", "c-a")),
                        "claim_id": None})
    target, _ = judge(t, tmp_path, "attribution", "c-a")
    other, _ = judge(t, tmp_path, "attribution", "c-b")
    assert target.controls["unclaimed_failure"] and not other.controls["unclaimed_failure"]
    assert "failures_name_only_target" in target.missing


def test_a_reacceptance_is_ambiguous_identity(tmp_path: Path) -> None:
    streaming, _ = judge(class4_reaccepted_with_another_predicate(), tmp_path, "observation",
                         "c-1")
    assert streaming.controls["ambiguous_identity"]


@pytest.mark.parametrize("build", [success_path, claimed_load_failure, two_claim_attribution,
                                   hard_protected_conflict])
def test_the_parents_of_the_defects_pass(build: Callable[[], Trace], tmp_path: Path) -> None:
    # the defects above are what fails: their parents pass the gate each case judges
    gates = {success_path: "observation", claimed_load_failure: "failure_outcome",
             two_claim_attribution: "attribution", hard_protected_conflict: "lifecycle"}
    claim = {two_claim_attribution: "c-a", hard_protected_conflict: "c-h"}.get(build, "c-1")
    streaming, reference = judge(build(), tmp_path, gates[build], claim)
    assert streaming.passed and reference.passed, reference.missing
