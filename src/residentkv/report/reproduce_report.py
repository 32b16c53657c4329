"""Render the reproduction table: scenario × trace × gate, ours vs published."""

from __future__ import annotations

from collections.abc import Sequence

from residentkv.jsontext import json_text
from residentkv.report.markdown import md_text
from residentkv.report.registry import RenderOptions, reporter
from residentkv.report.text import render_table
from residentkv.trace.reproduce import Row, compared, succeeded, unexplained

COLUMNS = ("scenario", "trace", "gate", "ours", "published", "agree", "reason")


def _cells(r: Row) -> list[str]:
    trace = "/".join(r.trace.split("/")[1:-1]) if r.trace else "(no trace)"
    if r.published not in ("pass", "fail") or r.trace is None:
        agree = "-"
    else:
        agree = "yes" if r.agree else ("no, explained" if r.explained else "NO, UNEXPLAINED")
    return [r.scenario, trace, r.gate, r.ours, r.published or "-", agree, r.reason]


def _summary(rows: Sequence[Row]) -> str:
    done = compared(rows)
    if not done:
        return (f"{len(rows)} rows, none with a published pass/fail value: nothing was "
                "compared, so nothing is reproduced -> NOT reproduced")
    if not any(r.judged for r in done):
        return (f"{len(rows)} rows, {len(done)} with a published value, but no trace among "
                "them names a claim: no gate judged anything, so nothing is reproduced "
                "-> NOT reproduced")
    agree = sum(r.agree for r in done)
    explained = sum(not r.agree and r.explained for r in done)
    mixed = sum(1 for r in rows if (r.published or "").startswith("mixed"))
    return (f"{len(rows)} rows, {len(done)} with a published value"
            + (f" ({mixed} more with a mixed rate)" if mixed else "")
            + f": {agree} agree, {explained} disagree explained by their first cause; "
            f"{len(unexplained(rows))} rows unexplained -> "
            f"{'reproduced' if succeeded(rows) else 'NOT reproduced'}")


@reporter("reproduce", "json")
def render_json(rows: Sequence[Row], _opts: RenderOptions) -> str:
    return json_text({"rows": [r.to_json_obj() for r in rows], "reproduced": succeeded(rows)})


@reporter("reproduce", "md")
def render_md(rows: Sequence[Row], _opts: RenderOptions) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(md_text(c) for c in _cells(r)) + " |"
              for r in rows]
    return "\n".join(lines) + "\n\n" + _summary(rows) + "\n"


@reporter("reproduce", "text")
def render_text(rows: Sequence[Row], _opts: RenderOptions) -> str:
    table = render_table("research artifact traces: our gates vs the published table",
                         COLUMNS, [_cells(r) for r in rows], width=160)
    return table + _summary(rows) + "\n"
