"""Descriptor v1: every validation error is a finding at path:line:col; schema export."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
from ruamel.yaml import YAML

from residentkv.lowering.descriptor import descriptor_json_schema, parse_descriptor
from residentkv.lowering.yamlio import DescriptorError

DATA = Path(__file__).resolve().parents[1] / "data" / "lowering"
MODES = {"soft_priority", "hard_protected", "demotable", "expiring", "offloadable"}

ROW = """\
schema: residentkv.descriptor/v1
rows:
  - id: r1
    runtime: {name: toyrt, version: "0.1"}
    mode: priority
    mechanism: native
    lowers: soft_priority
    asserts: substrate
    obligations:
      claim_identity:            {status: absent, evidence: [a1]}
      materialization_predicate: {status: absent, evidence: [a1]}
      ordered_lifecycle:         {status: unknown, evidence: []}
      claim_scoped_outcomes:     {status: absent, evidence: [a2]}
    anchors:
      a1: {kind: doc, url: "https://example.invalid", quote: "priority"}
      a2: {kind: source, package: toyrt, path: toyrt/NOTES.txt, lines: "4-6", quote: "evicted"}
    boundary: "test"
"""


def load(text: str) -> list[tuple[str, int | None, int | None]]:
    d = parse_descriptor(text, "d.yaml", MODES)
    return [(f.code, f.line, f.col) for r in d.rows for f in r.findings]


def test_valid_row_loads_without_findings() -> None:
    d = parse_descriptor(ROW, "d.yaml", MODES)
    assert d.rows[0].row is not None
    assert d.rows[0].findings == []
    assert d.rows[0].loc("anchors.a2") == (16, 7)


@pytest.mark.parametrize(("old", "new", "expected"), [
    ("evidence: [a2]}", "evidance: [a2]}", [("D005", 13, 7), ("D003", 13, 51),
                                            ("D007", 16, 7)]),
    ("mechanism: native", "mechanism: nativ", [("D004", 6, 5)]),
    ("    boundary: \"test\"\n", "", [("D005", 3, 5)]),
    ("evidence: [a2]}", "evidence: [a9]}", [("D006", 13, 62), ("D007", 16, 7)]),
    ("status: absent, evidence: [a2]}", "status: absent, evidence: []}",
     [("D007", 16, 7), ("D008", 13, 51)]),
    ("path: toyrt/NOTES.txt", "path: ../NOTES.txt", [("D009", 16, 42)]),
    ("lowers: soft_priority", "lowers: best_effort", [("D011", 7, 5)]),
    ("version: \"0.1\"", "version: 0.1", [("D004", 4, 28)]),
    ('lines: "4-6"', 'lines: "6-4"', [("D004", 16, 65)]),
    ('lines: "4-6", quote: "evicted"', 'lines: "4-6"', [("D004", 16, 7)]),
])
def test_row_errors_are_located(old: str, new: str, expected: list[tuple[str, int, int]]) -> None:
    text = ROW.replace(old, new, 1)
    assert text != ROW
    assert load(text) == expected


def test_invalid_row_keeps_raw_fields_and_is_not_a_model() -> None:
    d = parse_descriptor(ROW.replace("mechanism: native", "mechanism: nativ"), "d.yaml", MODES)
    assert d.rows[0].row is None
    assert d.rows[0].row_id == "r1"


def test_duplicate_key_is_an_unusable_file() -> None:
    with pytest.raises(DescriptorError) as exc:
        parse_descriptor(ROW.replace("    mode: priority\n", "    mode: a\n    mode: b\n"),
                         "d.yaml", MODES)
    assert (exc.value.code, exc.value.line, exc.value.col) == ("D002", 6, 5)
    assert str(exc.value).startswith("d.yaml:6:5: error[D002 duplicate_key]: found duplicate key")
    assert str(exc.value).splitlines()[-1].startswith("  help: ")


def test_duplicate_row_ids_are_flagged() -> None:
    rows = ROW.split("rows:\n")[1]
    assert [c for c, _, _ in load(ROW + rows)] == ["D010"]


@pytest.mark.parametrize(("text", "code"), [
    ("- just a list\n", "D001"),
    ("schema: residentkv.descriptor/v2\nrows: []\n", "D001"),
    ("schema: residentkv.descriptor/v1\nrows: []\n", "D012"),
    ("schema: residentkv.descriptor/v1\nrowz: []\n", "D003"),
    ("schema: [unclosed\n", "D001"),
])
def test_unusable_files_raise(text: str, code: str) -> None:
    with pytest.raises(DescriptorError) as exc:
        parse_descriptor(text, "d.yaml", MODES)
    assert exc.value.code == code
    assert exc.value.line is not None


def test_json_schema_accepts_test_and_example_descriptors() -> None:
    schema = descriptor_json_schema()
    json.dumps(schema)
    validator = jsonschema.Draft202012Validator(schema)
    examples = resources.files("residentkv").joinpath("data", "descriptors", "examples")
    files = [DATA / "six_classes.yaml", *(Path(str(p)) for p in examples.iterdir()
                                          if p.name.endswith(".yaml"))]
    for f in files:
        doc = json.loads(json.dumps(YAML(typ="safe").load(f.read_text())))
        validator.validate(doc)


def test_json_schema_rejects_unknown_fields() -> None:
    doc = YAML(typ="safe").load(ROW)
    doc["rows"][0]["surprise"] = 1
    errors = list(jsonschema.Draft202012Validator(descriptor_json_schema()).iter_errors(doc))
    assert errors


def test_alias_bomb_is_refused() -> None:
    lines = ["schema: residentkv.descriptor/v1", "rows:", "  - j0: &a0 [x, x, x, x, x, x, x, x]"]
    lines += [f"    j{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 8) + "]" for i in range(1, 9)]
    with pytest.raises(DescriptorError) as exc:
        parse_descriptor("\n".join(lines) + "\n", "d.yaml", MODES)
    assert exc.value.code == "D001"
    assert "expands to more than" in exc.value.message


def test_aliases_may_share_an_anchor_between_rows() -> None:
    text = ROW.replace('a1: {kind: doc', 'a1: &shared {kind: doc')
    second = ROW.split("rows:\n")[1].replace("id: r1", "id: r2").replace(
        'a1: {kind: doc, url: "https://example.invalid", quote: "priority"}', "a1: *shared")
    d = parse_descriptor(text + second, "d.yaml", MODES)
    assert [r.findings for r in d.rows] == [[], []]
