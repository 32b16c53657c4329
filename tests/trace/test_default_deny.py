"""Regression tests for default-deny semantics (SPEC §4.2), one per class of false verdict.

Each case edits a shipped canonical trace (which passes its gates) the way a hostile reviewer
did, and asserts the verdict SPEC §4.2 rules, in the streaming gates and in the reference
semantics alike. Before the automaton every one of these came out the other way.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from residentkv.model.events import EVENT_ADAPTER, Envelope
from residentkv.trace.gates import GATE_NAMES, GateResult, check_events, check_trace
from residentkv.trace.semantics import reference_results

TRACES = Path(__file__).parents[2] / "src" / "residentkv" / "data" / "traces"
Events = list[dict[str, Any]]
Edit = Callable[[Events], Events]


def load(name: str) -> Events:
    return [json.loads(line) for line in (TRACES / name).read_text().splitlines()]


def at(events: Events, event: str, claim: str | None = None, nth: int = 0) -> int:
    hits = [i for i, e in enumerate(events) if e["event"] == event
            and (claim is None or e["claim_id"] == claim)]
    return hits[nth]


def setf(event: str, nth: int = 0, claim: str | None = None, **fields: Any) -> Edit:
    def edit(events: Events) -> Events:
        events[at(events, event, claim, nth)].update(fields)
        return events
    return edit


def insert(after: str, new: dict[str, Any], nth: int = 0, claim: str | None = None) -> Edit:
    """Insert *new* after the nth *after* event, with that event's envelope (and identity)."""
    def edit(events: Events) -> Events:
        i = at(events, after, claim, nth)
        base = {k: v for k, v in events[i].items() if k in (
            "schema", "ts_ns", "source", "claim_id", "request_id", "object_id",
            "cache_identity", "request_token_map_id", "predicate_id")}
        if not new["event"].startswith("claim_"):
            for k in ("object_id", "cache_identity", "request_token_map_id", "predicate_id"):
                base.pop(k, None)
        events.insert(i + 1, {**base, **new})
        return events
    return edit


def move_after(event: str, after: str, nth: int = 0, after_nth: int = 0) -> Edit:
    def edit(events: Events) -> Events:
        moved = events.pop(at(events, event, None, nth))
        events.insert(at(events, after, None, after_nth) + 1, moved)
        return events
    return edit


def drop(event: str, nth: int = 0) -> Edit:
    def edit(events: Events) -> Events:
        events.pop(at(events, event, None, nth))
        return events
    return edit


def chain(*edits: Edit) -> Edit:
    def edit(events: Events) -> Events:
        for e in edits:
            events = e(events)
        return events
    return edit


def typed(events: Events, renumber: bool = True) -> list[Envelope]:
    out = []
    for i, e in enumerate(events):
        body = {**e, "seq": i} if renumber else e
        out.append(EVENT_ADAPTER.validate_python(body))
    return out  # type: ignore[return-value]


def judge(events: Events, claim: str, renumber: bool = True) -> dict[str, GateResult]:
    """Every gate for *claim*; the streaming gates and the reference must agree."""
    evs = typed(events, renumber)
    streaming = check_events(evs, GATE_NAMES, claim)
    reference = reference_results(evs, GATE_NAMES, claim)
    assert [(r.passed, r.missing) for r in streaming] == [
        (r.passed, r.missing) for r in reference]
    return {r.gate: r for r in streaming}


TWO_GEN = "lifecycle_two_generations.jsonl"
CHAIN_GATES = ("observation", "failure_outcome", "lifecycle")
LOAD_FAILED_ARGS = {"invalid_block_ids": [0], "injected": True}


