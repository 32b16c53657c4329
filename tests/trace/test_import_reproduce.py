"""The artifact-dialect importer and the reproduction of the artifact's published table."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from residentkv.cli import main
from residentkv.trace.gates import check_events
from residentkv.trace.importers import import_artifact_trace
from residentkv.trace.reproduce import reproduce, succeeded, unexplained

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(os.environ.get("RESIDENTKV_FIXTURES")
                or ROOT.parent / "shared" / "fixtures" / "paper-traces")


@pytest.fixture(scope="module")
def fixtures() -> Path:
    if not FIXTURES.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"{FIXTURES} must be present in CI (a copy of shared/ beside the clone)")
        pytest.skip(f"research artifact fixtures not found at {FIXTURES}")
    return FIXTURES


def gates(path: Path) -> dict[str, tuple[bool, list[str]]]:
    result = import_artifact_trace(path)
    return {r.gate: (r.passed, r.missing)
            for r in check_events(result.events, ["observation", "failure_outcome"])}


def test_scheduler_boundary_trace_meets_the_chain_but_is_no_legal_run(fixtures: Path) -> None:
    """The failure chain is complete and in SPEC §4.3's order (the scheduler-boundary refusal
    before the finish, the connector's restore failure and repeated refusal after it: late
    records of the answered failure). The run is still illegal, and its first illegal step is
    not the order: the artifact records no materialization, so the claim is stored before it
    ever materialized (§4.2). Its finish has no status (the artifact records none), which
    cannot show the request was not served."""
    path = fixtures / "claimed_load_failure/scheduler-boundary-21-event/vllm_runtime_events.jsonl"
    got = gates(path)
    assert got["failure_outcome"] == (False, ["legal_transitions", "outcome_before_finish"])
    assert got["observation"][0] is False
    imported = import_artifact_trace(path)
    result = check_events(imported.events, ["failure_outcome"])[0]
    assert result.illegal is not None
    assert (result.illegal.event, result.illegal.violation) == ("kv_store_started",
                                                                "before_materialization")
    assert imported.origin[result.illegal.seq] == 2  # the artifact's own event_sequence


@pytest.mark.parametrize("run", ["rep-001", "rep-002", "early-19-event"])
def test_refusal_after_termination_fails_failure_outcome(fixtures: Path, run: str) -> None:
    got = gates(fixtures / f"claimed_load_failure/{run}/vllm_runtime_events.jsonl")
    # SPEC §4.3: no outcome answered the failure before the finish, so it stays open too
    assert got["failure_outcome"] == (
        False, ["legal_transitions", "no_open_failure", "outcome_before_finish",
                "refusal_attributed", "scheduler_failure_branch"])


def test_import_synthesizes_the_registration_and_the_missing_start(fixtures: Path) -> None:
    """SPEC §4.3 Importers: the registration the artifact's gates assume, and a request_started
    at the first event of the request the artifact records no start of; nothing else."""
    result = import_artifact_trace(fixtures / "success_path/rep-001/vllm_runtime_events.jsonl")
    report = result.report
    assert [(s["event"], s["seq"], s["event_sequence"]) for s in report.synthesized] == [
        ("request_started", 0, 0), ("claim_accepted", 1, 0)]
    first, second = result.events[:2]
    assert (first.event, second.event) == ("request_started", "claim_accepted")  # type: ignore[attr-defined]
    assert first.request_id == second.request_id and first.source == "residentkv.import"
    assert any("request_started synthesized" in a for a in report.assumptions)
    accepted = [e for e in result.events if e.event == "claim_accepted"]  # type: ignore[attr-defined]
    assert len(accepted) == 1 and accepted[0].registration == "pre_registered"  # type: ignore[attr-defined]
    # the source's order is kept and its numbers stay visible: seq = 2 * event_sequence + 1
    # (a synthesized start takes the even number before); dropped events leave gaps
    raw = [json.loads(line)["event_sequence"] for line in
           (fixtures / "success_path/rep-001/vllm_runtime_events.jsonl").open()]
    mapped = [e for e in result.events if e.source != "residentkv.import"]
    assert {result.origin[e.seq] for e in mapped} <= set(raw)
    assert all(e.seq == 2 * result.origin[e.seq] + 1 for e in mapped)
    assert report.events_in == len(raw)
    assert report.events_out - 1 + sum(report.dropped_counts.values()) == report.events_in
    assert "offload_worker_transfer_submitted" in report.dropped
    assert "hook_scope" in report.unmapped_fields["request_initialized"]


def test_fallback_outcome_type_is_dropped_and_reported(fixtures: Path) -> None:
    result = import_artifact_trace(fixtures / "fallback_recompute/rep-001/"
                                   "vllm_runtime_events.jsonl")
    assert "fallback_recompute_without_claim_satisfaction" in result.report.dropped[
        "resident_claim_restoration_failed"]


def test_reproduction_table(fixtures: Path) -> None:
    rows = reproduce(fixtures)
    assert succeeded(rows)
    by = {(r.scenario, (r.trace or "").split("/")[1] if r.trace else None, r.gate): r
          for r in rows}
    fo = "failure_outcome"
    # SPEC §4.2: no legal run; its first illegal step is the store before any materialization
    # (the artifact records none), not the order of its failure records (SPEC §4.3)
    boundary = by[("claimed_load_failure", "scheduler-boundary-21-event", fo)]
    assert (boundary.ours, boundary.published, boundary.cause) == (
        "fail", None, "before_materialization")
    assert boundary.explained and "kv_store_started at event_sequence 2" in boundary.reason
    assert "no published value" in boundary.reason
    for run in ("rep-001", "rep-002", "early-19-event"):
        row = by[("claimed_load_failure", run, fo)]
        assert (row.ours, row.published, row.agree, row.explained) == ("fail", "pass", False,
                                                                       True)
        assert row.cause == "before_materialization"
        assert "also missing: no_open_failure" in row.reason
    assert unexplained(rows) == []
    for scenario in ("unclaimed_load_failure", "generic_counter_only"):
        for gate in ("observation", fo):
            assert by[(scenario, "rep-001", gate)].ours == "fail"
    for gate in ("observation", fo):
        none = by[("success_no_event_path", None, gate)]
        assert none.ours == "fail" and none.reason.startswith("no evidence")
        assert by[("ordinary_offload_no_claim", "top-level", gate)].ours == "fail"
    assert by[("fallback_recompute", "rep-001", fo)].ours == "fail"
    assert by[("success_path", "rep-001", fo)].agree


def test_reproduce_cli_json(fixtures: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["trace", "reproduce", str(fixtures), "--format", "json"])
    assert info.value.code == 0
    data = json.loads(capsys.readouterr().out)
    assert {"scenario", "trace", "gate", "ours", "published", "agree", "reason"} <= set(
        data["rows"][0])
    assert all(r["ours"] in ("pass", "fail") for r in data["rows"])
    assert all(r["published"] in ("pass", "fail", None) for r in data["rows"])


def test_an_unexplained_disagreement_fails(tmp_path: Path) -> None:
    # a scenario whose published table says pass for a trace our gates fail for an
    # undocumented first cause: here the failed request finishes twice (not well formed)
    scen = tmp_path / "claimed_load_failure" / "rep-001"
    scen.mkdir(parents=True)
    src = FIXTURES / "claimed_load_failure/rep-001/vllm_runtime_events.jsonl"
    if not src.is_file():
        pytest.skip("fixtures absent")
    lines = src.read_text().splitlines()
    again = json.loads(next(line for line in lines
                            if "offload_request_finished_pending_jobs" in line))
    again["event_sequence"] = 1 + max(json.loads(line)["event_sequence"] for line in lines)
    lines.append(json.dumps(again))
    (scen / "vllm_runtime_events.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "repetitions-aggregate.json").write_text(
        (FIXTURES / "repetitions-aggregate.json").read_text())
    rows = reproduce(tmp_path)
    assert not succeeded(rows)
    # observation's published fail agrees; failure_outcome's pass has no documented first cause
    assert [(r.gate, r.cause) for r in unexplained(rows)] == [
        ("failure_outcome", "trace_well_formed")]


def test_import_cli_reports_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "a.jsonl"
    trace.write_text("\n".join(json.dumps(d) for d in [
        {"event": "generic_request_error_counter", "event_sequence": 1, "request_failures": 2,
         "timestamp_ns": 5, "run_id": "x"},
        {"event": "mystery_event", "event_sequence": 2},
        {"event_sequence": 3},
        "not json",
    ]) + "\n{bad\n")
    out = tmp_path / "v1.jsonl"
    with pytest.raises(SystemExit) as info:
        main(["trace", "import", "--dialect", "resident-kv-artifact", str(trace), "-o", str(out)])
    err = capsys.readouterr().err
    assert info.value.code == 1  # invalid foreign lines are reported and fail the import
    assert "dropped     mystery_event x1: no v1 event type corresponds to it" in err
    assert "unmapped fields of generic_request_error_counter: run_id" in err
    assert "a.jsonl:3: error[T004 missing_field]" in err
    assert "a.jsonl:4: error[T004 missing_field]" in err  # a JSON string, not an object
    assert "a.jsonl:5:2: error[T001 invalid_json]" in err
    (event,) = [json.loads(line) for line in out.read_text().splitlines()]
    # seq = 2 * event_sequence + 1: the source's number stays visible
    assert event["event"] == "generic_counter" and event["seq"] == 3


# --- hostile input: the importer is strict, reproduction is never vacuous --------------------

def _artifact(tmp_path: Path, *records: dict[str, object], raw: bytes = b"") -> Path:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records) + raw)
    return path


_CLAIM = {"resident_claim": True, "resident_claim_id": "c-1", "request_id": "r-1",
          "monotonic_ns": 1}


@pytest.mark.parametrize(("field", "value", "event"), [
    ("success", "false", "offload_worker_transfer_finished"),
    ("resident_claim", "false", "request_initialized"),
    ("blocking_claim_ids", "c-1", "scheduler_active_request_refused"),
    ("blocking_claim_ids", 7, "scheduler_active_request_refused"),
    ("block_count_footprint", "many", "resident_claim_offloaded"),
    ("outcome_type", {"kind": "refusal"}, "resident_claim_restoration_failed"),
    ("event_sequence", True, "request_initialized"),
    ("event_sequence", 10 ** 30, "request_initialized"),
])
def test_wrong_types_are_located_problems_never_coerced(
        tmp_path: Path, field: str, value: object, event: str) -> None:
    record = {**_CLAIM, "event": event, "event_sequence": 3, "transfer_type": ["CPU", "GPU"],
              "materialization_predicate": "leading_prefix_at_least(1)", field: value}
    result = import_artifact_trace(_artifact(tmp_path, record))
    problems = [p for p in result.report.problems if p.code == "T005" and p.line == 1]
    assert problems and field in problems[0].message
    assert result.events == []  # nothing is guessed from a value of the wrong type


def test_string_false_never_becomes_true(tmp_path: Path) -> None:
    record = {**_CLAIM, "event": "offload_worker_transfer_finished", "event_sequence": 1,
              "transfer_type": ["GPU", "CPU"], "success": "false", "job_id": 1}
    result = import_artifact_trace(_artifact(tmp_path, record))
    assert not any(getattr(e, "success", False) for e in result.events)


def test_huge_integers_and_nan_are_problems_never_written(tmp_path: Path) -> None:
    path = _artifact(tmp_path, raw=b'{"event": "generic_request_error_counter", '
                                   b'"event_sequence": 1, "request_failures": NaN}\n'
                                   b'{"event": "generic_request_error_counter", '
                                   b'"event_sequence": 2, "request_failures": '
                                   + b"9" * 5000 + b"}\n")
    out = tmp_path / "v1.jsonl"
    with pytest.raises(SystemExit) as info:
        main(["trace", "import", "--dialect", "resident-kv-artifact", str(path), "-o", str(out)])
    assert info.value.code == 1
    assert "NaN" not in out.read_text() and out.read_text() == ""


def test_invalid_utf8_is_a_located_problem(tmp_path: Path) -> None:
    path = _artifact(tmp_path, raw=b'{"event": "x\xff", "event_sequence": 1}\n')
    result = import_artifact_trace(path)
    (problem,) = result.report.problems
    assert (problem.code, problem.line, problem.col) == ("T008", 1, 13)


def test_deep_json_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    path = _artifact(tmp_path, raw=b"[" * 100_000 + b"]" * 100_000 + b"\n")
    result = import_artifact_trace(path)
    assert result.report.problems[0].code == "T005"


@pytest.mark.parametrize("content", [b"", b"\n\n  \n"])
def test_importing_an_empty_file_exits_2(tmp_path: Path, content: bytes,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(content)
    with pytest.raises(SystemExit) as info:
        main(["trace", "import", "--dialect", "resident-kv-artifact", str(path)])
    assert info.value.code == 2 and "T009" in capsys.readouterr().err


def _one_scenario(tmp_path: Path, fixtures: Path, *, summary: dict[str, object] | None,
                  rate: tuple[int, int] | None) -> Path:
    run = tmp_path / "success_path" / "rep-001"
    run.mkdir(parents=True)
    trace = fixtures / "success_path/rep-001/vllm_runtime_events.jsonl"
    (run / "vllm_runtime_events.jsonl").write_bytes(trace.read_bytes())
    if summary is not None:
        (run / "summary.json").write_text(json.dumps(summary))
    if rate is not None:
        passed, total = rate
        agg = {"scenarios": {"success_path": {
            "observation_gate_pass_rate": {"passed": passed, "total": total},
            "failure_outcome_gate_pass_rate": {"passed": 0, "total": total}}}}
        (tmp_path / "repetitions-aggregate.json").write_text(json.dumps(agg))
    return tmp_path


def test_nothing_compared_is_not_a_reproduction(tmp_path: Path, fixtures: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    root = _one_scenario(tmp_path, fixtures, summary=None, rate=None)
    with pytest.raises(SystemExit) as info:
        main(["trace", "reproduce", str(root)])
    out = capsys.readouterr().out
    assert info.value.code == 1
    assert "nothing was compared" in out and "NOT reproduced" in out


def test_the_runs_own_summary_wins_over_the_aggregate(tmp_path: Path, fixtures: Path) -> None:
    summary = {"evaluation": {"gate_summary": {"observation_missing_requirements": ["x"],
                                               "failure_missing_requirements": ["y"]}}}
    root = _one_scenario(tmp_path, fixtures, summary=summary, rate=(30, 30))
    by = {r.gate: r for r in reproduce(root)}
    assert by["observation"].published == "fail"
    assert "the run's own summary.json" in by["observation"].reason


def test_a_mixed_rate_is_reported_as_mixed(tmp_path: Path, fixtures: Path) -> None:
    root = _one_scenario(tmp_path, fixtures, summary=None, rate=(29, 30))
    by = {r.gate: r for r in reproduce(root)}
    assert by["observation"].published == "mixed 29/30"
    assert "mixed" in by["observation"].reason
    assert by["failure_outcome"].published == "fail"


def test_a_disagreement_cites_only_the_request_of_its_cause(fixtures: Path) -> None:
    rows = reproduce(fixtures)
    row = next(r for r in rows if r.trace and "claimed_load_failure/rep-001" in r.trace
               and r.gate == "failure_outcome")
    # the first illegal step is the resident request's store: only its events are cited, with
    # the artifact's own sequence numbers (the reuse request's restore failure is not the cause)
    assert ("(request 0-beccdf56: no claim_materialized; kv_store_started at event_sequence 2)"
            in row.reason)
    assert "1-a375d083" not in row.reason


# --- no vacuous reproduction in any form ------------------------------------------------------

def _aggregate(root: Path, scenario: str, passed: int, total: int) -> None:
    rate = {"passed": passed, "total": total}
    (root / "repetitions-aggregate.json").write_text(json.dumps({"scenarios": {scenario: {
        "observation_gate_pass_rate": rate, "failure_outcome_gate_pass_rate": rate}}}))


def test_a_scenario_without_traces_against_a_published_fail_is_not_reproduced(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "success_no_event_path" / "rep-001").mkdir(parents=True)
    _aggregate(tmp_path, "success_no_event_path", 0, 1)
    rows = reproduce(tmp_path)
    assert {r.published for r in rows} == {"fail"} and not succeeded(rows)
    assert not any(r.agree for r in rows)
    with pytest.raises(SystemExit) as info:
        main(["trace", "reproduce", str(tmp_path)])
    assert info.value.code == 1 and "NOT reproduced" in capsys.readouterr().out


def _claimless_run(root: Path, published_missing: list[str]) -> None:
    run = root / "generic_counter_only" / "rep-001"
    run.mkdir(parents=True)
    (run / "vllm_runtime_events.jsonl").write_text(json.dumps(
        {"event": "generic_request_error_counter", "event_sequence": 1, "request_failures": 1,
         "timestamp_ns": 5}) + "\n")
    (run / "summary.json").write_text(json.dumps({"evaluation": {"gate_summary": {
        "observation_missing_requirements": published_missing,
        "failure_missing_requirements": published_missing}}}))


def test_a_claimless_trace_against_a_published_pass_is_unexplained(tmp_path: Path) -> None:
    _claimless_run(tmp_path, [])
    rows = reproduce(tmp_path)
    assert [(r.published, r.ours, r.agree, r.explained) for r in rows] == [
        ("pass", "fail", False, False)] * 2
    assert not succeeded(rows)


def test_only_claimless_traces_agreeing_with_a_published_fail_reproduce_nothing(
        tmp_path: Path) -> None:
    _claimless_run(tmp_path, ["x"])
    rows = reproduce(tmp_path)
    assert all(r.agree and not r.judged for r in rows)
    assert not succeeded(rows)


def test_import_out_into_a_missing_folder_is_a_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = _artifact(tmp_path, {"event": "generic_request_error_counter",
                                 "event_sequence": 1, "request_failures": 1})
    out = tmp_path / "missing" / "v1.jsonl"
    with pytest.raises(SystemExit) as info:
        main(["trace", "import", "--dialect", "resident-kv-artifact", str(trace), "-o",
              str(out)])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "missing" in err and "error[" in err
    assert not out.exists()


@pytest.mark.parametrize("raw", [
    b'{"event": "request_initialized", "event_sequence": 1, "resident_claim": true, '
    b'"resident_claim_id": "c-OTHER", "resident_claim_id": "c-1", "request_id": "r-1", '
    b'"materialization_predicate": "leading_prefix_at_least(4)"}\n',
    b'{"event": "generic_request_error_counter", "event_sequence": 1, "event_sequence": 2, '
    b'"request_failures": 1}\n',
    b'{"event": "x", "event_sequence": 1, "meta": {"a": 1, "a": 2}}\n',
])
def test_duplicate_keys_are_refused_never_last_wins(tmp_path: Path, raw: bytes,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = _artifact(tmp_path, raw=raw)
    result = import_artifact_trace(path)
    assert result.events == []
    assert [(p.code, p.line) for p in result.report.problems] == [("T020", 1)]
    with pytest.raises(SystemExit) as info:
        main(["trace", "import", "--dialect", "resident-kv-artifact", str(path)])
    out = capsys.readouterr()
    assert info.value.code == 1 and out.out == ""
    assert f"{path}:1: error[T020 duplicate_key]" in out.err


# --- a --claim no trace holds: the message says what is so ----------------------------------

WITNESS = ROOT / "tests" / "data" / "lowering" / "traces" / "witness.jsonl"


def _claim_error(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as info:
        main(["trace", "check", *args])
    err = capsys.readouterr().err
    assert info.value.code == 1
    return err


def test_a_claim_named_only_on_a_rejected_line_is_not_listed_as_present(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = WITNESS.read_text().splitlines()
    bad = [line.replace('"seq":', '"seq":"x",  "ignored":', 1) if '"c-1"' in line else line
           for line in lines]
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join(bad) + "\n")
    err = _claim_error(["--claim", "c-1", str(trace)], capsys)
    assert "claims with a valid claim event: (none)" in err
    present = err.split("claims with a valid claim event:")[1].split(";")[0]
    assert "c-1" not in present  # never "not found ... present: c-1"
    assert '"c-1" is named only on lines the reader rejected: line 3 (' in err


def test_a_claim_in_another_spelling_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    err = _claim_error(["--claim", "C-1 ", str(WITNESS)], capsys)
    assert 'claims with a valid claim event: "c-1"' in err and 'did you mean "c-1"?' in err


def test_reproduce_markdown_escapes_folder_names(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    scenario = tmp_path / "<img src=x>|[a](http:x)" / "rep-001"
    scenario.mkdir(parents=True)
    with pytest.raises(SystemExit):
        main(["trace", "reproduce", str(tmp_path), "--format", "md"])
    out = capsys.readouterr().out
    html = MarkdownIt("commonmark").enable("table").render(out)
    assert "<img" not in html and "<a " not in html and "&lt;img src=x&gt;" in html
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    assert {len(re.split(r"(?<!\\)\|", line)) for line in rows} == {9}  # 7 columns
