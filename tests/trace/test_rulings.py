"""SPEC §4.3 (fourth edition: rulings), one section per ruling, both directions: what now passes
and what now fails. Every trace is judged by the streaming gates and the reference semantics,
which must agree (results and the conformance stream verdict).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from residentkv.trace.gates import ALL_GATE_NAMES, GateResult, StreamVerdict
from tracekit import (
    PRED,
    Trace,
    claimed_load_failure,
    judged_by_both,
    two_claim_attribution,
    two_generations,
)

FAILURE_GATES = ("failure_outcome", "lifecycle")
HARM = {"cause": "evicted", "before": {"surviving": 2, "leading": 2, "required": 2,
                                       "holds": True},
        "after": {"surviving": 1, "leading": 0, "required": 2, "holds": False}}


def data(events: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(dict(e, seq=i)) + "\n" for i, e in enumerate(events)).encode()


def judge(t: Trace | list[dict[str, Any]], claim: str = "c-1"
          ) -> tuple[dict[str, GateResult], StreamVerdict]:
    """Every gate (conformance included) for *claim*; both readers agree on every claim."""
    results, verdict, _ = judged_by_both(data(t.events if isinstance(t, Trace) else t),
                                         ALL_GATE_NAMES)
    return {r.gate: r for r in results if r.claim_id == claim}, verdict


def illegal(got: dict[str, GateResult], gate: str = "observation") -> tuple[str, str]:
    step = got[gate].illegal
    assert step is not None, got[gate].missing
    return step.event, step.violation


def index(t: Trace, event: str, claim: str | None = None, request: str | None = None,
          nth: int = 0) -> int:
    hits = [i for i, e in enumerate(t.events) if e["event"] == event
            and (claim is None or e["claim_id"] == claim)
            and (request is None or e["request_id"] == request)]
    return hits[nth]


def moved(t: Trace, i: int, after: int) -> Trace:
    """The event at *i* moved to just after the event at *after* (*i* before *after*; seqs
    are renumbered)."""
    assert i < after
    t.events.insert(after, t.events.pop(i))
    return t


# ---------------------------------------------------------------- requests start first
class TestRequestsStartFirst:
    def test_the_canonical_order_passes(self) -> None:
        got, _ = judge(two_generations())
        assert all(got[g].passed for g in ("observation", *FAILURE_GATES, "conformance"))

    def test_an_acceptance_before_its_carrier_started_fails(self) -> None:
        """It was legal (a ruling SPEC §4.2 left open); now the acceptance names r-1 first."""
        t = two_generations()
        t.events.insert(1, t.events.pop(0))
        got, _ = judge(t)
        assert not any(got[g].passed for g in ALL_GATE_NAMES)
        assert illegal(got) == ("claim_accepted", "request_not_started")

    def test_an_eviction_naming_a_request_before_its_start_fails(self) -> None:
        """It was legal (an eviction may name the request whose pressure caused it); the
        request now starts first."""
        t = Trace().started("r-1").accept("c-1", "r-1", mode="expiring", expires_after_s=3.0)
        t.add("claim_materialized", "c-1", "r-1", surviving=2, leading=2, required=2,
              holds=True, tier="device").finished("r-1")
        t.add("claim_expired", "c-1", "r-9")
        assert judge(t)[0]["conformance"].passed is False
        started = Trace()
        started.events = [*t.events[:-1], *Trace().started("r-9").events, t.events[-1]]
        assert judge(started)[0]["lifecycle"].passed

    def test_a_request_that_never_starts_fails(self) -> None:
        t = two_generations()
        i = index(t, "request_started", request="r-2")
        del t.events[i]
        got, _ = judge(t)
        assert illegal(got) == ("kv_lookup", "request_not_started")

    def test_store_completions_after_the_finish_pass(self) -> None:
        """vLLM saves at finish: the accepting request's store and offload may follow it."""
        t = two_generations()
        saves = [t.events.pop(index(t, name)) for name in ("kv_store_started",
                                                            "kv_store_finished",
                                                            "claim_offloaded")]
        fin = index(t, "request_finished", request="r-1")
        t.events[fin + 1:fin + 1] = saves
        assert [e["event"] for e in t.events[fin:fin + 4]] == [
            "request_finished", "kv_store_started", "kv_store_finished", "claim_offloaded"]
        got, _ = judge(t)
        assert all(got[g].passed for g in ("observation", *FAILURE_GATES, "conformance"))

    def test_a_store_after_the_finish_of_a_request_that_did_not_carry_it_fails(self) -> None:
        t = two_generations().started("r-7").finished("r-7")
        t.add("kv_store_finished", "c-1", "r-7", job_id=9, bytes=4096, success=True,
              from_tier="device", to_tier="host")
        got, _ = judge(t)
        assert illegal(got) == ("kv_store_finished", "after_request_finished")

    @pytest.mark.parametrize("event", ["claim_materialized", "block_evicted", "claim_released",
                                       "kv_lookup", "claim_accepted"])
    def test_anything_else_naming_a_finished_request_fails(self, event: str) -> None:
        t = two_generations()
        fields: dict[str, Any] = {
            "claim_materialized": {"surviving": 2, "leading": 2, "required": 2, "holds": True,
                                   "tier": "device"},
            "block_evicted": {"block_id": 3, "protected": False, "reason": "lru",
                              "position": 5},
            "claim_released": {"reason": "done"},
            "kv_lookup": {"hit_tokens": 0, "async_load": False},
            "claim_accepted": {}}[event]
        if event == "claim_accepted":
            t.events.insert(index(t, "request_finished", request="r-1") + 1,
                            dict(t.events[index(t, "claim_accepted")]))
        else:
            t.add(event, "c-1", "r-1", **fields)
        got, _ = judge(t)
        assert not got["conformance"].passed
        assert illegal(got, "conformance")[1] in ("after_request_finished",
                                                  "restore_after_finish")


