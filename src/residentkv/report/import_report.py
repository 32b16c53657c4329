"""Render an import report: what was mapped, dropped, assumed and synthesized."""

from __future__ import annotations

from residentkv.jsontext import json_text
from residentkv.report.registry import RenderOptions, reporter
from residentkv.trace.importers.base import ImportReport


@reporter("import", "json")
def render_json(report: ImportReport, _opts: RenderOptions) -> str:
    """The report as deterministic JSON."""
    return json_text(report.to_json_obj())


@reporter("import", "text")
def render_text(report: ImportReport, _opts: RenderOptions) -> str:
    """The report for humans: what was mapped, dropped, synthesized and assumed."""
    data = report.to_json_obj()
    lines = [f"import {data['path']} ({data['dialect']}): {data['events_in']} events in, "
             f"{data['events_out']} v1 events out"]
    lines += [f"  mapped      {k}: {n}" for k, n in data["mapped"].items()]
    lines += [f"  dropped     {k} x{v['count']}: {v['reason']}"
              for k, v in data["dropped"].items()]
    lines += [f"  synthesized seq {s['seq']} (source event_sequence {s['event_sequence']}): "
              f"{s['event']} " + (f"from {s['from']}" if "from" in s else f"before {s['before']}")
              + f" ({s['why']})" for s in data["synthesized"]]
    lines += [f"  assumed     {a}" for a in data["assumptions"]]
    lines += [f"  unmapped fields of {k}: {', '.join(v)}"
              for k, v in data["unmapped_fields"].items() if v]
    lines += [f"  {p}" for p in data["problems"]]
    return "\n".join(lines) + "\n"
