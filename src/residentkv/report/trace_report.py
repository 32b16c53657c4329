"""Render trace-gate results (text, Markdown, JSON, SARIF) from their JSON-able form.

Each gate result is placed at its *deciding event*: the last event the verdict rests on (the
highest evidence seq — for a pass the event that completed the chain, for a failure the last
event that still satisfied a requirement, after which the missing ones never came). Its line in
the trace file is found by one scan for those seqs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from residentkv import __version__
from residentkv.codes import lookup
from residentkv.findings import render_line
from residentkv.jsontext import json_text
from residentkv.model.vocabulary import ALL_GATE_NAMES
from residentkv.report.registry import RenderOptions, reporter
from residentkv.report.sarif import code_rule, locations, sarif_log
from residentkv.report.text import render_table
from residentkv.trace.gates import BOUNDARIES, REQUIREMENTS, TraceCheck
from residentkv.trace.reader import seq_lines as seq_lines
from residentkv.trace.verdict_words import first_cause

GLOBAL_BOUNDARY = (
    "residentkv judges the evidence given, not unaudited behaviour: a gate result says what "
    "this stream shows, never what the runtime would do elsewhere."
)


def missing_reasons(missing: Iterable[str]) -> dict[str, str]:
    """requirement id -> the one-line reason the gate semantics give for it being missing."""
    from residentkv.trace.semantics import why_missing

    return {req: why_missing(req) for req in missing}


def _deciding_seq(evidence: dict[str, list[int]]) -> int | None:
    seqs = [s for v in evidence.values() for s in v]
    return max(seqs) if seqs else None


def _trace_obj(c: TraceCheck) -> dict[str, Any]:
    # an illegal run is decided by its offending event (SPEC §4.2), else by the last evidence
    deciding = {id(r): r.illegal.seq if r.illegal is not None else _deciding_seq(r.evidence)
                for r in c.results}
    lines = seq_lines(c.path, {s for s in deciding.values() if s is not None}, c.streams)
    results = []
    for r in c.results:
        seq = deciding[id(r)]
        why = missing_reasons(r.missing)
        if r.illegal is not None:
            i = r.illegal
            why["legal_transitions"] = (f"seq {i.seq}: {i.event} in state {i.state} is "
                                        f"{i.violation}: {i.why}")
        result = r.model_dump(mode="json")
        results.append({**result, "why": why, "because": first_cause(result, c.stories.get(
                            r.claim_id)),
                        "deciding": {"seq": seq, "line": lines.get(seq) if seq is not None
                                     else None}})
    obj: dict[str, Any] = {
        "path": c.path, "events": c.events, "problem_count": c.problem_count,
        "problems": [{"code": p.code, "name": p.name, "line": p.line, "col": p.col,
                      "message": p.message, "help": p.help} for p in c.problems],
        "results": results,
    }
    if c.conformance is not None:  # gate conformance ran: its verdict over the whole file
        obj["conformance"] = c.conformance.model_dump(mode="json")
    return obj


def to_json_obj(checks: Sequence[TraceCheck]) -> dict[str, Any]:
    """The canonical, deterministic result of ``trace check``."""
    return {
        "schema": "residentkv.trace-check/v1",
        "tool": {"name": "residentkv", "version": __version__},
        "boundary": GLOBAL_BOUNDARY,
        "traces": [_trace_obj(c) for c in checks],
        "passed": all(c.passed for c in checks),
    }


def _fired(controls: dict[str, bool]) -> str:
    return ", ".join(k for k, v in sorted(controls.items()) if v) or "-"


COLUMNS = ("claim", "gate", "result", "missing", "controls fired", "deciding line")


def _rows(trace: dict[str, Any]) -> list[list[str]]:
    return [[r["claim_id"], r["gate"], "pass" if r["passed"] else "FAIL",
             ", ".join(r["missing"]) or "-", _fired(r["controls"]),
             str(r["deciding"]["line"] or "-")] for r in trace["results"]]


def _problem_line(path: str, p: dict[str, Any]) -> str:
    return render_line(p["code"], p["name"], p["message"], path=path, line=p["line"],
                       col=p["col"])


def _why_lines(trace: dict[str, Any]) -> list[str]:
    """Each failed gate result and the first thing that decides it (every missing
    requirement's reason is in the JSON's ``why``, and ``residentkv explain ID``)."""
    return [f"{r['claim_id']} {r['gate']} failed: {r['because']}"
            for r in trace["results"] if not r["passed"]]


def _verdict_lines(trace: dict[str, Any]) -> list[str]:
    """Gate conformance's verdict over the file: its streams, failed and live claims."""
    v = trace.get("conformance")
    if v is None:
        return []
    streams = ", ".join(
        f"{s['incarnation'] or '(no incarnation)'} {s['end']}"
        + (f" ({s['reason']})" if s["reason"] else "") for s in v["streams"])
    return [f"conformance: {'PASS' if v['passed'] else 'FAIL'} for {v['claims']} claims "
            f"in {len(v['streams'])} streams [{streams}]",
            f"  failed: {', '.join(v['failed']) or '-'}",
            f"  live (open where the reading stopped): {', '.join(v['live']) or '-'}"]


