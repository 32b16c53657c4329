"""``residentkv explain TERM`` and ``explain --list``."""

from __future__ import annotations

import difflib

import click

from residentkv.codes import CODES
from residentkv.errors import UsageError
from residentkv.lowering.bundles import load_bundles
from residentkv.model.automaton import Violation
from residentkv.model.vocabulary import ALL_GATE_NAMES, CONTROLS
from residentkv.report.vocab_text import all_requirements, explain_lines, list_lines


def _known_terms() -> list[str]:
    names = [c.name for c in CODES.values()]
    return [*CODES, *names, *all_requirements(), *CONTROLS, *ALL_GATE_NAMES, *load_bundles(),
            *(v.value for v in Violation)]


@click.command()
@click.argument("term", required=False)
@click.option("--list", "list_", is_flag=True, help="List every term explain knows.")
def explain(term: str | None, list_: bool) -> None:
    """Explain TERM: a finding code (D006) or its name (unknown_anchor), a requirement id, a
    negative control, a gate or a protection mode."""
    if list_ or term is None:
        if term is None and not list_:
            raise UsageError("explain: give a TERM, or --list to see every term")
        click.echo("\n".join(list_lines()))
        return
    lines = explain_lines(term)
    if lines is None:
        close = difflib.get_close_matches(term, _known_terms(), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UsageError(f"explain: '{term}' is not a finding code, requirement id, control, "
                         f"gate, protection mode or automaton violation{hint} (see residentkv "
                         "explain --list)")
    click.echo("\n".join(lines))
