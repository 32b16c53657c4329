"""Reports of ``residentkv chaos`` (kind ``chaos``): text and JSON, rendered from the history
checker's JSON form through the reporter registry; nothing here re-evaluates."""

from __future__ import annotations

from typing import Any

from residentkv.findings import Finding
from residentkv.jsontext import json_text
from residentkv.report.registry import RenderOptions, reporter
from residentkv.report.text import render_table

#: findings printed in text; the JSON and HTML reports hold them all
TEXT_FINDINGS = 40
#: the latency columns, in order
LATENCY_COLUMNS = ("count", "p50", "p95", "p99", "max")
FAULT_COLUMNS = ("due (s of load)", "started (s)", "fault", "target", "applied",
                 "what happened")


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def settings_line(doc: dict[str, Any]) -> str:
    """One line: seed, load, faults, deployment."""
    s = doc["settings"]
    faults = ", ".join(s["faults"]) or "none"
    where = "started by the harness" if s["managed"] else f"attached at {s['base_url']}"
    return (f"seed {s['seed']}: {s['clients']} clients, {s['tenants']} tenants x "
            f"{s['sessions_per_tenant']} sessions, up to {s['ops']} requests in "
            f"{s['duration_s']:g} s; faults: {faults}; server {where}")


def verdict_line(doc: dict[str, Any]) -> str:
    """``chaos: pass`` or what fell short."""
    if doc["passed"]:
        return "chaos: pass (every figure that must be zero is zero; conformance passes)"
    short = [f"{name} {doc['figures'][name]}" for name in doc["failing"]]
    if doc["conformance"]["status"] != "pass":
        short.append(f"conformance {doc['conformance']['status']}")
    return "chaos: FAIL (" + ", ".join(short) + ")"


def latency_rows(doc: dict[str, Any]) -> list[list[str]]:
    """One row per kind of answer: count and percentiles in ms."""
    return [[kind, *(_cell(v[c]) for c in LATENCY_COLUMNS)]
            for kind, v in doc["load"]["latency_ms"].items()]


def figure_rows(doc: dict[str, Any], *, must: bool) -> list[list[str]]:
    """The figures that must be zero (with ok/FAIL), or the others."""
    zero = set(doc["must_be_zero"])
    if must:
        return [[name, str(doc["figures"][name]), "ok" if doc["figures"][name] == 0 else "FAIL"]
                for name in doc["must_be_zero"]]
    return [[name, str(value)] for name, value in doc["figures"].items() if name not in zero]


def fault_rows(doc: dict[str, Any]) -> list[list[str]]:
    """Each fault: due after how many seconds of load, started when (seconds since the run
    started), what, at whom, applied, what happened."""
    return [[f"{f['due_after_s']:.1f}", _cell(f["started_at"]), f["kind"],
             f["claim_id"] or f["target_session"] or "-", "yes" if f["applied"] else "no",
             f["detail"]] for f in doc["faults"]]


def incarnation_rows(doc: dict[str, Any]) -> list[list[str]]:
    """Each server incarnation: started, ready, stopped, how."""
    return [[str(i["index"]), _cell(i["started_at"]), _cell(i["ready_at"]),
             _cell(i["stopped_at"]), _cell(i["stopped_by"]), _cell(i["pid"])]
            for i in doc["incarnations"]]


def stream_rows(doc: dict[str, Any]) -> list[list[str]]:
    """Each stream of the sink as gate conformance read it: incarnation, how it ended."""
    return [[str(s["index"]), _cell(s["incarnation"]), s["end"], _cell(s["reason"]),
             _cell(s["line"])] for s in doc["conformance"].get("streams", ())]


STREAM_COLUMNS = ("stream", "incarnation", "ended", "reason", "line")


def finding_lines(doc: dict[str, Any], limit: int | None = None) -> list[str]:
    """The findings, rendered ``path:line: severity[CODE name]: message``."""
    shown = doc["findings"] if limit is None else doc["findings"][:limit]
    out = [Finding.model_validate(f).render() for f in shown]
    hidden = len(doc["findings"]) - len(shown)
    if hidden > 0:
        out.append(f"... and {hidden} more findings (--format json or html lists them all)")
    return out


@reporter("chaos", "text")
def render_text(doc: dict[str, Any], _opts: RenderOptions | None = None) -> str:
    """Settings, incarnations, faults, the figures, latency, conformance, findings, verdict."""
    load = doc["load"]
    out = [settings_line(doc),
           render_table("server incarnations (s since the run started)",
                        ("#", "started", "ready", "stopped", "by", "pid"),
                        incarnation_rows(doc)).rstrip()]
    if doc["faults"]:
        out.append(render_table("faults", FAULT_COLUMNS, fault_rows(doc)).rstrip())
    out.append(render_table("figures that must be zero", ("figure", "value", "result"),
                            figure_rows(doc, must=True)).rstrip())
    out.append(render_table("other figures", ("figure", "value"),
                            figure_rows(doc, must=False)).rstrip())
    out.append(render_table(
        f"latency (ms) over {load['seconds']} s of serving load ({load['wall_seconds']} s wall):"
        f" {load['requests_per_s']} requests/s, {load['served_per_s']} served/s",
        ("answer", *LATENCY_COLUMNS),
        latency_rows(doc)).rstrip())
    conf = doc["conformance"]
    if conf.get("streams"):
        out.append(render_table("the sink's streams (one per incarnation), as gate conformance "
                                "read them", STREAM_COLUMNS, stream_rows(doc)).rstrip())
    out.append(f"conformance: {conf['status']} ({conf['detail']})")
    out += finding_lines(doc, TEXT_FINDINGS)
    out.append(f"boundary: {doc['boundary']}")
    out.append(verdict_line(doc))
    return "\n".join(out) + "\n"


@reporter("chaos", "json")
def render_json(doc: dict[str, Any], _opts: RenderOptions | None = None) -> str:
    return json_text(doc)
