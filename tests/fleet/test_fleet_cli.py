"""``residentkv fleet check``: exit codes, located errors, JSON output, explain."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from fleetkit import healthy, write_fleet

from residentkv.codes import CODES
from residentkv.model.vocabulary import FLEET_GATE, FLEET_REQUIREMENTS

RunCli = Callable[..., tuple[int, str, str]]


def test_a_passing_fleet_exits_0(cli_run: RunCli, tmp_path: Path) -> None:
    rc, out, err = cli_run("fleet", "check", *map(str, write_fleet(tmp_path, *healthy())))
    assert rc == 0, out + err
    assert "fleet_outcome: pass (5/5 requirements met)" in out
    assert "boundary:" in out and "one clock" in out


def test_a_failing_fleet_exits_1_with_located_errors(cli_run: RunCli, tmp_path: Path) -> None:
    r0, r1 = healthy()
    r1.start("q8", "c2").finish("q8")
    paths = write_fleet(tmp_path, r0, r1)
    rc, out, _ = cli_run("fleet", "check", *map(str, paths))
    assert rc == 1
    line = len(r1.events) - 1
    assert f"{paths[1]}:{line}:1: error[F006 no_decision]: request 'q8'" in out
    assert "missing one_outcome_per_claimed_request: " in out
    assert "fleet_outcome: FAIL (4/5 requirements met)" in out


def test_json_output(cli_run: RunCli, tmp_path: Path) -> None:
    r0, r1 = healthy()
    r1.events[0]["replica"] = None
    rc, out, _ = cli_run("fleet", "check", "--format", "json",
                         *map(str, write_fleet(tmp_path, r0, r1)))
    doc = json.loads(out)
    assert rc == 1 and doc["schema"] == "residentkv.fleet-check/v1"
    assert doc["passed"] is False and doc["missing"] == ["replicas_identified"]
    assert doc["problems"][0]["code"] == "F003" and doc["problems"][0]["line"] == 1
    assert doc["requirements"] == ["replicas_identified", "claim_single_home",
                                   "one_outcome_per_claimed_request", "no_cross_tenant",
                                   "legal_transitions"]
    assert {r["request_id"] for r in doc["requests"]} == {"q1", "q2", "q3", "q4", "q5"}


def test_output_file(cli_run: RunCli, tmp_path: Path) -> None:
    report = tmp_path / "out" / "fleet.json"
    report.parent.mkdir()
    rc, out, _ = cli_run("fleet", "check", "--format", "json", "--output", str(report),
                         *map(str, write_fleet(tmp_path, *healthy())))
    assert rc == 0 and out == "" and json.loads(report.read_text())["passed"] is True


def test_an_unreadable_stream_exits_2_without_a_traceback(cli_run: RunCli,
                                                          tmp_path: Path) -> None:
    paths = write_fleet(tmp_path, *healthy())
    missing = tmp_path / "gone.jsonl"
    rc, out, err = cli_run("fleet", "check", str(paths[0]), str(missing))
    assert rc == 2 and "Traceback" not in out + err
    assert f"{missing}: error[T010 unreadable_trace]" in out


def test_an_empty_stream_exits_2(cli_run: RunCli, tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    rc, out, _ = cli_run("fleet", "check", str(empty))
    assert rc == 2 and "T009" in out


def test_binary_stream_is_located_not_a_crash(cli_run: RunCli, tmp_path: Path) -> None:
    paths = write_fleet(tmp_path, *healthy())
    paths[1].write_bytes(paths[1].read_bytes() + b"\xff\xfe\n")
    rc, out, err = cli_run("fleet", "check", *map(str, paths))
    assert rc == 1 and "Traceback" not in out + err
    assert f"{paths[1]}:{len(r1_lines(paths[1]))}:1: error[T008 not_text]" in out


def r1_lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def test_usage_errors_exit_2(cli_run: RunCli, tmp_path: Path) -> None:
    assert cli_run("fleet", "check")[0] == 2
    rc, _, err = cli_run("fleet", "check", "-")
    assert rc == 2 and "standard input" in err
    rc, _, err = cli_run("fleet", "check", "--format", "sarif", "x.jsonl")
    assert rc == 2


def test_explain_knows_every_fleet_code(cli_run: RunCli) -> None:
    fleet_codes = [c for c in CODES.values() if c.id.startswith("F")]
    assert len(fleet_codes) == 18
    for code in fleet_codes:
        rc, out, _ = cli_run("explain", code.id)
        assert rc == 0 and out.startswith(f"{code.id} {code.name} (finding code, phase fleet)")


@pytest.mark.parametrize("term", [*FLEET_REQUIREMENTS, FLEET_GATE])
def test_explain_knows_the_fleet_gate_and_its_requirement_ids(cli_run: RunCli,
                                                               term: str) -> None:
    rc, out, _ = cli_run("explain", term)
    assert rc == 0 and out.startswith(term), out
    rc, listing, _ = cli_run("explain", "--list")
    assert rc == 0 and f"  {term}\n" in listing
