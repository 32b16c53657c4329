"""Reporters of the smaller commands (suite, litmus, sweep, sources fetch, anchors drift,
witness run): text for people, JSON for machines, registered on the shared registry."""

from __future__ import annotations

from typing import Any

from residentkv.jsontext import json_text
from residentkv.report.registry import RenderOptions, reporter

# --- suite ----------------------------------------------------------------------------------


@reporter("suite", "json")
def _suite_json(result: Any, _opts: RenderOptions) -> str:
    return json_text(result.to_json_obj())


@reporter("suite", "text")
def _suite_text(result: Any, _opts: RenderOptions) -> str:
    from residentkv.suite.run import summary_lines

    out = []
    for case in result.cases:
        out.append(f"{'ok  ' if case.passed else 'FAIL'} {case.id}")
        out += [f"       {m}" for m in case.mismatches]
    out += [f"SURVIVOR {s}" for tally in result.operators.values() for s in tally.survivors]
    out += summary_lines(result)
    return "\n".join(out) + "\n"


# --- sources fetch and anchors drift -----------------------------------------------------------


@reporter("fetch", "json")
def _fetch_json(doc: dict[str, Any], _opts: RenderOptions) -> str:
    return json_text({"cache": doc["cache"], "results": [r.to_json() for r in doc["results"]]})


@reporter("fetch", "text")
def _fetch_text(doc: dict[str, Any], _opts: RenderOptions) -> str:
    out = [f"{r.pin.requirement}: {r.status}{f' {r.path}' if r.path else ''} ({r.detail})"
           for r in doc["results"]]
    return "\n".join([*out, f"cache: {doc['cache']}"]) + "\n"


@reporter("drift", "json")
def _drift_json(report: Any, _opts: RenderOptions) -> str:
    return json_text(report.to_json())


@reporter("drift", "text")
def _drift_text(report: Any, _opts: RenderOptions) -> str:
    from residentkv.sources.drift import render_drift_text

    return str(render_drift_text(report))


# --- witness ------------------------------------------------------------------------------------


@reporter("witness", "json")
def _witness_json(doc: dict[str, Any], _opts: RenderOptions) -> str:
    return json_text(doc["rows"], indent=1)


@reporter("witness", "text")
def _witness_text(doc: dict[str, Any], _opts: RenderOptions) -> str:
    from residentkv.adapters.vllm.witness import format_table

    return f"{format_table(doc['rows'])}\ntraces and summary.json in {doc['out']}\n"


# --- MicroRuntime litmus and sweep ----------------------------------------------------------------


@reporter("litmus", "json")
def _litmus_json(doc: dict[str, Any], _opts: RenderOptions) -> str:
    results = doc["results"]
    return json_text({"items": [r.to_dict() for r in results],
                      "passed": all(r.passed for r in results)})


@reporter("litmus", "text")
def _litmus_text(doc: dict[str, Any], _opts: RenderOptions) -> str:
    results, kept = doc["results"], doc["kept"]
    lines = []
    for r in results:
        mark = {"pass": "PASS", "fail": "FAIL", "not_run": "NOT RUN"}[r.status]
        lines.append(f"{r.id:<3} {mark:<7} {r.title}")
        lines.append(f"{'':12}{r.detail}")
        if kept and r.trace:
            lines.append(f"{'':12}trace: {r.trace}")
    passed = sum(r.passed for r in results)
    lines.append(f"{passed}/{len(results)} litmus items passed (verdicts read from the traces; "
                 "a not-run item counts as a failure)")
    if not kept:
        lines.append("traces were not kept: pass --out DIR to keep them")
    return "\n".join(lines) + "\n"


@reporter("sweep", "json")
def _sweep_json(result: Any, _opts: RenderOptions) -> str:
    return json_text(result.to_json())


@reporter("sweep", "text")
def _sweep_text(result: Any, _opts: RenderOptions) -> str:
    from residentkv.microruntime.sweep import render_text

    return str(render_text(result)) + "\n"


# --- anchors review --------------------------------------------------------------------------


@reporter("review", "json")
def _review_json(doc: dict[str, Any], _opts: RenderOptions) -> str:
    return json_text(doc)


@reporter("review", "text")
def _review_text(doc: dict[str, Any], _opts: RenderOptions) -> str:
    counts: dict[str, int] = {}
    for it in doc["items"]:
        key = "approved" if it.get("approved") else it["status"]
        counts[key] = counts.get(key, 0) + 1
    shown = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    return (f"review {doc['release']}: {shown or 'no anchors of rows naming this release'}"
            f"; pending {doc['pending']}; written: {', '.join(doc['written']) or 'nothing'}\n")
