"""Gate tests: the canonical traces, one test per requirement id, and every negative control."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from residentkv.trace.gates import CONTROLS, GATE_NAMES, REQUIREMENTS, GateResult, check_trace
from tracekit import (
    CANONICAL,
    SCHEMA,
    Trace,
    claimed_load_failure,
    expiring_release_before_loss,
    hard_protected_conflict,
    success_path,
    two_claim_attribution,
    two_generations,
)

Events = list[dict[str, Any]]
TRACES = Path(__file__).parent.parent.parent / "src" / "residentkv" / "data" / "traces"


def run(events: Events, tmp_path: Path, gate: str, claim: str) -> GateResult:
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(dict(e, seq=i)) + "\n" for i, e in enumerate(events)))
    (result,) = check_trace(path, [gate], claim).results
    return result


def find(events: Events, event: str, claim: str | None = None, nth: int = 0) -> int:
    hits = [i for i, e in enumerate(events)
            if e["event"] == event and (claim is None or e["claim_id"] == claim)]
    return hits[nth]


def setf(event: str, claim: str | None = None, nth: int = 0, **fields: Any) -> Callable[
        [Events], Events]:
    def mutate(events: Events) -> Events:
        i = find(events, event, claim, nth)
        events[i] = {**events[i], **fields}
        return events
    return mutate


def drop(event: str, claim: str | None = None, nth: int = 0) -> Callable[[Events], Events]:
    def mutate(events: Events) -> Events:
        del events[find(events, event, claim, nth)]
        return events
    return mutate


def unset(event: str, field: str, claim: str | None = None) -> Callable[[Events], Events]:
    def mutate(events: Events) -> Events:
        i = find(events, event, claim)
        events[i] = {k: v for k, v in events[i].items() if k != field}
        return events
    return mutate


def move_before(event: str, anchor: str, nth: int = 0, anchor_nth: int = 0) -> Callable[
        [Events], Events]:
    def mutate(events: Events) -> Events:
        moved = events.pop(find(events, event, None, nth))
        events.insert(find(events, anchor, None, anchor_nth), moved)
        return events
    return mutate


def insert_after(event: str, new: dict[str, Any], nth: int = 0) -> Callable[[Events], Events]:
    def mutate(events: Events) -> Events:
        i = find(events, event, None, nth)
        template = events[i]
        events.insert(i + 1, {**{k: template[k] for k in ("schema", "ts_ns", "source",
                                                          "claim_id", "request_id")}, **new})
        return events
    return mutate


# --------------------------------------------------------------------------- canonical traces
EXPECTED = {
    "success_path.jsonl": {"c-1": {"observation"}},
    "claimed_load_failure.jsonl": {"c-1": {"failure_outcome"}},
    "two_claim_attribution.jsonl": {"c-a": {"failure_outcome", "attribution"},
                                    "c-b": {"observation"}},
    "lifecycle_two_generations.jsonl": {"c-1": {"observation", "failure_outcome",
                                                "lifecycle"}},
    "expiring_release_before_loss.jsonl": {"c-e": {"lifecycle"}},
    "hard_protected_conflict.jsonl": {"c-h": {"lifecycle"}},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_canonical_traces_pass_exactly_their_gates(name: str) -> None:
    check = check_trace(TRACES / name)
    assert check.problems == []
    passed: dict[str, set[str]] = {}
    for r in check.results:
        passed.setdefault(r.claim_id, set())
        if r.passed:
            passed[r.claim_id].add(r.gate)
    assert passed == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(CANONICAL))
def test_shipped_test_traces_equal_their_builders(name: str, tmp_path: Path) -> None:
    assert (TRACES / name).read_text() == CANONICAL[name]().write(tmp_path / name).read_text()


# ------------------------------------------------------------ one break, exactly one missing id
OBS: list[tuple[str, Callable[[Events], Events]]] = [
    ("claim_accepted_before_lifecycle", setf("claim_accepted", registration="post_hoc")),
    ("identity_complete", unset("claim_reused", "request_token_map_id")),
    ("stable_identity", setf("claim_reused", object_id="prefix:other")),
    ("predicate_fixed", setf("claim_materialized", required=3)),
    ("materialized", setf("claim_materialized", holds=False)),
    ("store_succeeded", setf("kv_store_finished", success=False)),
    ("offloaded", drop("claim_offloaded")),
    ("lookup_hit", setf("kv_lookup", hit_tokens=0)),
    ("load_succeeded", setf("kv_load_finished", success=False)),
    ("restored_from_offload", setf("claim_restored", source="fallback_recompute")),
    ("reused_after_restore", setf("claim_reused", holds=False)),
]

FAIL: list[tuple[str, Callable[[Events], Events]]] = [
    ("claim_accepted_before_lifecycle", move_before("claim_materialized", "claim_accepted")),
    ("store_succeeded", setf("kv_store_finished", success=False)),
    ("claim_load_failed", lambda ev: setf("kv_load_failed", injected=False)(
        setf("kv_load_finished", injected=False)(ev))),
    ("scheduler_failure_branch", setf("scheduler_load_failure", policy="recompute")),
    ("restore_failed_scoped", setf("claim_restore_failed", outcome_claim_id=None)),
    ("outcome_before_finish", move_before("request_finished", "active_request_refused",
                                          nth=1)),
    ("no_restore_after_failure", insert_after("active_request_refused", {
        "event": "claim_restored", "generation": 0, "source": "offload_tier",
        "object_id": "prefix:c-1", "cache_identity": "tiny-llama|tok|vllm-prefix|tenant:a|128"
        "|bf16|-", "request_token_map_id": "tokmap:c-1", "predicate_id": "p-lead2"})),
]

LIFE: list[tuple[str, Callable[[Events], Events]]] = [
    ("legal_transitions", insert_after("claim_restore_required", {
        "event": "claim_materialized", "surviving": 2, "leading": 2, "required": 2,
        "holds": True, "tier": "device", "object_id": "prefix:c-1",
        "cache_identity": "tiny-llama|tok|vllm-prefix|tenant:a|128|bf16|-",
        "request_token_map_id": "tokmap:c-1", "predicate_id": "p-lead2"}, nth=1)),
]

EXPIRY: list[tuple[str, Callable[[Events], Events]]] = [
    # demoted instead of expired: the loss is post-release (no harm), but no expiry preceded it
    ("expiry_before_loss", lambda ev: [dict(e, event="claim_demoted") if e["event"] ==
                                       "claim_expired" else e for e in ev]),
]

HARD: list[tuple[str, Callable[[Events], Events]]] = [
    ("conflict_attributed", move_before("request_finished", "active_request_refused", nth=1)),
]

ATTR: list[tuple[str, Callable[[Events], Events]]] = [
    ("target_failure_outcome", setf("active_request_refused", arbiter="harness")),
    ("failures_name_only_target", insert_after("request_finished", {
        "event": "kv_load_failed", "invalid_block_ids": [3], "claim_id": None}, nth=0)),
    ("non_targets_served", setf("claim_restored", "c-b", source="fallback_recompute")),
]

CASES = (
    [("observation", success_path, "c-1", req, m) for req, m in OBS]
    + [("failure_outcome", claimed_load_failure, "c-1", req, m) for req, m in FAIL]
    + [("lifecycle", two_generations, "c-1", req, m) for req, m in LIFE]
    + [("lifecycle", expiring_release_before_loss, "c-e", req, m) for req, m in EXPIRY]
    + [("lifecycle", hard_protected_conflict, "c-h", req, m) for req, m in HARD]
    + [("attribution", two_claim_attribution, "c-a", req, m) for req, m in ATTR]
)


@pytest.mark.parametrize(
    ("gate", "build", "claim", "requirement", "mutate"), CASES,
    ids=[f"{c[0]}-{c[3]}" for c in CASES],
)
def test_breaking_one_requirement_fails_with_exactly_that_id(
    gate: str, build: Callable[[], Trace], claim: str, requirement: str,
    mutate: Callable[[Events], Events], tmp_path: Path,
) -> None:
    assert run(build().events, tmp_path, gate, claim).passed  # the unbroken trace passes
    result = run(mutate(build().events), tmp_path, gate, claim)
    assert not result.passed
    assert result.missing == sorted({requirement, *ALSO_ILLEGAL.get((gate, requirement), ())})


#: SPEC §4.2 (default deny): these breaks are also a step the automaton refuses (or leave a
#: failed load without its outcome), so every gate reports that id beside the broken one
ALSO_ILLEGAL: dict[tuple[str, str], tuple[str, ...]] = {
    ("observation", "materialized"): ("legal_transitions",),  # holds contradicts the numbers
    ("observation", "offloaded"): ("legal_transitions",),  # a restore with no offloaded copy
    # a failed store is a failure its outcome must follow (SPEC §4.1 "store/load failure"),
    # and the offload then has no stored copy in its tier (SPEC §4.3 Copies)
    ("observation", "store_succeeded"): ("legal_transitions", "no_open_failure"),
    ("failure_outcome", "store_succeeded"): ("legal_transitions", "no_open_failure"),
    # restored after a failed load, which has no outcome
    ("observation", "load_succeeded"): ("legal_transitions", "no_open_failure"),
    ("observation", "restored_from_offload"): ("legal_transitions",),  # reuse before restore
    ("failure_outcome", "claim_accepted_before_lifecycle"): ("legal_transitions",),
    # an outcome whose envelope differs from its outcome_claim_id is illegal (SPEC §4.1)
    ("failure_outcome", "restore_failed_scoped"): ("legal_transitions", "no_open_failure"),
    # the refusal after the finish: no outcome answered the failure before it (SPEC §4.3)
    ("failure_outcome", "outcome_before_finish"): ("legal_transitions", "no_open_failure"),
    ("failure_outcome", "no_restore_after_failure"): ("legal_transitions",),  # after failed closed
    ("lifecycle", "conflict_attributed"): ("legal_transitions",),  # refusal after finish
    # the unnamed load failure comes after the request finished
    ("attribution", "failures_name_only_target"): ("legal_transitions",
                                                   "target_failure_outcome"),
    # arbiter=harness satisfies nothing: the refusal no longer answers the failure either
    ("attribution", "target_failure_outcome"): ("no_open_failure", "target_failure_outcome"),
}


# Requirements whose break necessarily takes others with it: the id must still be reported.
COUPLED: list[tuple[str, Callable[[], Trace], str, str, Callable[[Events], Events]]] = [
    ("observation", success_path, "c-1", "restore_required", drop("claim_restore_required")),
    ("failure_outcome", claimed_load_failure, "c-1", "restore_required",
     drop("claim_restore_required")),
    ("lifecycle", two_generations, "c-1", "success_generation",
     setf("claim_reused", holds=False)),
    ("lifecycle", two_generations, "c-1", "failure_generation",
     setf("active_request_refused", arbiter="admission")),
    ("lifecycle", two_generations, "c-1", "generations_ordered",
     setf("claim_reused", holds=False)),
    ("lifecycle", expiring_release_before_loss, "c-e", "no_harm", insert_after(
        "claim_materialized", {"event": "claim_harmed", "cause": "evicted", "before": {
            "surviving": 2, "leading": 2, "required": 2, "holds": True}, "after": {
            "surviving": 1, "leading": 0, "required": 2, "holds": False},
            "object_id": "prefix:c-e", "cache_identity":
            "tiny-llama|tok|vllm-prefix|tenant:a|128|bf16|-", "request_token_map_id":
            "tokmap:c-e", "predicate_id": "p-lead2"})),
    ("lifecycle", expiring_release_before_loss.__call__, "c-e", "demotion_before_loss",
     setf("claim_accepted", protection_mode="demotable", expires_after_s=None)),
    ("attribution", claimed_load_failure, "c-1", "multiple_claims", lambda ev: ev),
    # schema v1: a gap leaves the history unknown; a digest asks for a verified restore
    ("observation", success_path, "c-1", "no_observation_gap", insert_after(
        "claim_reused", {"event": "observation_gap", "claim_id": None, "reason": "overflow"})),
    ("observation", success_path, "c-1", "restore_content_verified",
     setf("kv_store_finished", content_digest="sha256:00")),
    # control blocking_claim_smear: a refusal naming the claim blocks exactly its outcome claim
    ("failure_outcome", claimed_load_failure, "c-1", "no_blocking_smear",
     setf("active_request_refused", blocking_claim_ids=["c-1", "c-9"])),
    ("lifecycle", two_generations, "c-1", "no_blocking_smear",
     setf("active_request_refused", blocking_claim_ids=["c-1", "c-9"])),
    ("attribution", two_claim_attribution, "c-a", "no_blocking_smear",
     setf("active_request_refused", blocking_claim_ids=["c-a", "c-b"])),
    # SPEC §4.2: a failed load without its claim-scoped outcome is an open failure
    ("failure_outcome", claimed_load_failure, "c-1", "no_open_failure",
     setf("claim_restore_failed", outcome_claim_id="c-other")),
    # SPEC §4.1: the timing is judged on the attributed refusal itself, so a refusal that is
    # not attributed takes outcome_before_finish with it
    ("failure_outcome", claimed_load_failure, "c-1", "refusal_attributed",
     setf("active_request_refused", arbiter="admission")),
    # SPEC §4.1: a loss of the materialized claim before its expiry is (unreported) harm
    ("lifecycle", expiring_release_before_loss, "c-e", "expiry_before_loss",
     move_before("block_evicted", "claim_expired")),
    ("lifecycle", hard_protected_conflict, "c-h", "materialized",
     setf("claim_materialized", holds=False)),  # not resident: the refusal is no conflict
    ("lifecycle", hard_protected_conflict, "c-h", "conflict_attributed",
     setf("active_request_refused", blocking_claim_ids=["c-h", "c-x"])),
    # SPEC §9.1 conformance: decided once, nothing vanished, every loss announced, no claim
    # open in an unseen window (tests/trace/test_conformance.py holds the rest)
    ("conformance", success_path, "c-1", "decided_once", insert_after(
        "claim_accepted", {"event": "claim_rejected", "reason": "again", "object_id":
                           "prefix:c-1", "predicate_id": "p-lead2"})),
    ("conformance", success_path, "c-1", "not_vanished", lambda ev: [*ev, {
        "schema": SCHEMA, "seq": 0, "ts_ns": 1, "source": "test", "event": "stream_closed",
        "claim_id": None, "request_id": None, "reason": "shutdown"}]),
    ("conformance", success_path, "c-1", "losses_announced", insert_after(
        "claim_materialized", {"event": "block_evicted", "request_id": None, "block_id": 1,
                               "protected": False, "reason": "lru", "position": 0})),
    ("conformance", success_path, "c-1", "no_unseen_window", insert_after(
        "claim_accepted", {"event": "observation_gap", "claim_id": None, "reason": "late"})),
    ("lifecycle", hard_protected_conflict, "c-h", "no_harm", insert_after(
        "claim_materialized", {"event": "claim_harmed", "cause": "evicted", "before": {
            "surviving": 2, "leading": 2, "required": 2, "holds": True}, "after": {
            "surviving": 1, "leading": 0, "required": 2, "holds": False},
            "object_id": "prefix:c-h", "cache_identity":
            "tiny-llama|tok|vllm-prefix|tenant:a|128|bf16|-", "request_token_map_id":
            "tokmap:c-h", "predicate_id": "p-lead2"})),
]


@pytest.mark.parametrize(("gate", "build", "claim", "requirement", "mutate"), COUPLED,
                         ids=[f"{c[0]}-{c[3]}" for c in COUPLED])
def test_coupled_requirements_are_reported(
    gate: str, build: Callable[[], Trace], claim: str, requirement: str,
    mutate: Callable[[Events], Events], tmp_path: Path,
) -> None:
    result = run(mutate(build().events), tmp_path, gate, claim)
    assert not result.passed
    assert requirement in result.missing


def test_trace_well_formed_is_required_by_every_gate(tmp_path: Path) -> None:
    path = success_path().write(tmp_path / "t.jsonl")
    path.write_text(path.read_text() + "garbage\n")
    (result,) = check_trace(path, ["observation"], "c-1").results
    assert result.missing == ["trace_well_formed"]


def test_every_requirement_id_is_exercised() -> None:
    covered = {(g, r) for g, _, _, r, _ in CASES + COUPLED}
    covered |= {(g, "trace_well_formed") for g in GATE_NAMES}
    covered |= {(g, "claim_events_present") for g in GATE_NAMES}
    for gate, reqs in REQUIREMENTS.items():
        for req in reqs:
            assert (gate, req) in covered or any(
                r == req for g, r in covered
            ), f"{gate}:{req} has no breaking test"


# ------------------------------------------------------------------------- zero events, no claim
@pytest.mark.parametrize("gate", GATE_NAMES)
def test_zero_events_of_the_claim_fails_every_gate(gate: str, traces_dir: Path) -> None:
    check = check_trace(traces_dir / "success_path.jsonl", [gate], "c-404")
    (result,) = check.results
    assert not result.passed
    assert "claim_events_present" in result.missing
    assert [p.code for p in check.problems] == ["T011"]


def test_trace_without_claims_has_no_passing_result(tmp_path: Path) -> None:
    t = Trace().add("generic_counter", name="kv_transfer_failed", value=1)
    check = check_trace(t.write(tmp_path / "g.jsonl"))
    assert check.results == [] and not check.passed
    assert [p.code for p in check.problems] == ["T012"]


# ----------------------------------------------------------------------------- negative controls
def control_trace(name: str) -> tuple[Trace, str, str]:
    """A trace exhibiting control *name*, the claim to judge, and the gate it must fail."""
    # SPEC §9.1: each control fires for events that concern the judged claim (they name it,
    # or are on a request carrying it)
    if name == "generic_counter_only":
        t = Trace().started("r-1").accept("c-1", "r-1")
        t.add("generic_counter", None, "r-1", name="kv_transfer_failed", value=1)
        return t.finished("r-1"), "c-1", "failure_outcome"
    if name == "wrong_claim_failure":
        # c-b's restoring request r-3 reports a failed load naming c-a
        t = two_claim_attribution()
        i = find(t.events, "request_finished", nth=2)
        t.events.insert(i, {"schema": SCHEMA, "seq": 0, "ts_ns": 1, "source": "test",
                            "event": "kv_load_failed", "claim_id": "c-a", "request_id": "r-3",
                            "invalid_block_ids": [0], "injected": True})
        return t, "c-b", "failure_outcome"
    if name == "unclaimed_failure":
        t = success_path()
        i = find(t.events, "kv_load_finished")
        t.events.insert(i + 1, {**t.events[i], "event": "kv_load_failed", "claim_id": None,
                                "invalid_block_ids": [0], "injected": True})
        for k in ("bytes", "success"):
            t.events[i + 1].pop(k)
        return t, "c-1", "failure_outcome"
    if name == "fallback_recompute":
        t = claimed_load_failure()
        t.events = setf("scheduler_load_failure", policy="recompute")(t.events)
        return t, "c-1", "failure_outcome"
    if name == "ordinary_offload_without_claim":
        t = success_path()
        for e in t.events:
            if not e["event"].startswith("claim_"):
                e["claim_id"] = None
        return t, "c-1", "observation"
    if name == "post_hoc_naming":
        t = success_path()
        t.events = setf("claim_accepted", registration="post_hoc")(t.events)
        return t, "c-1", "observation"
    if name == "restore_after_reuse":
        t = success_path()
        t.events = move_before("claim_reused", "claim_restored")(t.events)
        return t, "c-1", "observation"
    if name == "blocking_claim_smear":
        t = claimed_load_failure()
        t.events = setf("active_request_refused", blocking_claim_ids=["c-1", "c-2"])(t.events)
        return t, "c-1", "failure_outcome"
    if name == "ambiguous_identity":
        t = success_path()
        t.events = setf("claim_offloaded", cache_identity="other-model")(t.events)
        return t, "c-1", "observation"
    if name == "admission_refusal":
        t = claimed_load_failure()
        t.events = setf("active_request_refused", arbiter="admission")(t.events)
        return t, "c-1", "failure_outcome"
    raise AssertionError(name)


@pytest.mark.parametrize("name", CONTROLS)
def test_every_negative_control_fires_and_its_gate_fails(name: str, tmp_path: Path) -> None:
    trace, claim, gate = control_trace(name)
    result = run(trace.events, tmp_path, gate, claim)
    assert result.controls[name] is True
    assert not result.passed


@pytest.mark.parametrize("name", ["success_path.jsonl", "claimed_load_failure.jsonl"])
def test_no_control_fires_on_clean_traces(name: str, traces_dir: Path) -> None:
    for r in check_trace(traces_dir / name).results:
        assert not any(r.controls.values()), r


def test_failure_outcome_ignores_an_injection_on_an_unrelated_request(tmp_path: Path) -> None:
    # the refusal belongs to another request: the failed request still finishes first
    t = claimed_load_failure()
    t.events = setf("active_request_refused", request_id="r-other")(t.events)
    result = run(t.events, tmp_path, "failure_outcome", "c-1")
    assert "outcome_before_finish" in result.missing


def test_evidence_names_the_satisfying_seqs(traces_dir: Path) -> None:
    (r,) = check_trace(traces_dir / "claimed_load_failure.jsonl", ["failure_outcome"]).results
    events = [json.loads(line) for line in (traces_dir / "claimed_load_failure.jsonl").open()]
    by_seq = {e["seq"]: e["event"] for e in events}
    assert by_seq[r.evidence["refusal_attributed"][0]] == "active_request_refused"
    assert by_seq[r.evidence["scheduler_failure_branch"][0]] == "scheduler_load_failure"
    refusal, finish = r.evidence["outcome_before_finish"]
    assert by_seq[finish] == "request_finished" and refusal < finish


def test_many_generations_keep_the_chains_that_decide(tmp_path: Path) -> None:
    # partial chains (a restore without a lookup hit of its own), a success at generation 5,
    # more partial chains and a failure at generation 9: memory per claim is bounded, but the
    # chains that decide the gates must survive
    def partial(t: Trace, g: int) -> None:
        n = len(t.events)
        t.started(f"r-p{g}").restore_ok("c-1", f"r-p{g}", generation=g)
        t.events[n + 1]["hit_tokens"] = 0
        t.finished(f"r-p{g}")

    t = Trace().started("r-0").accept("c-1", "r-0").resident("c-1", "r-0").finished("r-0")
    for g in range(5):
        partial(t, g)
    t.started("r-s").restore_ok("c-1", "r-s", generation=5).finished("r-s")
    for g in range(6, 9):
        partial(t, g)
    t.started("r-f").restore_fails("c-1", "r-f", generation=9).finished("r-f", "error", "error")
    path = t.write(tmp_path / "gens.jsonl")
    results = {r.gate: r for r in check_trace(path, claim_id="c-1").results}
    assert results["observation"].passed
    assert results["failure_outcome"].passed
    assert results["lifecycle"].passed, results["lifecycle"].missing


def test_judged_results_are_what_validation_builds(tmp_path: Path) -> None:
    result = run(claimed_load_failure().events, tmp_path, "failure_outcome", "c-1")
    values = result.model_dump()
    validated = GateResult.model_validate(values)
    assert result == validated
    assert result.__pydantic_fields_set__ == validated.__pydantic_fields_set__
    assert result.model_dump_json() == validated.model_dump_json()
    assert list(values) == list(GateResult.model_fields)


def test_each_result_owns_its_controls() -> None:
    """The results of one claim are separate values: changing one's controls (they are plain
    dicts) leaves its siblings' as judged."""
    results = check_trace(TRACES / "two_claim_attribution.jsonl").results
    assert len({id(r.controls) for r in results}) == len(results)
    first, second = [r for r in results if r.claim_id == results[0].claim_id][:2]
    before = dict(second.controls)
    first.controls[CONTROLS[0]] = not first.controls[CONTROLS[0]]
    assert second.controls == before
    assert all(type(k) is str for r in results for k in (*r.controls, *r.evidence, *r.missing))
