"""The audit's reporters (text, json, md, sarif, html, and the ``audit.json`` record),
registered on the shared registry, and the summary and report.md they render (from the
check JSON and the audit's record)."""

from __future__ import annotations

from typing import Any

from residentkv.jsontext import json_text
from residentkv.lowering.bundles import OBLIGATIONS
from residentkv.lowering.curation import REVIEW_STATES, target_text
from residentkv.report.audit_result import AuditResult, witness_trace_paths
from residentkv.report.html import html_input, render_page
from residentkv.report.markdown import render_markdown
from residentkv.report.matrix import matrix_rows
from residentkv.report.registry import RenderOptions, reporter
from residentkv.report.runtime_matrix import (
    render_runtime_matrix,
    render_runtime_matrix_md,
    runtime_matrix,
)
from residentkv.report.sarif import render_sarif
from residentkv.report.text import render_table

__all__ = ["audit_page", "render_audit_markdown", "render_audit_text"]

_ROW_COLUMNS = ("row", "lowers", "asserts", "B1", "B2", "B3", "B4", "class", "expect")


def _source_line(s: dict[str, Any]) -> str:
    sha = f" sha256 {s['sha256'][:16]}…" if s.get("sha256") else ""
    return f"{s['requirement']}: {s['status']}{sha} — {s['detail']}"


def _witness_line(w: dict[str, Any]) -> str:
    if w.get("mode") == "live":
        return (f"witness: live run on vLLM, {w['matched']}/{w['runs']} scenario runs matched "
                f"their expected gate results ({'pass' if w['passed'] else 'FAIL'})")
    prov = w.get("provenance") or {}
    made = f" produced by {prov['produced_by']} on {prov.get('vllm')}" if prov else ""
    return f"witness: shipped traces ({len(w.get('traces', []))} files){made}"


def _compact_rows(doc: dict[str, Any]) -> list[list[str]]:
    # matrix_rows: row, mechanism, lowers, asserts, B1..B4, class, expect
    return [[c[0], c[2], c[3], *c[4:8], c[8], "=" if c[9] == c[8] else f"≠ {c[9]}"]
            for c in matrix_rows(doc)]


def _review_line(reviews: dict[str, int]) -> str:
    counts = ", ".join(f"{s} {reviews.get(s, 0)}" for s in REVIEW_STATES)
    return f"anchors into pinned releases: {counts}"


def _curation_md(doc: dict[str, Any]) -> list[str]:
    """Per row: the curator's note per obligation and each anchor's target."""
    lines = ["## Curation: notes and anchor targets", ""]
    for r in doc["rows"]:
        lines += [f"### `{r['id']}` — {r['class']}", ""]
        for i, name in enumerate(OBLIGATIONS, 1):
            ob = r["obligations"].get(name)
            if ob is None:
                continue
            cited = ", ".join(a["id"] for a in ob["anchors"]) or "none"
            lines.append(f"- B{i} {name}: **{ob['effective']}** (asserted {ob['asserted']}; "
                         f"{cited}) — {ob.get('note') or '(no note)'}")
        for a in r["anchors"]:
            t = a.get("target")
            lines.append(f"  - `{a['id']}`: {target_text(t) if t else a['result']}")
        lines.append("")
    return lines


def render_audit_text(result: AuditResult, *, width: int = 160) -> str:
    """What ``residentkv audit`` prints: sources, witness, suite, the matrices, the verdict."""
    doc = result.doc
    out = ["sources:"] + [f"  {_source_line(s)}" for s in result.sources]
    out.append(_witness_line(result.witness))
    out.append(result.suite["detail"])
    out += [f"  {line}" for line in result.suite.get("lines", [])]
    out.append(render_runtime_matrix(runtime_matrix(doc), width=width).rstrip())
    out.append(render_table("rows", _ROW_COLUMNS, _compact_rows(doc), width=width).rstrip())
    for f in (f for r in doc["rows"] for f in r["findings"] if f["severity"] == "error"):
        out.append(f"{f['path']}:{f['line']}:{f['col']}: error[{f['code']} {f['name']}]: "
                   f"{f['message']}")
    out.append(_review_line(result.reviews))
    out += [f"unverified: {u}" for u in result.unverified]
    out += [f"positive class on a public runtime row: {p}" for p in result.positive_public]
    out += [f"observed: {s}" for s in result.observed_short]
    out.append("summary: " + ", ".join(f"{k} {v}" for k, v in doc["summary"].items()))
    out.append(f"boundary: {doc['boundary']}")
    out.append("reports: " + ", ".join(result.files.values()))
    out.append("audit: " + ("passed" if result.exit_code == 0 else "FELL SHORT"))
    return "\n".join(out) + "\n"


