"""The check and anchors commands through cli.main: output, exit codes, located errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from residentkv.codes import CODES

DATA = Path(__file__).resolve().parents[1] / "data" / "lowering"
SIX = str(DATA / "six_classes.yaml")
TOY = f"toyrt={DATA / 'tree'}"
TRUST = str(DATA / "trust" / "policy.yaml")
NEW_CODES = [c for c in CODES if c[0] in "DAO"]


def test_check_exit_0_when_every_row_matches(run_cli) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run_cli("check", SIX, "--trust", TRUST, "--source", TOY)
    assert code == 0
    assert "native_conformance" in out and "judges the evidence given" in out


@pytest.mark.parametrize("fmt", ["text", "md", "json", "sarif"])
def test_check_formats(run_cli, fmt: str) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run_cli("check", SIX, "--trust", TRUST, "--source", TOY, "--format", fmt)
    assert code == 0
    if fmt in ("json", "sarif"):
        json.loads(out)


def test_check_exit_1_on_expect_mismatch(run_cli) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run_cli("check", SIX)  # no source: the drifted row is now only cited
    assert code == 1
    assert "error[O010 expect_mismatch]" in out


def test_check_exit_2_on_unusable_input(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "d.yaml"
    bad.write_text("schema: residentkv.descriptor/v1\nrows:\n  - id: a\n    id: b\n")
    code, _, err = run_cli("check", str(bad))
    assert code == 2
    assert err.startswith(f"{bad}:4:5: error[D002 duplicate_key]")
    assert "help:" in err and "Traceback" not in err
    assert run_cli("check", str(tmp_path / "missing.yaml"))[0] == 2
    assert run_cli("check", SIX, "--source", "toyrt")[0] == 2
    assert run_cli("check", SIX, "--source", f"toyrt={tmp_path / 'nope'}")[0] == 2
    assert run_cli("check", SIX, "--bundles", str(tmp_path))[0] == 2


def test_check_examples_run_without_sources(run_cli) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run_cli("check", "--examples", "--format", "json")
    doc = json.loads(out)
    assert code == 0
    assert {r["class"] for r in doc["rows"]} == {"approximation_substrate", "rejected_mapping"}


def test_anchors_verify(run_cli, data_copy: Path) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run_cli("anchors", "verify", SIX, "--source", TOY)
    assert code == 1  # the drifted row's anchors
    assert "s_cfg source verified" in out and "s_old source drifted" in out
    assert "t_fb trace failed" in out


def test_anchors_make_prints_a_pasteable_anchor(run_cli) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run_cli("anchors", "make", "toyrt/cache.py:RetentionConfig", "--source", TOY,
                           "--version", "0.1", "--id", "s_cfg")
    assert code == 0
    assert out.startswith("s_cfg:\n  kind: source\n  package: toyrt\n  version: '0.1'")
    assert "sha256: 99e6fe3bbeb52ae10fd354ba7e68ed19f728f706d898381574987e9dd14ee17e" in out


@pytest.mark.parametrize("target", ["../x.py", "/etc/passwd:1-2", "toyrt/cache.py:Nope",
                                    "toyrt/gone.py"])
def test_anchors_make_refuses(run_cli, target: str) -> None:  # type: ignore[no-untyped-def]
    code, _, err = run_cli("anchors", "make", target, "--source", TOY)
    assert code == 2 and "error[" in err


@pytest.mark.parametrize("code", NEW_CODES)
def test_explain_covers_every_new_code(run_cli, code: str) -> None:  # type: ignore[no-untyped-def]
    rc, out, _ = run_cli("explain", code)
    assert rc == 0 and out.startswith(code)


def test_schema_descriptor_is_published(run_cli) -> None:  # type: ignore[no-untyped-def]
    import residentkv.commands.check  # noqa: F401  (registers the schema)

    rc, out, _ = run_cli("schema", "descriptor")
    assert rc == 0 and json.loads(out)["title"] == "residentkv.descriptor/v1"


def _site_packages() -> Path | None:
    import sysconfig

    site = Path(sysconfig.get_paths()["purelib"])
    return site if (site / "vllm" / "distributed" / "kv_events.py").is_file() else None


@pytest.mark.skipif(_site_packages() is None, reason="vllm is not installed in this environment")
def test_example_vllm_anchors_verify_against_the_installed_release(run_cli) -> None:  # type: ignore[no-untyped-def]
    from residentkv.lowering.check import example_paths

    vllm = next(p for p in example_paths() if "vllm" in Path(p).name)
    code, out, _ = run_cli("anchors", "verify", vllm, "--source", f"vllm={_site_packages()}")
    assert code == 0, out
    assert out.count(" verified: ") == 3


def test_a_lenient_user_bundle_is_refused(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # B3 by observation alone (no failure path) would make the observe-only row's B3
    # established: a bundle may only tighten, so the run cannot evaluate (exit 2), located
    from residentkv.lowering.bundles import shipped_bundle_dir

    text = shipped_bundle_dir().joinpath("offloadable.yaml").read_text(encoding="utf-8")
    lenient = text.replace("satisfied_by: [[lifecycle], [observation, failure_outcome]]",
                           "satisfied_by: [[lifecycle], [observation]]")
    assert lenient != text
    (tmp_path / "offloadable.yaml").write_text(lenient.replace("version: 1", "version: 9"))
    code, _, err = run_cli("check", SIX, "--trust", TRUST, "--source", TOY, "--bundles",
                           str(tmp_path), "--format", "json")
    assert code == 2
    assert f"{tmp_path / 'offloadable.yaml'}:19:3: error[O016 bundle_loosens_requirement]" in err
    assert "ordered_lifecycle: admits ['observation']" in err


def test_invalid_user_bundle_is_exit_2(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "x.yaml").write_text("schema: residentkv.bundle/v1\nmode: x\nversion: 1\n"
                                     "summary: s\noutcomes: [harm]\nobligations: {}\n")
    code, _, err = run_cli("check", SIX, "--bundles", str(tmp_path))
    assert code == 2
    assert "x.yaml:6:1: error[O002 bundle_empty]" in err