def scoped(claim_scope: str | None = "tenant:a", submitted: str | None = None,
           requests: dict[str, str] | None = None) -> Edit:
    """Give the claim (and some requests of the canonical trace) an owner scope."""
    def edit(events: Events) -> Events:
        for e in events:
            if e["event"] == "claim_accepted" and claim_scope is not None:
                e["owner_scope"] = claim_scope
            if e["event"] == "request_started":
                e["owner_scope"] = (requests or {}).get(e["request_id"], "tenant:a")
        if submitted is not None:
            events = insert("request_started", {"event": "claim_submitted", "claim_id": "c-1",
                                                "owner_scope": submitted,
                                                **{k: v for k, v in events[1].items() if k in (
                                                    "object_id", "cache_identity",
                                                    "request_token_map_id", "predicate_id")}})(
                events)
        return events
    return edit


def test_the_canonical_trace_passes_its_chain_gates() -> None:
    got = judge(load(TWO_GEN), "c-1")
    assert all(got[g].passed for g in CHAIN_GATES)


# (case id, edit): SPEC §4.2 rules the claim's run illegal, so every chain gate fails with
# legal_transitions; before, at least one of them passed
ILLEGAL: list[tuple[str, Edit]] = [
    # 1. order the automaton would reject
    ("reuse_before_restore", insert("claim_restore_required", {
        "event": "claim_reused", "generation": 0, "holds": True})),
    ("reuse_labelled_next_generation", setf("claim_reused", generation=1)),
    ("store_and_offload_before_materialization",
     move_after("claim_materialized", "claim_offloaded")),
    # 2. terminal states that are not terminal
    ("restore_and_reuse_after_harm", insert("claim_reused", {
        "event": "claim_harmed", "cause": "evicted", "request_id": None,
        "before": {"surviving": 2, "leading": 2, "required": 2, "holds": True},
        "after": {"surviving": 1, "leading": 0, "required": 2, "holds": False}})),
    ("reuse_after_failed_closed_on_the_refused_request", insert("claim_restore_failed", {
        "event": "claim_reused", "generation": 1, "holds": True})),
    # 3. generation labels
    ("offload_labelled_above_the_restore_chain", setf("claim_offloaded", generation=1)),
    ("failure_cycle_reuses_an_earlier_label", chain(*(
        setf(name, nth=n, generation=0) for name, n in (
            ("claim_restore_required", 1), ("claim_restore_failed", 0))))),
    # 4. silent failures hidden by a later proper one
    ("open_failure_with_foreign_label", insert("kv_load_finished", {
        "event": "kv_load_failed", "job_id": 99, "generation": 5, **LOAD_FAILED_ARGS})),
    ("open_failure_naming_no_request", insert("kv_load_finished", {
        "event": "kv_load_failed", "job_id": 99, "request_id": None, **LOAD_FAILED_ARGS})),
    ("load_failed_without_job_voids_the_load", insert("kv_load_finished", {
        "event": "kv_load_failed", **LOAD_FAILED_ARGS})),
    # SPEC §4.3: the outcome precedes the finish; after it only late records of an answered
    # failure (here the refusal itself follows the finish, so nothing answered the failure)
    ("refusal_and_restore_failed_after_the_finish", chain(
        move_after("claim_restore_failed", "request_finished", after_nth=2),
        move_after("active_request_refused", "claim_restore_failed"))),
    ("scheduler_branch_after_the_finish", move_after("scheduler_load_failure",
                                                     "request_finished", after_nth=2)),
    ("failed_request_never_finishes", drop("request_finished", nth=2)),
    ("refused_request_finishes_served", setf("request_finished", nth=2, status="served")),
    # 5. owner scope
    ("scope_only_on_submission_reused_by_another_tenant",
     scoped(claim_scope=None, submitted="tenant:a", requests={"r-2": "tenant:b"})),
    ("request_id_restarted_by_another_tenant", chain(
        scoped(requests={"r-3": "tenant:a"}),
        # both after the second finish, the start inserted last: it precedes the finish
        insert("request_finished", {"event": "request_finished", "claim_id": None,
                                    "request_id": "r-3", "status": "served",
                                    "finish_reason": "stop"}, nth=1),
        insert("request_finished", {"event": "request_started", "claim_id": None,
                                    "request_id": "r-3", "owner_scope": "tenant:b"}, nth=1))),
    ("reuse_by_an_unscoped_request", chain(scoped(), setf("claim_reused", request_id="r-9"))),
    # 6. modes
    ("best_effort_is_not_a_claim", setf("claim_accepted", protection_mode="best_effort")),
    # independent acceptor's disagreements
    ("load_before_the_restore", insert("claim_offloaded", {
        "event": "kv_load_finished", "job_id": 77, "success": True, "request_id": "r-2"})),
    ("load_by_a_request_that_never_restored", insert("claim_restore_required", {
        "event": "kv_load_started", "job_id": 78, "request_id": "r-9"})),
    ("reuse_by_another_request_than_the_chain", setf("claim_reused", request_id="r-1")),
    ("store_to_the_tier_it_came_from", setf("kv_store_finished", to_tier="device")),
    ("restore_from_another_tier_than_the_copy", setf("claim_restore_required",
                                                     from_tier="disk")),
]


