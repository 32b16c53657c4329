"""Builders of rows and anchor results for classifier tests (no files involved)."""

from __future__ import annotations

from typing import Any

from residentkv.lowering.anchors import AnchorResult
from residentkv.lowering.bundles import OBLIGATIONS
from residentkv.lowering.descriptor import Row
from residentkv.trace.gates import REQUIREMENTS

KINDS: dict[str, dict[str, Any]] = {
    "source": {"kind": "source", "package": "p", "path": "p/x.py", "symbol": "X",
               "sha256": "0" * 64},
    "doc": {"kind": "doc", "url": "https://example.invalid", "quote": "quoted sentence"},
    "sim": {"kind": "sim", "scenario": "s"},
}


def anchor_spec(kind: str, gate: str | None = None) -> dict[str, Any]:
    """A valid anchor of *kind* (trace anchors name *gate*)."""
    if kind == "trace":
        return {"kind": "trace", "path": "t.jsonl", "gate": gate or "observation", "claim": "c"}
    return dict(KINDS[kind])


def make_row(
    statuses: dict[str, str],
    evidence: dict[str, list[str]],
    anchors: dict[str, dict[str, Any]],
    *,
    mechanism: str = "native",
    asserts: str = "conformance",
    lowers: str = "offloadable",
) -> Row:
    """A Row model from compact parts."""
    return Row.model_validate({
        "id": "r", "runtime": {"name": "rt"}, "mode": "m", "mechanism": mechanism,
        "lowers": lowers, "asserts": asserts, "boundary": "b", "anchors": anchors,
        "obligations": {n: {"status": statuses[n], "evidence": evidence[n]}
                        for n in OBLIGATIONS},
    })


def result(aid: str, spec: dict[str, Any], outcome: str,
           shown: tuple[str, ...] | None = None) -> AnchorResult:
    """An AnchorResult for anchor *aid* with verification *outcome*.

    A trace result shows every requirement its gate can report unless *shown* says otherwise.
    """
    gate = spec.get("gate")
    if shown is None:
        shown = REQUIREMENTS.get(gate, ()) if spec["kind"] == "trace" and gate else ()
    return AnchorResult(id=aid, kind=spec["kind"], result=outcome,  # type: ignore[arg-type]
                        gate=gate, detail="test", shown=shown,
                        code=None if outcome == "verified" else "A001")
