"""audit --live's observer evidence: the observed trace is anchored in the rows it speaks to,
can never raise their class, and counts only when its lifecycle gate ran and failed. Here the
"observed" trace is a witness trace that holds no observed claim: the audit must call that a
shortfall, not evidence (the real observed run is in test_audit_job's live test)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from residentkv.audit.observed import OBSERVED_ANCHOR, attach_observed, observed_shortfalls
from residentkv.lowering.anchors import Verifier
from residentkv.lowering.check import run_check
from residentkv.lowering.classify import GRANTING
from residentkv.observe.scenario import ROWS
from residentkv.report.json_report import to_json
from residentkv.sources import cached_roots
from residentkv.sources.roots import runtime_descriptor_paths, runtimes_dir
from residentkv.trust.roots import TraceTrust


@dataclass
class Run:
    """The fields of an ObservedRun the audit reads."""

    trace: Path
    rows: tuple[str, ...] = ROWS

    def to_json(self) -> dict[str, Any]:
        return {"trace": str(self.trace), "rows": list(self.rows)}


def test_a_trace_without_the_observed_claim_is_a_shortfall_and_grants_nothing(
        tmp_path: Path, pinned_cache: Path) -> None:
    trust = TraceTrust(policy=None)
    live = trust.live.create(tmp_path / "observe")
    trace = live / "observed.jsonl"
    shutil.copyfile(runtimes_dir() / "traces" / "witness" / "success_path.jsonl", trace)
    info, descs = attach_observed(Run(trace), list(runtime_descriptor_paths()), live, trust)
    assert set(info["rows"]) == set(ROWS)
    assert [p.parent for p in descs if p.parent == live] == [live]
    check = run_check(descs, verifier=Verifier(cached_roots(pinned_cache)[0]), trust=trust)
    doc = to_json(check)
    rows = {r["id"]: r for r in doc["rows"] if r["id"] in ROWS}
    for rid, r in rows.items():
        (a,) = [a for a in r["anchors"] if a["id"] == OBSERVED_ANCHOR]
        assert a["result"] == "failed" and "no event for claim 'c-soft'" in a["detail"], a
        assert r["class"] not in GRANTING and r["class"] == r["expect"], (rid, r["class"])
    short = observed_shortfalls(doc, info)
    assert sorted(s.split(" ")[0] for s in short) == sorted(ROWS)


def test_a_row_the_run_names_and_no_descriptor_holds_is_a_shortfall(tmp_path: Path) -> None:
    trust = TraceTrust()
    live = trust.live.create(tmp_path / "observe")
    trace = live / "observed.jsonl"
    trace.write_text("")
    run = Run(trace, rows=("vllm/no-such-row/substrate",))
    info, descs = attach_observed(run, list(runtime_descriptor_paths()), live, trust)
    assert info["rows"] == [] and all(p.parent != live for p in descs)
    assert observed_shortfalls({"rows": []}, info) == [
        "vllm/no-such-row/substrate: the observed run names it, but no descriptor holds it"]