@pytest.mark.parametrize(("name", "edit"), ILLEGAL, ids=[n for n, _ in ILLEGAL])
def test_an_illegal_run_fails_every_chain_gate(name: str, edit: Edit) -> None:
    got = judge(edit(load(TWO_GEN)), "c-1")
    for gate in CHAIN_GATES:
        r = got[gate]
        assert not r.passed and "legal_transitions" in r.missing, (gate, r.missing)
        assert r.illegal is not None and r.illegal.violation  # seq, state and id reported


def test_a_restart_of_the_request_is_a_violation_at_its_seq() -> None:
    events = ILLEGAL[[n for n, _ in ILLEGAL].index("request_id_restarted_by_another_tenant")][1](
        load(TWO_GEN))
    r = judge(events, "c-1")["failure_outcome"]
    assert r.illegal is not None
    assert (r.illegal.violation, r.illegal.state) == ("request_started_twice", "finished")
    assert events[r.illegal.seq]["event"] == "request_started"


# legal under SPEC §4.2, failed before (false fails)
LEGAL: list[tuple[str, Edit]] = [
    ("carrier_request_started_names_the_claim", setf("request_started", claim_id="c-1")),
    ("identical_second_acceptance", lambda ev: [*ev[:2], copy.deepcopy(ev[1]), *ev[2:]]),
    ("generation_label_on_the_loads", chain(setf("kv_load_started", generation=0),
                                            setf("kv_load_finished", generation=0))),
    # SPEC §4.3: the refusal answered the failure before the finish; the claim's restore
    # failure of that cycle may follow it (it was failure_after_finish under §4.2)
    ("restore_failed_after_the_finish", move_after("claim_restore_failed", "request_finished",
                                                   after_nth=2)),
]


@pytest.mark.parametrize(("name", "edit"), LEGAL, ids=[n for n, _ in LEGAL])
def test_a_legal_run_keeps_its_chain_gates(name: str, edit: Edit) -> None:
    got = judge(edit(load(TWO_GEN)), "c-1")
    assert all(got[g].passed for g in CHAIN_GATES), {g: got[g].missing for g in CHAIN_GATES}


def test_expiry_needs_a_materialization_that_holds() -> None:
    """6: an expiring lifecycle on accept + expire alone is a vacuous path."""
    events = [e for e in load("expiring_release_before_loss.jsonl")
              if e["event"] not in ("claim_materialized", "block_evicted",
                                    "claim_block_lost_after_release")]
    r = judge(events, "c-e")["lifecycle"]
    assert not r.passed and "expiry_before_loss" in r.missing


def test_holds_contradicting_the_numbers_is_no_silent_drop() -> None:
    """6: a materialization whose numbers contradict holds is a violation, not ignored."""
    events = setf("claim_materialized", leading=0, surviving=1)(
        load("expiring_release_before_loss.jsonl"))
    r = judge(events, "c-e")["lifecycle"]
    assert not r.passed and r.illegal is not None
    assert r.illegal.violation == "holds_contradicts_numbers"