# ------------------------------------------------------------ B4 is the outcome
def vllm_order(generations: bool = True) -> Trace:
    """vLLM's real order with kv_load_failure_policy=fail (SPEC §9): the failed load seen,
    the fail branch, the restore failure and the attributed refusal before the finish, the
    invalid-block report of the failed job after it."""
    t = two_generations() if generations else claimed_load_failure()
    failed = index(t, "kv_load_failed")
    late = t.events.pop(failed)
    t.events.append(late)
    return t


class TestB4IsTheOutcome:
    def test_vllm_order_passes_failure_outcome_and_lifecycle(self) -> None:
        t = vllm_order()
        events = [e["event"] for e in t.events]
        assert events[-2:] == ["request_finished", "kv_load_failed"]
        assert events.index("active_request_refused") < events.index("request_finished", -3)
        got, verdict = judge(t)
        for gate in (*FAILURE_GATES, "observation", "conformance"):
            assert got[gate].passed, (gate, got[gate].missing)
        assert verdict.passed and verdict.failed == []

    def test_the_artifact_order_passes(self) -> None:
        """The refusal before the finish; the restore failure and a repeated refusal after."""
        t = two_generations()
        rf = t.events.pop(index(t, "claim_restore_failed"))
        again = dict(t.events[index(t, "active_request_refused")], arbiter="harness")
        assert t.events[-1]["event"] == "request_finished"
        t.events += [rf, again]
        got, _ = judge(t)
        assert all(got[g].passed for g in (*FAILURE_GATES, "conformance")), {
            g: got[g].missing for g in FAILURE_GATES}

    def test_a_refusal_after_the_finish_answers_nothing(self) -> None:
        t = two_generations()
        moved(t, index(t, "active_request_refused"), index(t, "request_finished", nth=2))
        got, _ = judge(t)
        for gate in FAILURE_GATES:
            assert {"legal_transitions", "no_open_failure"} <= set(got[gate].missing), gate
        assert illegal(got) == ("active_request_refused", "failure_after_finish")
        assert "outcome_before_finish" in got["failure_outcome"].missing

    def test_a_late_report_of_another_job_fails(self) -> None:
        t = vllm_order()
        t.events[-1]["job_id"] = 77
        got, _ = judge(t)
        assert not got["failure_outcome"].passed
        assert illegal(got)[1] in ("failure_after_finish", "after_terminal")

    def test_a_late_record_whose_record_never_comes_is_open(self) -> None:
        """The refusal answered the failure before the finish, but no claim_restore_failed
        follows at all: a record it needs never comes."""
        t = two_generations()
        del t.events[index(t, "claim_restore_failed")]
        got, _ = judge(t)
        assert "no_open_failure" in got["failure_outcome"].missing
        assert "restore_failed_scoped" in got["failure_outcome"].missing

    def test_nothing_is_restored_between_the_failure_and_its_last_record(self) -> None:
        t = two_generations()
        recompute = dict(t.events[index(t, "claim_restore_failed")], event="claim_restored",
                         source="fallback_recompute")
        for k in ("reason", "injected", "outcome_type", "outcome_claim_id"):
            recompute.pop(k)
        t.events.insert(index(t, "claim_restore_failed"), recompute)
        got, _ = judge(t)
        assert illegal(got) == ("claim_restored", "restored_after_failure")

    def test_a_late_record_opens_no_failure_where_the_reading_stops(self) -> None:
        """Read mid-run: a failure answered before its finish whose restore failure has not come
        yet is live, not failed (SPEC §9.1); an unanswered one whose request finished fails."""
        t = two_generations()
        del t.events[index(t, "claim_restore_failed")]
        got, verdict = judge(t)
        assert got["conformance"].passed and verdict.live == ["c-1"]
        t = two_generations()
        del t.events[index(t, "claim_restore_failed")]
        del t.events[index(t, "active_request_refused")]
        got, verdict = judge(t)
        assert "no_open_failure" in got["conformance"].missing and verdict.failed == ["c-1"]

    def test_vllm_order_with_only_the_branch_before_the_finish_passes(self) -> None:
        """vLLM reports the invalid blocks after the finish: the only failed-load record is
        the late ``kv_load_failed`` of the failed job, the fail branch its first sign (found
        by a SPEC-only review)."""
        t = vllm_order()
        del t.events[index(t, "kv_load_finished", nth=1)]  # the failure cycle's load end
        got, verdict = judge(t)
        for gate in (*FAILURE_GATES, "observation", "conformance"):
            assert got[gate].passed, (gate, got[gate].missing)
        assert verdict.passed

    def test_the_branch_before_a_failed_load_before_the_finish_fails(self) -> None:
        """The branch answers a failed load, so it follows it when both come before the
        finish."""
        t = two_generations()
        moved(t, index(t, "kv_load_failed"), index(t, "scheduler_load_failure"))
        moved(t, index(t, "kv_load_finished", nth=1), index(t, "scheduler_load_failure"))
        got, _ = judge(t)
        assert "scheduler_failure_branch" in got["failure_outcome"].missing

    @staticmethod
    def _answered_by(ending: str, mode: str, **fields: Any) -> Trace:
        t = Trace().started("r-1").accept("c-1", "r-1", mode=mode, **(
            {"expires_after_s": 60} if mode == "expiring" else {}))
        t.resident("c-1", "r-1").finished("r-1").started("r-2").restore_required("c-1", "r-2")
        t.add("kv_load_started", "c-1", "r-2", job_id=1, bytes=4096)
        t.add("kv_load_finished", "c-1", "r-2", job_id=1, bytes=4096, success=False,
              injected=True)
        t.add(ending, "c-1", "r-2", **fields)
        return t.finished("r-2", "error", "error")

    @pytest.mark.parametrize(("ending", "mode", "fields"), [
        ("claim_harmed", "soft_priority", HARM),
        ("claim_expired", "expiring", {}),
        ("claim_demoted", "demotable", {}),
    ])
    def test_the_modes_ending_answers_a_failure_and_its_late_records_follow(
            self, ending: str, mode: str, fields: dict[str, Any]) -> None:
        """Demotion and expiry answer a failed load as harm does (they were cycle_open), and
        the failure's records may follow the finish after any of them (they were
        after_terminal)."""
        t = self._answered_by(ending, mode, **fields)
        got, _ = judge(t)
        assert got["observation"].illegal is None and got["conformance"].passed, (
            got["conformance"].missing)
        t.add("kv_load_failed", "c-1", "r-2", job_id=1, invalid_block_ids=[0, 1],
              injected=True)
        got, _ = judge(t)
        assert got["observation"].illegal is None and got["conformance"].passed, (
            got["conformance"].missing)
        wrong_job = self._answered_by(ending, mode, **fields)
        wrong_job.add("kv_load_failed", "c-1", "r-2", job_id=9, invalid_block_ids=[0],
                      injected=True)
        assert illegal(judge(wrong_job)[0])[1] in ("failure_after_finish", "after_terminal")

    @pytest.mark.parametrize("ending", ["claim_expired", "claim_demoted"])
    def test_the_modes_ending_answers_a_failure_first_seen_as_the_branch(
            self, ending: str) -> None:
        """vLLM's order: only the fail branch before the finish, the failed job's report after
        it; an expiry or demotion between them answers it (it was cycle_open)."""
        mode = "expiring" if ending == "claim_expired" else "demotable"
        t = self._answered_by(ending, mode)
        i = index(t, "kv_load_finished")
        t.events[i] = {k: v for k, v in t.events[i].items() if k not in (
            "success", "injected", "bytes")} | {"event": "scheduler_load_failure",
                                              "policy": "fail", "invalid_block_count": 2,
                                              "failed_tokens": 256,
                                              "finish_status": "FINISHED_ERROR"}
        t.events[i].pop("job_id", None)
        t.add("kv_load_failed", "c-1", "r-2", job_id=1, invalid_block_ids=[0, 1],
              injected=True)
        got, _ = judge(t)
        assert got["observation"].illegal is None and got["conformance"].passed, (
            got["conformance"].missing)

    def test_a_harness_refusal_answers_no_failure(self) -> None:
        """arbiter=harness satisfies nothing: not even the answer that keeps a failure closed."""
        t = vllm_order()
        t.events[index(t, "active_request_refused")]["arbiter"] = "harness"
        got, _ = judge(t)
        assert not got["conformance"].passed
        assert "no_open_failure" in got["conformance"].missing

    def test_a_release_does_not_answer_a_failure(self) -> None:
        t = self._answered_by("claim_released", "expiring", reason="client_release")
        assert illegal(judge(t)[0]) == ("claim_released", "cycle_open")

    def test_a_harm_before_the_finish_answers_a_failure(self) -> None:
        """The mode's harm is an attributed outcome: it answers and closes the failure (no
        claim_restore_failed can follow an ended claim)."""
        t = Trace().started("r-1").accept("c-1", "r-1", mode="soft_priority")
        t.resident("c-1", "r-1").finished("r-1").started("r-2").restore_required("c-1", "r-2")
        t.add("kv_load_started", "c-1", "r-2", job_id=1, bytes=4096)
        t.add("kv_load_finished", "c-1", "r-2", job_id=1, bytes=4096, success=False,
              injected=True)
        t.add("claim_harmed", "c-1", None, **HARM).finished("r-2", "error", "error")
        got, _ = judge(t)
        assert "no_open_failure" not in got["conformance"].missing
        assert got["conformance"].passed, got["conformance"].missing
        late = Trace()
        late.events = [*t.events[:-2], t.events[-1], t.events[-2]]  # the harm after the finish
        assert "no_open_failure" in judge(late)[0]["conformance"].missing


