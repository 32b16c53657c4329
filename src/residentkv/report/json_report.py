"""The canonical JSON form of a check result: deterministic, with input digests and version.

Every other report (text, Markdown, SARIF) renders this dict; none re-evaluates anything.
"""

from __future__ import annotations

import json
from typing import Any

from residentkv import __version__
from residentkv.findings import Finding
from residentkv.lowering.bundles import OBLIGATIONS
from residentkv.lowering.check import CHECK_SCHEMA, GLOBAL_BOUNDARY, CheckResult, RowResult, summary


def to_json(result: CheckResult) -> dict[str, Any]:
    """The canonical, JSON-able result of one ``check`` run."""
    return {
        "schema": CHECK_SCHEMA,
        "tool": {"name": "residentkv", "version": __version__},
        "boundary": GLOBAL_BOUNDARY,
        "inputs": result.inputs,
        "summary": summary(result),
        "exit_code": result.exit_code,
        "rows": [_row(r) for r in result.rows],
    }


def dumps(doc: dict[str, Any]) -> str:
    """Serialise deterministically (sorted keys, fixed indentation, trailing newline)."""
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _row(r: RowResult) -> dict[str, Any]:
    return {
        "id": r.id, "path": r.path, "line": r.line, "runtime": r.runtime, "mode": r.mode,
        "mechanism": r.mechanism, "lowers": r.lowers, "asserts": r.asserts, "class": r.klass,
        "rule": r.rule, "expect": r.expect, "bundle": r.bundle, "boundary": r.boundary,
        "reasons": list(r.reasons),
        "obligations": _obligations(r),
        "anchors": [a.model_dump(mode="json") for a in r.anchors],
        "findings": [finding_json(f) for f in r.findings],
    }


def _obligations(r: RowResult) -> dict[str, Any]:
    if r.verdict is not None:
        return {n: o.model_dump(mode="json") for n, o in r.verdict.obligations.items()}
    return {n: {"asserted": None, "effective": "unknown", "strength": "none",
                "established": False, "decided_by": None, "anchors": [],
                "reason": "row invalid: not evaluated"} for n in OBLIGATIONS}


def finding_json(f: Finding) -> dict[str, Any]:
    """A finding as JSON, with its code's name."""
    return {"code": f.code, "name": f.name, "severity": f.severity, "message": f.message,
            "path": f.path, "line": f.line, "col": f.col, "help": f.help, "notes": list(f.notes)}
