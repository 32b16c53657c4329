"""docs/runtimes.md: every figure shown in a ``$ residentkv`` console block is what the command
prints. The test runs each block's command and compares (``| tail -N``: the last N lines
exactly; otherwise every shown line, in order)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "runtimes.md"
BLOCK = re.compile(r"```console\n\$ (residentkv [^\n]*)\n(.*?)```", re.S)


def blocks() -> list[tuple[str, list[str]]]:
    return [(cmd, body.splitlines()) for cmd, body in BLOCK.findall(DOC.read_text())]


def test_the_page_has_figure_blocks() -> None:
    cmds = [cmd for cmd, _ in blocks()]
    assert any("anchors drift" in c for c in cmds) and any("anchors review" in c for c in cmds)
    assert any(c.startswith("residentkv audit") for c in cmds)


def _in_order(shown: list[str], out: list[str]) -> bool:
    it = iter(out)
    return all(any(line == got for got in it) for line in shown)


@pytest.mark.parametrize("cmd,shown", blocks(), ids=[c for c, _ in blocks()])
def test_figures_are_what_the_command_prints(cmd: str, shown: list[str], pinned_cache: Path,
                                             cli_run: Callable[..., tuple[int, str, str]],
                                             tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # reports a command writes land here, not in the tree
    command, _, tail = cmd.partition(" | tail -")
    args = shlex.split(command)[1:]
    _, out, err = cli_run(*args, "--cache", str(pinned_cache))
    lines = out.splitlines()
    if tail:
        assert lines[-int(tail):] == shown, (cmd, lines[-int(tail):], err)
    else:
        assert _in_order(shown, lines), (cmd, out, err)