def _passed_line(doc: dict[str, Any]) -> str:
    results = [r for t in doc["traces"] for r in t["results"]]
    return f"{sum(r['passed'] for r in results)}/{len(results)} gate results passed"


@reporter("trace", "text")
def render_text(doc: dict[str, Any], _opts: RenderOptions | None = None) -> str:
    """A table per trace plus every reader problem as a located diagnostic."""
    out: list[str] = []
    for t in doc["traces"]:
        out.extend(_problem_line(t["path"], p) for p in t["problems"])
        hidden = t["problem_count"] - len(t["problems"])
        if hidden > 0:
            out.append(f"{t['path']}: ... and {hidden} more problems")
        if t["results"]:
            out.append(render_table(f"{t['path']} ({t['events']} events)", COLUMNS,
                                    _rows(t)).rstrip())
            out += [f"  {line}" for line in _why_lines(t)]
        out += _verdict_lines(t)
    out.append(GLOBAL_BOUNDARY)
    out.append(_passed_line(doc))
    return "\n".join(out) + "\n"


@reporter("trace", "json")
def render_json(doc: dict[str, Any], _opts: RenderOptions | None = None) -> str:
    return json_text(doc)


@reporter("trace", "md")
def render_markdown(doc: dict[str, Any], _opts: RenderOptions | None = None) -> str:
    lines = ["# residentkv trace check", ""]
    for t in doc["traces"]:
        lines += [f"## `{t['path']}` ({t['events']} events)", "",
                  "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
        lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"
                  for row in _rows(t)]
        why = _why_lines(t)
        if why:
            lines += ["", "Why:", ""] + [f"- {x}" for x in why]
        verdict = _verdict_lines(t)
        if verdict:
            lines += ["", *(f"- {x.strip()}" for x in verdict)]
        lines.append("")
    problems = [_problem_line(t["path"], p) for t in doc["traces"] for p in t["problems"]]
    if problems:
        lines += ["## Problems", ""] + [f"- `{p}`" for p in problems]
    lines += ["", "## Boundaries", "", f"- {GLOBAL_BOUNDARY}"]
    seen = sorted({(r["gate"], r["boundary"]) for t in doc["traces"] for r in t["results"]})
    lines += [f"- **{g}**: {b}" for g, b in seen]
    lines += ["", _passed_line(doc)]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------- SARIF


def _gate_rule(gate: str) -> dict[str, Any]:
    reqs = ", ".join(REQUIREMENTS[gate])
    text = (f"Trace gate {gate}: {BOUNDARIES[gate]}. Requirement ids: {reqs}. "
            f"More: residentkv explain {gate}")
    return {"id": gate, "name": gate, "shortDescription": {"text": f"trace gate {gate}"},
            "fullDescription": {"text": BOUNDARIES[gate]},
            "help": {"text": text, "markdown": f"**Trace gate `{gate}`**: {BOUNDARIES[gate]}"
                                               f"\n\nRequirement ids: `{reqs}`"}}


def _gate_message(r: dict[str, Any]) -> str:
    seq = r["deciding"]["seq"]
    at = f" (deciding event seq {seq})" if seq is not None else ""
    if r["passed"]:
        return f"gate {r['gate']} passed for claim {r['claim_id']}{at}"
    fired = _fired(r["controls"])
    tail = f"; controls fired: {fired}" if fired != "-" else ""
    return (f"gate {r['gate']} failed for claim {r['claim_id']}: {r['because']} (unmet: "
            f"{', '.join(r['missing']) or '(none)'}){tail}{at}")


@reporter("trace", "sarif")
def render_sarif(doc: dict[str, Any], opts: RenderOptions) -> str:
    """SARIF: one result per gate result (kind pass/fail) and per reader problem."""
    codes = sorted({p["code"] for t in doc["traces"] for p in t["problems"]})
    gates = [g for g in ALL_GATE_NAMES if any(r["gate"] == g for t in doc["traces"]
                                          for r in t["results"])]
    rule_ids = gates + codes
    index = {rid: i for i, rid in enumerate(rule_ids)}
    results: list[dict[str, Any]] = []
    for t in doc["traces"]:
        for p in t["problems"]:
            results.append({"ruleId": p["code"], "ruleIndex": index[p["code"]], "level": "error",
                            "message": {"text": p["message"]},
                            "locations": locations(t["path"], p["line"], p["col"],
                                                   opts.srcroot)})
        for r in t["results"]:
            results.append({
                "ruleId": r["gate"], "ruleIndex": index[r["gate"]],
                "kind": "pass" if r["passed"] else "fail",
                "level": "none" if r["passed"] else "error",
                "message": {"text": _gate_message(r)},
                "locations": locations(t["path"], r["deciding"]["line"], None, opts.srcroot),
                "properties": {"claim": r["claim_id"], "missing": r["missing"],
                               "controls": r["controls"], "boundary": r["boundary"],
                               "deciding_seq": r["deciding"]["seq"],
                               "illegal": r["illegal"]}})
    rules = [_gate_rule(g) for g in gates] + [code_rule(lookup(c).id) for c in codes]
    run = {"results": results, "properties": {"boundary": doc["boundary"],
                                              "passed": doc["passed"]}}
    log = sarif_log(run, command=opts.command, version=doc["tool"]["version"],
                    srcroot=opts.srcroot, rules=rules)
    return json_text(log)
