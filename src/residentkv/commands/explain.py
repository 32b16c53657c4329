"""``residentkv explain CODE``."""

from __future__ import annotations

import click

from residentkv.codes import CODES, lookup
from residentkv.errors import UsageError


@click.command()
@click.argument("code")
def explain(code: str) -> None:
    """Explain what a finding CODE means, why it matters, and show an example."""
    try:
        entry = lookup(code)
    except KeyError:
        known = ", ".join(sorted(CODES))
        raise UsageError(f"unknown finding code {code!r}; known codes: {known}") from None
    click.echo(f"{entry.id} {entry.name} ({entry.phase})")
    click.echo(f"  what:    {entry.summary}")
    click.echo(f"  why:     {entry.why}")
    click.echo(f"  example: {entry.example}")