# ------------------------------------------------------------ refusals name carriers
class TestRefusalsNameCarriers:
    def test_a_refusal_of_another_request_after_the_claim_failed_closed_fails(self) -> None:
        """It passed observation (the mutation against the SPEC-only acceptor)."""
        t = two_generations().started("r-9")
        t.add("active_request_refused", "c-1", "r-9", outcome_claim_id="c-1",
              blocking_claim_ids=["c-1"], feasibility="x", arbiter="admission")
        t.finished("r-9", "refused", "refused")
        got, _ = judge(t)
        assert not got["observation"].passed
        assert illegal(got) == ("active_request_refused", "refusal_of_non_carrier")

    def test_a_refusal_on_the_carrier_passes(self) -> None:
        got, _ = judge(claimed_load_failure())
        assert got["failure_outcome"].passed

    def test_a_hard_protected_conflict_while_resident_passes_and_after_release_fails(
            self) -> None:
        t = Trace().started("r-1").accept("c-1", "r-1", mode="hard_protected")
        t.add("claim_materialized", "c-1", "r-1", surviving=2, leading=2, required=2,
              holds=True, tier="device").finished("r-1").started("r-2")
        conflict = Trace()
        conflict.add("active_request_refused", "c-1", "r-2", outcome_claim_id="c-1",
                     blocking_claim_ids=["c-1"], arbiter="admission",
                     feasibility="infeasible_preserve_resident_and_active")
        conflict.finished("r-2", "refused", "infeasible")
        resident = Trace()
        resident.events = [*t.events, *conflict.events]
        assert judge(resident)[0]["lifecycle"].passed
        released = Trace()
        released.events = [*t.events, {**t.events[1], "event": "claim_released",
                                       "request_id": None, "reason": "done"},
                           *conflict.events]
        for k in ("registration", "protection_mode", "footprint_blocks", "predicate"):
            released.events[len(t.events)].pop(k)
        got, _ = judge(released)
        assert illegal(got, "lifecycle") == ("active_request_refused",
                                             "refusal_of_non_carrier")

    def test_a_deferral_blaming_an_offloadable_claim_on_another_request_fails(self) -> None:
        t = two_generations().started("r-9")
        t.add("active_request_deferred", None, "r-9", reason="capacity",
              blocking_claim_ids=["c-1"]).finished("r-9")
        got, _ = judge(t)
        assert illegal(got) == ("active_request_deferred", "refusal_of_non_carrier")

    def test_a_refusal_smearing_a_second_claim_is_its_illegal_step(self) -> None:
        """The refusal of c-a's request blocks c-b too: a step of c-b (SPEC §4.3: a step of
        every claim it names), illegal there; c-a only fails its smear requirements."""
        t = two_claim_attribution()
        t.events[index(t, "active_request_refused")]["blocking_claim_ids"] = ["c-a", "c-b"]
        got_b, _ = judge(t, "c-b")
        assert illegal(got_b) == ("active_request_refused", "refusal_of_non_carrier")
        got_a, _ = judge(t, "c-a")
        assert "legal_transitions" not in got_a["observation"].missing
        assert "no_blocking_smear" in got_a["failure_outcome"].missing


