"""SARIF 2.1.0 reports that code scanning can place.

* ``check``: one rule per finding code, results located in the descriptor files.
* ``trace check``: one rule per gate (and per reader problem code); each gate result is located
  at the trace file and the line of its deciding event (see :mod:`residentkv.report.trace_report`).

Paths under the source root become repo-relative URIs with ``uriBaseId: SRCROOT`` (declared in
``originalUriBaseIds``); a path outside it keeps an absolute ``file:`` URI, since no relative
form would be honest. ``automationDetails.id`` names the command, so uploads of different
commands stay apart.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

from residentkv.codes import lookup
from residentkv.jsontext import json_text
from residentkv.report.registry import RenderOptions, find_srcroot, reporter
from residentkv.trace.reader import STDIN

SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
SRCROOT = "SRCROOT"
INFORMATION_URI = "https://pypi.org/project/residentkv/"
_LEVEL = {"error": "error", "warning": "warning", "note": "note"}


def artifact_location(path: str, srcroot: Path) -> dict[str, Any]:
    """A repo-relative ``artifactLocation`` under *srcroot*, else an absolute file URI."""
    p = Path(path)
    full = p if p.is_absolute() else Path.cwd() / p
    try:
        rel = full.resolve().relative_to(srcroot.resolve())
    except ValueError:
        return {"uri": full.resolve().as_uri()}
    return {"uri": quote(rel.as_posix()), "uriBaseId": SRCROOT}


def code_rule(code: str) -> dict[str, Any]:
    """The SARIF rule of a finding code, with the help ``residentkv explain`` prints."""
    c = lookup(code)
    text = f"{c.summary}. Why: {c.why}. Example: {c.example}. More: residentkv explain {c.id}"
    md = (f"**{c.summary}**\n\n{c.why}.\n\nExample: `{c.example}`\n\n"
          f"Run `residentkv explain {c.id}` for details.")
    return {"id": c.id, "name": c.name, "shortDescription": {"text": c.summary},
            "fullDescription": {"text": c.why}, "help": {"text": text, "markdown": md},
            "properties": {"phase": c.phase}}


def sarif_log(run: dict[str, Any], *, command: str, version: str, srcroot: Path,
              rules: list[dict[str, Any]]) -> dict[str, Any]:
    """Wrap one run's results and properties into a complete SARIF 2.1.0 log."""
    driver = {"name": "residentkv", "version": version, "informationUri": INFORMATION_URI,
              "rules": rules}
    full = {"tool": {"driver": driver},
            "automationDetails": {"id": f"residentkv/{command}/"},
            "originalUriBaseIds": {SRCROOT: {"uri": srcroot.resolve().as_uri() + "/",
                                             "description": {"text": "the repository root"}}},
            "columnKind": "unicodeCodePoints", **run}
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [full]}


def region(line: int | None, col: int | None = None) -> dict[str, int]:
    """A SARIF region (empty when the line is unknown)."""
    out: dict[str, int] = {}
    if line:
        out["startLine"] = line
        if col:
            out["startColumn"] = col
    return out


def locations(path: str | None, line: int | None, col: int | None,
              srcroot: Path) -> list[dict[str, Any]]:
    """The ``locations`` of a result: none for standard input (no file to place it in)."""
    if not path or path == STDIN:
        return []
    loc: dict[str, Any] = {"artifactLocation": artifact_location(path, srcroot)}
    reg = region(line, col)
    if reg:
        loc["region"] = reg
    return [{"physicalLocation": loc}]


# ------------------------------------------------------------------------------- check


def render_sarif(doc: dict[str, Any], srcroot: Path | None = None,
                 command: str = "check") -> dict[str, Any]:
    """The SARIF log of the canonical check JSON (rows' classes ride in result properties)."""
    root = srcroot or find_srcroot()
    findings = [(r, f) for r in doc["rows"] for f in r["findings"]]
    codes = sorted({f["code"] for _, f in findings})
    index = {c: i for i, c in enumerate(codes)}
    results = [_check_result(r, f, index[f["code"]], root) for r, f in findings]
    run = {"results": results,
           "properties": {"boundary": doc["boundary"], "summary": doc["summary"],
                          "evidence": doc.get("evidence", {}),
                          "rows": [{"id": r["id"], "class": r["class"],
                                    "boundary": r["boundary"], "roots": _roots(r)}
                                   for r in doc["rows"]]}}
    return sarif_log(run, command=command, version=doc["tool"]["version"], srcroot=root,
                     rules=[code_rule(c) for c in codes])


def _roots(row: dict[str, Any]) -> dict[str, str]:
    """The root of trust of each granting trace anchor of a row (SPEC §7.1), by anchor id."""
    return {a["id"]: a["root"] for a in row.get("anchors", []) if a.get("root")}


def _check_result(row: dict[str, Any], f: dict[str, Any], index: int,
                  srcroot: Path) -> dict[str, Any]:
    text = f["message"] + (f"\nhelp: {f['help']}" if f["help"] else "")
    return {"ruleId": f["code"], "ruleIndex": index, "level": _LEVEL.get(f["severity"], "note"),
            "message": {"text": text},
            "locations": locations(f["path"] or row["path"], f["line"], f["col"], srcroot),
            "properties": {"row": row["id"], "class": row["class"],
                           "boundary": row["boundary"]}}


@reporter("check", "sarif")
def _check_sarif(doc: dict[str, Any], opts: RenderOptions) -> str:
    return json_text(render_sarif(doc, opts.srcroot, opts.command))


def sarif_schema() -> dict[str, Any]:
    """The vendored OASIS SARIF 2.1.0 JSON Schema (draft-04), for offline validation."""
    text = resources.files("residentkv").joinpath("data", "schemas", "sarif-2.1.0.json")
    loaded: dict[str, Any] = json.loads(text.read_text(encoding="utf-8"))
    return loaded


def validate_file(path: str) -> list[str]:
    """Problems of the SARIF log at *path* against the vendored 2.1.0 schema (empty: valid).

    Needs ``jsonschema`` (the ``[dev]`` extra); a missing file or invalid JSON is a problem.
    """
    import jsonschema  # type: ignore[import-untyped,unused-ignore]

    try:
        log = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        return [f"{path}: cannot read a JSON SARIF log: {e}"]
    validator = jsonschema.Draft4Validator(sarif_schema())
    return [f"{path}: {'/'.join(str(p) for p in err.absolute_path) or '(root)'}: {err.message}"
            for err in validator.iter_errors(log)]


def main(argv: list[str] | None = None) -> int:
    """``python -m residentkv.report.sarif FILE...``: validate SARIF logs (exit 0 valid, 1 not)."""
    import sys

    files = sys.argv[1:] if argv is None else argv
    if not files:
        print("usage: python -m residentkv.report.sarif FILE...", file=sys.stderr)
        return 2
    problems = [p for f in files for p in validate_file(f)]
    for p in problems:
        print(p, file=sys.stderr)
    print(f"{len(files)} SARIF file(s): {'valid' if not problems else 'INVALID'} "
          "(SARIF 2.1.0 schema)")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