def render_audit_markdown(result: AuditResult, check_md: str) -> str:
    """report.md: the audit header, the runtime matrix, then the check report per row."""
    doc = result.doc
    lines = ["# residentkv audit", "", f"> {doc['boundary']}", "", "## Sources", ""]
    lines += [f"- {_source_line(s)}" for s in result.sources]
    lines += ["", "## Witness", "", f"- {_witness_line(result.witness)}"]
    for t in result.witness.get("traces", []):
        lines.append(f"  - `{t['path']}` sha256 `{t['sha256']}`")
    for r in result.witness.get("results", []):
        lines.append(f"  - {r['scenario']}: matched {r['matched']}, gates {r['gates']}")
    lines += ["", "## Suite", "", f"- {result.suite['detail']}"]
    lines += [f"  - {x}" for x in result.suite.get("lines", [])]
    lines += ["",
              "## Runtime × obligation", "", render_runtime_matrix_md(runtime_matrix(doc)),
              "Cells: the strongest effective status over the runtime's rows; ✓ verified, "
              "~ cited, · no usable evidence.", "",
              "## Anchor review", "", f"- {_review_line(result.reviews)} (reviewed: the "
              "anchored text changed in a later release and a curator re-read it; pending: "
              "it does not verify against the release it names)", ""]
    if result.observed:
        run = result.observed["run"]
        lines += ["## Observer", "", f"- live trace `{run['trace']}` of {run.get('runtime')} (no "
                  "residentkv connector), anchored as `o_observed` (gate lifecycle, claim "
                  f"c-soft, expected to fail) in: {', '.join(result.observed['rows'])}", ""]
    if result.unverified or result.positive_public or result.observed_short:
        lines += ["## Shortfalls", ""]
        lines += [f"- observed: {s}" for s in result.observed_short]
        lines += [f"- unverified: {u}" for u in result.unverified]
        lines += [f"- positive class on a public runtime row: {p}"
                  for p in result.positive_public]
        lines.append("")
    lines += [f"**Audit: {'passed' if result.exit_code == 0 else 'fell short'}**", ""]
    body = check_md.split("\n", 1)[1] if check_md.startswith("# ") else check_md
    lines += _curation_md(doc)
    lines += ["## Rows", body]
    return "\n".join(lines)


def audit_page(result: AuditResult) -> dict[str, Any]:
    """The HTML page's input for one audit: check JSON, audit record, the timelines of the
    witness traces and (``--live``) of the observer's trace of plain vLLM."""
    paths = list(dict.fromkeys(r["path"] for r in result.doc["rows"]))
    traces = [str(p) for p in witness_trace_paths(result.witness)]
    if result.observed:
        traces.append(str(result.observed["run"]["trace"]))
    return html_input(result.doc, paths, result.audit_json(), traces)


@reporter("audit", "text")
def _text(result: AuditResult, _opts: RenderOptions) -> str:
    return render_audit_text(result)


@reporter("audit", "json")
def _json(result: AuditResult, _opts: RenderOptions) -> str:
    return json_text(result.doc)


@reporter("audit", "md")
def _md(result: AuditResult, _opts: RenderOptions) -> str:
    return render_audit_markdown(result, render_markdown(result.doc))


@reporter("audit", "sarif")
def _sarif(result: AuditResult, opts: RenderOptions) -> str:
    return json_text(render_sarif(result.doc, opts.srcroot, opts.command))


@reporter("audit", "html")
def _html(result: AuditResult, _opts: RenderOptions) -> str:
    return render_page(audit_page(result))


@reporter("audit-record", "json")
def _record(result: AuditResult, _opts: RenderOptions) -> str:
    return json_text(result.audit_json())