# ------------------------------------------------------------------------------ copies
class TestCopies:
    def test_an_offload_with_no_store_fails(self) -> None:
        t = two_generations()
        for name in ("kv_store_finished", "kv_store_started"):
            del t.events[index(t, name)]
        got, _ = judge(t)
        assert illegal(got) == ("claim_offloaded", "offload_without_store")

    def test_an_offload_to_another_tier_than_the_store_fails(self) -> None:
        t = two_generations()
        t.events[index(t, "claim_offloaded")]["to_tier"] = "disk"
        got, _ = judge(t)
        assert illegal(got) == ("claim_offloaded", "offload_without_store")

    def test_one_stored_copy_serves_several_offloads(self) -> None:
        t = Trace().started("r-1").accept("c-1", "r-1").resident("c-1", "r-1").finished("r-1")
        t.started("r-2").restore_ok("c-1", "r-2")
        t.add("claim_offloaded", "c-1", "r-2", generation=0, from_tier="device",
              to_tier="host", block_count=2).finished("r-2")
        t.started("r-3").restore_fails("c-1", "r-3", generation=1, job=2)
        t.finished("r-3", "error", "error")
        got, _ = judge(t)
        assert all(got[g].passed for g in ("observation", *FAILURE_GATES)), {
            g: got[g].missing for g in FAILURE_GATES}


