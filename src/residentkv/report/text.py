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
    """Render a table to a plain string (no colour codes, stable for tests and pipes).

    The first column (an id) never wraps, so ids stay whole; other cells wrap at spaces.
    Above :data:`PLAIN_ABOVE` rows rich's layout (about a millisecond a row) would dominate a
    large report, so the table is laid out in one linear pass instead.
    """
    if len(rows) > PLAIN_ABOVE:
        return _plain_table(title, columns, rows, caption)
    # Text, never str: rich would read "[/x]" in a claim id as markup (and crash, or hide it)
    table = Table(title=Text(title), caption=Text(caption) if caption else None,
                  show_lines=False)
    for i, col in enumerate(columns):
        table.add_column(Text(col), overflow="fold", no_wrap=i == 0)
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    buffer = io.StringIO()
    Console(file=buffer, width=width, color_system=None, force_terminal=False).print(table)
    return buffer.getvalue()


#: tables with more rows than this are rendered without rich (linear time, same columns)
PLAIN_ABOVE = 500
_MAX_CELL = 60


def _plain_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]],
                 caption: str | None) -> str:
    """Fixed-width columns in one pass; cells longer than the column are kept whole."""
    widths = [min(max([len(c), *(len(r[i]) for r in rows)]), _MAX_CELL)
              for i, c in enumerate(columns)]
    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()
    out = [title, line(columns), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    if caption:
        out.append(caption)
    return "\n".join(out) + "\n"