def _attribution(edit: Edit) -> GateResult:
    return judge(edit(load("two_claim_attribution.jsonl")), "c-a")["attribution"]


def test_attribution_base_passes() -> None:
    assert _attribution(lambda ev: ev).passed


def test_offloadable_non_target_evicted_before_any_store_is_harmed() -> None:
    """6: an eviction of a needed position with no stored, offloaded copy is loss."""
    r = _attribution(insert("claim_materialized", {
        "event": "block_evicted", "block_id": 7, "protected": False, "reason": "lru",
        "position": 0}, claim="c-b"))
    assert not r.passed and "non_targets_served" in r.missing


def test_runtime_removed_eviction_of_the_stored_copy_is_loss() -> None:
    """The observer's runtime_removed eviction from the copy's medium loses the copy."""
    r = _attribution(insert("claim_offloaded", {
        "event": "block_evicted", "block_id": 7, "protected": False,
        "reason": "runtime_removed", "position": 0, "medium": "host"}, nth=1))
    assert not r.passed and "non_targets_served" in r.missing


def test_non_target_restored_and_reused_by_another_tenant() -> None:
    """5: in attribution, a non-target's own history must be legal."""
    def edit(events: Events) -> Events:
        for e in events:
            if e["event"] == "claim_accepted":
                e["owner_scope"] = "tenant:a"
            if e["event"] == "request_started":
                e["owner_scope"] = "tenant:b" if e["request_id"] == "r-3" else "tenant:a"
        return events
    r = _attribution(edit)
    assert not r.passed and r.missing == ["non_targets_served"]


def test_non_target_carrier_finishing_in_error_without_an_outcome() -> None:
    r = _attribution(setf("request_finished", nth=1, status="error"))
    assert not r.passed and r.missing == ["non_targets_served"]


@pytest.mark.parametrize(("field", "value"), [("claim_id", "c-x"), ("claim_id", None),
                                               ("arbiter", "harness")])
def test_hard_protected_conflict_refusal_must_be_the_claims_own(field: str, value: str) -> None:
    """7: an envelope naming another claim or none (SPEC §4.1: the envelope equals the
    outcome_claim_id; the null envelope was found by a fifth SPEC-only review), or a harness
    arbiter, is no conflict outcome."""
    events = setf("active_request_refused", **{field: value})(
        load("hard_protected_conflict.jsonl"))
    r = judge(events, "c-h")["lifecycle"]
    assert not r.passed and "conflict_attributed" in r.missing


def test_contiguous_range_missing_only_the_leading_position_holds() -> None:
    """8: contiguous_range(1, 2), footprint 4, surviving 3, leading 0 proves positions 1, 2."""
    def edit(events: Events) -> Events:
        for e in events:
            if e["event"] == "claim_accepted":
                e["footprint_blocks"] = 4
                e["predicate"] = {"id": "p-lead2", "kind": "contiguous_range", "blocks": 2,
                                  "start": 1}
            if e["event"] == "claim_materialized":
                e.update(surviving=3, leading=0, required=2)
        return events
    got = judge(edit(load(TWO_GEN)), "c-1")
    assert got["observation"].passed, got["observation"].missing


@pytest.mark.parametrize(("kind", "start"), [("contiguous_range", 0),
                                             ("leading_prefix_at_least", None)])
def test_numbers_that_contradict_each_other_prove_nothing(kind: str, start: int | None) -> None:
    """SPEC §4.2 Predicates: leading 0 says position 0 is missing, surviving == footprint says
    every position is present; such numbers prove nothing, so ``holds: true`` contradicts them
    (found by make fuzz-gates: the independent acceptor's holds_contradiction)."""
    def edit(events: Events) -> Events:
        for e in events:
            if e["event"] == "claim_accepted":
                e["footprint_blocks"] = 2
                e["predicate"] = {"id": "p-x", "kind": kind, "blocks": 1,
                                  **({} if start is None else {"start": start})}
            if e["event"] == "claim_materialized":
                e.update(surviving=2, leading=1 if start is None else 0, required=1)
        return events
    got = judge(edit(load(TWO_GEN)), "c-1")["observation"]
    assert not got.passed and got.illegal is not None
    assert got.illegal.violation == "holds_contradicts_numbers"


