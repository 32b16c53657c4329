"""The CI example (docs/ci/github-actions.yml) run as a fresh clone would: its residentkv steps,
in a git work tree holding descriptors, give a SARIF log that validates and is repo-relative."""

from __future__ import annotations

import glob
import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from residentkv.cli import main
from residentkv.lowering.check import example_paths
from residentkv.report.sarif import main as validate_main

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / "docs" / "ci" / "github-actions.yml"


def _steps() -> list[dict[str, str]]:
    doc = YAML(typ="safe").load(WORKFLOW.read_text())
    return [s for s in doc["jobs"]["check"]["steps"] if "run" in s]


def _run_cli(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    return int(exc.value.code or 0)


def test_ci_example_produces_a_valid_placeable_sarif(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "clone"
    (repo / "descriptors").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for p in example_paths():
        shutil.copyfile(p, repo / "descriptors" / Path(p).name)
    monkeypatch.chdir(repo)
    steps = _steps()
    check = next(s["run"] for s in steps if s["run"].startswith("residentkv check"))
    argv = [x for a in shlex.split(check)[1:] for x in (sorted(glob.glob(a)) or [a])]
    rc = _run_cli(argv)
    assert rc == 1  # --strict: the examples' anchors are only cited without --source
    validate = next(s["run"] for s in steps if "residentkv.report.sarif" in s["run"])
    assert validate_main(shlex.split(validate)[3:]) == 0
    log = json.loads((repo / "residentkv.sarif").read_text())
    run = log["runs"][0]
    assert run["originalUriBaseIds"]["SRCROOT"]["uri"] == repo.resolve().as_uri() + "/"
    locs = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for r in run["results"]}
    assert locs == {f"descriptors/{Path(p).name}" for p in example_paths()}
    upload = next(s for s in _steps_all() if "upload-sarif" in s.get("uses", ""))
    assert upload["with"]["sarif_file"] == "residentkv.sarif"


def _steps_all() -> list[dict[str, object]]:
    doc = YAML(typ="safe").load(WORKFLOW.read_text())
    steps: list[dict[str, object]] = doc["jobs"]["check"]["steps"]
    return steps


def test_validator_rejects_a_broken_log(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sarif"
    bad.write_text(json.dumps({"version": "2.1.0", "runs": [{"results": []}]}))
    assert validate_main([str(bad)]) == 1
    assert validate_main([str(tmp_path / "missing.sarif")]) == 1
