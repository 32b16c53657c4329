"""``residentkv suite``: run the bad-lowering suite and its mutants."""

from __future__ import annotations

import json
from pathlib import Path

import click

from residentkv.commands.schema import register_schema
from residentkv.suite.case import case_json_schema
from residentkv.suite.run import run_suite, summary_lines
from residentkv.suite.runner import shipped_suite

register_schema("suite-case", case_json_schema)


@click.command()
@click.argument("folder", required=False, type=click.Path(file_okay=False))
@click.option("--mutants", type=click.IntRange(min=0), default=None,
              help="Judge at most N mutants (default: every mutant).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the mutant sample when --mutants is smaller than their number.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def suite(folder: str | None, mutants: int | None, seed: int, fmt: str) -> None:
    """Run every case of the suite (the shipped one, or FOLDER) and the generated mutants.

    A case passes only if row classes, finding codes and gate results match exactly; exit 0
    only if every case passes and no mutant survives.
    """
    result = run_suite(Path(folder) if folder else shipped_suite(), mutants, seed)
    if fmt == "json":
        click.echo(json.dumps(result.to_json_obj(), indent=2, sort_keys=True))
    else:
        for case in result.cases:
            mark = "ok  " if case.passed else "FAIL"
            click.echo(f"{mark} {case.id}")
            for m in case.mismatches:
                click.echo(f"       {m}")
        for tally in result.operators.values():
            for s in tally.survivors:
                click.echo(f"SURVIVOR {s}")
        for line in summary_lines(result):
            click.echo(line)
    raise click.exceptions.Exit(0 if result.passed else 1)
