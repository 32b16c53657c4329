"""The gates against an acceptor written from SPEC §4.1–§4.3 alone (see acceptor.py).

(a) every shipped legal trace is legal for the acceptor (it is not simply strict);
(b) on unconstrained mutants of legal traces, a gate that passes a claim never passes a history
    the acceptor finds illegal for that gate (default deny, SPEC §4.2);
(c) one small legal and one illegal example per rule, so the acceptor can fail and says why.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from acceptor import (
    AS_NON_TARGET,
    ATTRIBUTION,
    FAILURE_GATES,
    FAILURE_OUTCOME,
    LIFECYCLE,
    OBSERVATION,
    Rule,
    Verdict,
    holds_from_numbers,
    judge,
    judge_bytes,
)
from compare import disagreements, gate_verdicts
from hypothesis import given, settings
from hypothesis import strategies as st
from mutant_sources import LEGAL_GENERATED, SOURCES, Source
from mutator import Mutant, mutants, shipped_traces, to_bytes
from rewrites import REWRITES, rewritten

from tracekit import PRED, Trace, claimed_load_failure, success_path, two_generations

SHIPPED = shipped_traces()
MUTANT_EXAMPLES = 400
GENERATED_EXAMPLES = 60


def _budget(examples: int) -> settings:
    """*examples* in `make test` (derandomized); the fuzz profile's own count in `make fuzz`."""
    if settings.get_current_profile_name() == "fuzz":
        return settings(max_examples=settings.default.max_examples)
    return settings(max_examples=examples)


# --- (a) and (b) -------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_traces_are_legal(name: str) -> None:
    verdicts = judge(SHIPPED[name])
    assert verdicts, name
    assert {c: v.pairs() for c, v in verdicts.items() if not v.legal} == {}


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_traces_agree(name: str) -> None:
    assert [str(d) for d in disagreements(to_bytes(SHIPPED[name]))] == []


@pytest.mark.parametrize("rewrite", REWRITES)
@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_legal_rewrites_stay_legal(name: str, rewrite: str) -> None:
    verdicts = judge_bytes(rewritten(rewrite, SHIPPED[name]))
    assert set(verdicts) == set(judge(SHIPPED[name]))
    assert {c: v.pairs() for c, v in verdicts.items() if not v.legal} == {}


@pytest.mark.parametrize("rewrite", REWRITES)
@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_legal_rewrites_keep_every_gate_verdict(name: str, rewrite: str) -> None:
    """No false fail: what SPEC calls legal and irrelevant changes no gate's verdict."""
    before = gate_verdicts(to_bytes(SHIPPED[name]))
    after = gate_verdicts(rewritten(rewrite, SHIPPED[name]))
    assert {k: (before.get(k), after.get(k)) for k in before.keys() | after.keys()
            if before.get(k) != after.get(k)} == {}


@_budget(GENERATED_EXAMPLES)
@given(LEGAL_GENERATED, st.sampled_from(REWRITES))
def test_generated_legal_traces_and_their_rewrites(source: Source, rewrite: str) -> None:
    """(a) and the rewrites over the generator's richer legal traces (owner scopes,
    submissions, labelled transfers, re-offloads, deferrals, harm, expiry, demotion)."""
    name = source.origin
    original, changed = source.data(), rewritten(rewrite, source.events)
    for data in (original, changed):
        assert {c: v.pairs() for c, v in judge_bytes(data).items() if not v.legal} == {}, name
    before, after = gate_verdicts(original), gate_verdicts(changed)
    assert {k: (before.get(k), after.get(k)) for k in before.keys() | after.keys()
            if before.get(k) != after.get(k)} == {}, name


@_budget(MUTANT_EXAMPLES)
@given(mutants(SOURCES))
def test_gate_pass_implies_legal_history(mutant: Mutant) -> None:
    found = disagreements(mutant.data())
    assert not found, (f"{mutant!r}\n" + "\n".join(map(str, found))
                       + "\n" + mutant.compact())


def _pinned(name: str, edit: Callable[[list[dict[str, Any]]], None]) -> bytes:
    events = json.loads(json.dumps(SHIPPED[name]))
    edit(events)
    return to_bytes(events)


def _set(index: int, **fields: Any) -> Callable[[list[dict[str, Any]]], None]:
    return lambda events: events[index].update(fields)


def _drop(*indexes: int) -> Callable[[list[dict[str, Any]]], None]:
    def edit(events: list[dict[str, Any]]) -> None:
        for i in sorted(indexes, reverse=True):
            del events[i]
    return edit


