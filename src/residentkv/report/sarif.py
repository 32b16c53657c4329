"""SARIF 2.1.0 report: one rule per finding code, results located in the descriptor files."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import PurePosixPath
from typing import Any

from residentkv.codes import lookup

SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
_LEVEL = {"error": "error", "warning": "warning", "note": "note"}


def _rule(code: str) -> dict[str, Any]:
    c = lookup(code)
    return {"id": c.id, "name": c.name, "shortDescription": {"text": c.summary},
            "fullDescription": {"text": c.why}, "help": {"text": f"example: {c.example}"}}


def render_sarif(doc: dict[str, Any]) -> dict[str, Any]:
    """The SARIF log of the canonical JSON result (rows' classes ride in result properties)."""
    findings = [(r, f) for r in doc["rows"] for f in r["findings"]]
    codes = sorted({f["code"] for _, f in findings})
    index = {c: i for i, c in enumerate(codes)}
    results = [_result(r, f, index[f["code"]]) for r, f in findings]
    driver = {"name": "residentkv", "version": doc["tool"]["version"],
              "informationUri": "https://pypi.org/project/residentkv/",
              "rules": [_rule(c) for c in codes]}
    run = {"tool": {"driver": driver}, "results": results,
           "properties": {"boundary": doc["boundary"], "summary": doc["summary"],
                          "rows": [{"id": r["id"], "class": r["class"],
                                    "boundary": r["boundary"]} for r in doc["rows"]]}}
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def _result(row: dict[str, Any], f: dict[str, Any], index: int) -> dict[str, Any]:
    region: dict[str, int] = {}
    if f["line"]:
        region["startLine"] = f["line"]
        if f["col"]:
            region["startColumn"] = f["col"]
    physical: dict[str, Any] = {"artifactLocation": {"uri": _uri(f["path"] or row["path"])}}
    if region:
        physical["region"] = region
    text = f["message"] + (f"\nhelp: {f['help']}" if f["help"] else "")
    return {"ruleId": f["code"], "ruleIndex": index, "level": _LEVEL.get(f["severity"], "note"),
            "message": {"text": text}, "locations": [{"physicalLocation": physical}],
            "properties": {"row": row["id"], "class": row["class"],
                           "boundary": row["boundary"]}}


def _uri(path: str) -> str:
    """A relative path stays relative (SARIF resolves it against the run); absolute -> file URI."""
    p = PurePosixPath(path)
    return p.as_uri() if p.is_absolute() else p.as_posix().replace(" ", "%20")


def sarif_schema() -> dict[str, Any]:
    """The vendored OASIS SARIF 2.1.0 JSON Schema (draft-04), for offline validation."""
    text = resources.files("residentkv").joinpath("data", "schemas", "sarif-2.1.0.json")
    loaded: dict[str, Any] = json.loads(text.read_text(encoding="utf-8"))
    return loaded
