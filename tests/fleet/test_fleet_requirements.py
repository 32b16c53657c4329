"""Gate fleet_outcome on hand-written fleets: one passing fleet, then one defect at a time
(each must fail exactly its requirement, located, and legal_transitions too where the defect is
also a step the automaton refuses), then defects combined.

Every fleet is judged by both the streaming gate and the reference semantics, which must agree.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fleetkit import Clock, Replica, healthy, write_fleet

from residentkv.fleet import FleetJudgement, FleetProblem, judge_fleet, reference_fleet

IDENTIFIED, SINGLE_HOME = "replicas_identified", "claim_single_home"
ONE_OUTCOME, NO_CROSS_TENANT = "one_outcome_per_claimed_request", "no_cross_tenant"
LEGAL = "legal_transitions"


def judge(tmp_path: Path, *replicas: Replica) -> FleetJudgement:
    return judge_paths(write_fleet(tmp_path, *replicas))


def judge_paths(paths: list[Path]) -> FleetJudgement:
    ours, ref = judge_fleet(paths), reference_fleet(paths)
    assert ours == ref
    return ours


def only(j: FleetJudgement, requirement: str, code: str, *,
         illegal: bool = False) -> FleetProblem:
    """The judgement fails exactly *requirement* (and legal_transitions when *illegal*), and a
    problem with *code* says where."""
    wanted = sorted({requirement, LEGAL} if illegal else {requirement})
    assert j.missing == wanted, [p.render() for p in j.problems]
    assert not j.passed
    found = [p for p in j.problems if p.code == code]
    assert found, [p.render() for p in j.problems]
    return found[0]


def line_of(r: Replica, event: str, nth: int = 0, **match: object) -> int:
    hits = [i + 1 for i, e in enumerate(r.events) if e["event"] == event
            and all(e.get(k) == v for k, v in match.items())]
    return hits[nth]


# ------------------------------------------------------------------------------ passing


def test_healthy_fleet_passes_with_every_decision_kind(tmp_path: Path) -> None:
    j = judge(tmp_path, *healthy())
    assert j.passed and j.missing == [] and j.problems == [] and j.evaluated
    assert {r.request_id: r.decision for r in j.requests} == {
        "q1": "accepted", "q2": "accepted", "q3": "reused", "q4": "rejected", "q5": "refused"}
    assert all(r.passed for r in j.requests)
    assert {c.claim_id: (c.home, c.status) for c in j.claims} == {
        "c1": ("r0", "held"), "c2": ("r1", "ended")}
    assert [s.replica for s in j.streams] == ["r0", "r1"]


@pytest.mark.parametrize("events", [["refused"], ["restore_failed"],
                                    ["restore_failed", "refused"]])
def test_a_refusal_is_one_decision_whichever_events_carry_it(tmp_path: Path,
                                                             events: list[str]) -> None:
    r0 = Replica("r0", Clock()).registered("c1", "q1").start("q2", "c1").required("c1", "q2")
    for name in events:
        getattr(r0, name)("c1", "q2")
    j = judge(tmp_path, r0.finish("q2", "error"))
    assert j.passed and j.requests[1].decision == "refused"


# -------------------------------------------------------------------- replicas_identified


def test_stream_without_stream_started(tmp_path: Path) -> None:
    r0, r1 = healthy()
    del r1.events[0]
    j = judge(tmp_path, r0, r1)
    p = only(j, IDENTIFIED, "F002")
    assert p.path is not None and p.path.endswith("r1-1.jsonl") and (p.line, p.col) == (1, 1)
    assert p.render().startswith(f"{p.path}:1:1: error[F002 stream_without_provenance]")


@pytest.mark.parametrize("name", [None, "", "   "])
def test_stream_without_a_replica_name(tmp_path: Path, name: str | None) -> None:
    clock = Clock()
    r0 = Replica(name, clock).registered("c1", "q1")
    only(judge(tmp_path, r0), IDENTIFIED, "F003")


def test_two_streams_name_one_replica(tmp_path: Path) -> None:
    r0, r1 = healthy()
    r1.events[0]["replica"] = "r0"
    p = only(judge(tmp_path, r0, r1), IDENTIFIED, "F004")
    assert p.path is not None and p.path.endswith("1.jsonl") and p.line == 1
    assert "r0-0.jsonl" in p.message


def test_an_invalid_line_is_located(tmp_path: Path) -> None:
    r0, r1 = healthy()
    paths = write_fleet(tmp_path, r0, r1)
    text = paths[1].read_text().splitlines(keepends=True)
    text.insert(3, '{"schema": "residentkv.event/v1", "seq": \n')
    paths[1].write_text("".join(text))
    p = only(judge_paths(paths), IDENTIFIED, "T001")
    assert (p.path, p.line, p.col) == (str(paths[1]), 4, 1)


def test_unreadable_and_empty_streams_fail_closed(tmp_path: Path) -> None:
    (r0, _) = healthy()
    (path,) = write_fleet(tmp_path, r0)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    j = judge_paths([path, tmp_path / "missing.jsonl", empty, tmp_path])
    assert j.missing == [IDENTIFIED] and not j.evaluated
    assert [p.code for p in j.problems] == ["T010", "T009", "T010"]
    assert [s.usable for s in j.streams] == [True, False, False, False]


def test_no_stream_is_no_pass() -> None:
    j = judge_paths([])
    assert j.missing == sorted([IDENTIFIED, ONE_OUTCOME]) and not j.evaluated
    assert {p.code for p in j.problems} == {"F001", "F016"}


# ---------------------------------------------------------------------- claim_single_home


def test_claim_accepted_on_two_replicas(tmp_path: Path) -> None:
    r0, r1 = healthy()
    r1.registered("c1", "q7")
    p = only(judge(tmp_path, r0, r1), SINGLE_HOME, "F005")
    assert p.claim_id == "c1" and p.line == line_of(r1, "claim_accepted", claim_id="c1")
    assert "'r0'" in p.message


def test_the_home_is_the_earliest_acceptance(tmp_path: Path) -> None:
    clock = Clock()
    r0, r1 = Replica("r0", clock), Replica("r1", clock)
    r1.registered("c1", "q1")  # earlier on the shared clock, though r1 is the second stream
    r0.registered("c1", "q2")
    j = judge(tmp_path, r0, r1)
    p = only(j, SINGLE_HOME, "F005")
    assert p.path is not None and p.path.endswith("r0-0.jsonl")
    assert j.claims[0].home == "r1"


# -------------------------------------------------------- one_outcome_per_claimed_request


def _one_request(*steps: str, claim: str = "c1") -> Replica:
    r0 = Replica("r0", Clock()).registered("c1", "q1").start("q2", claim)
    for step in steps:
        if step == "finish":
            r0.finish("q2")
        else:
            getattr(r0, step)("c1", "q2")
    return r0


# a rejection naming c1 where c1 was accepted, a restore failure after the restore, a
# refusal after the finish: steps the automaton refuses as well (legal_transitions)
@pytest.mark.parametrize(("steps", "code", "illegal"), [
    (("finish",), "F006", False),
    (("reuse", "reject", "finish"), "F007", True),
    (("reuse", "unnamed", "finish"), "F007", False),
    (("reuse", "restore_failed", "finish"), "F007", True),
    (("reject", "reject", "finish"), "F007", True),
    (("unnamed", "unnamed", "finish"), "F007", False),
    (("finish", "reject"), "F009", True),
    (("finish", "unnamed"), "F009", False),
    (("reject",), "F010", True),
    (("unnamed",), "F010", False),
    (("required", "restore_failed", "refused", "finish", "refused"), "F009", True),
])
def test_one_decision_before_the_finish(tmp_path: Path, steps: tuple[str, ...],
                                        code: str, illegal: bool) -> None:
    j = judge(tmp_path, _one_request(*steps))
    p = only(j, ONE_OUTCOME, code, illegal=illegal)
    assert p.request_id == "q2"
    assert [r.passed for r in j.requests] == [True, False]


def test_conflicting_decisions_leave_no_decision(tmp_path: Path) -> None:
    j = judge(tmp_path, _one_request("reuse", "reject", "finish"))
    assert j.requests[1].decision is None


def test_a_decision_naming_another_claim(tmp_path: Path) -> None:
    r0 = Replica("r0", Clock()).registered("c1", "q1").start("q2", "c1")
    r0.reject("c2", "q2").finish("q2")
    p = only(judge(tmp_path, r0), ONE_OUTCOME, "F008")
    assert "'c2'" in p.message and p.line == line_of(r0, "claim_rejected")


def test_a_rejection_naming_no_claim_where_the_claim_was_never_held(tmp_path: Path) -> None:
    # a reference to a claim this replica never held ("not held"): the rejection is about the
    # request; naming c2 would decide it, and the request may not own it (SPEC §9.1)
    r0 = Replica("r0", Clock()).registered("c1", "q1").start("q2", "c2")
    r0.reject(None, "q2").finish("q2")
    j = judge(tmp_path, r0)
    assert j.passed, [p.render() for p in j.problems]
    assert {r.request_id: r.decision for r in j.requests}["q2"] == "rejected"


def test_an_unnamed_rejection_of_a_claim_held_here_is_its_decision(tmp_path: Path) -> None:
    # another tenant quoting c1, or a reference to c1 after it closed: naming c1 would write
    # into c1's history, so the replica that holds (or held) it may leave it unnamed
    r0 = Replica("r0", Clock()).registered("c1", "q1").start("q2", "c1")
    r0.reject(None, "q2").finish("q2")
    j = judge(tmp_path, r0)
    assert j.passed, [p.render() for p in j.problems]
    assert {r.request_id: r.decision for r in j.requests}["q2"] == "rejected"


def test_fallback_recompute_is_no_reuse(tmp_path: Path) -> None:
    r0 = Replica("r0", Clock()).registered("c1", "q1").start("q2", "c1")
    r0.required("c1", "q2").restore("c1", "q2", "fallback_recompute")
    r0.add("claim_reused", "c1", "q2", generation=0, holds=True).finish("q2")
    # the reuse after a recompute is refused by the automaton too
    p = only(judge(tmp_path, r0), ONE_OUTCOME, "F011", illegal=True)
    assert p.line == line_of(r0, "claim_restored")


def test_one_request_id_with_a_claim_on_two_replicas(tmp_path: Path) -> None:
    r0, r1 = healthy()
    r1.rejected("c1", "q3")  # q3 already carried c1 on r0
    j = judge(tmp_path, r0, r1)
    only(j, ONE_OUTCOME, "F012")
    assert sorted(p.path or "" for p in j.problems if p.code == "F012") == sorted(
        s.path for s in j.streams)
    assert [r.passed for r in j.requests if r.request_id == "q3"] == [False, False]


def test_a_request_started_twice(tmp_path: Path) -> None:
    r0 = Replica("r0", Clock()).registered("c1", "q1").start("q1", "c1")
    p = only(judge(tmp_path, r0), ONE_OUTCOME, "F013", illegal=True)
    assert p.line == line_of(r0, "request_started", 1)


def test_a_decision_for_a_request_without_claim_ref(tmp_path: Path) -> None:
    r0 = Replica("r0", Clock()).registered("c1", "q1")
    r0.start("q2").reuse("c1", "q2").finish("q2")  # the intake did not record claim_ref
    p = only(judge(tmp_path, r0), ONE_OUTCOME, "F014")
    assert p.line == line_of(r0, "claim_reused")


def test_claim_ref_without_request_id(tmp_path: Path) -> None:
    r0 = Replica("r0", Clock()).registered("c1", "q1")
    r0.add("request_started", None, None, owner_scope="tenant:a", claim_ref="c1")
    only(judge(tmp_path, r0), ONE_OUTCOME, "F015")


def test_a_fleet_without_claim_carrying_requests_shows_nothing(tmp_path: Path) -> None:
    r0 = Replica("r0", Clock()).start("q1").finish("q1")
    j = judge(tmp_path, r0)
    p = only(j, ONE_OUTCOME, "F016")
    assert p.path is None and j.requests == []


# ------------------------------------------------------------------------ no_cross_tenant


def test_reuse_by_another_tenant_on_the_home_replica(tmp_path: Path) -> None:
    r0 = Replica("r0", Clock()).registered("c1", "q1").reused("c1", "q2", owner="tenant:b")
    j = judge(tmp_path, r0)
    p = only(j, NO_CROSS_TENANT, "F017", illegal=True)
    assert p.line == line_of(r0, "claim_restored") and "tenant:b" in p.message
    assert len([x for x in j.problems if x.code == "F017"]) == 1  # one per request and claim


def test_restore_by_another_tenant_on_another_replica(tmp_path: Path) -> None:
    clock = Clock()
    r0 = Replica("r0", clock).registered("c1", "q1")
    r1 = Replica("r1", clock).reused("c1", "q2", owner="tenant:b")
    p = only(judge(tmp_path, r0, r1), NO_CROSS_TENANT, "F017", illegal=True)
    assert p.path is not None and p.path.endswith("r1-1.jsonl")


def test_restore_for_a_request_of_unknown_owner(tmp_path: Path) -> None:
    r0 = Replica("r0", Clock()).registered("c1", "q1").restore("c1", "q9")
    p = only(judge(tmp_path, r0), NO_CROSS_TENANT, "F017", illegal=True)
    assert "no request_started" in p.message


# ---------------------------------------------------------------------- legal_transitions


def test_an_illegal_step_in_one_replica_fails_the_fleet(tmp_path: Path) -> None:
    """A reuse with no restore cycle on an offloaded claim: one decision, so every other
    requirement holds; SPEC §4.2 refuses the step on that replica's stream."""
    r0, r1 = healthy()
    r0.registered("c3", "q6").start("q7", "c3")
    r0.add("claim_reused", "c3", "q7", generation=0, holds=True).finish("q7")
    j = judge(tmp_path, r0, r1)
    p = only(j, LEGAL, "F018")
    reuse = line_of(r0, "claim_reused", claim_id="c3")
    assert (p.replica, p.claim_id, p.line) == ("r0", "c3", reuse)
    assert p.path is not None and p.path.endswith("r0-0.jsonl")
    assert p.illegal is not None
    assert (p.illegal.seq, p.illegal.event, p.illegal.state, p.illegal.violation) == (
        reuse - 1, "claim_reused", "offloaded", "reuse_before_restore")
    assert p.illegal.why and p.illegal.why in p.message and "replica 'r0'" in p.message
    assert all(r.passed for r in j.requests)  # the fleet's own requirements still hold


