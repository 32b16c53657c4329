"""One self-contained HTML report (``report.html``): no network, no external assets, printable.

Rendered from JSON-able inputs only: the canonical check JSON (with the curator's notes and
anchor targets merged in, see :mod:`residentkv.lowering.curation`), optionally the audit record
(``audit.json``: sources, witness, suite) and the witness timelines
(:mod:`residentkv.report.timeline`). Sections: verdict and boundary, suite and witness summary,
the runtime x obligation matrix, every row (per-obligation status, the curator's reason, each
anchor's target and verification state), and the witness traces as timelines.
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

from residentkv.lowering.curation import with_curation
from residentkv.model.vocabulary import OBLIGATION_SHORT as SHORT
from residentkv.model.vocabulary import OBLIGATIONS
from residentkv.report.json_report import CITED_NEVER_GRANTS, evidence_line, strict_lines
from residentkv.report.registry import RenderOptions, reporter
from residentkv.report.runtime_matrix import runtime_matrix
from residentkv.report.timeline import CATEGORY_COLOURS, event_label, timeline

_MARK = {"verified": "✓ verified", "cited": "~ cited", "none": "· no usable evidence"}
_CSS = """
:root{--ok:#1b7f3b;--part:#a86b00;--bad:#b3261e;--unk:#6b6b6b;--ink:#1d1d1f;--line:#d0d0d7}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--ink);
 margin:0 auto;max-width:1180px;padding:16px 20px}
h1{font-size:22px;margin:4px 0}h2{font-size:18px;margin:22px 0 8px;border-bottom:1px solid
 var(--line);padding-bottom:4px}h3{font-size:15px;margin:14px 0 6px}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