def test_large_seqs_agree_in_both_readers() -> None:
    """8: seqs near 2^63 are ordinary; the reference has no smaller "never" sentinel."""
    events = load(TWO_GEN)
    for i, e in enumerate(events):
        e["seq"] = 2**63 - 100 + i
    got = judge(events, "c-1", renumber=False)
    assert all(got[g].passed for g in CHAIN_GATES)


def test_seq_beyond_64_bits_is_a_typing_problem(tmp_path: Path) -> None:
    events = load(TWO_GEN)
    events[-1]["seq"] = 2**64 + 5
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    check = check_trace(path)
    assert check.problem_count and not any(r.passed for r in check.results)


def test_a_byte_order_mark_before_the_first_line_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + (TRACES / TWO_GEN).read_bytes())
    check = check_trace(path)
    assert check.problems == []
    assert all(r.passed for r in check.results if r.gate in CHAIN_GATES)


def test_an_observation_gap_leaves_every_claim_unknown() -> None:
    events = insert("request_finished", {"event": "observation_gap", "claim_id": None,
                                         "request_id": None, "reason": "ring overflow"})(
        load(TWO_GEN))
    got = judge(events, "c-1")
    assert all("no_observation_gap" in got[g].missing for g in GATE_NAMES)


def test_a_digest_at_store_asks_for_a_verified_restore() -> None:
    events = setf("kv_store_finished", content_digest="sha256:ab")(load(TWO_GEN))
    assert judge(events, "c-1")["observation"].missing == ["restore_content_verified"]
    verified = setf("claim_restored", content_verified=True)(events)
    assert judge(verified, "c-1")["observation"].passed


def test_a_claim_named_by_a_request_but_never_decided_is_illegal() -> None:
    """SPEC §4.2: before acceptance only the carrier's request_started may name the claim, and
    the carrier is the request its claim_accepted names; a claim that is never accepted (nor
    rejected) has none, so the naming is a violation (found by the independent acceptor)."""
    events = setf("request_started", claim_id="c-9")(load(TWO_GEN))
    r = judge(events, "c-9")["lifecycle"]
    assert r.illegal is not None and not r.passed
    assert (r.illegal.violation, r.illegal.event) == ("named_never_decided", "request_started")
    assert events[r.illegal.seq]["event"] == "request_started"
    # as a non-target of another claim's attribution it needs a legal history too
    assert judge(load("two_claim_attribution.jsonl"), "c-a")["attribution"].passed
    named = setf("request_started", claim_id="c-9")(load("two_claim_attribution.jsonl"))
    missing = judge(named, "c-a")["attribution"].missing
    # SPEC §4.3 per claim: the undecided claim's history is its own, though the request that
    # named it is c-a's carrier (the request's own run is legal); attribution still judges it
    assert missing == ["non_targets_served"]


def test_a_scheduler_branch_after_the_outcome_is_an_open_failure() -> None:
    """SPEC §4.2 Failures: the scheduler's failure branch is a failure like a failed load; one
    repeated after the claim's outcome and refusal is not followed by an outcome, so it stays
    open (found by make fuzz-gates: the independent acceptor's open_failure)."""
    base = load("claimed_load_failure.jsonl")
    assert judge(base, "c-1")["failure_outcome"].passed
    repeated = insert("active_request_refused", dict(base[at(base, "scheduler_load_failure")]))(
        load("claimed_load_failure.jsonl"))
    got = judge(repeated, "c-1")
    for gate in ("failure_outcome", "lifecycle", "attribution"):
        assert "no_open_failure" in got[gate].missing, gate


