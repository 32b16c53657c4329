"""Reports: canonical JSON, text matrix, Markdown and SARIF 2.1.0 (validated offline)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from residentkv import __version__
from residentkv.codes import CODES
from residentkv.jsontext import json_text as dumps
from residentkv.lowering.bundles import OBLIGATIONS
from residentkv.lowering.check import GLOBAL_BOUNDARY, CheckResult, run_check
from residentkv.report.json_report import to_json
from residentkv.report.markdown import md_text, render_markdown
from residentkv.report.matrix import render_text
from residentkv.report.sarif import render_sarif, sarif_schema

DATA = Path(__file__).resolve().parents[1] / "data" / "lowering"
ROW_KEYS = {"id", "runtime", "mode", "mechanism", "lowers", "asserts", "class", "expect",
            "obligations", "findings", "boundary", "reasons"}


@pytest.fixture(scope="module")
def result() -> CheckResult:
    return run_check([DATA / "six_classes.yaml"], [f"toyrt={DATA / 'tree'}"])


def test_json_has_the_canonical_shape(result: CheckResult) -> None:
    doc = to_json(result)
    assert doc["tool"] == {"name": "residentkv", "version": __version__}
    assert doc["boundary"] == GLOBAL_BOUNDARY
    kinds = {i["kind"] for i in doc["inputs"]}
    assert kinds == {"descriptor", "bundle", "trace", "source"}
    assert all(len(i["sha256"]) == 64 for i in doc["inputs"] if i["kind"] != "source")
    for row in doc["rows"]:
        assert set(row) >= ROW_KEYS
        assert set(row["obligations"]) == set(OBLIGATIONS)
        for ob in row["obligations"].values():
            assert {"asserted", "effective", "anchors"} <= set(ob)
            assert all(set(a) == {"id", "kind", "result"} for a in ob["anchors"])


def test_json_is_deterministic(result: CheckResult) -> None:
    again = run_check([DATA / "six_classes.yaml"], [f"toyrt={DATA / 'tree'}"])
    assert dumps(to_json(result)) == dumps(to_json(again))
    json.loads(dumps(to_json(result)))


def test_every_report_carries_every_boundary(result: CheckResult) -> None:
    doc = to_json(result)
    text, md = render_text(doc), render_markdown(doc)
    sarif = json.dumps(render_sarif(doc))
    for out in (text, md, sarif):
        assert GLOBAL_BOUNDARY in out
        for row in doc["rows"]:
            assert (json.dumps(row["boundary"])[1:-1] in out or row["boundary"] in out
                    or (out is md and md_text(row["boundary"]) in out))


def test_text_matrix_lists_rows_and_classes(result: CheckResult) -> None:
    text = render_text(to_json(result), width=250)
    assert "toy/retention/hard_protected" in text
    assert "rejected_mapping" in text and "satisfied ✓" in text


def test_markdown_table(result: CheckResult) -> None:
    md = render_markdown(to_json(result))
    assert "| row | mechanism | lowers | asserts | B1 | B2 | B3 | B4 | class | expect |" in md
    assert md.count("\n## ") == 6


def test_sarif_validates_against_the_2_1_0_schema(result: CheckResult) -> None:
    log = render_sarif(to_json(result))
    jsonschema.Draft4Validator(sarif_schema()).validate(log)
    run = log["runs"][0]
    rule_ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert rule_ids == sorted(set(rule_ids))
    assert {r["ruleId"] for r in run["results"]} == set(rule_ids)
    for res in run["results"]:
        assert rule_ids[res["ruleIndex"]] == res["ruleId"]
        loc = res["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"]["uri"].endswith("six_classes.yaml")
        assert loc["region"]["startLine"] >= 1


def test_sarif_of_invalid_rows_validates(data_copy: Path) -> None:
    path = data_copy / "six_classes.yaml"
    path.write_text(path.read_text().replace("mechanism: adapter\n", "mechanism: adaptr\n"))
    log = render_sarif(to_json(run_check([path])))
    jsonschema.Draft4Validator(sarif_schema()).validate(log)
    assert "D004" in {r["ruleId"] for r in log["runs"][0]["results"]}


def test_every_finding_code_is_registered(result: CheckResult) -> None:
    assert {f.code for r in result.rows for f in r.findings} <= set(CODES)
