"""``residentkv trace check``: run the gates over one or more traces."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from residentkv.errors import UsageError
from residentkv.limits import read_stdin
from residentkv.model.events import event_to_dict
from residentkv.report import import_report, reproduce_report, trace_report
from residentkv.trace.gates import GATE_NAMES, TraceCheck, check_trace
from residentkv.trace.importers import DIALECTS
from residentkv.trace.reader import DEFAULT_MAX_LINE_BYTES
from residentkv.trace.reproduce import reproduce, succeeded

RENDERERS = {
    "text": trace_report.render_text,
    "json": trace_report.render_json,
    "md": trace_report.render_markdown,
}


@click.group()
def trace() -> None:
    """Check event traces against the gates of the contract."""


@trace.command("check")
@click.argument("traces", nargs=-1, required=True,
                type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--gate", "gates", multiple=True, type=click.Choice(GATE_NAMES),
              help="Gate to run (repeatable; default: all four).")
@click.option("--claim", "claim_id", default=None, help="Judge only this claim id.")
@click.option("--format", "fmt", type=click.Choice(sorted(RENDERERS)), default="text",
              show_default=True)
@click.option("--max-line-bytes", type=click.IntRange(min=1), default=DEFAULT_MAX_LINE_BYTES,
              show_default=True, help="Longest accepted trace line.")
def check(traces: tuple[str, ...], gates: tuple[str, ...], claim_id: str | None, fmt: str,
          max_line_bytes: int) -> None:
    """Run trace gates over TRACES.

    Exit 0 when every requested gate passes for every claim, 1 when some gate fails or a trace
    has problems, 2 when a trace cannot be used at all.
    """
    if traces.count("-") > 1:
        raise UsageError("standard input (-) can be read once; expected at most one -")
    checks: list[TraceCheck] = [
        check_trace(p, gates or GATE_NAMES, claim_id, max_line_bytes=max_line_bytes,
                    # read here, not reopened by fd: an in-process runner has no file descriptor
                    stream=sys.stdin.buffer if p == "-" else None)
        for p in traces
    ]
    click.echo(RENDERERS[fmt](checks), nl=False)
    unusable = [c for c in checks if c.events == 0]
    if unusable:
        raise click.exceptions.Exit(2)
    raise click.exceptions.Exit(0 if all(c.passed for c in checks) else 1)



@trace.command("import")
@click.argument("source", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--dialect", required=True, type=click.Choice(sorted(DIALECTS)),
              help="The foreign trace dialect.")
@click.option("-o", "--out", type=click.Path(dir_okay=False), default=None,
              help="Write the v1 trace here (default: standard output).")
@click.option("--report", "report_format", type=click.Choice(["text", "json"]),
              default="text", show_default=True, help="Format of the import report (stderr).")
def import_(source: str, dialect: str, out: str | None, report_format: str) -> None:
    """Import a foreign trace into residentkv.event/v1.

    Every dropped event, unmapped field, assumption and synthesized event is reported on
    standard error. Exit 0 when every foreign line was read, 1 when some were invalid.
    """
    data = read_stdin("trace") if source == "-" else None
    result = DIALECTS[dialect](source, data)
    # allow_nan=False: a NaN or Infinity would be a line no strict v1 reader accepts
    lines = "".join(
        json.dumps(event_to_dict(e), separators=(",", ":"), allow_nan=False) + "\n"
        for e in result.events
    )
    if out is None:
        click.echo(lines, nl=False)
    else:
        Path(out).write_text(lines)
    click.echo(import_report.render(result.report, report_format), err=True, nl=False)
    raise click.exceptions.Exit(1 if result.report.problems else 0)


@trace.command("reproduce")
@click.argument("fixtures", type=click.Path(file_okay=False))
@click.option("--format", "fmt", type=click.Choice(["text", "json", "md"]), default="text",
              show_default=True)
def reproduce_cmd(fixtures: str, fmt: str) -> None:
    """Reproduce the research artifact's published gate table from its raw traces.

    Exit 0 only when every row with a published value agrees or carries an explained reason.
    """
    rows = reproduce(fixtures)
    click.echo(reproduce_report.render(rows, fmt), nl=False)
    raise click.exceptions.Exit(0 if succeeded(rows) else 1)