def _swap(i: int, j: int) -> Callable[[list[dict[str, Any]]], None]:
    def edit(events: list[dict[str, Any]]) -> None:
        events[i], events[j] = ({**events[j], "seq": events[i]["seq"]},
                                {**events[i], "seq": events[j]["seq"]})
    return edit


def _refuse_other(events: list[dict[str, Any]]) -> None:
    events.insert(13, {**events[13], "event": "active_request_refused", "claim_id": "c-9",
                       "outcome_claim_id": "c-9", "blocking_claim_ids": ["c-9"],
                       "feasibility": "x", "arbiter": "admission"})
    for key in ("object_id", "cache_identity", "request_token_map_id", "predicate_id",
                "generation", "holds"):
        events[13].pop(key, None)
    for i, e in enumerate(events):
        e["seq"] = i


def _unaccepted_claim(events: list[dict[str, Any]]) -> None:
    """A third claim, c-x, materialized on r-1 but never accepted."""
    events.insert(2, {**events[2], "claim_id": "c-x", "object_id": "prefix:c-x",
                      "request_token_map_id": "tokmap:c-x"})
    for i, e in enumerate(events):
        e["seq"] = i


#: one small case per disagreement class the mutants found (each fails some gate on main)
PINNED = {
    "non-target never accepted": ("two_claim_attribution.jsonl", _unaccepted_claim),
    "non-target with two identities": ("two_claim_attribution.jsonl",
                                       _set(16, cache_identity="other")),
    "contiguous range beyond the footprint": ("lifecycle_two_generations.jsonl", _set(
        1, predicate={"id": "p-lead2", "kind": "contiguous_range", "blocks": 2, "start": 1})),
    "refusal envelope names no claim": ("lifecycle_two_generations.jsonl",
                                        _set(23, claim_id=None)),
    "refused, then served": ("success_path.jsonl", _refuse_other),
    "expiry with no holding materialization": ("expiring_release_before_loss.jsonl",
                                               _set(2, surviving=1, leading=1)),
    "seq beyond int64": ("success_path.jsonl", _set(14, seq=2**64)),
}


@pytest.mark.parametrize("case", sorted(PINNED))
def test_pinned_disagreements(case: str) -> None:
    name, edit = PINNED[case]
    data = _pinned(name, edit)
    assert any(not v.legal for v in judge_bytes(data).values()), case  # the case is illegal
    assert [str(d) for d in disagreements(data)] == []


# --- (c) the acceptor, rule by rule ------------------------------------------------------------

SCOPE = "tenant:a/session:1"
HARM = {"cause": "evicted", "before": {"surviving": 2, "leading": 2, "required": 2, "holds": True},
        "after": {"surviving": 1, "leading": 0, "required": 2, "holds": False}}


def verdict(t: Trace | list[dict[str, Any]], claim: str = "c-1") -> Verdict:
    events = t.events if isinstance(t, Trace) else t
    return judge(events)[claim]


def rules(t: Trace | list[dict[str, Any]], claim: str = "c-1") -> set[Rule]:
    return {v.rule for v in verdict(t, claim).violations}


def mat(t: Trace, claim: str = "c-1", request: str | None = "r-1", **numbers: Any) -> Trace:
    fields = {"surviving": 2, "leading": 2, "required": 2, "holds": True, "tier": "device"}
    fields.update(numbers)
    return t.add("claim_materialized", claim, request, **fields)


def store(t: Trace, job: int = 0, request: str = "r-1", **extra: Any) -> Trace:
    tiers = {"from_tier": "device", "to_tier": "host"}
    tiers.update(extra)
    t.add("kv_store_started", "c-1", request, job_id=job, bytes=4096, **tiers)
    return t.add("kv_store_finished", "c-1", request, job_id=job, bytes=4096, success=True,
                 **tiers)


def offloaded(t: Trace, generation: int = 0) -> Trace:
    return t.add("claim_offloaded", "c-1", "r-1", generation=generation, from_tier="device",
                 to_tier="host", block_count=2)


def resident(mode: str = "offloadable", **accept: Any) -> Trace:
    """r-1 carries c-1: accepted, materialized, stored, offloaded (label 0), finished."""
    t = Trace().started("r-1").accept("c-1", "r-1", mode=mode, **accept)
    return offloaded(store(mat(t))).finished("r-1")


def test_an_empty_history_is_not_a_claim() -> None:
    t = Trace().started("r-1").add("kv_lookup", "c-1", "r-1", hit_tokens=1, async_load=False)
    assert rules(t) == {Rule.BEFORE_ACCEPT, Rule.NOT_ACCEPTED}


