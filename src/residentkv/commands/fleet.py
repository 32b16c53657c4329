"""``residentkv fleet``: several replicas' streams judged together (gate ``fleet_outcome``).

The group is extended by other modules (``fleet.add_command`` in commands/registry.py).
"""

from __future__ import annotations

import click

from residentkv.errors import UsageError
from residentkv.fleet import judge_fleet
from residentkv.report import fleet_report  # noqa: F401  (registers the fleet reporters)
from residentkv.report.registry import emit, output_options
from residentkv.trace.reader import STDIN


@click.group()
def fleet() -> None:
    """Judge several replicas' event streams together (gate fleet_outcome)."""


@fleet.command("check")
@click.argument("traces", nargs=-1, required=True, type=click.Path(dir_okay=False))
@output_options("fleet")
def check(traces: tuple[str, ...], fmt: str, output: str | None) -> None:
    """Judge TRACES, one stream per replica, as one fleet.

    Exit 0 when gate fleet_outcome passes, 1 when it fails, 2 when a stream cannot be
    evaluated at all (unreadable, or without a single valid event).
    """
    if STDIN in traces:
        raise UsageError("fleet check reads one file per replica; standard input (-) cannot "
                         "name its replica among several streams")
    judgement = judge_fleet(traces)
    emit("fleet", fmt, judgement.to_json(), output)
    if not judgement.evaluated:
        raise click.exceptions.Exit(2)
    raise click.exceptions.Exit(0 if judgement.passed else 1)
