"""The curator's side of the audit: per-obligation notes, anchor targets and review state.

The canonical check JSON says what each anchor *verified*; a reviewer also needs to see what
the curator *wrote* -- the one-sentence note behind each obligation -- and where each anchor
points (file, symbol, line range, release). :func:`annotate` adds both to the audit's copy of
the check JSON (``report.json``); :func:`review_counts` counts the source anchors into pinned
releases as ``reviewed`` (verified, carrying a ``reviewed`` record), ``unchanged`` (verified as
first anchored) or ``pending`` (not verified against the release it names: changed and not yet
re-read, or gone).
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from residentkv.lowering.bundles import load_bundles
from residentkv.lowering.descriptor import (
    DocAnchor,
    Row,
    SimAnchor,
    SourceAnchor,
    TraceAnchor,
    read_descriptor,
)

__all__ = ["REVIEW_STATES", "annotate", "curated_rows", "review_counts", "with_curation"]

REVIEW_STATES: tuple[str, ...] = ("reviewed", "unchanged", "pending")


def curated_rows(descriptors: Sequence[Path], bundles_dir: str | None = None) -> dict[str, Row]:
    """Valid rows by id (an invalid row has no curation to show beyond its findings)."""
    modes = set(load_bundles(bundles_dir))
    out: dict[str, Row] = {}
    for path in descriptors:
        for lr in read_descriptor(path, modes).rows:
            if lr.row is not None:
                out[lr.row_id] = lr.row
    return out


def _target(a: Any, result: dict[str, Any], pinned: Collection[str]) -> dict[str, Any]:
    """Where an anchor points, and how it stands (``result`` is its verification result)."""
    state = result["result"]
    if isinstance(a, SourceAnchor):
        release = f"{a.package}=={a.version}" if a.version else a.package
        review = None
        if a.package in pinned:
            review = ("pending" if state != "verified"
                      else "reviewed" if a.reviewed is not None else "unchanged")
        return {"kind": "source", "package": a.package, "release": release, "file": a.path,
                "symbol": a.symbol, "lines": result.get("lines") or a.lines,
                "anchored_lines": a.lines, "sha256": a.sha256, "state": state,
                "review": review,
                "reviewed": a.reviewed.model_dump() if a.reviewed is not None else None}
    if isinstance(a, TraceAnchor):
        return {"kind": "trace", "file": a.path, "gate": a.gate, "claim": a.claim,
                "sha256": getattr(a, "sha256", None), "state": state, "review": None}
    if isinstance(a, DocAnchor):
        return {"kind": "doc", "url": a.url, "quote": a.quote, "state": state, "review": None}
    assert isinstance(a, SimAnchor)
    return {"kind": "sim", "scenario": a.scenario, "state": state, "review": None}


def annotate(doc: dict[str, Any], rows: dict[str, Row], pinned: Collection[str]) -> None:
    """Add each obligation's ``note`` and each anchor's ``target`` to the check JSON, in place."""
    for r in doc["rows"]:
        row = rows.get(r["id"])
        if row is None:
            continue
        for name, ob in row.obligations.items():
            if name in r["obligations"]:
                r["obligations"][name]["note"] = ob.note
        for a in r["anchors"]:
            anchor = row.anchors.get(a["id"])
            if anchor is not None:
                a["target"] = _target(anchor, a, pinned)


def with_curation(doc: dict[str, Any], descriptors: Sequence[str | Path],
                  bundles_dir: str | None = None) -> dict[str, Any]:
    """A copy of the check JSON carrying notes and anchor targets.

    A document the audit already annotated (it knows the pinned releases, hence review
    states) is copied as it is; a plain check JSON is annotated from its descriptors.
    """
    out = copy.deepcopy(doc)
    if any("target" in a for r in out["rows"] for a in r["anchors"]):
        return out
    annotate(out, curated_rows([Path(p) for p in descriptors], bundles_dir), pinned=())
    return out


def review_counts(doc: dict[str, Any]) -> dict[str, int]:
    """Distinct source anchors into pinned releases, by review state (after :func:`annotate`).

    An anchor shared by a primitive's two rows (same release, file, symbol, lines, hash) counts
    once.
    """
    seen: dict[tuple[Any, ...], str] = {}
    for r in doc["rows"]:
        for a in r["anchors"]:
            t = a.get("target") or {}
            if t.get("review") is None:
                continue
            key = (t["release"], t["file"], t["symbol"], t["anchored_lines"], t["sha256"])
            seen[key] = t["review"]
    states = list(seen.values())
    return {s: states.count(s) for s in REVIEW_STATES}


def target_text(t: dict[str, Any]) -> str:
    """One line for a target: ``vllm==0.32.0 vllm/x.py:Sym (lines 1-9) verified, reviewed``."""
    if t["kind"] == "source":
        where = f"{t['file']}:{t['symbol']}" if t["symbol"] else t["file"]
        extra = f", {t['review']}" if t.get("review") else ""
        rev = t.get("reviewed")
        if rev:
            extra += f" ({rev['release']} {rev['date']}: {rev['reason']})"
        return f"{t['release']} {where} (lines {t['lines']}) {t['state']}{extra}"
    if t["kind"] == "trace":
        sha = f" sha256 {t['sha256'][:12]}…" if t.get("sha256") else ""
        return f"trace {t['file']} gate {t['gate']} claim {t['claim']}{sha} {t['state']}"
    if t["kind"] == "doc":
        return f"doc {t['url']} {t['state']}"
    return f"sim {t['scenario']} {t['state']}"
