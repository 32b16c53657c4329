"""Run the residentkv CLI in-process with the release-cache and audit commands registered.

The lead registers `sources`, `audit` and `anchors drift` in commands/registry.py; until then
(and harmlessly after) this helper attaches them to the CLI for the tests.
"""

from __future__ import annotations

import pytest

from residentkv import cli


def register() -> None:
    from residentkv.commands.anchors import anchors
    from residentkv.commands.audit import audit
    from residentkv.commands.sources import drift, sources

    cli.cli.commands.setdefault("sources", sources)
    cli.cli.commands.setdefault("audit", audit)
    cli.cli.commands.setdefault("anchors", anchors)
    group = cli.cli.commands["anchors"]
    if hasattr(group, "commands"):
        group.commands.setdefault("drift", drift)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``residentkv ARGS``."""
    register()
    with pytest.raises(SystemExit) as exc:
        cli.main(list(args))
    out, err = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 1), out, err
