"""What ``residentkv audit`` shows on a terminal: short enough for a log or an 80-column window.

By default: one line each for the witness and the suite, the runtime × obligation matrix as
plain aligned text, the verdict counts, everything that needs attention (or that nothing does),
the path of the report (report.html when written) and the audit's verdict. The row table is
printed only on request (``--rows``); it is always in the reports.
"""

from __future__ import annotations

from typing import Any

from residentkv.lowering.bundles import OBLIGATIONS
from residentkv.lowering.curation import REVIEW_STATES
from residentkv.printable import printable_fields
from residentkv.report.audit_report import render_audit_text
from residentkv.report.audit_result import AuditResult
from residentkv.report.runtime_matrix import runtime_matrix

__all__ = ["render_audit_terminal"]

#: short status and class labels, so a matrix line fits 80 columns (legend printed below it)
_STATUS = {"satisfied": "sat", "partial": "part", "absent": "abs", "contradicted": "contr",
           "unknown": "unk"}
_CLASS = {"native_conformance": "native", "adapter_policy_evidence": "policy",
          "adapter_observational_evidence": "observational",
          "approximation_substrate": "substrate", "rejected_mapping": "rejected",
          "unknown_evidence": "unknown"}
_MARK = {"verified": "✓", "cited": "~", "none": "·"}
_LEGEND = ("B1-B4: the strongest status over the release's rows (sat, part, abs, contr, unk)",
           "on verified (✓), cited (~) or no usable (·) evidence")


def _matrix_lines(doc: dict[str, Any]) -> list[str]:
    entries = runtime_matrix(doc)
    name_w = max([len("runtime release"), *(len(e["runtime"]) for e in entries)])
    head = f"{'runtime release':<{name_w}} {'rows':>4}  " + "".join(
        f"{b:<8}" for b in ("B1", "B2", "B3", "B4")) + "strongest"
    lines = ["runtime x obligation", head]
    for e in entries:
        cells = "".join(
            f"{_STATUS.get(c['effective'], c['effective'])} {_MARK.get(c['strength'], '?')}"
            .ljust(8) for c in (e["obligations"][n] for n in OBLIGATIONS))
        klass = _CLASS.get(e["strongest_class"], e["strongest_class"])
        lines.append(f"{e['runtime']:<{name_w}} {e['rows']:>4}  {cells}{klass}")
    return [*lines, *_LEGEND]


def _attention(result: AuditResult) -> list[str]:
    """Everything that makes the audit fall short or that a reader must act on."""
    doc = result.doc
    out = [f"source {s['requirement']}: {s['status']} — {s['detail']}"
           for s in result.sources if s.get("path") is None]
    w = result.witness
    if w.get("mode") == "live" and not w.get("passed"):
        out.append(f"witness: {w.get('matched')}/{w.get('runs')} scenario runs matched their "
                   "expected gate results")
    if result.suite.get("available") and not result.suite.get("passed"):
        out.append(f"suite: {result.suite['detail']}")
    out += [f"observed: {s}" for s in result.observed_short]
    for r in doc["rows"]:
        if r.get("expect") and r["expect"] != r["class"]:
            out.append(f"row {r['id']}: {r['class']}, expected {r['expect']}")
    out += [f"{f['path']}:{f['line']}:{f['col']}: error[{f['code']} {f['name']}]: "
            f"{f['message']}"
            for r in doc["rows"] for f in r["findings"] if f["severity"] == "error"]
    if result.unverified:  # one line, not one per anchor: audit.json lists each
        out.append(f"unverified anchors: {len(result.unverified)} (each listed in audit.json); "
                   f"first: {result.unverified[0]}")
    out += [f"positive class on a public runtime row: {p}" for p in result.positive_public]
    pending = result.reviews.get("pending", 0)
    if pending:
        out.append(f"anchors pending review: {pending} (`residentkv anchors review`)")
    return out


def _report_path(result: AuditResult) -> str:
    files = result.files
    main = files.get("report.html") or files.get("report.md") or next(iter(files.values()), "")
    others = [k for k, p in files.items() if p != main]
    return f"report: {main}" + (f"\n  beside it: {', '.join(others)}" if others else "")


def render_audit_terminal(result: AuditResult, *, rows: bool = False, width: int = 80) -> str:
    """The audit's terminal view; *rows* adds the full row table (the detailed text view).
    Every field is escaped first (:func:`residentkv.printable.printable_fields`)."""
    result = printable_fields(result)
    if rows:
        return render_audit_text(result, width=max(width, 160))
    doc = result.doc
    w = result.witness
    witness = (f"witness: live, {w.get('matched')}/{w.get('runs')} runs matched their "
               "expected gate results"
               if w.get("mode") == "live" else
               f"witness: shipped traces ({len(w.get('traces', []))} files)")
    out = [witness, result.suite["detail"], "", *_matrix_lines(doc), ""]
    out.append(f"verdicts ({len(doc['rows'])} rows):")
    out += [f"  {v:>4} {k}" for k, v in doc["summary"].items()]
    out.append("anchors into pinned releases: " + ", ".join(
        f"{k} {result.reviews.get(k, 0)}" for k in REVIEW_STATES))
    attention = _attention(result)
    if attention:
        out.append(f"needs attention ({len(attention)}):")
        out += [f"  {a}" for a in attention]
    else:
        out.append("needs attention: nothing")
    out.append(_report_path(result))
    out.append("rows: in the report, or `residentkv audit --rows`")
    out.append("audit: " + ("passed" if result.exit_code == 0 else "FELL SHORT"))
    return "\n".join(out) + "\n"
