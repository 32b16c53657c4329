"""``residentkv litmus`` and ``residentkv sweep``: the MicroRuntime's litmus suite and capacity
sweep (SPEC §10). Each command parses, runs one function, renders, sets the exit code:
0 everything passed, 1 a litmus item or sweep expectation failed, 2 bad usage."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

import residentkv.report.command_reports  # noqa: F401  (registers litmus and sweep reporters)
from residentkv.errors import UsageError, install_hint
from residentkv.microruntime.litmus import run_litmus
from residentkv.microruntime.results import ITEMS, LitmusResult
from residentkv.microruntime.sweep import parse_usable, run_sweep
from residentkv.report.pictures import sweep_grid, timeline_picture
from residentkv.report.registry import emit, output_options
from residentkv.report.timeline import timeline

#: what to install when a picture cannot be drawn
PLOT_HINT = f"plots need matplotlib: {install_hint('plot')}"


@contextmanager
def _workdir(out: str | None) -> Iterator[tuple[Path, bool]]:
    """The output folder (kept) or a temporary one (removed)."""
    if out is not None:
        path = Path(out)
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UsageError(f"--out {out}: cannot create folder: {e.strerror or e}") from None
        yield path, True
        return
    with tempfile.TemporaryDirectory(prefix="residentkv-") as tmp:
        yield Path(tmp), False


def _parse_only(only: str | None) -> list[str] | None:
    if only is None:
        return None
    wanted = [x.strip().upper() for x in only.split(",") if x.strip()]
    unknown = [x for x in wanted if x not in ITEMS]
    if unknown or not wanted:
        raise UsageError(
            f"--only {only!r}: unknown item(s) {', '.join(unknown) or '(none given)'}; "
            f"expected a comma list of {', '.join(ITEMS)}"
        )
    return wanted


def _litmus_picture(results: list[LitmusResult], folder: Path) -> None:
    """litmus-timelines.png: each item's trace as a timeline (needs the [plot] extra)."""
    traces = dict.fromkeys(r.trace for r in results if r.trace and r.trace.endswith(".jsonl"))
    try:
        path = timeline_picture([timeline(t) for t in traces], folder / "litmus-timelines.png")
    except ImportError:
        click.echo(f"note: no picture written; {PLOT_HINT}", err=True)
    else:
        click.echo(f"picture: {path}", err=True)


@click.command()
@click.option("--only", default=None, metavar="ITEMS",
              help=f"Comma list of items to run (default: all of {','.join(ITEMS)}).")
@click.option("--out", default=None, type=click.Path(file_okay=False),
              help="Folder to keep the traces and the C1 descriptor in.")
@output_options("litmus")
def litmus(only: str | None, out: str | None, fmt: str, output: str | None) -> None:
    """Run the MicroRuntime litmus suite (L1-L7, C1), each verdict derived from its trace.

    Exit 0 when every item passes, 1 when any fails or could not run.
    """
    wanted = _parse_only(only)
    with _workdir(out) as (folder, kept):
        results = run_litmus(folder, wanted)
        emit("litmus", fmt, {"results": results, "kept": kept}, output)
        if kept:
            _litmus_picture(results, folder)
    raise click.exceptions.Exit(0 if all(r.passed for r in results) else 1)


@click.command()
@click.option("--resident", type=int, default=60, show_default=True,
              help="Blocks of the resident claim (materialized first).")
@click.option("--active", type=int, default=70, show_default=True,
              help="Blocks of the active prefill that arrives next.")
@click.option("--usable", default="80..150", show_default=True, metavar="LOW..HIGH",
              help="Pool sizes: LOW..HIGH (inclusive, by --step), a comma list, or one number.")
@click.option("--step", type=int, default=10, show_default=True)
@click.option("--out", default=None, type=click.Path(file_okay=False),
              help="Folder for the traces and the plot (sweep.png, sweep.svg).")
@output_options("sweep")
def sweep(resident: int, active: int, usable: str, step: int, out: str | None, fmt: str,
          output: str | None) -> None:
    """Capacity sweep per policy: resident victims and the active request's outcome.

    Every figure is read back from the run's own trace. Exit 0 when every point matches the
    contract's expectation, 1 otherwise.
    """
    usables = parse_usable(usable, step)
    if resident <= 0 or active <= 0:
        raise UsageError("--resident and --active must be positive block counts")
    with _workdir(out) as (folder, kept):
        result = run_sweep(resident, active, usables, folder)
        emit("sweep", fmt, result, output)
        if kept:
            try:
                paths = sweep_grid(result, folder)
            except ImportError:
                click.echo(f"note: no plot written; {PLOT_HINT}", err=True)
            else:
                click.echo("plot: " + ", ".join(str(p) for p in paths), err=True)
            click.echo(f"traces: {folder / 'traces'}", err=True)
        else:
            click.echo("note: pass --out DIR to keep the traces and write the plot", err=True)
    for failure in result.failures:
        click.echo(f"error: {failure}", err=True)
    raise click.exceptions.Exit(0 if result.passed else 1)
