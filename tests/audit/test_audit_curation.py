"""The audit's curation layer: notes and anchor targets in the report, review counts."""

from __future__ import annotations

from pathlib import Path

from residentkv.lowering.anchors import Verifier
from residentkv.lowering.check import run_check
from residentkv.lowering.curation import annotate, curated_rows, review_counts, target_text
from residentkv.report.json_report import to_json
from residentkv.sources.roots import runtimes_dir


def _doc(results: dict[str, str]) -> dict:  # type: ignore[type-arg]
    path = runtimes_dir() / "vllm_0_33.yaml"
    doc = to_json(run_check([path], verifier=Verifier({})))
    for r in doc["rows"]:  # stand in for a verifier: what each anchor verified as
        for a in r["anchors"]:
            a["result"] = results.get(a["id"], "verified")
    annotate(doc, curated_rows([Path(path)]), {"vllm"})
    return doc


def test_notes_and_targets_are_attached() -> None:
    doc = _doc({})
    row = next(r for r in doc["rows"] if r["id"] == "vllm@0.33.0/prefix-caching/substrate")
    assert row["obligations"]["claim_identity"]["note"].startswith("A cached block is named")
    free = next(a for a in row["anchors"] if a["id"] == "s_free")
    t = free["target"]
    assert (t["release"], t["file"], t["symbol"]) == (
        "vllm==0.33.0", "vllm/v1/core/block_pool.py", "BlockPool.free_blocks")
    assert t["review"] == "reviewed" and t["reviewed"]["release"] == "vllm==0.33.0"
    assert "reviewed (vllm==0.33.0 2026-12-01:" in target_text(t)


def test_review_counts_distinct_targets_and_pending_ones() -> None:
    counts = review_counts(_doc({}))
    assert counts["pending"] == 0 and counts["reviewed"] == 10 and counts["unchanged"] > 0
    pending = review_counts(_doc({"s_free": "drifted"}))
    # s_free is one target shared by the primitive's two rows: it counts once
    assert pending["pending"] == 1 and pending["reviewed"] == 9