def test_a_claim_only_submitted_and_never_decided_is_illegal() -> None:
    """A claim_submitted that no claim_accepted or claim_rejected follows leaves a non-target
    without a legal history: attribution of another claim fails (found by make fuzz-gates:
    the independent acceptor's not_accepted)."""
    events = load("two_claim_attribution.jsonl")
    assert judge(events, "c-a")["attribution"].passed
    undecided = insert("request_started", {"event": "claim_submitted", "claim_id": "c-new"})(
        load("two_claim_attribution.jsonl"))
    got = judge(undecided, "c-a")["attribution"]
    assert "non_targets_served" in got.missing
    own = judge(undecided, "c-new")["lifecycle"]
    assert own.illegal is not None
    assert (own.illegal.violation, own.illegal.event) == ("named_never_decided",
                                                          "claim_submitted")


def test_a_refusal_before_the_request_started_is_illegal() -> None:
    """An active_request_refused of a request that has not started yet, then that request
    starting, restoring and finishing served: the refusal is request_not_started (and, SPEC
    §4.3, a refusal of a request that does not carry the claim), so every gate fails (found by
    make fuzz-gates: the independent acceptor's refused_then_served)."""
    assert judge(load("success_path.jsonl"), "c-1")["observation"].passed
    early = insert("claim_accepted", {
        "event": "active_request_refused", "claim_id": "c-1", "request_id": "r-2",
        "outcome_claim_id": "c-1", "blocking_claim_ids": ["c-1"], "arbiter": "admission",
        "feasibility": "infeasible_preserve_resident_and_active"})(load("success_path.jsonl"))
    got = judge(early, "c-1")
    for gate in GATE_NAMES:
        assert not got[gate].passed, gate
        assert "legal_transitions" in got[gate].missing, gate
    illegal = got["observation"].illegal
    assert illegal is not None
    # both steps are illegal at that seq; the first by name is reported
    assert (illegal.violation, illegal.event) == ("refusal_of_non_carrier",
                                                  "active_request_refused")


def _observation(events: Events) -> GateResult:
    return judge(events, "c-1")["observation"]


@pytest.mark.parametrize("mode", ["soft_priority", "hard_protected", "expiring", "demotable"])
def test_a_loss_the_mode_did_not_announce_fails_every_gate(mode: str) -> None:
    """SPEC §4.1: a loss must be preceded by the outcome the mode promises; §4.2: an illegal
    step fails every gate. An eviction of a needed position after a complete restore chain
    failed only lifecycle (found by a fourth SPEC-only review)."""
    def with_mode(events: Events) -> Events:
        events[at(events, "claim_accepted")].update(
            protection_mode=mode, **({"expires_after_s": 30.0} if mode == "expiring" else {}))
        return events
    assert _observation(with_mode(load("success_path.jsonl"))).passed
    evicted = with_mode(load("success_path.jsonl"))
    evicted.append({**{k: evicted[-1][k] for k in ("schema", "ts_ns", "source")},
                    "event": "block_evicted", "claim_id": "c-1", "request_id": None,
                    "block_id": 7, "protected": False, "reason": "lru", "position": 0})
    for gate, result in judge(evicted, "c-1").items():
        assert "legal_transitions" in result.missing, gate


def test_a_lookup_hit_counts_only_for_the_restoring_request() -> None:
    """SPEC §4.1: one and the same chain of the affected request. A hit by another request
    stood in for the restoring request's own (found by a fourth SPEC-only review)."""
    moved = insert("request_finished", {"event": "request_started", "claim_id": None,
                                        "request_id": "r-9"})(load("success_path.jsonl"))
    moved[at(moved, "kv_lookup")]["request_id"] = "r-9"
    got = _observation(moved)
    assert "lookup_hit" in got.missing


