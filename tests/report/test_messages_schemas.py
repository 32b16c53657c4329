"""Descriptor editor support ($schema key, modelines, did you mean, quote hints), event field
descriptions, and messages free of Python reprs."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest
from ruamel.yaml import YAML

from residentkv.commands.schema import published_schema, schema_id
from residentkv.lowering.check import example_paths
from residentkv.model.event_fields import FIELDS, PER_EVENT, describe
from residentkv.model.events import EVENT_ADAPTER

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "lowering"
SUITE = ROOT / "src" / "residentkv" / "data" / "suite"
RunCli = Callable[..., tuple[int, str, str]]
#: a Python list, dict or tuple repr inside a message
PY_REPR = re.compile(r"\[\[?'|\['|\{'|\('")


@pytest.fixture
def six(tmp_path: Path) -> Path:
    dest = tmp_path / "lowering"
    shutil.copytree(DATA, dest)
    return dest / "six_classes.yaml"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_schema_key_is_allowed_in_a_descriptor(cli_run: RunCli, six: Path) -> None:
    base = cli_run("check", str(six), "--format", "json")
    _edit(six, "schema: residentkv.descriptor/v1",
          f"$schema: {schema_id('descriptor')}\nschema: residentkv.descriptor/v1")
    rc, out, err = cli_run("check", str(six), "--format", "json")
    assert rc == base[0], err
    classes = [(r["id"], r["class"]) for r in json.loads(out)["rows"]]
    assert classes == [(r["id"], r["class"]) for r in json.loads(base[1])["rows"]]


def test_descriptor_schema_accepts_the_shipped_examples() -> None:
    import residentkv.commands.check  # noqa: F401  (registers the descriptor schema)

    validator = jsonschema.Draft202012Validator(published_schema("descriptor"))
    for path in example_paths():
        text = Path(path).read_text()
        first = text.splitlines()[0]
        assert first == f"# yaml-language-server: $schema={schema_id('descriptor')}"
        doc = json.loads(json.dumps(YAML(typ="safe").load(text)))
        validator.validate({"$schema": schema_id("descriptor"), **doc})


@pytest.mark.parametrize(("old", "new", "hint"), [
    ("evidence: [t_obs]}", "evidance: [t_obs]}", "did you mean evidence?"),
    ("expect: native_conformance", "expectt: native_conformance", "did you mean expect?"),
    ('version: "0.1"', "version: 0.1", 'quote it exactly as written, e.g. version: "0.1"'),
])
def test_descriptor_hints(cli_run: RunCli, six: Path, old: str, new: str, hint: str) -> None:
    _edit(six, old, new)
    rc, out, _ = cli_run("check", str(six))
    assert rc == 1
    assert "help: " in out and hint in out


def test_top_level_typo_gets_did_you_mean(cli_run: RunCli, six: Path) -> None:
    _edit(six, "rows:", "rws:")
    rc, _, err = cli_run("check", str(six))
    assert rc == 2 and "did you mean rows?" in err and "['" not in err


def test_every_event_field_has_a_description() -> None:
    schema = EVENT_ADAPTER.json_schema(by_alias=True)
    assert describe(schema) == []
    used = {name for d in schema["$defs"].values() for name in d.get("properties", {})}
    assert set(FIELDS) <= used
    assert all(field in used for _, field in PER_EVENT)


def test_published_event_schema_carries_the_descriptions(cli_run: RunCli) -> None:
    _, out, _ = cli_run("schema", "event")
    defs = json.loads(out)["$defs"]
    assert defs["ActiveRequestRefused"]["properties"]["feasibility"]["description"]
    assert "offload_tier" in defs["ClaimRestored"]["properties"]["source"]["description"]


def test_every_claim_field_has_a_description(cli_run: RunCli) -> None:
    _, out, _ = cli_run("schema", "claim")
    schema = json.loads(out)
    objects = [schema, *schema["$defs"].values()]
    props = {f"{o['title']}.{name}": p for o in objects for name, p in
             o.get("properties", {}).items()}
    assert "residentkv.claim/v1.cache_identity" in props and "CacheIdentity.block_size" in props
    assert [name for name, p in props.items() if not p.get("description")] == []
    assert "served-model-name" in props["CacheIdentity.model_id"]["description"]


def _suite_inputs() -> list[tuple[str, Path]]:
    out: list[tuple[str, Path]] = []
    for case in sorted(p for p in SUITE.iterdir() if p.is_dir() and not p.name.startswith("_")):
        out += [("check", y) for y in sorted(case.glob("*.yaml")) if y.name != "case.yaml"]
        out += [("trace", t) for t in sorted(case.rglob("*.jsonl"))]
    return out


def test_no_python_reprs_in_any_suite_message(cli_run: RunCli) -> None:
    inputs = _suite_inputs()
    assert len(inputs) > 40
    offenders = []
    for kind, path in inputs:
        args = ["check", str(path)] if kind == "check" else ["trace", "check", str(path)]
        _, out, err = cli_run(*args)
        offenders += [f"{path.parent.name}: {line}" for line in (out + err).splitlines()
                      if PY_REPR.search(line)]
    assert offenders == []