class TestBeforeAcceptance:
    def test_carrying_request_start_may_name_the_claim(self) -> None:
        t = Trace().add("request_started", "c-1", "r-1")
        t.add("claim_submitted", "c-1", "r-1").accept("c-1", "r-1")
        assert verdict(t).legal

    def test_another_request_may_not(self) -> None:
        t = Trace().add("request_started", "c-1", "r-9").started("r-1").accept("c-1", "r-1")
        assert rules(t) == {Rule.BEFORE_ACCEPT}

    def test_no_store_or_refusal_before_acceptance(self) -> None:
        t = store(Trace().started("r-1")).accept("c-1", "r-1")
        assert rules(t) == {Rule.BEFORE_ACCEPT}
        t = Trace().started("r-1").add("active_request_refused", "c-1", "r-1",
                                       outcome_claim_id="c-1", blocking_claim_ids=["c-1"],
                                       feasibility="x", arbiter="admission")
        assert Rule.BEFORE_ACCEPT in rules(t.accept("c-1", "r-1"))

    def test_identical_second_acceptance_changes_nothing(self) -> None:
        t = Trace().started("r-1").accept("c-1", "r-1").accept("c-1", "r-1")
        assert verdict(t).legal
        # but SPEC §4.3: after its first finish only store completions and late records may
        # name a request
        t.finished("r-1").accept("c-1", "r-1")
        assert rules(t) == {Rule.REQ_ACTS_AFTER_FINISH}

    @pytest.mark.parametrize("change", [
        {"predicate": {**PRED, "blocks": 1}}, {"owner_scope": SCOPE},
        {"protection_mode": "soft_priority"}, {"object_id": "prefix:other"}])
    def test_changed_second_acceptance_is_ambiguous(self, change: dict[str, Any]) -> None:
        t = Trace().started("r-1").accept("c-1", "r-1")
        t.events.append({**t.events[-1], "seq": 2, **change})
        assert rules(t) == {Rule.AMBIGUOUS}


class TestOrder:
    def test_store_and_offload_need_a_holding_materialization(self) -> None:
        assert verdict(resident()).legal
        t = offloaded(store(Trace().started("r-1").accept("c-1", "r-1")))
        assert rules(t) == {Rule.STORE_ORDER, Rule.OFFLOAD_ORDER}
        t = offloaded(store(mat(Trace().started("r-1").accept("c-1", "r-1"), leading=1,
                                surviving=1, holds=False)))
        assert rules(t) == {Rule.STORE_ORDER, Rule.OFFLOAD_ORDER}

    def test_reuse_while_resident_since_materialization(self) -> None:
        t = mat(Trace().started("r-1").accept("c-1", "r-1"))
        t.add("claim_reused", "c-1", "r-1", generation=0, holds=True)
        assert verdict(t).legal

    def test_reuse_after_offload_needs_a_restore(self) -> None:
        t = resident().started("r-2").add("claim_reused", "c-1", "r-2", generation=0, holds=True)
        assert rules(t) == {Rule.REUSE_ORDER}

    @pytest.mark.parametrize("event,fields,rule", [
        # a reuse labelled with the next generation inside the current cycle
        ("claim_reused", {"generation": 1, "holds": True}, Rule.REUSE_ORDER),
        # a restore after the reuse (restore_after_reuse)
        ("claim_restored", {"generation": 0, "source": "offload_tier"}, Rule.CYCLE_ORDER),
        # a cycle closes with its reuse: no load belongs to it afterwards
        ("kv_load_finished", {"job_id": 1, "success": True}, Rule.LOAD_AFTER_CYCLE),
    ])
    def test_after_a_complete_cycle(self, event: str, fields: dict[str, Any],
                                    rule: Rule) -> None:
        t = resident().started("r-2").restore_ok("c-1", "r-2")
        assert verdict(t).legal
        assert rules(t.add(event, "c-1", "r-2", **fields)) == {rule}

    def test_reuse_by_another_request_than_the_restore(self) -> None:
        t = resident().started("r-2").restore_ok("c-1", "r-2").finished("r-2").started("r-3")
        t.add("claim_reused", "c-1", "r-3", generation=0, holds=True)
        assert rules(t) == {Rule.REUSE_ORDER}

    def test_reuse_after_a_fallback_recompute_is_not_a_restore(self) -> None:
        t = resident().started("r-2").restore_required("c-1", "r-2")
        t.add("claim_restored", "c-1", "r-2", generation=0, source="fallback_recompute")
        t.add("claim_reused", "c-1", "r-2", generation=0, holds=True)
        assert rules(t) == {Rule.REUSE_ORDER}

    def test_loads_belong_to_an_open_cycle(self) -> None:
        t = resident().started("r-2").add("kv_load_started", "c-1", "r-2", job_id=1)
        assert rules(t) == {Rule.LOAD_OUTSIDE_CYCLE}
        t = resident().started("r-2").restore_required("c-1", "r-2").started("r-3")
        t.add("kv_load_finished", "c-1", "r-3", job_id=1, success=True)
        assert rules(t) == {Rule.LOAD_OUTSIDE_CYCLE}


