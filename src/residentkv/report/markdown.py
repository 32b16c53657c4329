"""Markdown report of a check result (rendered from the canonical JSON).

Every piece of text that comes from user files (row ids, mechanisms, reasons, boundaries,
finding messages and paths) goes through :func:`md_text`: a CI summary renders Markdown and
inline HTML, so raw row text could show an image, hide the rest of the page in an HTML
comment, plant a link or break a table.
"""

from __future__ import annotations

import re
from typing import Any

from residentkv.lowering.bundles import OBLIGATIONS
from residentkv.report.json_report import evidence_line, strict_lines
from residentkv.report.matrix import COLUMNS, matrix_rows
from residentkv.report.registry import RenderOptions, reporter

#: every ASCII punctuation character: CommonMark lets each be backslash-escaped, and an
#: escaped one is always literal text (never HTML, a link, emphasis, a table pipe or an
#: autolink's ``://``, ``www.`` or ``@``)
_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")
#: control characters other than the line separators (those become spaces)
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1b\x7f]")


def md_text(text: object) -> str:
    """*text* as Markdown that renders exactly as that text, on one line.

    Line breaks of any kind (everything ``str.splitlines`` splits on) become spaces, other
    control characters U+FFFD, and every ASCII punctuation character is backslash-escaped.
    """
    flat = " ".join(str(text).splitlines())
    return _PUNCTUATION.sub(r"\\\1", _CONTROL.sub("\ufffd", flat))


def render_markdown(doc: dict[str, Any]) -> str:
    """A Markdown page: the matrix, then one section per row with reasons and boundary."""
    out = ["# residentkv check", "", f"> {doc['boundary']}", "",
           "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    out += ["| " + " | ".join(md_text(c) for c in cells) + " |" for cells in matrix_rows(doc)]
    out += ["", "Cells: effective status; ✓ verified, ~ cited, · no usable evidence.", ""]
    for r in doc["rows"]:
        out += [f"## {md_text(r['id'])} — {md_text(r['class'])}", "",
                f"*Boundary:* {md_text(r['boundary'])}", ""]
        out += [f"- {md_text(x)}" for x in r["reasons"]]
        out += [f"- `{n}`: {md_text(r['obligations'][n]['reason'])}" for n in OBLIGATIONS]
        out += [f"- **{f['severity']}[{f['code']} {f['name']}]** "
                f"{md_text(str(f['path']) + ':' + str(f['line']))}: {md_text(f['message'])}"
                for f in r["findings"]]
        out.append("")
    out.append("Summary: " + ", ".join(f"{k} {v}" for k, v in doc["summary"].items()))
    if doc.get("evidence"):
        out += ["", evidence_line(doc)]
    out += [f"- {md_text(x)}" for x in strict_lines(doc)]
    return "\n".join(out) + "\n"


@reporter("check", "md")
def _check_md(doc: dict[str, Any], _opts: RenderOptions) -> str:
    return render_markdown(doc)
