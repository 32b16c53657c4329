"""The runtime x obligation matrix: for each runtime release (``vllm 0.32.0``, ``vllm 0.33.0``,
...), the strongest effective status of B1-B4 over its rows, and its strongest class (rendered
from the canonical check JSON)."""

from __future__ import annotations

from typing import Any

from residentkv.lowering.bundles import OBLIGATIONS
from residentkv.lowering.descriptor import CLASSES
from residentkv.report.text import render_table

COLUMNS = ("runtime release", "rows", "B1", "B2", "B3", "B4", "strongest class", "anchors")
#: how much of an obligation a status binds, best first
_STATUS_RANK = {"satisfied": 0, "partial": 1, "absent": 2, "contradicted": 3, "unknown": 4}
_MARK = {"verified": "✓", "cited": "~", "none": "·"}
_STRENGTH_RANK = {"verified": 0, "cited": 1, "none": 2}


def _runtime_name(row: dict[str, Any]) -> str:
    """``name version``: each release of a runtime is its own line of the matrix."""
    return str(row.get("runtime") or "?")


def runtime_matrix(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """One entry per runtime release, in the order the releases first appear."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in doc["rows"]:
        groups.setdefault(_runtime_name(r), []).append(r)
    out = []
    for name, rows in groups.items():
        cells = {}
        for ob in OBLIGATIONS:
            obs = [r["obligations"][ob] for r in rows]
            best = min(obs, key=lambda o: (_STATUS_RANK.get(o["effective"], 9),
                                           _STRENGTH_RANK.get(o["strength"], 9)))
            cells[ob] = {"effective": best["effective"], "strength": best["strength"]}
        klass = min((r["class"] for r in rows), key=CLASSES.index)
        results = [a["result"] for r in rows for a in r["anchors"]]
        anchors = {k: results.count(k) for k in sorted(set(results))}
        out.append({"runtime": name, "rows": len(rows), "obligations": cells,
                    "strongest_class": klass, "anchors": anchors})
    return out


def matrix_cells(entry: dict[str, Any]) -> list[str]:
    """The table cells of one runtime entry."""
    obs = [f"{c['effective']} {_MARK.get(c['strength'], '?')}"
           for c in (entry["obligations"][n] for n in OBLIGATIONS)]
    anchors = ", ".join(f"{v} {k}" for k, v in entry["anchors"].items())
    return [entry["runtime"], str(entry["rows"]), *obs, entry["strongest_class"], anchors]


def render_runtime_matrix(entries: list[dict[str, Any]], *, width: int = 160) -> str:
    """The runtime x obligation table for the terminal."""
    legend = ("cells: the strongest effective status over the runtime's rows; ✓ verified, "
              "~ cited, · no usable evidence")
    return render_table("runtime x obligation", COLUMNS, [matrix_cells(e) for e in entries],
                        caption=legend, width=width)


def render_runtime_matrix_md(entries: list[dict[str, Any]]) -> str:
    """The runtime x obligation table in Markdown."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in matrix_cells(e)) + " |"
              for e in entries]
    return "\n".join(lines) + "\n"
