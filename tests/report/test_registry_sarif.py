"""The reporter registry, --output, SARIF that code scanning can place, check --strict."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import click
import jsonschema
import pytest

from residentkv.cli import cli
from residentkv.model.automaton import Violation
from residentkv.model.vocabulary import GATE_NAMES
from residentkv.report.registry import formats
from residentkv.report.sarif import sarif_schema

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "lowering"
TRACES = ROOT / "src" / "residentkv" / "data" / "traces"
RunCli = Callable[..., tuple[int, str, str]]


def _commands(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    out: list[tuple[str, click.Command]] = []
    for name, cmd in sorted(group.commands.items()):
        if isinstance(cmd, click.Group):
            out += _commands(cmd, f"{prefix}{name} ")
        else:
            out.append((f"{prefix}{name}", cmd))
    return out


def test_every_command_with_a_format_takes_output() -> None:
    with_format = [(n, c) for n, c in _commands(cli)
                   if any(p.name == "fmt" for p in c.params)]
    assert {"check", "trace check", "audit", "bundles show", "suite"} <= {n for n, _ in
                                                                          with_format}
    for name, cmd in with_format:
        params = {p.name for p in cmd.params}
        assert "output" in params, f"{name} has --format but no --output"


def test_registry_holds_the_formats_of_each_kind() -> None:
    assert set(formats("check")) >= {"text", "json", "md", "sarif", "html"}
    assert set(formats("trace")) == {"text", "json", "md", "sarif"}
    assert formats("check")[0] == "text"


@pytest.mark.parametrize("fmt", ["text", "json", "md", "sarif", "html"])
def test_output_file_equals_stdout(cli_run: RunCli, tmp_path: Path, fmt: str) -> None:
    args = ["check", str(DATA / "six_classes.yaml"), f"--source=toyrt={DATA / 'tree'}",
            "--format", fmt, "--srcroot", str(ROOT)]
    rc1, out, _ = cli_run(*args)
    target = tmp_path / f"report.{fmt}"
    rc2, quiet, _ = cli_run(*args, "--output", str(target))
    assert rc1 == rc2 and quiet == ""
    assert target.read_text(encoding="utf-8") == out


def test_output_to_an_unwritable_place_is_a_usage_error(cli_run: RunCli, tmp_path: Path) -> None:
    rc, _, err = cli_run("check", str(DATA / "six_classes.yaml"), "--output",
                         str(tmp_path / "no" / "such" / "dir" / "r.json"), "--format", "json")
    assert rc == 2 and "--output" in err and "Traceback" not in err


def _sarif(cli_run: RunCli, *args: str) -> dict:  # type: ignore[type-arg]
    rc, out, err = cli_run(*args, "--format", "sarif", "--srcroot", str(ROOT))
    assert rc in (0, 1), err
    log = json.loads(out)
    jsonschema.Draft4Validator(sarif_schema()).validate(log)
    return log  # type: ignore[no-any-return]


def test_check_sarif_is_repo_relative_with_srcroot(cli_run: RunCli) -> None:
    log = _sarif(cli_run, "check", str(DATA / "six_classes.yaml"),
                 f"--source=toyrt={DATA / 'tree'}")
    run = log["runs"][0]
    assert run["automationDetails"]["id"] == "residentkv/check/"
    assert run["originalUriBaseIds"]["SRCROOT"]["uri"] == ROOT.as_uri() + "/"
    assert run["results"]
    for res in run["results"]:
        loc = res["locations"][0]["physicalLocation"]["artifactLocation"]
        assert loc == {"uri": "tests/data/lowering/six_classes.yaml", "uriBaseId": "SRCROOT"}
    for rule in run["tool"]["driver"]["rules"]:
        assert rule["help"]["text"] and f"explain {rule['id']}" in rule["help"]["markdown"]


def test_sarif_path_outside_srcroot_stays_absolute(cli_run: RunCli, tmp_path: Path) -> None:
    desc = tmp_path / "d.yaml"
    shutil.copyfile(DATA / "six_classes.yaml", desc)
    log = _sarif(cli_run, "check", str(desc))
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for r in log["runs"][0]["results"]}
    assert uris == {desc.resolve().as_uri()}


def _seq_at(path: Path, line: int) -> int:
    return int(json.loads(path.read_text().splitlines()[line - 1])["seq"])


@pytest.mark.parametrize("name", ["success_path.jsonl", "claimed_load_failure.jsonl",
                                  "two_claim_attribution.jsonl"])
def test_trace_sarif_points_at_the_deciding_event(cli_run: RunCli, name: str) -> None:
    log = _sarif(cli_run, "trace", "check", str(TRACES / name))
    run = log["runs"][0]
    assert run["automationDetails"]["id"] == "residentkv/trace-check/"
    assert {r["kind"] for r in run["results"]} <= {"pass", "fail"}
    assert any(r["kind"] == "fail" for r in run["results"])  # every canonical trace fails some gate
    for res in run["results"]:
        phys = res["locations"][0]["physicalLocation"]
        assert phys["artifactLocation"] == {"uri": f"src/residentkv/data/traces/{name}",
                                            "uriBaseId": "SRCROOT"}
        line = phys["region"]["startLine"]
        assert _seq_at(TRACES / name, line) == res["properties"]["deciding_seq"]
        assert res["level"] == ("none" if res["kind"] == "pass" else "error")


def test_trace_sarif_reader_problems_are_located(cli_run: RunCli, tmp_path: Path) -> None:
    bad = tmp_path / "t.jsonl"
    lines = (TRACES / "success_path.jsonl").read_text().splitlines()
    bad.write_text("\n".join([*lines[:3], "{not json", *lines[3:]]) + "\n")
    log = _sarif(cli_run, "trace", "check", str(bad))
    t001 = [r for r in log["runs"][0]["results"] if r["ruleId"] == "T001"]
    assert t001 and t001[0]["locations"][0]["physicalLocation"]["region"]["startLine"] == 4


def test_trace_sarif_places_an_illegal_step_at_its_line(cli_run: RunCli, tmp_path: Path) -> None:
    """An illegal step (SPEC §4.2) is located at the trace line of the offending event, not at
    a line computed from its seq: seqs here start at 100 and step by 7, and an invalid line and
    a blank line come before the offending one."""
    events = [json.loads(x) for x in (TRACES / "success_path.jsonl").read_text().splitlines()]
    early = dict(events[2])  # claim_materialized of c-1, moved before its claim_accepted
    assert early["event"] == "claim_materialized" and events[1]["event"] == "claim_accepted"
    lines = ["{not json"]
    for i, e in enumerate([events[0], early, *events[1:]]):
        lines.append(json.dumps({**e, "seq": 100 + 7 * i}))
        if i == 0:
            lines.append("")
    trace = tmp_path / "illegal.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    offending_line = 4  # 1: invalid, 2: request_started, 3: blank, 4: the early event
    assert json.loads(lines[offending_line - 1])["seq"] == 107
    gate_results = [r for r in _sarif(cli_run, "trace", "check", str(trace))["runs"][0]["results"]
                    if r["ruleId"] in GATE_NAMES]
    assert len(gate_results) == len(GATE_NAMES)
    for res in gate_results:
        illegal = res["properties"]["illegal"]
        assert illegal is not None and illegal["seq"] == 107, res
        assert illegal["violation"] == Violation.BEFORE_ACCEPTANCE.value
        assert res["properties"]["deciding_seq"] == 107
        region = res["locations"][0]["physicalLocation"]["region"]
        assert region["startLine"] == offending_line


def test_unknown_claim_is_one_error_listing_the_claims(cli_run: RunCli) -> None:
    rc, out, err = cli_run("trace", "check", str(TRACES / "two_claim_attribution.jsonl"),
                           "--claim", "c-404")
    assert rc == 1 and out == ""
    assert err.count("error[") == 1 and "T011" in err
    assert "trace_well_formed" not in err
    claims = {json.loads(x)["claim_id"] for x in
              (TRACES / "two_claim_attribution.jsonl").read_text().splitlines()} - {None}
    assert all(c in err for c in claims)


def test_check_summary_says_what_was_verified(cli_run: RunCli) -> None:
    rc, out, _ = cli_run("check", "--examples")
    assert rc == 0
    assert "anchors: 0 verified, 7 only cited" in out and "cited anchors never grant" in out
    rc, out, _ = cli_run("check", "--examples", "--format", "json")
    assert json.loads(out)["evidence"] == {"anchors": 7, "verified": 0, "cited": 7,
                                           "unusable": 0}


def test_strict_fails_what_default_passes(cli_run: RunCli) -> None:
    assert cli_run("check", "--examples")[0] == 0
    rc, out, _ = cli_run("check", "--examples", "--strict")
    assert rc == 1 and "only cited in a granting row" in out
    rc, out, _ = cli_run("check", "--examples", "--strict", "--format", "json")
    doc = json.loads(out)
    assert rc == 1 and doc["exit_code"] == 1 and doc["strict"]["shortfalls"]


def test_strict_shortfalls_reach_stderr_whatever_the_format_and_output(
        cli_run: RunCli, tmp_path: Path) -> None:
    report = tmp_path / "check.sarif"
    rc, out, err = cli_run("check", "--examples", "--strict", "--format", "sarif", "--output",
                           str(report))
    shortfalls = [line for line in err.splitlines() if line.startswith("strict: ")]
    assert rc == 1 and out == "" and report.is_file()
    assert shortfalls[0].startswith("strict: ") and "shortfall(s), exit 1" in shortfalls[0]
    assert any("only cited in a granting row" in line for line in shortfalls[1:])
    assert cli_run("check", "--examples", "--format", "sarif", "--output", str(report))[2] == ""


def test_strict_fails_on_drift(cli_run: RunCli) -> None:
    rc, out, _ = cli_run("check", str(DATA / "six_classes.yaml"),
                         f"--source=toyrt={DATA / 'tree'}", "--strict")
    assert rc == 1
    assert "toy/drifted/soft_priority: anchor s_old drifted" in out


def test_strict_passes_a_clean_verified_row(cli_run: RunCli, tmp_path: Path) -> None:
    # keep the two granted rows of the six-class file: nothing cited, nothing drifted (the
    # native row's source anchors are what make the traces' toyrt release a verified source)
    from ruamel.yaml import YAML

    yaml = YAML()
    doc = yaml.load((DATA / "six_classes.yaml").read_text())
    doc["rows"] = [r for r in doc["rows"]
                   if r["expect"] in ("adapter_policy_evidence", "native_conformance")]
    out_dir = tmp_path / "lowering"
    shutil.copytree(DATA, out_dir)
    target = out_dir / "one.yaml"
    with target.open("w") as fh:
        yaml.dump(doc, fh)
    rc, out, _ = cli_run("check", str(target), f"--source=toyrt={out_dir / 'tree'}", "--strict",
                         "--trust", str(out_dir / "trust" / "policy.yaml"))
    assert rc == 0, out
    assert "strict: no drift" in out


def test_bare_word_mode_is_a_warning_that_strict_refuses(cli_run: RunCli) -> None:
    case = ROOT / "src" / "residentkv" / "data" / "suite" / "mode-names-a-protection-mode"
    rc, out, _ = cli_run("check", str(case / "descriptor.yaml"))
    assert rc == 0 and "warning[D013 mode_not_described]" in out and "lowers" in out
    rc, out, _ = cli_run("check", str(case / "descriptor.yaml"), "--strict")
    assert rc == 1 and "strict: pinned/substrate: warning D013" in out


def test_unknown_lowers_mode_is_rejected(cli_run: RunCli, tmp_path: Path) -> None:
    desc = tmp_path / "d.yaml"
    text = (DATA / "six_classes.yaml").read_text()
    desc.write_text(text.replace("lowers: offloadable", "lowers: pinned", 1))
    rc, out, _ = cli_run("check", str(desc), "--format", "json")
    row = json.loads(out)["rows"][0]
    assert rc == 1 and row["class"] == "unknown_evidence"
    assert "D011" in {f["code"] for f in row["findings"]}


def test_terminal_tables_keep_row_ids_whole() -> None:
    from residentkv.lowering.check import run_check
    from residentkv.report.json_report import to_json
    from residentkv.report.matrix import render_text

    doc = to_json(run_check([DATA / "six_classes.yaml"]))
    for width in (100, 160):
        table = "\n".join(x for x in render_text(doc, width=width).splitlines() if "│" in x)
        for row in doc["rows"]:
            assert row["id"] in table, f"{row['id']} broken at width {width}"


def test_failed_results_come_with_their_first_cause_and_every_reason(cli_run: RunCli) -> None:
    from residentkv.trace.semantics import why_missing

    trace = str(TRACES / "claimed_load_failure.jsonl")
    _, out, _ = cli_run("trace", "check", trace, "--format", "json")
    failed = [r for t in json.loads(out)["traces"] for r in t["results"] if not r["passed"]]
    assert failed
    for r in failed:
        assert r["why"] == {req: why_missing(req) for req in r["missing"]}
        assert all(r["why"].values())
    _, text, _ = cli_run("trace", "check", trace)
    _, md, _ = cli_run("trace", "check", trace, "--format", "md")
    log = _sarif(cli_run, "trace", "check", trace)
    messages = " ".join(res["message"]["text"] for res in log["runs"][0]["results"])
    for r in failed:  # every format says the first cause; the JSON keeps every reason
        line = f"{r['claim_id']} {r['gate']} failed: {r['because']}"
        assert r["because"] and line in text and line in md
        assert f"{r['because']} (unmet: {', '.join(r['missing'])})" in messages


def test_explain_a_requirement_gives_its_reason(cli_run: RunCli) -> None:
    from residentkv.trace.semantics import why_missing

    _, out, _ = cli_run("explain", "refusal_attributed")
    assert f"when missing: {why_missing('refusal_attributed')}" in out


def test_trace_sarif_from_standard_input_has_no_file_location(
        cli_run: RunCli, monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import sys

    read_fd, write_fd = os.pipe()
    os.write(write_fd, (TRACES / "success_path.jsonl").read_bytes())
    os.close(write_fd)
    with os.fdopen(read_fd, "r") as pipe:
        monkeypatch.setattr(sys, "stdin", pipe)
        log = _sarif(cli_run, "trace", "check", "-")
    results = log["runs"][0]["results"]
    assert results and all(r.get("locations", []) == [] for r in results)
