"""The audit's reporters (text, json, md, html), registered on the shared registry."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from residentkv.audit.render import render_audit_markdown, render_audit_text
from residentkv.audit.witness_traces import witness_trace_paths
from residentkv.report.html import html_input, render_page
from residentkv.report.json_report import dumps
from residentkv.report.markdown import render_markdown
from residentkv.report.registry import RenderOptions, reporter

if TYPE_CHECKING:
    from residentkv.audit.job import AuditResult


@reporter("audit", "text")
def _text(result: AuditResult, _opts: RenderOptions) -> str:
    return render_audit_text(result)


@reporter("audit", "json")
def _json(result: AuditResult, _opts: RenderOptions) -> str:
    return dumps(result.doc)


@reporter("audit", "md")
def _md(result: AuditResult, _opts: RenderOptions) -> str:
    return render_audit_markdown(result, render_markdown(result.doc))


def audit_page(result: AuditResult) -> dict[str, Any]:
    """The HTML page's input for one audit: check JSON, audit record, the timelines of the
    witness traces and (``--live``) of the observer's trace of plain vLLM."""
    paths = list(dict.fromkeys(r["path"] for r in result.doc["rows"]))
    traces = [str(p) for p in witness_trace_paths(result.witness)]
    if result.observed:
        traces.append(str(result.observed["run"]["trace"]))
    return html_input(result.doc, paths, result.audit_json(), traces)


@reporter("audit", "html")
def _html(result: AuditResult, _opts: RenderOptions) -> str:
    return render_page(audit_page(result))
