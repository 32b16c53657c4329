"""Terminal rendering with rich: the only module of residentkv that imports rich."""

from __future__ import annotations

import io
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text


def render_table(
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    caption: str | None = None,
    width: int = 120,
) -> str:
    """Render a table to a plain string (no colour codes, stable for tests and pipes)."""
    # Text, never str: rich would read "[/x]" in a claim id as markup (and crash, or hide it)
    table = Table(title=Text(title), caption=Text(caption) if caption else None,
                  show_lines=False)
    for col in columns:
        table.add_column(Text(col), overflow="fold")
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    buffer = io.StringIO()
    Console(file=buffer, width=width, color_system=None, force_terminal=False).print(table)
    return buffer.getvalue()