def test_a_claim_rejected_twice_by_one_replica_is_decided_twice(tmp_path: Path) -> None:
    r0, r1 = healthy()
    r1.rejected("c9", "q6")  # r1 rejected c9 (q4) before: naming it again decides it twice
    p = only(judge(tmp_path, r0, r1), LEGAL, "F018")
    assert p.illegal is not None and p.illegal.violation == "decided_twice"
    assert (p.replica, p.claim_id, p.line) == ("r1", "c9", line_of(r1, "claim_rejected", 1))


def test_a_later_rejection_where_the_claim_was_rejected_may_name_none(tmp_path: Path) -> None:
    r0, r1 = healthy()
    r1.start("q6", "c9").unnamed("c9", "q6").finish("q6")
    j = judge(tmp_path, r0, r1)
    assert j.passed, [p.render() for p in j.problems]
    assert {r.request_id: r.decision for r in j.requests}["q6"] == "rejected"


def test_an_unfinished_failure_chain_is_located_at_its_first_event(tmp_path: Path) -> None:
    r0 = Replica("r0", Clock()).registered("c1", "q1").start("q2", "c1").required("c1", "q2")
    r0.restore_failed("c1", "q2").refused("c1", "q2")  # the stream ends before q2 finishes
    j = judge(tmp_path, r0)
    assert j.missing == sorted([LEGAL, ONE_OUTCOME])
    (p,) = [p for p in j.problems if p.code == "F018"]
    assert p.illegal is not None and p.illegal.violation == "failure_never_finished"
    assert p.line == line_of(r0, "claim_restore_failed")


