"""Shared fixtures of the lowering tests: test data paths and a CLI runner."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "lowering"
TREE = DATA / "tree"
SIX = DATA / "six_classes.yaml"
#: the test key's policy: it attests the toy traces of tests/data/lowering (TRACE.intoto.json)
TRUST = DATA / "trust" / "policy.yaml"

RunCli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run_cli(cli_run: RunCli) -> RunCli:
    """Run ``residentkv ARGS`` through cli.main (the real exit-code mapping)."""
    return cli_run


@pytest.fixture
def data_copy(tmp_path: Path) -> Path:
    """A writable copy of tests/data/lowering."""
    dest = tmp_path / "lowering"
    shutil.copytree(DATA, dest)
    return dest