class TestTerminal:
    def test_no_restore_or_reuse_after_harm(self) -> None:
        t = resident().add("claim_harmed", "c-1", None, **HARM)
        t.started("r-2").restore_ok("c-1", "r-2")
        assert rules(t) == {Rule.AFTER_TERMINAL}

    def test_no_reuse_after_failed_closed_on_the_refused_request(self) -> None:
        t = resident().started("r-2").restore_fails("c-1", "r-2")
        t.add("claim_reused", "c-1", "r-2", generation=0, holds=True)
        assert rules(t.finished("r-2", "error", "error")) == {Rule.AFTER_TERMINAL}

    def test_no_materialization_after_release(self) -> None:
        t = resident().add("claim_released", "c-1", None, reason="done")
        assert verdict(t).legal
        assert rules(mat(t, request=None)) == {Rule.AFTER_TERMINAL}

    def test_post_release_loss_is_legal(self) -> None:
        t = mat(Trace().started("r-1").accept("c-1", "r-1", mode="expiring"))
        t.add("claim_expired", "c-1", None)
        t.add("block_evicted", "c-1", None, block_id=1, protected=False, reason="lru",
              position=0)
        t.add("claim_block_lost_after_release", "c-1", None, block_id=1, position=0)
        assert verdict(t).legal

    def test_lost_after_release_needs_a_release(self) -> None:
        t = mat(Trace().started("r-1").accept("c-1", "r-1", mode="expiring"))
        t.add("claim_block_lost_after_release", "c-1", None, block_id=1, position=0)
        assert rules(t) == {Rule.LOST_BEFORE_RELEASE}


class TestGenerations:
    def test_two_cycles_on_one_stored_copy(self) -> None:
        assert verdict(two_generations()).legal

    def test_labels_need_only_increase(self) -> None:
        t = resident().started("r-2").restore_ok("c-1", "r-2", generation=3).finished("r-2")
        assert verdict(t).legal

    def test_offload_label_above_the_restore_chain(self) -> None:
        t = Trace().started("r-1").accept("c-1", "r-1")
        offloaded(store(mat(t)), generation=1).finished("r-1")
        t.started("r-2").restore_ok("c-1", "r-2", generation=0).finished("r-2")
        assert rules(t) == {Rule.LABEL_ORDER}

    def test_a_new_cycle_may_not_reuse_an_earlier_label(self) -> None:
        t = resident().started("r-2").restore_ok("c-1", "r-2", generation=0).finished("r-2")
        t.started("r-3").restore_ok("c-1", "r-3", generation=1, job=2).finished("r-3")
        assert verdict(t).legal
        t.started("r-4").restore_fails("c-1", "r-4", generation=0, job=3)
        t.finished("r-4", "error", "error")
        assert rules(t) == {Rule.LABEL_ORDER}

    def test_a_load_label_is_its_cycle_label(self) -> None:
        t = resident().started("r-2").restore_required("c-1", "r-2", generation=2)
        t.add("kv_load_started", "c-1", "r-2", job_id=1, generation=2)
        assert verdict(t).legal
        t.add("kv_load_finished", "c-1", "r-2", job_id=1, success=True, generation=1)
        assert rules(t) == {Rule.LABEL_CYCLE}