def test_each_replica_is_judged_on_its_own_stream(tmp_path: Path) -> None:
    """Legal on its home, c1 is illegal on r1, where it was never accepted; one problem per
    stream and claim."""
    clock = Clock()
    r0, r1 = Replica("r0", clock).registered("c1", "q1"), Replica("r1", clock)
    r1.start("q2", "c1").reuse("c1", "q2").finish("q2")
    j = judge(tmp_path, r0, r1)
    assert j.missing == [LEGAL]
    (p,) = j.problems
    assert p.illegal is not None
    assert (p.replica, p.illegal.state, p.illegal.violation) == (
        "r1", "start", "before_acceptance")


# -------------------------------------------------------------------- claims: held / lost


def test_a_claim_lost_between_replicas_is_recorded_as_harm(tmp_path: Path) -> None:
    clock = Clock()
    r0, r1 = Replica("r0", clock), Replica("r1", clock)
    r0.registered("c1", "q1")
    r1.rejected("c1", "q2")  # after r0's last event: the router came back, r0 was gone
    j = judge(tmp_path, r0, r1)
    assert j.passed  # a finding, not a failure of the gate
    (claim,) = j.claims
    assert claim.status == "lost" and claim.lost_by is not None
    assert (claim.lost_by.replica, claim.lost_by.request_id) == ("r1", "q2")
    assert claim.lost_by_request == "q2" and claim.home == "r0"
    assert claim.lost_by.line == line_of(r1, "claim_rejected") and j.harm == [claim]