@pytest.mark.parametrize("case", ["lookup_after_finish", "finish_without_start"])
def test_request_steps_outside_its_run_are_illegal(case: str) -> None:
    """A kv_lookup of a finished request, and a request_finished naming the claim on a request
    that never started, are request_not_started / after-finish steps (found by a fourth
    SPEC-only review)."""
    events = load("success_path.jsonl")
    lookup = dict(events[at(events, "kv_lookup")])
    if case == "lookup_after_finish":
        events.append(lookup)
    else:
        events.append({**events[-1], "claim_id": "c-1", "request_id": "r-77"})
    got = _observation(events)
    assert "legal_transitions" in got.missing and got.illegal is not None


@pytest.mark.parametrize("job", [1, None])
def test_a_load_failure_naming_no_claim_voids_the_restoring_request_s_load(job: int | None) -> None:
    """SPEC §4.2: kv_load_failed voids the load job it names (without job_id, every load of
    that request). One whose envelope names no claim did not void the claim's load, so
    observation passed (found by a fourth SPEC-only review; SPEC §9 unclaimed_load_failure)."""
    failed = insert("kv_load_finished", {
        "event": "kv_load_failed", "claim_id": None, "invalid_block_ids": [0, 1],
        "injected": False, **({} if job is None else {"job_id": job})})(load("success_path.jsonl"))
    got = _observation(failed)
    assert "load_succeeded" in got.missing


@pytest.mark.parametrize("claim", ["c-1", None])
def test_a_load_job_reported_failed_did_not_succeed(claim: str | None) -> None:
    """A kv_load_finished(success=false) of the job whose success the chain rests on voids that
    success, named or not (found by a fourth SPEC-only review)."""
    failed = insert("kv_load_finished", {
        "event": "kv_load_finished", "claim_id": claim, "job_id": 1, "bytes": 4096,
        "success": False, "injected": True})(load("success_path.jsonl"))
    assert "load_succeeded" in _observation(failed).missing


def test_an_offload_naming_a_request_before_its_start_is_illegal() -> None:
    """A non-target's claim_offloaded names the target's request before that request started.
    It was legal (an earlier ruling: SPEC §4.2 stated no such order); SPEC §4.3 reverses it:
    a request's first event is its request_started, so the request's run is illegal and every
    claim it names fails every gate (found by make fuzz-gates before: the spill-over)."""
    def early(events: Events) -> Events:
        events[at(events, "claim_offloaded", claim="c-b")]["request_id"] = "r-4"
        return events
    for claim in ("c-b", "c-a"):
        got = judge(early(load("two_claim_attribution.jsonl")), claim)
        for gate, result in got.items():
            assert "legal_transitions" in result.missing, (claim, gate)
        illegal = got["observation"].illegal
        assert illegal is not None
        assert (illegal.violation, illegal.event) == ("request_not_started", "claim_offloaded")


def test_a_request_that_stores_a_non_target_and_fails_unexplained_carries_it() -> None:
    """Attribution ruling: every request whose events name a claim carries it (not only the
    accepting, restoring and reusing ones). The target's request storing the non-target, then
    failing with no outcome naming the non-target, is unexplained spill-over."""
    def stored(events: Events) -> Events:
        at_lookup = at(events, "kv_lookup", claim="c-a")
        env = {k: events[0][k] for k in ("schema", "ts_ns", "source")}
        job = {"claim_id": "c-b", "request_id": "r-4", "job_id": 9, "bytes": 4096,
               "from_tier": "device", "to_tier": "host"}
        events[at_lookup:at_lookup] = [
            {**env, "event": "kv_store_started", **job},
            {**env, "event": "kv_store_finished", **job, "success": True}]
        return events
    r = _attribution(stored)
    assert not r.passed and r.missing == ["non_targets_served"]
    served = chain(stored, setf("request_finished", nth=3, status="served"),
                   drop("active_request_refused"), drop("claim_restore_failed"),
                   drop("scheduler_load_failure"), drop("kv_load_failed"))
    assert "non_targets_served" not in _attribution(served).missing


def _as_soft_priority(events: Events) -> Events:
    events[at(events, "claim_accepted")]["protection_mode"] = "soft_priority"
    return events


