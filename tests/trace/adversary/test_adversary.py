"""Adversarial traces written from SPEC §2–§4 alone, judged through ``residentkv trace check``.

Each case in ``expectations.yaml`` is one test (its id is the case name). The trace is checked
with the public CLI (``--format json``, every gate, every claim; a claim the report does not list
is checked again with ``--claim``) and every gate's verdict for every claim the case names is
compared with the manifest, together with the negative controls that must fire and, where the
case says so, whether the trace has problems.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from residentkv.cli import main as cli_main

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "expectations.yaml"
GATES = ("observation", "failure_outcome", "lifecycle", "attribution")


def _cases() -> list[dict[str, Any]]:
    data = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    cases: list[dict[str, Any]] = data["cases"]
    return cases


CASES = _cases()


@dataclass(frozen=True)
class Run:
    """One ``trace check`` run: exit code and the parsed JSON report (None when unparsable)."""

    code: int
    report: dict[str, Any] | None


def _check(path: Path, tmp: Path, claim: str | None = None) -> Run:
    out = tmp / f"report-{claim or 'all'}.json"
    args = ["trace", "check", str(path), "--format", "json", "--output", str(out)]
    if claim is not None:
        args += ["--claim", claim]
    with pytest.raises(SystemExit) as stop:
        cli_main(args)
    code = stop.value.code if isinstance(stop.value.code, int) else 0
    try:
        report = json.loads(out.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        report = None
    return Run(code, report)


def _results(run: Run) -> tuple[dict[tuple[str, str], dict[str, Any]], int | None]:
    if run.report is None:
        return {}, None
    found: dict[tuple[str, str], dict[str, Any]] = {}
    problems = 0
    for trace in run.report.get("traces", []):
        problems += int(trace.get("problem_count", 0))
        for r in trace.get("results", []):
            found[(str(r["claim_id"]), str(r["gate"]))] = r
    return found, problems


def judge(path: Path, case: dict[str, Any], tmp: Path) -> tuple[dict[tuple[str, str], Any],
                                                               int | None, dict[str, int]]:
    """Every (claim, gate) result the CLI reports for the claims the case names, the number of
    reader problems, and per claim the exit code of the run that judged it."""
    first = _check(path, tmp)
    found, problems = _results(first)
    codes = {"": first.code}
    for claim in case["expect"]:
        codes[claim] = first.code
        if claim in case.get("claim_arg", []) or any((claim, g) not in found for g in GATES):
            run = _check(path, tmp, claim)
            codes[claim] = run.code
            more, p2 = _results(run)
            found.update({k: v for k, v in more.items() if k[0] == claim})
            if problems is None:
                problems = p2
    return found, problems, codes


def mismatches(case: dict[str, Any], found: dict[tuple[str, str], Any],
               problems: int | None, codes: dict[str, int]) -> list[str]:
    """What the CLI said that the manifest does not expect (empty when they agree)."""
    bad: list[str] = []
    if 101 in codes.values():
        bad.append(f"internal error (exit 101) on {case['file']}")
    if "problems" in case:
        if problems is None:
            bad.append("no report: cannot tell whether the trace has problems")
        elif bool(problems) != case["problems"]:
            bad.append(f"problems: expected {case['problems']}, got {problems} problem(s)")
    for claim, per in case["expect"].items():
        for gate in GATES:
            want = per[gate]
            got = found.get((claim, gate))
            if want == "pass":
                if got is None or got.get("passed") is not True:
                    detail = "no result" if got is None else f"missing={got.get('missing')}"
                    bad.append(f"{claim}/{gate}: expected pass, got fail ({detail})")
                continue
            if got is not None and got.get("passed") is not False:
                bad.append(f"{claim}/{gate}: expected fail, got pass")
                continue
            if got is None and codes[claim] == 0:
                bad.append(f"{claim}/{gate}: expected fail, no result and exit 0")
            need = case.get("controls", {}).get(claim, {}).get(gate, [])
            fired = {k for k, v in (got or {}).get("controls", {}).items() if v}
            lacking = sorted(set(need) - fired)
            if lacking:
                bad.append(f"{claim}/{gate}: controls {lacking} did not fire "
                           f"(fired: {sorted(fired)})")
    return bad


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_case(case: dict[str, Any], tmp_path: Path) -> None:
    found, problems, codes = judge(HERE / case["file"], case, tmp_path)
    bad = mismatches(case, found, problems, codes)
    reading = f" [ambiguous in SPEC, fail-closed reading: {case['ambiguous']}]" if (
        "ambiguous" in case) else ""
    assert not bad, f"{case['name']} ({case['class']}): " + "; ".join(bad) + reading


def test_corpus_in_sync_with_builder() -> None:
    """The committed traces and manifest are exactly what build_cases.py writes."""
    spec = importlib.util.spec_from_file_location("adversary_build_cases",
                                                  HERE / "build_cases.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    files: dict[str, str] = module.build(HERE)
    on_disk = {f"traces/{p.name}" for p in (HERE / "traces").glob("*.jsonl")}
    assert on_disk == {k for k in files if k.startswith("traces/")}
    for rel, text in files.items():
        assert (HERE / rel).read_bytes() == text.encode("utf-8"), rel


def test_every_case_names_a_claim_and_quotes_spec() -> None:
    for case in CASES:
        assert case["expect"], case["name"]
        assert "§" in case["spec"], case["name"]