def test_a_rejection_before_the_home_stream_ends_is_no_loss(tmp_path: Path) -> None:
    clock = Clock()
    r0, r1 = Replica("r0", clock), Replica("r1", clock)
    r0.registered("c1", "q1")
    r1.rejected("c1", "q2")
    r0.start("q3").finish("q3")  # r0 still running after the rejection
    assert judge(tmp_path, r0, r1).claims[0].status == "held"


def test_an_ended_claim_is_not_lost(tmp_path: Path) -> None:
    clock = Clock()
    r0, r1 = Replica("r0", clock), Replica("r1", clock)
    r0.registered("c1", "q1").release("c1")
    r1.rejected("c1", "q2")
    assert judge(tmp_path, r0, r1).claims[0].status == "ended"


def test_a_rejection_at_the_same_instant_is_not_after(tmp_path: Path) -> None:
    clock = Clock()
    r0, r1 = Replica("r0", clock), Replica("r1", clock)
    r0.registered("c1", "q1")
    r1.start("q2", "c1").reject("c1", "q2").finish("q2")
    r1.events[-2]["ts_ns"] = r0.events[-1]["ts_ns"]
    assert judge(tmp_path, r0, r1).claims[0].status == "held"


# ---------------------------------------------------------------------- combined defects


def test_every_requirement_broken_at_once(tmp_path: Path) -> None:
    r0, r1 = healthy()
    r1.events[0]["replica"] = "r0"                     # replicas_identified
    r1.registered("c1", "q7")                           # claim_single_home
    r0.start("q8", "c1").finish("q8")                   # one_outcome: no decision
    r0.reused("c1", "q9", owner="tenant:b")             # no_cross_tenant, legal_transitions
    j = judge(tmp_path, r0, r1)
    assert j.missing == sorted([IDENTIFIED, SINGLE_HOME, ONE_OUTCOME, NO_CROSS_TENANT, LEGAL])
    assert {p.code for p in j.problems} == {"F004", "F005", "F006", "F017", "F018"}
    assert all(p.line is not None and p.col == 1 for p in j.problems)


