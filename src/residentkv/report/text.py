"""Terminal rendering with rich: the only module of residentkv that imports rich."""

from __future__ import annotations

import io
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table


def render_table(
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    caption: str | None = None,
    width: int = 120,
) -> str:
    """Render a table to a plain string (no colour codes, stable for tests and pipes).

    The first column (an id) never wraps, so ids stay whole; other cells wrap at spaces.
    """
    table = Table(title=title, caption=caption, show_lines=False)
    for i, col in enumerate(columns):
        table.add_column(col, overflow="fold", no_wrap=i == 0)
    for row in rows:
        table.add_row(*row)
    buffer = io.StringIO()
    Console(file=buffer, width=width, color_system=None, force_terminal=False).print(table)
    return buffer.getvalue()
