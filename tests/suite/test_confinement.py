"""Suites stay in their folder: sources, descriptors, traces and case files resolve inside the
case (or the suite's ``_shared`` folder); symlinks are never followed out; copying for mutants
copies links as links."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from residentkv.lowering.classify import GRANTING
from residentkv.suite.descriptor_mutants import DescriptorParent
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