def test_several_defects_of_one_request(tmp_path: Path) -> None:
    r0 = Replica("r0", Clock()).registered("c1", "q1").start("q2", "c1")
    r0.required("c1", "q2").restore("c1", "q2", "fallback_recompute").reject("c2", "q2")
    j = judge(tmp_path, r0)
    assert j.missing == [ONE_OUTCOME]
    assert sorted(p.code for p in j.problems) == ["F006", "F008", "F010", "F011"]


def test_problems_are_sorted_by_stream_then_line(tmp_path: Path) -> None:
    r0, r1 = healthy()
    r1.start("q8", "c2").finish("q8")
    r0.start("q9", "c1").finish("q9")
    j = judge(tmp_path, r0, r1)
    order = [(j.streams.index(next(s for s in j.streams if s.path == p.path)), p.line)
             for p in j.problems]
    assert order == sorted(order) and len(order) == 2


# ------------------------------------------------------------------ incarnations (SPEC §9.1)


def restarted_fleet(graceful: bool) -> tuple[Replica, Replica]:
    """r0 holds c1 when its engine stops; its next incarnation numbers requests afresh."""
    clock = Clock()
    r0, r1 = Replica("r0", clock, incarnation="a"), Replica("r1", clock)
    r0.registered("c1", "q1").reused("c1", "q2")
    r1.registered("c2", "q3", "tenant:b")
    r0.restart("b", ["c1"], graceful=graceful)
    # ids of the first stream recur; c1, decided there, is answered with no second decision
    r0.registered("c3", "q1").start("q2", "c1").unnamed("c1", "q2").finish("q2")
    return r0, r1