# ---------------------------------------------------------------------- unscoped claims
def scoped(claim_scope: str | None, request_scope: str | None) -> Trace:
    t = Trace().add("request_started", None, "r-1", owner_scope=claim_scope)
    t.accept("c-1", "r-1", owner_scope=claim_scope).resident("c-1", "r-1").finished("r-1")
    t.add("request_started", None, "r-2", owner_scope=request_scope)
    return t.restore_ok("c-1", "r-2").finished("r-2")


class TestUnscopedClaims:
    def test_an_unscoped_claim_restored_by_unscoped_requests_passes(self) -> None:
        assert judge(scoped(None, None))[0]["observation"].passed

    def test_an_unscoped_claim_restored_by_a_scoped_request_fails(self) -> None:
        got, _ = judge(scoped(None, "tenant:a/session:1"))
        assert illegal(got) == ("claim_restore_required", "foreign_owner_scope")

    def test_the_mirror_still_holds(self) -> None:
        got, _ = judge(scoped("tenant:a/session:1", None))
        assert illegal(got) == ("claim_restore_required", "foreign_owner_scope")


# ----------------------------------------------------------------------- soft_priority
class TestSoftPriority:
    def test_both_generations_pass_lifecycle(self) -> None:
        t = two_generations()
        t.events[index(t, "claim_accepted")]["protection_mode"] = "soft_priority"
        assert judge(t)[0]["lifecycle"].passed

    def test_a_reported_harm_before_loss_is_legal_but_no_lifecycle_pass(self) -> None:
        t = Trace().started("r-1").accept("c-1", "r-1", mode="soft_priority")
        t.add("claim_materialized", "c-1", "r-1", surviving=2, leading=2, required=2,
              holds=True, tier="device").finished("r-1")
        t.add("claim_harmed", "c-1", None, **HARM)
        t.add("block_evicted", "c-1", None, block_id=3, protected=False, reason="lru",
              position=0)
        got, _ = judge(t)
        assert got["conformance"].passed  # a legal ending, announced
        assert "legal_transitions" not in got["lifecycle"].missing
        assert not got["lifecycle"].passed and "no_harm" in got["lifecycle"].missing

    def test_an_unreported_loss_is_illegal(self) -> None:
        t = Trace().started("r-1").accept("c-1", "r-1", mode="soft_priority")
        t.add("claim_materialized", "c-1", "r-1", surviving=2, leading=2, required=2,
              holds=True, tier="device").finished("r-1")
        t.add("block_evicted", "c-1", None, block_id=3, protected=False, reason="lru",
              position=0)
        assert "legal_transitions" in judge(t)[0]["lifecycle"].missing