class TestFailures:
    def _restore_after_void(self, job: int | None) -> Trace:
        t = resident().started("r-2").restore_required("c-1", "r-2")
        t.add("kv_load_started", "c-1", "r-2", job_id=1)
        t.add("kv_load_finished", "c-1", "r-2", job_id=1, success=True)
        fields = {} if job is None else {"job_id": job}
        t.add("kv_load_failed", "c-1", "r-2", invalid_block_ids=[0], **fields)
        return t.add("claim_restored", "c-1", "r-2", generation=0, source="offload_tier")

    def test_kv_load_failed_without_job_voids_the_request_loads(self) -> None:
        assert Rule.RESTORE_VOIDED in rules(self._restore_after_void(None))
        assert Rule.RESTORE_VOIDED in rules(self._restore_after_void(1))
        assert Rule.RESTORE_VOIDED not in rules(self._restore_after_void(7))

    def test_a_substrate_failure_naming_the_claim_names_its_request(self) -> None:
        t = resident().add("kv_load_failed", "c-1", None, invalid_block_ids=[0])
        assert rules(t) == {Rule.FAILURE_NO_REQUEST}

    def test_an_open_failure_is_not_made_up_for_by_a_later_one(self) -> None:
        t = resident().started("r-2").restore_required("c-1", "r-2")
        t.add("kv_load_failed", "c-1", "r-2", invalid_block_ids=[0], injected=True)
        t.finished("r-2", "error", "error")
        assert verdict(t).legal_for(OBSERVATION)
        assert {v.rule for v in verdict(t).against(FAILURE_OUTCOME)} == {Rule.OPEN_FAILURE}
        t.started("r-3").restore_fails("c-1", "r-3", generation=1, job=2)
        t.finished("r-3", "error", "error")
        v = verdict(t)
        assert [(x.rule, x.gates) for x in v.violations] == [
            (Rule.OPEN_FAILURE, FAILURE_GATES)]  # the later chain does not close it
        # as a non-target: r-2 failed with nothing naming c-1, and failures name it
        assert {x.rule for x in v.as_non_target} == {Rule.NOT_SERVED, Rule.NAMED_BY_FAILURE}

    def test_the_branch_after_the_restore_failure_is_a_failure_again(self) -> None:
        """SPEC §4.3: the refusal answers it, but no claim_restore_failed follows it (a record
        it needs never comes); the branch outside the cycle is a reading."""
        events = claimed_load_failure().events
        events[13], events[14] = ({**events[14], "seq": 13}, {**events[13], "seq": 14})
        v = verdict(events)
        assert {x.rule for x in v.violations} == {Rule.FAILURE_OUTSIDE_CYCLE, Rule.OPEN_FAILURE}
        assert not v.legal_for(FAILURE_OUTCOME)

    def test_vllm_order_is_legal(self) -> None:
        """SPEC §4.3: the refusal before the finish; the failed job's kv_load_failed, the
        restore failure and a repeated refusal after it."""
        def ordered(*late_kinds: str) -> Trace:
            t = resident().started("r-2").restore_fails("c-1", "r-2")
            late = [e for e in t.events if e["event"] in late_kinds and e["request_id"] == "r-2"]
            t.events = [e for e in t.events if e not in late]
            t.finished("r-2", "error", "error")
            t.events += late
            if "active_request_refused" not in late_kinds:
                refusal = next(e for e in t.events if e["event"] == "active_request_refused")
                t.events.append(dict(refusal, arbiter="harness"))
            for i, e in enumerate(t.events):
                e["seq"] = i
            return t

        t = ordered("kv_load_failed", "claim_restore_failed")
        assert verdict(t).legal, verdict(t).pairs()
        # the refusal after the finish too: nothing answered the failure
        t = ordered("kv_load_failed", "claim_restore_failed", "active_request_refused")
        assert {Rule.OPEN_FAILURE, Rule.REQ_AFTER_FINISH} <= rules(t)

    def test_a_textbook_failure_is_legal(self) -> None:
        assert verdict(claimed_load_failure()).legal

    def test_the_whole_chain_precedes_the_first_finish(self) -> None:
        t = resident().started("r-2").restore_fails("c-1", "r-2")
        refusal = t.events.pop()
        t.finished("r-2", "error", "error")
        t.events.append({**refusal, "seq": len(t.events)})
        assert Rule.REQ_AFTER_FINISH in rules(t)

    def test_the_failed_request_must_finish_in_the_stream(self) -> None:
        t = resident().started("r-2").restore_fails("c-1", "r-2")
        assert {v.rule for v in verdict(t).violations} == {Rule.UNFINISHED}
        assert verdict(t).legal_for(OBSERVATION)


