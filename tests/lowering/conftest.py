"""Shared fixtures of the lowering tests: test data paths and a CLI runner."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "lowering"
TREE = DATA / "tree"
SIX = DATA / "six_classes.yaml"

RunCli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> RunCli:
    """Run ``residentkv ARGS`` through cli.main (the real exit-code mapping)."""
    from residentkv import cli
    from residentkv.commands.anchors import anchors
    from residentkv.commands.check import check

    # The lead registers these in commands/registry.py; adding them again is idempotent.
    cli.cli.add_command(check)
    cli.cli.add_command(anchors)

    def run(*args: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as exc:
            cli.main(list(args))
        out, err = capsys.readouterr()
        return int(exc.value.code or 0), out, err

    return run


@pytest.fixture
def data_copy(tmp_path: Path) -> Path:
    """A writable copy of tests/data/lowering."""
    dest = tmp_path / "lowering"
    shutil.copytree(DATA, dest)
    return dest