# ---------------------------------------------------------------------------- per claim
class TestPerClaim:
    def test_another_claims_illegal_step_on_a_shared_request_is_its_own(self) -> None:
        """c-x, never accepted, is materialized on c-1's restoring request: c-x's history is
        illegal, c-1's chain gates are not touched (it failed them all under §4.2)."""
        t = two_generations()
        t.events.insert(index(t, "kv_load_finished"), {
            **t.events[index(t, "claim_materialized")], "claim_id": "c-x", "request_id": "r-2",
            "object_id": "prefix:c-x"})
        got, _ = judge(t)
        assert all(got[g].passed for g in ("observation", *FAILURE_GATES)), {
            g: got[g].missing for g in ("observation", *FAILURE_GATES)}
        other, _ = judge(t, "c-x")
        assert illegal(other) == ("claim_materialized", "before_acceptance")

    def test_a_request_whose_own_run_is_illegal_fails_every_claim_it_names(self) -> None:
        t = two_generations()
        t.events.insert(index(t, "request_finished", request="r-2"),
                        dict(t.events[index(t, "request_started", request="r-2")]))
        got, _ = judge(t)
        assert illegal(got) == ("request_started", "request_started_twice")
        assert not any(got[g].passed for g in ALL_GATE_NAMES)

    def test_attribution_still_judges_a_non_target(self) -> None:
        t = two_claim_attribution()
        t.events.insert(index(t, "kv_load_finished", claim="c-b"), {
            **t.events[index(t, "kv_load_started", claim="c-b")], "claim_id": "c-x",
            "job_id": 5})
        got, _ = judge(t, "c-a")
        assert got["failure_outcome"].passed
        assert got["attribution"].missing == ["non_targets_served"]


def test_the_predicate_value_is_the_one_the_readers_ask() -> None:
    """One accepted-predicate value (SPEC §2, §4.2): the needed positions and the proof."""
    from residentkv.model.predicate import AcceptedPredicate

    lead = AcceptedPredicate.of(type("P", (), {"kind": "leading_prefix_at_least",
                                               "blocks": 2, "start": None})(), 4)
    assert list(lead.needed) == [0, 1] and lead.needs(None) and not lead.needs(2)
    assert lead.proves(2, 3) and not lead.proves(1, 3) and lead.short(1)
    rng = AcceptedPredicate("contiguous_range", 2, 1, 4)
    assert rng.proves(0, 3) and not rng.proves(1, 3) and rng.proves(4, 4)
    assert not AcceptedPredicate("contiguous_range", 3, 2, 4).proves(4, 4)  # beyond it
    assert PRED["blocks"] == 2
