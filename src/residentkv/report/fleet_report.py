"""Reports of ``residentkv fleet check`` (kind ``fleet``), rendered from the judgement's JSON
form through the project's reporter registry; nothing here re-evaluates."""

from __future__ import annotations

from typing import Any

from residentkv.findings import render_line
from residentkv.fleet.why import why_missing
from residentkv.jsontext import json_text
from residentkv.report.registry import RenderOptions, reporter
from residentkv.report.text import render_table


def _problem_line(p: dict[str, Any]) -> str:
    return render_line(p["code"], p["name"], p["message"], path=p["path"], line=p["line"],
                       col=p["col"])


def _rows(doc: dict[str, Any]) -> tuple[list[list[str]], list[list[str]]]:
    claims = [[c["claim_id"], str(c["home"]), c["status"], str(c["owner_scope"]),
               _lost(c["lost_by"])] for c in doc["claims"]]
    requests = [[r["request_id"], str(r["replica"]), r["claim_ref"], r["decision"] or "-",
                 "pass" if r["passed"] else "FAIL"] for r in doc["requests"]]
    return claims, requests


def _lost(loss: dict[str, Any] | None) -> str:
    if loss is None:
        return "-"
    return f"rejected on {loss['replica']} for {loss['request_id']} ({loss['path']}:{loss['line']})"


@reporter("fleet", "text")
def render_text(doc: dict[str, Any], _opts: RenderOptions | None = None) -> str:
    """Located problems, the claims and requests the fleet recorded, each missing
    requirement with its reason, the boundary and the verdict."""
    out = [_problem_line(p) for p in doc["problems"]]
    hidden = doc["problem_count"] - len(doc["problems"])
    if hidden > 0:
        out.append(f"... and {hidden} more reader problems")
    streams = [[str(s["replica"]), s["path"], str(s["events"])] for s in doc["streams"]]
    if streams:
        out.append(render_table("replicas", ("replica", "stream", "events"), streams).rstrip())
    claims, requests = _rows(doc)
    if claims:
        out.append(render_table("claims (home replica, status at the end)",
                                ("claim", "home", "status", "owner_scope", "lost by"),
                                claims).rstrip())
    if requests:
        out.append(render_table("claim-carrying requests",
                                ("request", "replica", "claim_ref", "decision", "result"),
                                requests).rstrip())
    out += [f"harm: claim {c['claim_id']} held on {c['home']} was lost: "
            f"{_lost(c['lost_by'])}" for c in doc["claims"] if c["status"] == "lost"]
    out += [f"  missing {req}: {why_missing(req)}" for req in doc["missing"]]
    out.append(f"boundary: {doc['boundary']}")
    met = len(doc["requirements"]) - len(doc["missing"])
    verdict = "pass" if doc["passed"] else "FAIL"
    out.append(f"{doc['gate']}: {verdict} ({met}/{len(doc['requirements'])} requirements met)")
    return "\n".join(out) + "\n"


@reporter("fleet", "json")
def render_json(doc: dict[str, Any], _opts: RenderOptions | None = None) -> str:
    return json_text(doc)