def test_soft_priority_lifecycle_needs_both_generations() -> None:
    """SPEC §4 lifecycle: "both paths for one claim in one stream (success generation, then
    failure generation)" for every mode but expiring and demotable. A soft_priority claim
    that was only materialized passed lifecycle (found by a fifth SPEC-only review)."""
    resident = _as_soft_priority(load("success_path.jsonl"))
    resident = resident[:at(resident, "claim_materialized") + 1] + [
        e for e in resident if e["event"] == "request_finished"][:1]
    got = judge(resident, "c-1")["lifecycle"]
    assert not got.passed and "success_generation" in got.missing
    only_success = judge(_as_soft_priority(load("success_path.jsonl")), "c-1")["lifecycle"]
    assert not only_success.passed and "failure_generation" in only_success.missing
    both = judge(_as_soft_priority(load("lifecycle_two_generations.jsonl")), "c-1")["lifecycle"]
    assert both.passed, both.missing


@pytest.mark.parametrize("request_id", [None, "r-9"])
@pytest.mark.parametrize("where", ["after_load", "at_end"])
def test_a_load_failure_voids_the_job_it_names_whatever_else_it_names(
        request_id: str | None, where: str) -> None:
    """SPEC §4.2: "kv_load_failed voids the load job its job_id names". One naming neither the
    claim nor the restoring request (no request, or one that never started) did not void the
    job, so observation passed (found by a fifth SPEC-only review)."""
    failed = {"event": "kv_load_failed", "claim_id": None, "request_id": request_id,
              "invalid_block_ids": [0], "job_id": 1, "injected": False}
    events = load("success_path.jsonl")
    if where == "after_load":
        events = insert("kv_load_finished", failed)(events)
    else:
        events.append({**{k: events[0][k] for k in ("schema", "ts_ns", "source")}, **failed})
    assert "load_succeeded" in _observation(events).missing


def test_a_load_failure_of_another_claim_voids_the_job_it_names() -> None:
    """The target's own kv_load_failed naming the non-target's load job voids that load: the
    non-target's restore rests on no successful load (found by a fifth SPEC-only review)."""
    def foreign(events: Events) -> Events:
        events[at(events, "kv_load_failed", claim="c-a")]["job_id"] = 2
        return events
    got = judge(foreign(load("two_claim_attribution.jsonl")), "c-b")["observation"]
    assert "load_succeeded" in got.missing


def test_a_release_after_the_expiry_is_legal() -> None:
    """A claim_released after claim_expired frees what the expiry let go: SPEC §4.2's terminal
    states ban materialization, store, offload, restore and reuse only. It failed every gate as
    after_terminal (found by a fifth SPEC-only review); a materialization after it still does."""
    events = load("expiring_release_before_loss.jsonl")
    expired = events[at(events, "claim_expired")]
    released = {**expired, "event": "claim_released", "reason": "freed after expiry"}
    released.pop("cause", None)
    events.insert(at(events, "claim_expired") + 1, released)
    got = judge(events, "c-e")
    assert got["lifecycle"].passed, got["lifecycle"].missing
    materialized = dict(events[at(events, "claim_materialized")])
    events.append(materialized)
    assert "legal_transitions" in judge(events, "c-e")["lifecycle"].missing


def test_a_failed_store_without_its_outcome_is_an_open_failure() -> None:
    """SPEC §4.1 lists "store/load failure" among the failure events; §4.2: a failure not
    followed by its claim-scoped outcome on that request is an open failure. A failed store
    passed failure_outcome and lifecycle (ruling reversed after the third, fourth and fifth
    SPEC-only reviews read it so)."""
    failed = insert("claim_materialized", {
        "event": "kv_store_finished", "job_id": 9, "bytes": 1, "success": False,
        "from_tier": "device", "to_tier": "host"})(load("lifecycle_two_generations.jsonl"))
    got = judge(failed, "c-1")
    for gate in ("failure_outcome", "lifecycle"):
        assert "no_open_failure" in got[gate].missing, gate
