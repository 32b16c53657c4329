"""Markdown report of a check result (rendered from the canonical JSON)."""

from __future__ import annotations

from typing import Any

from residentkv.lowering.bundles import OBLIGATIONS
from residentkv.report.json_report import evidence_line, strict_lines
from residentkv.report.matrix import COLUMNS, matrix_rows
from residentkv.report.registry import RenderOptions, reporter


def _esc(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(doc: dict[str, Any]) -> str:
    """A Markdown page: the matrix, then one section per row with reasons and boundary."""
    out = ["# residentkv check", "", f"> {doc['boundary']}", "",
           "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    out += ["| " + " | ".join(_esc(c) for c in cells) + " |" for cells in matrix_rows(doc)]
    out += ["", "Cells: effective status; ✓ verified, ~ cited, · no usable evidence.", ""]
    for r in doc["rows"]:
        out += [f"## `{_esc(r['id'])}` — {r['class']}", "", f"*Boundary:* {_esc(r['boundary'])}",
                ""]
        out += [f"- {_esc(x)}" for x in r["reasons"]]
        out += [f"- `{n}`: {_esc(r['obligations'][n]['reason'])}" for n in OBLIGATIONS]
        out += [f"- **{f['severity']}[{f['code']} {f['name']}]** "
                f"`{f['path']}:{f['line']}`: {_esc(f['message'])}" for f in r["findings"]]
        out.append("")
    out.append("Summary: " + ", ".join(f"{k} {v}" for k, v in doc["summary"].items()))
    if doc.get("evidence"):
        out += ["", evidence_line(doc)]
    out += [f"- {x}" for x in strict_lines(doc)]
    return "\n".join(out) + "\n"


@reporter("check", "md")
def _check_md(doc: dict[str, Any], _opts: RenderOptions) -> str:
    return render_markdown(doc)
