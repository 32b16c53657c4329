"""The canonical JSON form of a check result: deterministic, with input digests and version.

Every other report (text, Markdown, SARIF) renders this dict; none re-evaluates anything.
"""

from __future__ import annotations

from typing import Any

from residentkv import __version__
from residentkv.findings import Finding
from residentkv.jsontext import json_text
from residentkv.lowering.bundles import OBLIGATIONS
from residentkv.lowering.check import CHECK_SCHEMA, GLOBAL_BOUNDARY, CheckResult, RowResult, summary
from residentkv.report.registry import RenderOptions, reporter

#: what the summary says about cited evidence, in every format
CITED_NEVER_GRANTS = ("cited anchors never grant: a positive class needs verified evidence "
                      "(give --source NAME=PATH, or cite a trace the checker runs)")


def to_json(result: CheckResult) -> dict[str, Any]:
    """The canonical, JSON-able result of one ``check`` run."""
    return {
        "schema": CHECK_SCHEMA,
        "tool": {"name": "residentkv", "version": __version__},
        "boundary": GLOBAL_BOUNDARY,
        "inputs": result.inputs,
        "summary": summary(result),
        "evidence": evidence_summary(result),
        "exit_code": result.exit_code,
        "rows": [_row(r) for r in result.rows],
    }


def evidence_summary(result: CheckResult) -> dict[str, int]:
    """Anchors by what the run could do with them: verified, only cited, unusable."""
    results = [str(a.result) for r in result.rows for a in r.anchors]
    return {"anchors": len(results), "verified": results.count("verified"),
            "cited": results.count("unverifiable"),
            "unusable": sum(x in ("drifted", "missing", "failed") for x in results)}


def evidence_line(doc: dict[str, Any]) -> str:
    """The sentence every report prints about anchors verified vs only cited."""
    ev = doc.get("evidence")
    if not ev:
        return ""
    return (f"anchors: {ev['verified']} verified, {ev['cited']} only cited, "
            f"{ev['unusable']} unusable (of {ev['anchors']}); {CITED_NEVER_GRANTS}")


def strict_lines(doc: dict[str, Any]) -> list[str]:
    """What ``--strict`` refused, one line each (nothing when --strict was not given)."""
    strict = doc.get("strict")
    if strict is None:
        return []
    found = strict["shortfalls"]
    head = (f"strict: {len(found)} shortfall(s), exit 1" if found
            else "strict: no drift, no warning, no cited-only anchor in a granting row")
    return [head] + [f"strict: {x}" for x in found]


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


@reporter("check", "json")
def _check_json(doc: dict[str, Any], _opts: RenderOptions) -> str:
    return json_text(doc)
