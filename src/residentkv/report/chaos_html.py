"""The HTML page of a chaos run (kind ``chaos``, format ``html``): one self-contained page with
the verdict, the figures, latency, the server incarnations and faults, a timeline of every
request and fault over the run, and every finding. Rendered from the history checker's JSON
form; nothing here re-evaluates."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from residentkv.findings import Finding
from residentkv.report.chaos_report import (
    FAULT_COLUMNS,
    LATENCY_COLUMNS,
    STREAM_COLUMNS,
    fault_rows,
    figure_rows,
    incarnation_rows,
    latency_rows,
    settings_line,
    stream_rows,
    verdict_line,
)
from residentkv.report.registry import RenderOptions, reporter

#: colour of each kind of answer on the timeline
ANSWER_COLOURS: dict[str, str] = {
    "restored": "#1b7f3b", "not_restored": "#8a8a94", "refused": "#c46a00",
    "registration": "#1f5fbf", "unclaimed": "#c8c8d0", "foreign": "#6a3d9a",
    "error": "#b3261e",
}
#: a request without an HTTP response (connection refused or lost, timeout)
NO_RESPONSE = "#222222"
_CSS = """
body{font:14px/1.45 system-ui,sans-serif;color:#1d1d1f;margin:0 auto;max-width:1180px;
 padding:16px 20px}h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #d0d0d7}
