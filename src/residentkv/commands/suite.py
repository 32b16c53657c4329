"""``residentkv suite``: run the bad-lowering suite and its mutants."""

from __future__ import annotations

from pathlib import Path

import click

import residentkv.report.command_reports  # noqa: F401  (registers the suite reporters)
from residentkv.commands.schema import register_schema
from residentkv.report.registry import emit, output_options
from residentkv.suite.case import case_json_schema
from residentkv.suite.run import run_suite
from residentkv.suite.runner import shipped_suite

register_schema("suite-case", case_json_schema)


@click.command()
@click.argument("folder", required=False, type=click.Path(file_okay=False))
@click.option("--mutants", type=click.IntRange(min=0), default=None,
              help="Judge at most N mutants (default: every mutant).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the mutant sample when --mutants is smaller than their number.")
@output_options("suite")
def suite(folder: str | None, mutants: int | None, seed: int, fmt: str,
          output: str | None) -> None:
    """Run every case of the suite (the shipped one, or FOLDER) and the generated mutants.

    A case passes only if row classes, finding codes and gate results match exactly; exit 0
    only if every case passes and no mutant survives.
    """
    result = run_suite(Path(folder) if folder else shipped_suite(), mutants, seed)
    emit("suite", fmt, result, output)
    raise click.exceptions.Exit(0 if result.passed else 1)
