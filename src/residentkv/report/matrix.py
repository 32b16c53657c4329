"""The rows x B1-B4 matrix, rendered for the terminal (through report.text's rich helper)."""

from __future__ import annotations

from typing import Any

from residentkv.lowering.bundles import OBLIGATIONS
from residentkv.report.json_report import evidence_line, strict_lines
from residentkv.report.registry import RenderOptions, reporter
from residentkv.report.text import render_table

COLUMNS = ("row", "mechanism", "lowers", "asserts", "B1", "B2", "B3", "B4", "class", "expect")
_STRENGTH = {"verified": "✓", "cited": "~", "none": "·"}


def cell(ob: dict[str, Any]) -> str:
    """``effective`` plus a mark of evidence strength (✓ verified, ~ cited, · none)."""
    return f"{ob['effective']} {_STRENGTH.get(ob['strength'], '?')}"


def matrix_rows(doc: dict[str, Any]) -> list[list[str]]:
    """One list of cells per row of the canonical JSON result."""
    return [[r["id"], r["mechanism"] or "?", r["lowers"] or "?", r["asserts"] or "?",
             *(cell(r["obligations"][n]) for n in OBLIGATIONS), r["class"], r["expect"] or "-"]
            for r in doc["rows"]]


def render_text(doc: dict[str, Any], *, width: int = 160) -> str:
    """The terminal report: matrix, per-row reasons, findings and boundaries."""
    legend = "cells: effective status; ✓ verified, ~ cited, · no usable evidence"
    out = [render_table("residentkv check", COLUMNS, matrix_rows(doc), caption=legend,
                        width=width)]
    for r in doc["rows"]:
        out.append(f"{r['id']}: {r['class']} (rule {r['rule']})")
        out += [f"  reason: {x}" for x in r["reasons"]]
        out += [f"  {o['reason']}" for o in r["obligations"].values()]
        out += [f"  boundary: {r['boundary']}"]
        out += ["  " + line for f in r["findings"] for line in _finding_lines(f)]
    out.append(f"boundary: {doc['boundary']}")
    out.append("summary: " + ", ".join(f"{k} {v}" for k, v in doc["summary"].items()))
    if doc.get("evidence"):
        out.append(evidence_line(doc))
    out += strict_lines(doc)
    return "\n".join(out) + "\n"


@reporter("check", "text")
def _check_text(doc: dict[str, Any], _opts: RenderOptions) -> str:
    return render_text(doc)


def _finding_lines(f: dict[str, Any]) -> list[str]:
    loc = ":".join(str(p) for p in (f["path"], f["line"], f["col"]) if p is not None)
    head = f"{f['severity']}[{f['code']} {f['name']}]: {f['message']}"
    lines = [f"{loc}: {head}" if loc else head]
    lines += [f"  note: {n}" for n in f["notes"]]
    if f["help"]:
        lines.append(f"  help: {f['help']}")
    return lines
