"""``residentkv witness run``: the positive systems witness (SPEC §9) on real vLLM.

vLLM and torch are imported only inside the command, so the CLI starts (and ``--help`` works)
on machines without the ``[vllm]`` extra.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import click

import residentkv.report.command_reports  # noqa: F401  (registers the witness reporters)
from residentkv.errors import UsageError
from residentkv.report.registry import emit, output_options

__all__ = ["witness"]

ALL = "all"


def _scenario_names() -> tuple[str, ...]:
    # The scenario list lives with the adapter; importing it pulls in no vLLM.
    from residentkv.adapters.vllm.witness import SCENARIOS

    return SCENARIOS


@click.group()
def witness() -> None:
    """Run the vLLM witness: ResidentClaims through real offload, load and failure."""


@witness.command("run")
@click.option("--scenario", "scenarios", multiple=True, default=(ALL,), show_default=True,
              help="Scenario to run (repeatable), or 'all'.")
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True,
              help="Runs per scenario.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="witness-out",
              show_default=True, help="Directory for traces, logs and summary.json.")
@click.option("--load-mode", type=click.Choice(["async", "sync"]), default="async",
              show_default=True,
              help="async: vLLM's async-load protocol; sync: loads before the forward.")
@output_options("witness")
def run(scenarios: tuple[str, ...], repeat: int, out_dir: str, load_mode: str,
        fmt: str, output: str | None) -> None:
    """Run witness scenarios on vLLM with a tiny local model and judge each trace.

    Exit 0 only when every run of every scenario gave SPEC §9's expected gate results and its
    checks held (e.g. restored output equal to a cold run); 1 otherwise; 2 when vLLM is missing
    or the arguments are wrong.
    """
    known = _scenario_names()
    chosen = list(known) if ALL in scenarios else list(dict.fromkeys(scenarios))
    unknown = [s for s in chosen if s not in known]
    if unknown:
        raise UsageError(
            f"unknown scenario(s): {', '.join(unknown)}; choose from: all, {', '.join(known)}"
        )
    if importlib.util.find_spec("vllm") is None:
        raise UsageError(
            "vLLM is not installed; install the extra: pip install 'residentkv[vllm]'"
        )
    from residentkv.adapters.vllm.witness import run_witness, summarize

    out = Path(out_dir)
    try:
        runs = run_witness(chosen, repeat, out, load_mode=load_mode)
    except RuntimeError as exc:
        click.echo(f"error: {exc}", err=True)
        raise click.exceptions.Exit(1) from None
    rows = summarize(runs)
    (out / "summary.json").write_text(
        json.dumps({"rows": rows, "runs": [r.to_json() for r in runs]}, indent=1),
        encoding="utf-8",
    )
    emit("witness", fmt, {"rows": rows, "out": str(out)}, output)
    ok = all(r.matched for r in runs)
    raise click.exceptions.Exit(0 if ok else 1)