table{border-collapse:collapse;width:100%;margin:6px 0 10px}
th,td{border:1px solid var(--line);padding:4px 6px;text-align:left;vertical-align:top}
th{background:#f3f3f6;font-weight:600}
table.rows{font-size:12.5px}table.rows td{white-space:nowrap}
table.rows td:nth-last-child(-n+2){white-space:normal}table.rows td.rowid{white-space:normal}
.verdict{display:inline-block;padding:3px 10px;border-radius:4px;color:#fff;font-weight:600}
.pass{background:var(--ok)}.fail{background:var(--bad)}
.st{font-weight:600;white-space:nowrap}
.st-satisfied{color:var(--ok)}.st-partial{color:var(--part)}.st-absent{color:var(--bad)}
.st-contradicted{color:var(--bad)}.st-unknown{color:var(--unk)}
td.cell-satisfied{background:#e7f4ea}td.cell-partial{background:#fff4de}
td.cell-absent,td.cell-contradicted{background:#fbe9e7}td.cell-unknown{background:#f1f1f1}
.cls{font-weight:600}.cls-native_conformance,.cls-adapter_policy_evidence{color:var(--ok)}
.cls-adapter_observational_evidence{color:#0b6e74}.cls-approximation_substrate{color:var(--part)}
.cls-rejected_mapping{color:var(--bad)}.cls-unknown_evidence{color:var(--unk)}
.res-verified{color:var(--ok)}.res-unverifiable{color:var(--part)}
.res-drifted,.res-missing,.res-failed{color:var(--bad)}
.nw{white-space:nowrap}.small{font-size:12px}th .muted{font-weight:400;font-size:11.5px}
table.matrix{font-size:13px}.note{color:#333}.muted{color:#666}
.boundary{border-left:3px solid var(--line);padding-left:8px;color:#444;margin:6px 0}
section.row{border:1px solid var(--line);border-radius:6px;padding:8px 12px;margin:12px 0;
 break-inside:avoid}
svg{max-width:100%;height:auto}svg text{font-family:system-ui,sans-serif}
.legend span{display:inline-block;margin-right:14px}
.sw{display:inline-block;width:10px;height:10px;border-radius:50%;margin-right:4px}
nav a{margin-right:12px}
@media print{body{max-width:none;padding:0;font-size:11px}nav{display:none}
 section.row,figure{break-inside:avoid}h2{break-after:avoid}a{color:inherit;text-decoration:none}}
"""
_COLOURS = CATEGORY_COLOURS


def _e(x: Any) -> str:
    return escape("" if x is None else str(x))


def _wrap(row_id: str) -> str:
    """A row id that may break after its slashes (never inside a word)."""
    return "/<wbr>".join(f'<span class="nw">{_e(part)}</span>' for part in row_id.split("/"))


def _status(ob: dict[str, Any]) -> str:
    eff = ob["effective"]
    return (f'<span class="st st-{_e(eff)}">{_e(eff)}</span> '
            f'<span class="muted">{_e(_MARK.get(ob["strength"], ob["strength"])[0])}</span>')


def _cls(name: str) -> str:
    # a class name may break after its underscores, so narrow columns stay on screen
    return f'<span class="cls cls-{_e(name)}">{_e(name).replace("_", "_<wbr>")}</span>'


def _head(title: str) -> list[str]:
    return ["<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
            "style-src 'unsafe-inline'; img-src data:\">",
            f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"]


def _summary(doc: dict[str, Any], audit: dict[str, Any] | None) -> list[str]:
    passed = (audit or doc)["exit_code"] == 0
    what = "audit" if audit else "check"
    out = [f'<p><span class="verdict {"pass" if passed else "fail"}" id="verdict">{what}: '
           f'{"passed" if passed else "fell short"}</span> '
           f'<span class="muted">residentkv {_e(doc["tool"]["version"])}</span></p>',
           f'<p class="boundary">{_e(doc["boundary"])}</p>',
           "<p>" + ", ".join(f"{_cls(k)} {v}" for k, v in doc["summary"].items()) + "</p>"]
    if doc.get("evidence"):
        out.append(f'<p id="evidence">{_e(evidence_line(doc))}</p>')
    out += [f"<p>{_e(x)}</p>" for x in strict_lines(doc)]
    return out


def _audit_sections(audit: dict[str, Any]) -> list[str]:
    suite, witness = audit.get("suite") or {}, audit.get("witness") or {}
    out = ['<h2 id="suite">Suite and witness</h2>', "<table><tbody>"]
    lines = suite.get("lines", [])
    mutants = [x.removeprefix("suite mutants ") for x in lines if x.startswith("suite mutants")]
    others = [x for x in lines if not x.startswith("suite mutants")]
    out.append(f"<tr><th>suite</th><td>{_e(suite.get('detail', 'not run'))}"
               + "".join(f"<br><span class='muted'>{_e(x)}</span>" for x in others)
               + (f"<br><span class='muted small'>mutants by operator: "
                  f"{_e(' · '.join(mutants))}</span>" if mutants else "") + "</td></tr>")
    if witness.get("mode") == "live":
        wtext = (f"live run on vLLM: {witness.get('matched')}/{witness.get('runs')} scenario "
                 f"runs matched their expected gate results")
    else:
        prov = witness.get("provenance") or {}
        wtext = (f"shipped traces ({len(witness.get('traces', []))} files), produced by "
                 f"{prov.get('produced_by', '?')} on {prov.get('vllm', '?')}")
    out.append(f"<tr><th>witness</th><td>{_e(wtext)}</td></tr>")
    for s in audit.get("sources", []):
        out.append(f"<tr><th>source</th><td>{_e(s['requirement'])}: <b>{_e(s['status'])}</b> "
                   f"<span class='muted'>{_e(s.get('detail'))}</span></td></tr>")
    for u in audit.get("unverified_anchors", []):
        out.append(f"<tr><th>unverified</th><td class='res-missing'>{_e(u)}</td></tr>")
    for p in audit.get("positive_public_rows", []):
        out.append(f"<tr><th>positive public row</th><td class='res-missing'>{_e(p)}</td></tr>")
    out.append("</tbody></table>")
    return out


def _matrix(doc: dict[str, Any]) -> list[str]:
    out = ['<h2 id="matrix">Runtime × obligation</h2>',
           '<table class="matrix"><thead><tr><th>runtime</th><th>rows</th>']
    out += [f"<th>{SHORT[n]} <span class='muted'>{n}</span></th>" for n in OBLIGATIONS]
    out.append("<th>strongest class</th><th>anchors</th></tr></thead><tbody>")
    for m in runtime_matrix(doc):
        cells = "".join(
            f'<td class="cell cell-{_e(m["obligations"][n]["effective"])}" data-obligation='
            f'"{n}">{_status(m["obligations"][n])}</td>' for n in OBLIGATIONS)
        anchors = ", ".join(f"{v} {_e(k)}" for k, v in m["anchors"].items())
        out.append(f'<tr data-runtime="{_e(m["runtime"])}"><td>{_e(m["runtime"])}</td>'
                   f'<td>{m["rows"]}</td>{cells}<td>{_cls(m["strongest_class"])}</td>'
                   f"<td>{anchors}</td></tr>")
    out.append("</tbody></table><p class='muted'>Cells: the strongest effective status over "
               "the runtime's rows; ✓ verified, ~ cited, · no usable evidence. "
               f"{_e(CITED_NEVER_GRANTS)}.</p>")
    return out


def _rows_table(doc: dict[str, Any]) -> list[str]:
    out = ['<h2 id="rows">Rows</h2>', '<table class="rows"><thead><tr><th>row</th><th>lowers</th>'
           "<th>asserts</th>"]
    out += [f"<th>{SHORT[n]}</th>" for n in OBLIGATIONS]
    out.append("<th>class</th><th title='= the class matches the expect field'>expect</th>"
               "</tr></thead><tbody>")
    for r in doc["rows"]:
        cells = "".join(f'<td class="cell-{_e(r["obligations"][n]["effective"])}">'
                        f'{_status(r["obligations"][n])}</td>' for n in OBLIGATIONS)
        same = r["expect"] in (None, r["class"])
        exp = ("=" if r["expect"] else "-") if same else f"≠ {_e(r['expect'])}"
        mark = "" if same else ' class="res-missing"'
        out.append(f'<tr><td class="rowid"><a href="#row-{_e(r["id"])}"><code>{_wrap(r["id"])}'
                   f'</code></a></td><td>{_e(r["lowers"])}</td><td>{_e(r["asserts"])}</td>'
                   f'{cells}<td>{_cls(r["class"])}</td>'
                   f'<td{mark}>{_e(exp).replace("_", "_<wbr>")}</td></tr>')
    out.append("</tbody></table>")
    return out


def _target(a: dict[str, Any]) -> str:
    """Where an anchor points: release, file, symbol, line range (or trace / doc / sim)."""
    t = a.get("target") or {}
    kind = t.get("kind", a["kind"])
    if kind == "source" and t:
        parts = [f"<b>{_e(t.get('release') or t.get('package'))}</b>",
                 f"<code>{_e(t.get('file'))}</code>"]
        if t.get("symbol"):
            parts.append(f"symbol <code>{_e(t['symbol'])}</code>")
        if t.get("lines") or a.get("lines"):
            parts.append(f"lines {_e(t.get('lines') or a.get('lines'))}")
        if t.get("review"):
            parts.append(f"<span class='muted'>({_e(t['review'])})</span>")
        return " ".join(parts)
    if kind == "trace" and t:
        return (f"trace <code>{_e(t.get('file'))}</code> gate <b>{_e(t.get('gate'))}</b> "
                f"claim <code>{_e(t.get('claim'))}</code>")
    if kind == "doc" and t:
        quote = f"<br><span class='muted'>“{_e(t['quote'])}”</span>" if t.get("quote") else ""
        return f"doc {_e(t.get('url'))}{quote}"
    if kind == "sim" and t:
        return f"sim scenario <code>{_e(t.get('scenario'))}</code>"
    return "<span class='muted'>(target not recorded)</span>"


def _row_section(r: dict[str, Any]) -> list[str]:
    out = [f'<section class="row" id="row-{_e(r["id"])}" data-row="{_e(r["id"])}">',
           f'<h3><code>{_e(r["id"])}</code> — {_cls(r["class"])} '
           f'<span class="muted">rule {r["rule"]}, {_e(r["runtime"])}, lowers '
           f'{_e(r["lowers"])}, asserts {_e(r["asserts"])}</span></h3>',
           f'<p class="muted">{_e(r["mode"])}</p>']
    out += [f"<p>{_e(x)}</p>" for x in r["reasons"]]
    out.append("<table><thead><tr><th>obligation</th><th>asserted</th><th>effective</th>"
               "<th>curator's reason</th><th>checker</th></tr></thead><tbody>")
    for n in OBLIGATIONS:
        ob = r["obligations"][n]
        out.append(f'<tr data-obligation="{n}"><td>{SHORT[n]} <code>{n}</code></td>'
                   f'<td>{_e(ob["asserted"])}</td><td>{_status(ob)}</td>'
                   f'<td class="note reason">{_e(ob.get("note") or "(no note)")}</td>'
                   f'<td class="muted">{_e(ob["reason"])}</td></tr>')
    out.append("</tbody></table>")
    if r["anchors"]:
        out.append("<table><thead><tr><th>anchor</th><th>kind</th><th>target</th>"
                   "<th>verification</th></tr></thead><tbody>")
        for a in r["anchors"]:
            out.append(f'<tr data-anchor="{_e(a["id"])}"><td><code>{_e(a["id"])}</code></td>'
                       f'<td>{_e(a["kind"])}</td><td>{_target(a)}</td>'
                       f'<td><span class="res-{_e(a["result"])}"><b>{_e(a["result"])}</b>'
                       f'</span> <span class="muted">{_e(a["detail"])}</span></td></tr>')
        out.append("</tbody></table>")
    for f in r["findings"]:
        loc = ":".join(str(x) for x in (f["path"], f["line"], f["col"]) if x is not None)
        out.append(f'<p class="mono">{_e(loc)}: {_e(f["severity"])}[{_e(f["code"])} '
                   f'{_e(f["name"])}]: {_e(f["message"])}</p>')
    out += [f'<p class="boundary">{_e(r["boundary"])}</p>', "</section>"]
    return out


def timeline_svg(t: dict[str, Any]) -> str:
    """One trace as an SVG: a lane per request, events in seq order, failure -> outcome."""
    events, lanes = t["events"], t["lanes"]
    step, left, top, lane_h = 30, 110, 34, 54
    width = left + step * max(len(events), 1) + 30
    height = top + lane_h * len(lanes) + 16
    x = {e["seq"]: left + step * i + step // 2 for i, e in enumerate(events)}
    y = {lane: top + lane_h * i + lane_h // 2 for i, lane in enumerate(lanes)}
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img" aria-label="timeline of '
           f'{_e(t["name"])}">',
           '<defs><marker id="arr" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
           'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#b3261e"/>'
           "</marker></defs>"]
    for lane, ly in y.items():
        seqs = [x[e["seq"]] for e in events if e["request"] == lane]
        out.append(f'<text x="4" y="{ly + 4}" font-size="11">{_e(lane)}</text>')
        if seqs:
            out.append(f'<line x1="{min(seqs)}" y1="{ly}" x2="{max(seqs)}" y2="{ly}" '
                       'stroke="#c8c8d0" stroke-width="6" stroke-linecap="round"/>')
    for link in t["links"]:
        a = next(e for e in events if e["seq"] == link["from"])
        b = next(e for e in events if e["seq"] == link["to"])
        out.append(f'<path class="link" d="M{x[a["seq"]]},{y[a["request"]] - 8} '
                   f'C{x[a["seq"]]},{top - 14} {x[b["seq"]]},{top - 14} {x[b["seq"]]},'
                   f'{y[b["request"]] - 9}" fill="none" stroke="#b3261e" stroke-width="1.5" '
                   'stroke-dasharray="4 3" marker-end="url(#arr)"/>')
    for e in events:
        colour = _COLOURS.get(e["category"], _COLOURS["other"])
        r = 7 if e["category"] in ("failure", "outcome") else 5
        tip = (f"seq {e['seq']}: {e['event']}" + (f" x{e['count']}" if e["count"] > 1 else "")
               + (f" ({e['claim']})" if e["claim"] else ""))
        out.append(f'<circle class="ev ev-{_e(e["category"])}" cx="{x[e["seq"]]}" '
                   f'cy="{y[e["request"]]}" r="{r}" fill="{colour}"><title>{_e(tip)}</title>'
                   "</circle>")
        if e["category"] in ("claim", "failure", "outcome", "loss"):
            label = event_label(e)
            out.append(f'<text x="{x[e["seq"]] + 3}" y="{y[e["request"]] + 15}" font-size="9" '
                       f'transform="rotate(45 {x[e["seq"]] + 3} {y[e["request"]] + 15})" '
                       f'fill="{colour}">{_e(label)}</text>')
    out.append("</svg>")
    return "".join(out)


def _timelines(timelines: list[dict[str, Any]]) -> list[str]:
    out = ['<h2 id="witness">Witness and observed traces</h2>', '<p class="legend">'] + [
        f'<span><i class="sw" style="background:{c}"></i>{k}</span>'
        for k, c in _COLOURS.items() if k != "other"] + [
        "<span>dashed arrow: failure → the outcome it became</span></p>"]
    for t in timelines:
        out.append(f'<figure class="timeline" data-trace="{_e(t["name"])}"><h3>{_e(t["name"])} '
                   f'<span class="muted mono">{_e(Path(t["path"]).name)}</span></h3>')
        out += [f'<p class="res-missing mono">{_e(p)}</p>' for p in t["problems"]]
        out.append(timeline_svg(t))
        claims = sorted({e["claim"] for e in t["events"] if e["claim"]})
        out.append(f"<figcaption class='muted'>{len(t['events'])} events, claims: "
                   f"{_e(', '.join(claims) or '(none)')}; {len(t['links'])} failure → outcome "
                   "link(s)</figcaption></figure>")
    return out


def render_html(doc: dict[str, Any], audit: dict[str, Any] | None = None,
                timelines: list[dict[str, Any]] | None = None) -> str:
    """The whole page."""
    title = "residentkv audit" if audit else "residentkv check"
    nav = ('<nav><a href="#matrix">matrix</a>'
           + ('<a href="#suite">suite</a>' if audit else "") + '<a href="#rows">rows</a>'
           + ('<a href="#witness">witness</a>' if timelines else "")
           + '<a href="#details">row details</a></nav>')
    out = [*_head(title), f"<h1>{title}</h1>", nav]
    out += _summary(doc, audit)
    out += _matrix(doc)
    if audit:
        out += _audit_sections(audit)
    out += _rows_table(doc)
    if timelines:
        out += _timelines(timelines)
    out.append('<h2 id="details">Row details</h2>')
    for r in doc["rows"]:
        out += _row_section(r)
    out.append("</body></html>")
    return "\n".join(out) + "\n"


@reporter("check", "html")
def _check_html(doc: dict[str, Any], _opts: RenderOptions) -> str:
    paths = list(dict.fromkeys(r["path"] for r in doc["rows"]))
    return render_page(html_input(doc, paths))


def html_input(doc: dict[str, Any], descriptors: list[str],
               audit: dict[str, Any] | None = None,
               traces: list[str] | None = None) -> dict[str, Any]:
    """The JSON-able input of the page: the check JSON with notes and anchor targets merged
    in, the audit record, and the witness timelines."""
    return {"check": with_curation(doc, descriptors), "audit": audit,
            "timelines": [timeline(p) for p in traces or []]}


def render_page(page: dict[str, Any]) -> str:
    """The page of an :func:`html_input` result."""
    return render_html(page["check"], page.get("audit"), page.get("timelines"))