table{border-collapse:collapse;margin:6px 0 12px}th,td{border:1px solid #d0d0d7;
 padding:3px 6px;text-align:left}th{background:#f3f3f6}.verdict{padding:3px 10px;
 border-radius:4px;color:#fff;font-weight:600}.pass{background:#1b7f3b}.fail{background:#b3261e}
.FAIL{color:#b3261e;font-weight:600}.ok{color:#1b7f3b}.mono{font-family:ui-monospace,monospace;
 font-size:12px}.boundary{border-left:3px solid #d0d0d7;padding-left:8px;color:#444}
svg{max-width:100%;height:auto}.sw{display:inline-block;width:10px;height:10px;
 border-radius:50%;margin:0 4px 0 12px}@media print{body{max-width:none}}
"""


def _e(x: Any) -> str:
    return escape("" if x is None else str(x))


def _table(columns: Sequence[str], rows: Sequence[Sequence[str]], klass: str = "") -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(
        f'<td class="{_e(cell) if cell in ("ok", "FAIL") else ""}">{_e(cell)}</td>'
        for cell in row) + "</tr>" for row in rows)
    return f'<table class="{klass}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _span(doc: dict[str, Any]) -> float:
    ends = [float(doc["load_window"][1]),
            *(float(i["stopped_at"] or 0) for i in doc["incarnations"]),
            *(float(f["ended_at"] or 0) for f in doc["faults"])]
    return max(*ends, 1.0)


def timeline_svg(doc: dict[str, Any]) -> str:
    """Server incarnations, faults and every request on one time axis."""
    span, left, width, lane = _span(doc), 90, 1000, 22
    clients = sorted({p["client"] for p in doc["timeline"]})
    lanes = ["server", "faults", *(f"client {c}" if c >= 0 else "nemesis" for c in clients)]
    height = 30 + lane * len(lanes) + 20

    def x(t: float) -> float:
        return round(left + width * t / span, 1)

    def y(i: int) -> int:
        return 30 + lane * i + lane // 2

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {left + width + 20} {height}" '
           f'width="{left + width + 20}" height="{height}" role="img" '
           'aria-label="timeline of the chaos run">']
    out += [f'<text x="4" y="{y(i) + 4}" font-size="11">{_e(name)}</text>'
            for i, name in enumerate(lanes)]
    for t in range(0, int(span) + 1, max(int(span / 10), 1)):
        out.append(f'<line x1="{x(t)}" y1="24" x2="{x(t)}" y2="{height - 14}" stroke="#eee"/>'
                   f'<text x="{x(t)}" y="{height - 2}" font-size="9">{t}s</text>')
    for a, label in zip(doc["load_window"], ("load starts", "load ends"), strict=True):
        out.append(f'<line x1="{x(a)}" y1="20" x2="{x(a)}" y2="{height - 14}" stroke="#555" '
                   f'stroke-dasharray="4 3"/><text x="{x(a) + 2}" y="16" font-size="9">'
                   f"{label}</text>")
    out += _server_lane(doc, x, y(0), span)
    out += _fault_lane(doc, x, y(1))
    row = {c: 2 + i for i, c in enumerate(clients)}
    for p in doc["timeline"]:
        colour = ANSWER_COLOURS.get(p["category"], NO_RESPONSE)
        out.append(f'<circle cx="{x(p["t"])}" cy="{y(row[p["client"]])}" r="3" '
                   f'fill="{colour}"><title>{_e(p["kind"])}: {_e(p["category"])}, '
                   f'{p["ms"]:.0f} ms at {p["t"]:.1f} s</title></circle>')
    out.append("</svg>")
    return "".join(out)


def _server_lane(doc: dict[str, Any], x: Any, cy: int, span: float) -> list[str]:
    out = []
    for inc in doc["incarnations"]:
        start, ready = inc["started_at"], inc["ready_at"] or inc["started_at"]
        stop = inc["stopped_at"] if inc["stopped_at"] is not None else span
        out.append(f'<rect x="{x(start)}" y="{cy - 6}" width="{max(x(ready) - x(start), 1)}" '
                   f'height="12" fill="#d0d0d7"><title>incarnation {inc["index"]} starting'
                   "</title></rect>")
        out.append(f'<rect x="{x(ready)}" y="{cy - 6}" width="{max(x(stop) - x(ready), 1)}" '
                   f'height="12" fill="#7fb88f"><title>incarnation {inc["index"]} serving; '
                   f'ended by {_e(inc["stopped_by"])}</title></rect>')
    return out


def _fault_lane(doc: dict[str, Any], x: Any, cy: int) -> list[str]:
    out = []
    for f in doc["faults"]:
        if not f["applied"]:
            continue
        a, b = f["started_at"], f["ended_at"] or f["started_at"]
        out.append(f'<rect x="{x(a)}" y="{cy - 6}" width="{max(x(b) - x(a), 3)}" height="12" '
                   f'fill="#b3261e" opacity="0.75"><title>{_e(f["kind"])}: {_e(f["detail"])}'
                   "</title></rect>"
                   f'<text x="{x(a)}" y="{cy - 8}" font-size="9" fill="#b3261e">'
                   f'{_e(f["kind"])}</text>')
    return out


@reporter("chaos", "html")
def render_html(doc: dict[str, Any], _opts: RenderOptions | None = None) -> str:
    """The whole page."""
    passed = doc["passed"]
    legend = "".join(f'<span class="sw" style="background:{c}"></span>{_e(k)}'
                     for k, c in ANSWER_COLOURS.items())
    conf = doc["conformance"]
    out = [
        "<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "style-src 'unsafe-inline'\">",
        f"<title>residentkv chaos</title><style>{_CSS}</style></head><body>",
        "<h1>residentkv chaos</h1>",
        f'<p><span id="verdict" class="verdict {"pass" if passed else "fail"}">'
        f"{_e(verdict_line(doc))}</span></p>",
        f"<p>{_e(settings_line(doc))}</p>",
        f'<p class="boundary">{_e(doc["boundary"])}</p>',
        f'<h2 id="timeline">Timeline</h2><p class="small">{legend}'
        f'<span class="sw" style="background:{NO_RESPONSE}"></span>no response</p>',
        timeline_svg(doc),
        '<h2 id="figures">Figures</h2>',
        _table(("figure", "value", "result"), figure_rows(doc, must=True)),
        _table(("figure", "value"), figure_rows(doc, must=False)),
        f'<p>conformance: <b>{_e(conf["status"])}</b> ({_e(conf["detail"])})</p>',
        _table(STREAM_COLUMNS, stream_rows(doc)) if conf.get("streams") else "",
        f'<h2 id="latency">Latency (ms)</h2><p>{doc["load"]["requests_per_s"]} requests/s, '
        f'{doc["load"]["served_per_s"]} served/s over {doc["load"]["seconds"]} s of serving '
        f'load ({doc["load"]["wall_seconds"]} s wall)</p>',
        _table(("answer", *LATENCY_COLUMNS), latency_rows(doc)),
        '<h2 id="faults">Server incarnations and faults</h2>',
        _table(("#", "started", "ready", "stopped", "by", "pid"), incarnation_rows(doc)),
        _table(FAULT_COLUMNS, fault_rows(doc)),
        f'<h2 id="findings">Findings ({len(doc["findings"])})</h2><ul class="mono">',
        *(f"<li>{_e(Finding.model_validate(f).render())}</li>" for f in doc["findings"]),
        "</ul></body></html>",
    ]
    return "\n".join(out) + "\n"
