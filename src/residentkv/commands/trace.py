"""``residentkv trace check``: run the gates over one or more traces."""

from __future__ import annotations

import click

from residentkv.errors import UsageError
from residentkv.report import trace_report
from residentkv.trace.gates import GATE_NAMES, TraceCheck, check_trace
from residentkv.trace.reader import DEFAULT_MAX_LINE_BYTES

RENDERERS = {
    "text": trace_report.render_text,
    "json": trace_report.render_json,
    "md": trace_report.render_markdown,
}


@click.group()
def trace() -> None:
    """Check event traces against the gates of the contract."""


@trace.command("check")
@click.argument("traces", nargs=-1, required=True, type=click.Path(dir_okay=False))
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
    checks: list[TraceCheck] = [
        check_trace(p, gates or GATE_NAMES, claim_id, max_line_bytes=max_line_bytes)
        for p in traces
    ]
    click.echo(RENDERERS[fmt](checks), nl=False)
    unusable = [c for c in checks if c.events == 0]
    if unusable:
        raise click.exceptions.Exit(2)
    raise click.exceptions.Exit(0 if all(c.passed for c in checks) else 1)


__all__ = ["UsageError", "trace"]