class TestRequests:
    def test_a_request_starts_once(self) -> None:
        t = success_path().started("r-2")
        assert rules(t) == {Rule.REQ_RESTART, Rule.REQ_ACTS_AFTER_FINISH}

    def test_finishes_once(self) -> None:
        t = success_path().finished("r-2")
        assert rules(t) == {Rule.REQ_AFTER_FINISH}

    def test_refused_then_served_contradicts_the_refusal(self) -> None:
        t = resident().started("r-2").restore_fails("c-1", "r-2").finished("r-2")
        assert rules(t) == {Rule.REFUSED_SERVED}

    def test_served_after_the_fail_branch(self) -> None:
        t = resident().started("r-2").restore_required("c-1", "r-2")
        t.add("scheduler_load_failure", "c-1", "r-2", policy="fail", invalid_block_count=2,
              failed_tokens=256, finish_status="FINISHED_ERROR").finished("r-2")
        assert Rule.FAIL_BRANCH_SERVED in rules(t)

    def test_an_observation_gap_leaves_an_open_claim_unknown(self) -> None:
        gap = {"reason": "batch sequence jumped"}
        t = resident().add("observation_gap", None, None, **gap)
        assert rules(t) == {Rule.OBSERVATION_GAP}
        t = resident().add("claim_released", "c-1", None, reason="done")
        assert verdict(t.add("observation_gap", None, None, **gap)).legal
        before = Trace().add("observation_gap", None, None, **gap).events
        assert verdict(before + [{**e, "seq": e["seq"] + 1}
                                 for e in success_path().events]).legal

    def _scoped(self, claim_scope: dict[str, Any], request_scope: str | None) -> Trace:
        t = Trace().add("request_started", None, "r-1", owner_scope=SCOPE)
        if "submitted" in claim_scope:
            t.add("claim_submitted", "c-1", "r-1", owner_scope=claim_scope["submitted"])
        t.accept("c-1", "r-1", **({"owner_scope": claim_scope["accepted"]}
                                  if "accepted" in claim_scope else {}))
        offloaded(store(mat(t))).finished("r-1")
        t.add("request_started", None, "r-2", owner_scope=request_scope)
        return t.restore_ok("c-1", "r-2").finished("r-2")

    def test_restore_and_reuse_by_the_claim_owner(self) -> None:
        assert verdict(self._scoped({"accepted": SCOPE}, SCOPE)).legal
        assert verdict(self._scoped({}, None)).legal

    def test_another_tenant_or_an_unscoped_request(self) -> None:
        assert rules(self._scoped({"accepted": SCOPE}, "tenant:b/session:1")) == {Rule.SCOPE}
        assert rules(self._scoped({"accepted": SCOPE}, None)) == {Rule.SCOPE}

    def test_an_unscoped_claim_restored_by_a_scoped_request(self) -> None:
        """SPEC §4.3 Unscoped claims: only requests without one."""
        assert rules(self._scoped({}, SCOPE)) == {Rule.SCOPE}

    def test_a_scope_declared_after_the_restore_is_too_late(self) -> None:
        t = self._scoped({"accepted": SCOPE}, SCOPE)
        start = next(i for i, e in enumerate(t.events)
                     if e["event"] == "request_started" and e["request_id"] == "r-2")
        t.events.insert(start + 3, t.events.pop(start))  # after the lookup and the restore
        for i, e in enumerate(t.events):
            e["seq"] = i
        assert rules(t) == {Rule.SCOPE, Rule.REQ_NOT_STARTED}
        assert {v.rule for v in verdict(t).against(OBSERVATION)} == {Rule.SCOPE,
                                                                     Rule.REQ_NOT_STARTED}

    def test_scope_declared_on_submission_only(self) -> None:
        assert rules(self._scoped({"submitted": SCOPE}, "tenant:b/session:1")) == {Rule.SCOPE}
        assert verdict(self._scoped({"submitted": SCOPE}, SCOPE)).legal

    def test_submission_and_acceptance_scopes_differ(self) -> None:
        t = self._scoped({"submitted": "tenant:b/session:1", "accepted": SCOPE}, SCOPE)
        assert Rule.AMBIGUOUS in rules(t)


