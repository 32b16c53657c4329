"""Suites stay in their folder: sources, descriptors, traces and case files resolve inside the
case (or the suite's ``_shared`` folder); symlinks are never followed out; copying for mutants
copies links as links."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from residentkv.lowering.classify import GRANTING
from residentkv.suite.descriptor_mutants import DescriptorParent
from residentkv.suite.run import run_suite
from residentkv.suite.runner import run_case, shipped_suite


def _suite_with(tmp_path: Path, name: str) -> Path:
    suite = tmp_path / "suite"
    shutil.copytree(shipped_suite() / "_shared", suite / "_shared")
    shutil.copytree(shipped_suite() / name, suite / name)
    return suite / name


def _shared_source_case(tmp_path: Path) -> Path:
    """A shipped case whose descriptor reads the shared toy tree (``shared:toyrt``) and grants
    nothing (a copy outside the package loses the package root its granting traces stand on)."""
    for folder in sorted(shipped_suite().iterdir()):
        case = folder / "case.yaml"
        text = case.read_text() if case.is_file() else ""
        if "shared:toyrt" in text and not any(k in text for k in GRANTING):
            return _suite_with(tmp_path, folder.name)
    pytest.skip("no shipped case reads shared:toyrt")


def test_a_shared_source_linking_out_of_the_suite_is_refused(tmp_path: Path) -> None:
    case = _shared_source_case(tmp_path)
    assert run_case(case).passed
    shared = case.parent / "_shared"
    shutil.rmtree(shared / "toyrt")
    os.symlink("/", shared / "toyrt")
    result = run_case(case)
    assert not result.passed
    assert any(m.startswith("S002") and "outside" in m for m in result.mismatches)


def test_a_descriptor_symlinked_out_of_the_case_is_refused(tmp_path: Path) -> None:
    case = _suite_with(tmp_path, "priority-as-hard-protected")
    outside = tmp_path / "elsewhere.yaml"
    shutil.move(case / "descriptor.yaml", outside)
    os.symlink(outside, case / "descriptor.yaml")
    result = run_case(case)
    assert any(m.startswith("S002") for m in result.mismatches)


def test_a_case_folder_symlinked_out_of_the_suite_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    shutil.copytree(shipped_suite() / "empty-trace", real / "empty-trace")
    suite = tmp_path / "suite"
    suite.mkdir()
    os.symlink(real / "empty-trace", suite / "empty-trace")
    result = run_case(suite / "empty-trace")
    assert not result.passed and "S002" in result.mismatches[0]


def test_a_case_yaml_symlinked_out_is_refused(tmp_path: Path) -> None:
    case = _suite_with(tmp_path, "empty-trace")
    outside = tmp_path / "case.yaml"
    shutil.move(case / "case.yaml", outside)
    os.symlink(outside, case / "case.yaml")
    result = run_case(case)
    assert not result.passed and "S002" in result.mismatches[0]


def test_mutant_scratch_copies_links_as_links(tmp_path: Path) -> None:
    case = _shared_source_case(tmp_path)
    result = run_case(case)
    assert result.passed and result.case is not None
    os.symlink("/", case / "root-link")  # a link the case never cites
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    DescriptorParent(case, result.case, scratch)
    copied = scratch / result.case.id / "root-link"
    assert copied.is_symlink() and os.readlink(copied) == "/"


# --- the suite's _shared folder: never a way out of the suite ------------------------------

@pytest.mark.parametrize("target", ["/", "/etc", "elsewhere"])
def test_a_shared_folder_that_is_a_link_is_refused(tmp_path: Path, target: str) -> None:
    """``_shared -> /`` must not turn ``shared:etc`` into ``/etc``; the result is the same
    whatever the link points at and whether the named path exists there (no oracle)."""
    case = _shared_source_case(tmp_path)
    shared = case.parent / "_shared"
    if target == "elsewhere":  # a real copy of the toy tree, outside the suite
        shutil.move(shared, tmp_path / "elsewhere")
        target = str(tmp_path / "elsewhere")
    else:
        shutil.rmtree(shared)
    os.symlink(target, shared)
    answers = set()
    for name in ("toyrt", "etc", "no-such-dir"):
        text = (case / "case.yaml").read_text()
        (case / "case.yaml").write_text(text.replace('"shared:toyrt"', f'"shared:{name}"')
                                        .replace('"shared:etc"', f'"shared:{name}"')
                                        .replace('"shared:no-such-dir"', f'"shared:{name}"'))
        result = run_case(case)
        assert not result.passed
        s002 = [m for m in result.mismatches if m.startswith("S002")]
        assert s002 and "symbolic link" in s002[0]
        answers.add(s002[0])
    assert len(answers) == 1


def test_a_shared_source_resolving_out_of_the_suite_is_refused(tmp_path: Path) -> None:
    case = _shared_source_case(tmp_path)
    os.symlink("/etc", case.parent / "_shared" / "etc")
    text = (case / "case.yaml").read_text()
    (case / "case.yaml").write_text(text.replace('"shared:toyrt"', '"shared:etc"'))
    result = run_case(case)
    assert any(m.startswith("S002") and "outside" in m for m in result.mismatches)


# --- special, oversized and sparse files in a case folder ----------------------------------

def _sparse(path: Path, size: int) -> None:
    with path.open("wb") as fh:
        fh.truncate(size)


@pytest.mark.parametrize(("make", "code"), [
    (lambda p: os.mkfifo(p), "S010"),
    (lambda p: _sparse(p, 2 << 30), "S011"),  # a sparse 2 GiB file: over the size limit
    (lambda p: _sparse(p, 1 << 40), "S011"),  # a sparse 1 TiB file
    (lambda p: _sparse(p, 4 << 20), "S012"),  # under the limit, but a hole
])
def test_special_oversized_and_sparse_case_files_are_refused_before_any_copy(
        tmp_path: Path, make: Callable[[Path], None], code: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    case = _shared_source_case(tmp_path)
    bad = case / "sub" / "blob"
    bad.parent.mkdir()
    make(bad)
    if code == "S012" and bad.stat().st_blocks * 512 * 2 >= bad.stat().st_size:
        pytest.skip("this file system allocates holes")
    copies: list[object] = []
    monkeypatch.setattr(shutil, "copytree", lambda *a, **k: copies.append(a))
    result = run_case(case)
    assert not result.passed and result.case is None
    assert result.mismatches[0].startswith(f"{code}: {bad}")
    suite = run_suite(case.parent, mutants=None)
    assert not suite.passed and copies == []  # the failing case is never copied for mutants
