"""What the reports show beside each verdict: the curator's note per obligation and each
anchor's target (release, file, symbol, line range; or trace, gate and claim; or doc URL).

Read from the same descriptor files the check read (nothing is re-judged) and merged into the
canonical check JSON only where the JSON does not already carry the field.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from residentkv.lowering.bundles import load_bundles
from residentkv.lowering.descriptor import (
    DocAnchor,
    SimAnchor,
    SourceAnchor,
    TraceAnchor,
    read_descriptor,
)

Details = dict[str, dict[str, Any]]


def _target(a: SourceAnchor | DocAnchor | TraceAnchor | SimAnchor) -> dict[str, Any]:
    # the same keys as the audit's annotated report.json (kind, release, file, ...)
    if isinstance(a, SourceAnchor):
        release = f"{a.package}=={a.version}" if a.version else a.package
        return {"kind": "source", "package": a.package, "release": release, "file": a.path,
                "symbol": a.symbol, "lines": a.lines}
    if isinstance(a, TraceAnchor):
        return {"kind": "trace", "file": a.path, "gate": a.gate, "claim": a.claim}
    if isinstance(a, DocAnchor):
        return {"kind": "doc", "url": a.url, "quote": a.quote}
    return {"kind": "sim", "scenario": a.scenario}


def row_details(descriptors: Sequence[str | Path], bundles_dir: str | None = None) -> Details:
    """row id -> {"notes": {obligation: note}, "targets": {anchor id: target}} (valid rows)."""
    modes = set(load_bundles(bundles_dir))
    out: Details = {}
    for path in descriptors:
        for lr in read_descriptor(path, modes).rows:
            if lr.row is None:
                continue
            out[lr.row_id] = {
                "notes": {n: o.note for n, o in lr.row.obligations.items()},
                "targets": {aid: _target(a) for aid, a in lr.row.anchors.items()},
            }
    return out


def with_details(doc: dict[str, Any], details: Details) -> dict[str, Any]:
    """A copy of the check JSON with ``note`` on obligations and ``target`` on anchors."""
    out = copy.deepcopy(doc)
    for row in out["rows"]:
        d = details.get(row["id"])
        if d is None:
            continue
        for name, ob in row["obligations"].items():
            ob.setdefault("note", d["notes"].get(name))
        for a in row["anchors"]:
            a.setdefault("target", d["targets"].get(a["id"]))
    return out


def witness_trace_paths(witness: dict[str, Any]) -> list[Path]:
    """The witness traces an audit classified the adapter rows on (shipped or live)."""
    if witness.get("mode") == "live" and witness.get("descriptor"):
        folder = Path(witness["descriptor"]).parent / "traces" / "witness"
        return sorted(folder.glob("*.jsonl"))
    return [Path(t["path"]) for t in witness.get("traces", [])]