class TestModesTiersArbiters:
    def test_best_effort_is_not_a_claim(self) -> None:
        assert rules(Trace().started("r-1").accept("c-1", "r-1", mode="best_effort")) == {
            Rule.MODE}

    def test_predicate_fixed(self) -> None:
        t = Trace().started("r-1").accept("c-1", "r-1")
        assert verdict(t).legal
        t.events[-1]["predicate"] = {**PRED, "id": "p-other"}
        assert rules(t) == {Rule.PREDICATE_FIXED}

    def test_submission_after_acceptance_is_a_reading(self) -> None:
        t = Trace().started("r-1").accept("c-1", "r-1").add("claim_submitted", "c-1", "r-1")
        assert rules(t) == {Rule.SUBMIT_ORDER}
        assert verdict(t).violations[0].reading and not verdict(t).against(OBSERVATION)
        assert verdict(t).against(OBSERVATION, readings=True)

    def test_post_hoc_registration(self) -> None:
        t = Trace().started("r-1").accept("c-1", "r-1", registration="post_hoc")
        assert rules(t) == {Rule.POST_HOC}

    def test_store_to_the_tier_it_comes_from(self) -> None:
        t = store(mat(Trace().started("r-1").accept("c-1", "r-1")), to_tier="device")
        assert rules(t) == {Rule.STORE_TIER}

    def test_restore_from_another_tier_than_the_copy(self) -> None:
        t = resident().started("r-2")
        t.add("claim_restore_required", "c-1", "r-2", generation=0, from_tier="disk",
              to_tier="device", tokens=256)
        assert rules(t) == {Rule.RESTORE_TIER}

    def test_restore_needs_a_stored_offloaded_copy(self) -> None:
        t = mat(Trace().started("r-1").accept("c-1", "r-1")).finished("r-1").started("r-2")
        assert rules(t.restore_ok("c-1", "r-2")) == {Rule.RESTORE_NO_COPY}
        t = offloaded(mat(Trace().started("r-1").accept("c-1", "r-1"))).finished("r-1")
        t.started("r-2").restore_ok("c-1", "r-2")
        # SPEC §4.3 Copies: the offload needs a stored copy in its tier
        assert rules(t) == {Rule.OFFLOAD_NO_STORE, Rule.RESTORE_NO_STORE}
        assert not verdict(t).legal_for(OBSERVATION)

    def _evicted(self, t: Trace, position: int | None = 0) -> Trace:
        return t.add("block_evicted", "c-1", None, block_id=5, protected=False, reason="lru",
                     position=position)

    def test_offloadable_eviction_with_and_without_a_copy(self) -> None:
        assert verdict(self._evicted(resident())).legal
        t = self._evicted(store(mat(Trace().started("r-1").accept("c-1", "r-1"))))
        assert rules(t) == {Rule.SILENT_LOSS}

    @pytest.mark.parametrize("mode,outcome", [
        ("soft_priority", "claim_harmed"), ("expiring", "claim_expired"),
        ("demotable", "claim_demoted")])
    def test_loss_needs_the_promised_outcome_first(self, mode: str, outcome: str) -> None:
        fields = HARM if outcome == "claim_harmed" else {}
        t = mat(Trace().started("r-1").accept("c-1", "r-1", mode=mode))
        assert rules(self._evicted(t)) == {Rule.SILENT_LOSS}
        t = mat(Trace().started("r-1").accept("c-1", "r-1", mode=mode))
        assert verdict(self._evicted(t.add(outcome, "c-1", None, **fields))).legal

    def test_hard_protected_loss_and_unneeded_eviction(self) -> None:
        t = mat(Trace().started("r-1").accept("c-1", "r-1", mode="hard_protected"))
        assert verdict(self._evicted(t, position=5)).legal
        assert rules(self._evicted(t, position=None)) == {Rule.SILENT_LOSS}

    def test_non_holding_evaluation_is_loss(self) -> None:
        t = mat(Trace().started("r-1").accept("c-1", "r-1", mode="hard_protected"))
        assert rules(mat(t, surviving=1, leading=1, holds=False)) == {Rule.SILENT_LOSS}

    def test_no_vacuous_expiry(self) -> None:
        t = Trace().started("r-1").accept("c-1", "r-1", mode="expiring")
        assert rules(t.add("claim_expired", "c-1", None)) == {Rule.VACUOUS_PATH}

    def _conflict(self, arbiter: str, outcome: str = "c-1") -> Trace:
        t = mat(Trace().started("r-1").accept("c-1", "r-1", mode="hard_protected"))
        t.finished("r-1").started("r-2")
        t.add("active_request_refused", "c-1", "r-2", outcome_claim_id=outcome,
              blocking_claim_ids=["c-1"], feasibility="x", arbiter=arbiter)
        return t.finished("r-2", "refused", "infeasible")

    def test_harness_arbitrated_conflict_is_no_evidence(self) -> None:
        assert verdict(self._conflict("admission")).legal
        v = verdict(self._conflict("harness"))
        assert [(x.rule, x.gates) for x in v.violations] == [
            (Rule.HARNESS_ONLY, frozenset({LIFECYCLE}))]

    def test_a_refusal_blocks_only_its_outcome_claim(self) -> None:
        t = self._conflict("admission")
        t.events[-2]["blocking_claim_ids"] = ["c-1", "c-2"]
        assert [(x.rule, x.gates) for x in verdict(t).violations] == [
            (Rule.SMEAR, FAILURE_GATES)]
        assert verdict(t, "c-2").against(ATTRIBUTION)

    def test_a_request_naming_the_claim_is_served_or_explained(self) -> None:
        t = resident().started("r-2").restore_ok("c-1", "r-2").finished("r-2", "error", "x")
        assert verdict(t).legal
        assert [(x.rule, x.gates) for x in verdict(t).as_non_target] == [
            (Rule.NOT_SERVED, frozenset({AS_NON_TARGET}))]
        assert verdict(t).legal_for(ATTRIBUTION) and verdict(t).against_non_target()

    def test_failures_name_only_the_target(self) -> None:
        v = verdict(claimed_load_failure())
        assert v.legal and {x.rule for x in v.as_non_target} == {Rule.NAMED_BY_FAILURE}
        assert not verdict(success_path()).as_non_target
        t = success_path().started("r-3").add("kv_load_failed", None, "r-3",
                                              invalid_block_ids=[0])
        assert rules(t) == {Rule.UNCLAIMED_FAILURE}
        assert verdict(t).legal_for(OBSERVATION) and not verdict(t).legal_for(ATTRIBUTION)

    def test_refusal_envelope_names_its_outcome_claim(self) -> None:
        assert Rule.OUTCOME_ENVELOPE in rules(self._conflict("admission", outcome="c-2"))