@pytest.mark.parametrize("graceful", [False, True])
def test_a_replica_restarted_on_its_sink_passes(tmp_path: Path, graceful: bool) -> None:
    j = judge(tmp_path, *restarted_fleet(graceful))
    assert j.passed, [p.render() for p in j.problems]
    assert [(r.request_id, r.decision) for r in j.requests if r.path.endswith("r0-0.jsonl")] == [
        ("q1", "accepted"), ("q2", "reused"), ("q1", "accepted"), ("q2", "rejected")]
    assert {c.claim_id: c.status for c in j.claims}["c1"] == "ended"


def test_a_claimed_request_its_engine_death_cut_off_need_not_finish(tmp_path: Path) -> None:
    clock = Clock()
    r0 = Replica("r0", clock, incarnation="a").registered("c1", "q1")
    r0.start("q2", "c1").reuse("c1", "q2")  # in flight when the engine dies
    r0.restart("b", ["c1"], graceful=False)
    j = judge(tmp_path, r0)
    assert j.passed, [p.render() for p in j.problems]
    r0.events = r0.events[:-2]  # the same request, and a graceful stop that never finished it
    r0.restart("b", ["c1"], graceful=True)
    assert "F010" in {p.code for p in judge(tmp_path, r0).problems}


@pytest.mark.parametrize(("graceful", "event"), [(False, "stream_started"),
                                                  (True, "stream_closed")])
def test_a_claim_its_stopped_engine_did_not_end_vanished(tmp_path: Path, graceful: bool,
                                                         event: str) -> None:
    r0, r1 = restarted_fleet(graceful)
    r0.events = [e for e in r0.events if e["event"] != "claim_harmed"]
    p = only(judge(tmp_path, r0, r1), LEGAL, "F018")
    assert p.illegal is not None and (p.illegal.event, p.illegal.violation) == (event,
                                                                                "vanished")
    assert (p.replica, p.claim_id, p.line) == ("r0", "c1", line_of(r0, event, int(not graceful)))
