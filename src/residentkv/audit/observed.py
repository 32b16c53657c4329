"""The observer's live evidence in ``audit --live`` (docs/observe.md, "In the audit").

The audit runs the observer scenario on real vLLM (plain OpenAI server, no residentkv
connector) and attaches the trace it recorded, root *live*, to the curated rows the run speaks
to (``ObservedRun.rows``). The rows are not edited in the package: a copy of the descriptor that
holds them is written beside the trace, each such row gaining one trace anchor
(:data:`OBSERVED_ANCHOR`: gate ``lifecycle``, claim ``c-soft``, sha256 pinned) cited for
``ordered_lifecycle``. That gate is *expected to fail* — the runtime published the claimed
prefix's loss with no outcome — so the anchor's result is ``failed`` and, being no usable
support, can never raise a class: the rows stay non-positive. What makes the refusal rest on
verified live evidence is the audit's own check (:func:`observed_shortfalls`): the anchor must
be the pinned live trace and its gate must have run and failed; anything else (a gate that
passed, a trace that did not verify, a gap that left it unknown) makes the audit fall short.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from residentkv.lowering.trace_pins import pin_trace_digests
from residentkv.lowering.yamlio import round_trip_yaml
from residentkv.trust.roots import TraceTrust

__all__ = ["OBSERVED_ANCHOR", "attach_observed", "is_expected_observed_failure",
           "observed_shortfalls"]

#: the anchor id the observed trace gets in each row it speaks to
OBSERVED_ANCHOR = "o_observed"
#: the gate and claim the observed trace is judged on: the soft_priority claim's lifecycle
OBSERVED_GATE = "lifecycle"
OBSERVED_CLAIM = "c-soft"
#: the obligation the lifecycle gate speaks to (B3)
OBSERVED_OBLIGATION = "ordered_lifecycle"
#: the result code of a trace anchor whose gate ran and did not pass (the expected outcome);
#: a trace with problems (a gap, an unreadable line) or a fired control is not that outcome
GATE_FAILED = "A004"

def attach_observed(run: Any, descriptors: Sequence[Path], live_dir: Path,
                    trust: TraceTrust) -> tuple[dict[str, Any], list[Path]]:
    """Register ``run.trace`` as live and swap in copies of the descriptors holding
    ``run.rows``, with the observed trace anchored in each of those rows."""
    trust.add_live(Path(run.trace), "the observer run by this audit on real vLLM (--live)")
    yaml = round_trip_yaml()
    swapped: list[Path] = []
    attached: list[str] = []
    for path in descriptors:
        doc: Any = yaml.load(path.read_text(encoding="utf-8"))
        rows = [r for r in doc.get("rows") or [] if r.get("id") in run.rows]
        if not rows:
            swapped.append(path)
            continue
        copy = live_dir / path.name
        rel = Path(run.trace).resolve().relative_to(live_dir.resolve())
        for row in rows:
            row["anchors"][OBSERVED_ANCHOR] = {
                "kind": "trace", "path": str(rel), "gate": OBSERVED_GATE,
                "claim": OBSERVED_CLAIM,
                "note": "the observer's live trace of plain vLLM (audit --live): the claimed "
                        "prefix was lost with no runtime-reported outcome; expected to fail"}
            ob = row["obligations"][OBSERVED_OBLIGATION]
            ob["evidence"] = [*ob.get("evidence", []), OBSERVED_ANCHOR]
            attached.append(str(row["id"]))
        buf = io.StringIO()
        yaml.dump(doc, buf)
        copy.write_text(buf.getvalue(), encoding="utf-8")
        pin_trace_digests(copy)
        swapped.append(copy)
    info = {"mode": "live", "run": run.to_json(), "rows": attached,
            "anchor": OBSERVED_ANCHOR, "gate": OBSERVED_GATE, "claim": OBSERVED_CLAIM,
            "expected": "failed"}
    return info, swapped


def observed_shortfalls(doc: dict[str, Any], observed: dict[str, Any]) -> list[str]:
    """Each observed row whose live anchor is not what the run must show (pinned, rooted live,
    its gate run and failed), and each row the run named that no descriptor held."""
    by_id = {r["id"]: r for r in doc["rows"]}
    out = [f"{rid}: the observed run names it, but no descriptor holds it"
           for rid in observed["run"]["rows"] if rid not in by_id]
    for rid in observed["rows"]:
        anchor = next((a for a in by_id[rid]["anchors"] if a["id"] == OBSERVED_ANCHOR), None)
        if anchor is None:
            out.append(f"{rid}: the observed trace is not among its anchors")
        elif not is_expected_observed_failure(anchor):
            out.append(f"{rid} {OBSERVED_ANCHOR}: expected gate {OBSERVED_GATE} to run and "
                       f"fail on the live trace, got {anchor['result']} "
                       f"({anchor.get('detail')})")
    return out


def is_expected_observed_failure(anchor: dict[str, Any]) -> bool:
    """An observed anchor that failed as expected (not a shortfall of the audit)."""
    return (anchor["id"] == OBSERVED_ANCHOR and anchor["result"] == "failed"
            and anchor.get("code") == GATE_FAILED
            and "trace problems" not in str(anchor.get("detail")))