class TestPredicates:
    @pytest.mark.parametrize("kind,start,blocks,footprint,surviving,leading,holds", [
        ("contiguous_range", 1, 2, 4, 3, 0, True),    # every position but 0
        ("contiguous_range", 1, 2, 4, 3, 1, False),   # position 1 missing
        ("contiguous_range", 1, 2, 4, 2, 0, False),   # two missing: unknown which
        ("contiguous_range", 0, 2, 4, 2, 2, True),    # leading run covers it
        ("contiguous_range", 2, 3, 4, 4, 4, False),   # range beyond the footprint
        ("leading_prefix_at_least", 0, 2, 4, 3, 2, True),
        ("leading_prefix_at_least", 0, 2, 4, 59, 1, False),  # 59 scattered, block 1 gone
        ("leading_prefix_at_least", 0, 2, 4, 4, 2, False),   # all present but leading 2: lies
        ("leading_prefix_at_least", 0, 2, 4, 1, 2, False),   # leading above surviving
    ])
    def test_holds_from_numbers(self, kind: str, start: int, blocks: int, footprint: int,
                                surviving: int, leading: int, holds: bool) -> None:
        predicate = {"id": "p", "kind": kind, "blocks": blocks, "start": start}
        assert holds_from_numbers(footprint, predicate, surviving, leading) is holds

    def test_holds_true_contradicted_by_numbers(self) -> None:
        t = mat(Trace().started("r-1").accept("c-1", "r-1"), leading=1)
        assert rules(t) == {Rule.HOLDS_CONTRADICTION}


def _records(t: Trace) -> list[str]:
    return [json.dumps(e) for e in t.events]


class TestNumbersAndText:
    def test_seq_is_int64(self) -> None:
        t = Trace().started("r-1").accept("c-1", "r-1")
        t.events[-1]["seq"] = 2**63 - 1
        assert verdict(t).legal
        t.events[-1]["seq"] = 2**63
        assert Rule.NUMBER_RANGE in rules(t)

    def test_every_integer_is_int64(self) -> None:
        t = mat(Trace().started("r-1").accept("c-1", "r-1"), surviving=2**64)
        assert Rule.NUMBER_RANGE in rules(t)

    def test_seq_strictly_increases(self) -> None:
        t = Trace().started("r-1").accept("c-1", "r-1")
        t.events[-1]["seq"] = 0
        assert Rule.SEQ_ORDER in rules(t)

    def test_bom_and_blank_lines_carry_nothing(self) -> None:
        lines = _records(success_path())
        data = b"\xef\xbb\xbf" + "\n\n".join(lines).encode() + b"\n  \n"
        assert judge_bytes(data)["c-1"].legal

    @pytest.mark.parametrize("edit", [
        lambda s: s.replace('"holds": true', '"holds": true, "holds": true', 1),
        lambda s: s.replace('"footprint_blocks": 2', '"footprint_blocks": 2.0', 1),
        lambda s: s.replace('"success": true', '"success": "true"', 1),
        lambda s: s.replace('"seq": 3', '"seq": true', 1),
        lambda s: s.replace('"ts_ns": 4000', '"ts_ns": NaN', 1),
    ])
    def test_strict_json(self, edit: Callable[[str], str]) -> None:
        text = "\n".join(_records(success_path())) + "\n"
        changed = edit(text)
        assert changed != text
        assert not judge_bytes(changed.encode())["c-1"].legal

