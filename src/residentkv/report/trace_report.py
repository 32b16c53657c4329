"""Render trace-gate results (text, Markdown, JSON) from their JSON-able form."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from residentkv import __version__
from residentkv.report.text import render_table
from residentkv.trace.gates import TraceCheck

GLOBAL_BOUNDARY = (
    "residentkv judges the evidence given, not unaudited behaviour: a gate result says what "
    "this stream shows, never what the runtime would do elsewhere."
)


def to_json_obj(checks: Sequence[TraceCheck]) -> dict[str, Any]:
    """The canonical, deterministic result of ``trace check``."""
    return {
        "tool": {"name": "residentkv", "version": __version__},
        "boundary": GLOBAL_BOUNDARY,
        "traces": [
            {
                "path": c.path,
                "events": c.events,
                "problem_count": c.problem_count,
                "problems": [
                    {"code": p.code, "name": p.name, "line": p.line, "col": p.col,
                     "message": p.message}
                    for p in c.problems
                ],
                "results": [r.model_dump(mode="json") for r in c.results],
            }
            for c in checks
        ],
        "passed": all(c.passed for c in checks),
    }


def render_json(checks: Sequence[TraceCheck]) -> str:
    return json.dumps(to_json_obj(checks), indent=2, sort_keys=True)


def _fired(controls: dict[str, bool]) -> str:
    return ", ".join(k for k, v in sorted(controls.items()) if v) or "-"


def _rows(check: TraceCheck) -> list[list[str]]:
    return [
        [r.claim_id, r.gate, "pass" if r.passed else "FAIL", ", ".join(r.missing) or "-",
         _fired(r.controls)]
        for r in check.results
    ]


COLUMNS = ("claim", "gate", "result", "missing", "controls fired")


def render_text(checks: Sequence[TraceCheck]) -> str:
    """A rich table plus every reader problem as a located diagnostic."""
    out: list[str] = []
    for c in checks:
        out.extend(p.render() for p in c.problems)
        hidden = c.problem_count - len(c.problems)
        if hidden > 0:
            out.append(f"{c.path}: ... and {hidden} more problems")
        if c.results:
            out.append(render_table(f"{c.path} ({c.events} events)", COLUMNS, _rows(c)).rstrip())
    out.append(GLOBAL_BOUNDARY)
    passed = sum(r.passed for c in checks for r in c.results)
    total = sum(len(c.results) for c in checks)
    out.append(f"{passed}/{total} gate results passed")
    return "\n".join(out) + "\n"


def render_markdown(checks: Sequence[TraceCheck]) -> str:
    lines = ["# residentkv trace check", ""]
    for c in checks:
        lines += [f"## `{c.path}` ({c.events} events)", "",
                  "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
        lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"
                  for row in _rows(c)]
        lines.append("")
    problems = [p for c in checks for p in c.problems]
    if problems:
        lines += ["## Problems", ""] + [f"- `{p.render().splitlines()[0]}`" for p in problems]
    lines += ["", "## Boundaries", "", f"- {GLOBAL_BOUNDARY}"]
    seen = sorted({(r.gate, r.boundary) for c in checks for r in c.results})
    lines += [f"- **{g}**: {b}" for g, b in seen]
    return "\n".join(lines) + "\n"
