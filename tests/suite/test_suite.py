"""The shipped suite: every case and every mutant, plus the suite's own failure modes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from residentkv.cli import main
from residentkv.suite.run import run_suite
from residentkv.suite.runner import run_case, shipped_suite


@pytest.fixture(scope="module")
def shipped() -> object:
    return run_suite(shipped_suite())


def test_every_case_and_mutant_passes(shipped: object) -> None:
    failures = [f"{c.id}: {m}" for c in shipped.cases for m in c.mismatches]  # type: ignore[attr-defined]
    survivors = [s for t in shipped.operators.values() for s in t.survivors]  # type: ignore[attr-defined]
    assert failures == [] and survivors == []
    assert shipped.passed  # type: ignore[attr-defined]


def test_suite_has_positive_controls(shipped: object) -> None:
    kinds = [c.case.kind for c in shipped.cases]  # type: ignore[attr-defined]
    assert kinds.count("positive") >= 5 and kinds.count("negative") >= 13


def test_every_case_has_a_readme() -> None:
    for folder in shipped_suite().iterdir():
        if folder.is_dir():
            assert (folder / "README.md").is_file(), folder.name


def copy_case(tmp_path: Path, name: str) -> Path:
    dst = tmp_path / "suite" / name
    shutil.copytree(shipped_suite() / name, dst)
    return dst


def test_a_wrong_expectation_fails_the_case(tmp_path: Path) -> None:
    case = copy_case(tmp_path, "post-hoc-naming")
    text = (case / "case.yaml").read_text().replace("observation: fail", "observation: pass")
    (case / "case.yaml").write_text(text)
    result = run_case(case)
    assert not result.passed
    assert any("expected pass, got fail" in m for m in result.mismatches)


def test_a_case_without_readme_fails(tmp_path: Path) -> None:
    case = copy_case(tmp_path, "empty-trace")
    (case / "README.md").unlink()
    assert not run_case(case).passed


@pytest.mark.parametrize("content", [None, "", "schema: residentkv.suite-case/v1\nid: [\n",
                                     "schema: residentkv.suite-case/v1\nid: x\nsurprise: 1\n"])
def test_empty_or_unparseable_case_folders_fail_the_suite(
    tmp_path: Path, content: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "suite"
    copy_case(tmp_path, "positive-success-path")
    bad = root / "broken-case"
    bad.mkdir()
    if content is not None:
        (bad / "case.yaml").write_text(content)
    result = run_suite(root)
    assert not result.passed
    assert [c.id for c in result.cases if not c.passed] == ["broken-case"]
    with pytest.raises(SystemExit) as info:
        main(["suite", str(root)])
    assert info.value.code == 1
    assert "FAIL broken-case" in capsys.readouterr().out


def test_an_empty_suite_is_not_a_pass(tmp_path: Path) -> None:
    (tmp_path / "suite").mkdir()
    assert not run_suite(tmp_path / "suite").passed


def test_suite_cli_prints_one_summary_line_per_category(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["suite", "--mutants", "50"])
    out = capsys.readouterr().out
    assert info.value.code == 0
    assert "suite cases (negative):" in out and "suite cases (positive):" in out
    assert "suite mutants drop_event: generated" in out
