"""Trace evidence binds to the row that cites it (mode, bundle requirements) and grants only
with provenance that cannot be typed: a pinned sha256, a stream_started whose runtime release
is a verified source of the same descriptor, and for native rows the runtime's own emitter."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from attesting import attested
from lowering_rows import anchor_spec, make_row, result

import residentkv
from residentkv.lowering.bundles import OBLIGATIONS, load_bundles
from residentkv.lowering.check import run_check
from residentkv.lowering.classify import GRANTING, effective
from residentkv.trace.writer import EventWriter, Provenance
from residentkv.trust.roots import TraceTrust

DATA = Path(__file__).resolve().parents[1] / "data" / "lowering"
TREE = DATA / "tree"
IDENT = {"object_id": "prefix-1", "cache_identity": "tiny|salt|128|fp32",
         "request_token_map_id": "tm-1", "predicate_id": "lead-2"}
EMIT_SHA = "c979e50600873c088f6c03a571e87f136935536dcfe0029b0a0e8f373ed12dea"
CFG_SHA = "99e6fe3bbeb52ae10fd354ba7e68ed19f728f706d898381574987e9dd14ee17e"
TOY = Provenance("toyrt.scheduler", "0.1", "toyrt", "0.1")


TWO_GENERATIONS = (Path(residentkv.__file__).parent / "data" / "traces"
                   / "lifecycle_two_generations.jsonl")


def soft_priority_trace(path: Path, provenance: Provenance | None = TOY) -> str:
    """A soft_priority claim's two generations, success then failure (its lifecycle passes;
    the shipped two-generation trace replayed with claim c-s of that mode)."""
    buf = io.StringIO()
    w = EventWriter(buf, source="toyrt.scheduler", provenance=provenance)
    for line in TWO_GENERATIONS.read_text().splitlines():
        e = json.loads(line)
        for envelope in ("schema", "seq", "ts_ns"):
            e.pop(envelope)
        kind, source = e.pop("event"), e.pop("source")
        if e.get("claim_id") is not None:
            e["claim_id"] = "c-s"
            if "object_id" in e:
                e.update(IDENT)
        if kind == "claim_accepted":
            e.update(protection_mode="soft_priority", predicate={
                "id": "lead-2", "kind": "leading_prefix_at_least", "blocks": 2})
        if kind == "active_request_refused" or kind == "claim_restore_failed":
            e["outcome_claim_id"] = "c-s"
        if kind == "active_request_refused":
            e["blocking_claim_ids"] = ["c-s"]
        w.emit(kind, source=None if source == "test" else source, **e)
    w.flush()
    path.write_text(buf.getvalue())
    return hashlib.sha256(path.read_bytes()).hexdigest()


def descriptor(tmp_path: Path, lowers: str, trace: str, sha: str | None, *,
               mechanism: str = "native", gate: str = "lifecycle", claim: str = "c-s",
               with_source: bool = True, runtime: str = "toyrt") -> Path:
    pin = f", sha256: {sha}" if sha else ""
    sources = (f"""
      s_emit: {{kind: source, package: toyrt, version: "0.1", path: toyrt/events.py,
               symbol: EMITTER, sha256: {EMIT_SHA}}}""" if with_source else "")
    b1 = "[t, s_emit]" if with_source else "[t]"
    path = tmp_path / "d.yaml"
    path.write_text(f"""schema: residentkv.descriptor/v1
rows:
  - id: r
    runtime: {{name: {runtime}, version: "0.1"}}
    mode: "m"
    mechanism: {mechanism}
    lowers: {lowers}
    asserts: conformance
    obligations:
      claim_identity: {{status: satisfied, evidence: {b1}}}
      materialization_predicate: {{status: satisfied, evidence: [t]}}
      ordered_lifecycle: {{status: satisfied, evidence: [t]}}
      claim_scoped_outcomes: {{status: satisfied, evidence: [t]}}
    anchors:
      t: {{kind: trace, path: {trace}, gate: {gate}, claim: {claim}{pin}}}{sources}
    boundary: "test"
""")
    return path


def check(path: Path, trust: TraceTrust | None = None
          ) -> tuple[str, dict[str, tuple[str, str | None]]]:
    (row,) = run_check([path], [f"toyrt={TREE}"], trust=trust).rows
    return row.klass, {a.id: (a.result, a.code) for a in row.anchors}


# --- F1: a trace anchor supports a row only for its own mode ----------------------------------

@pytest.mark.parametrize("lowers", ["expiring", "demotable", "hard_protected", "offloadable"])
def test_a_soft_priority_trace_never_supports_another_mode(tmp_path: Path, lowers: str) -> None:
    sha = soft_priority_trace(tmp_path / "t.jsonl")
    klass, anchors = check(descriptor(tmp_path, lowers, "t.jsonl", sha))
    assert klass not in GRANTING  # (the verified source anchor alone may make it substrate)
    assert anchors["t"] == ("failed", "A014")


def test_a_restore_failure_trace_of_an_offloadable_claim_never_supports_hard_protected(
        tmp_path: Path) -> None:
    shutil.copy(DATA / "traces/witness.jsonl", tmp_path / "w.jsonl")
    sha = hashlib.sha256((tmp_path / "w.jsonl").read_bytes()).hexdigest()
    klass, anchors = check(descriptor(tmp_path, "hard_protected", "w.jsonl", sha,
                                      gate="failure_outcome", claim="c-1"))
    assert klass not in GRANTING and anchors["t"] == ("failed", "A014")


def test_the_gate_must_show_the_bundles_requirements() -> None:
    # a lifecycle result that shows only a legal run and a materialization establishes nothing of an
    # expiring bundle, whose B3 needs expiry_before_loss
    bundles = load_bundles()
    spec = anchor_spec("trace", "lifecycle")
    row = make_row(dict.fromkeys(OBLIGATIONS, "satisfied"), {n: ["t"] for n in OBLIGATIONS},
                   {"t": spec}, lowers="expiring")
    thin = result("t", spec, "verified", shown=("legal_transitions", "materialized"))
    full = result("t", spec, "verified")
    ob = row.obligations.ordered_lifecycle
    b3 = bundles["expiring"].obligations["ordered_lifecycle"]
    assert effective("ordered_lifecycle", ob, {"t": thin}, b3).established is False
    assert effective("ordered_lifecycle", ob, {"t": full}, b3).established is True


# --- F2: provenance that cannot be typed ------------------------------------------------------

def test_the_positive_path_grants(tmp_path: Path) -> None:
    shutil.copy(DATA / "traces/witness.jsonl", tmp_path / "w.jsonl")
    sha = hashlib.sha256((tmp_path / "w.jsonl").read_bytes()).hexdigest()
    path = descriptor(tmp_path, "offloadable", "w.jsonl", sha, gate="failure_outcome",
                      claim="c-1")
    text = path.read_text().replace(
        "claim_identity: {status: satisfied, evidence: [t, s_emit]}",
        "claim_identity: {status: satisfied, evidence: [o, s_emit]}").replace(
        "materialization_predicate: {status: satisfied, evidence: [t]}",
        "materialization_predicate: {status: satisfied, evidence: [o]}").replace(
        "ordered_lifecycle: {status: satisfied, evidence: [t]}",
        "ordered_lifecycle: {status: satisfied, evidence: [l]}").replace(
        "      t: {kind: trace", f"      o: {{kind: trace, path: w.jsonl, gate: observation, "
        f"claim: c-1, sha256: {sha}}}\n      l: {{kind: trace, path: w.jsonl, gate: lifecycle, "
        f"claim: c-1, sha256: {sha}}}\n      t: {{kind: trace")
    path.write_text(text)
    # a root of trust: a key the policy trusts for toyrt's own emitter signed the trace
    assert check(path, attested(tmp_path, [tmp_path / "w.jsonl"]))[0] == "native_conformance"
    # without one, the same trace is cited and never grants
    klass, anchors = check(path)
    assert klass not in GRANTING and anchors["t"] == ("unverifiable", "A030")


def test_an_unpinned_trace_never_grants(tmp_path: Path) -> None:
    soft_priority_trace(tmp_path / "t.jsonl")
    klass, anchors = check(descriptor(tmp_path, "soft_priority", "t.jsonl", None))
    assert anchors["t"] == ("unverifiable", "A010") and klass != "native_conformance"


def test_a_hand_typed_trace_without_provenance_never_grants(tmp_path: Path) -> None:
    sha = soft_priority_trace(tmp_path / "t.jsonl", provenance=None)
    klass, anchors = check(descriptor(tmp_path, "soft_priority", "t.jsonl", sha))
    assert anchors["t"] == ("unverifiable", "A011")
    assert klass not in GRANTING


def test_a_release_no_source_of_the_descriptor_verifies_never_grants(tmp_path: Path) -> None:
    sha = soft_priority_trace(tmp_path / "t.jsonl",
                              Provenance("toyrt.scheduler", "0.1", "toyrt", "9.9"))
    _, anchors = check(descriptor(tmp_path, "soft_priority", "t.jsonl", sha))
    assert anchors["t"] == ("unverifiable", "A012")
    sha = soft_priority_trace(tmp_path / "t.jsonl")
    _, anchors = check(descriptor(tmp_path, "soft_priority", "t.jsonl", sha,
                                  with_source=False))
    assert anchors["t"] == ("unverifiable", "A012")


@pytest.mark.parametrize(("emitter", "dist", "speaks", "native", "bound"), [
    # the module ships in toyrt's RECORD: native, and binds the plain toyrt row
    ("toyrt.scheduler", None, (), None, {"toyrt": None, "toyrt+toyrt-plugin": "A052"}),
    # named after the runtime, trusted by the key, but toyrt ships no such module
    ("toyrt.recorder", None, (), "A051", {"toyrt": "A052", "toyrt+toyrt-plugin": "A052"}),
    ("ResidentKV.vllm.scheduler", None, (), "A051", {"toyrt": "A052"}),
    # a plugin distribution: an adapter however it is named, bound to toyrt+its distribution
    # when the policy lets the key speak for that distribution
    ("toyrt_plugin.emit", "toyrt-plugin", ("toyrt-plugin",), "A009",
     {"toyrt": "A052", "toyrt+toyrt_plugin": None, "toyrt+other": "A052"}),
    ("toyrt.plugin", "toyrt-plugin", ("toyrt_plugin",), "A009",
     {"toyrt": "A052", "toyrt+toyrt.plugin": None}),
    # ... and never when it does not: the distribution is then only the signer's word
    ("toyrt_plugin.emit", "toyrt-plugin", (), "A009",
     {"toyrt": "A052", "toyrt+toyrt-plugin": "A054"}),
    ("toyrt_plugin.emit", "residentkv", ("toyrt-plugin",), "A009",
     {"toyrt+residentkv": "A054", "toyrt+toyrt-plugin": "A052"}),
])
def test_native_is_where_the_emitter_ships_and_a_trace_binds_its_own_row(
        tmp_path: Path, emitter: str, dist: str | None, speaks: tuple[str, ...],
        native: str | None, bound: dict[str, str | None]) -> None:
    sha = soft_priority_trace(tmp_path / "t.jsonl", Provenance(emitter, "1", "toyrt", "0.1"))
    trust = attested(tmp_path, [tmp_path / "t.jsonl"], emitters=[emitter],
                     emitter_distribution=dist, distributions=speaks)
    _, anchors = check(descriptor(tmp_path, "soft_priority", "t.jsonl", sha), trust)
    assert anchors["t"] == ("verified" if native is None else "unverifiable", native)
    for runtime, code in bound.items():  # adapter rows: (runtime, adapter, version) equal
        _, anchors = check(descriptor(tmp_path, "soft_priority", "t.jsonl", sha,
                                      mechanism="adapter", runtime=runtime), trust)
        assert anchors["t"] == ("verified" if code is None else "unverifiable", code), runtime


def test_a_key_trusted_for_another_emitter_vouches_for_nothing(tmp_path: Path) -> None:
    sha = soft_priority_trace(tmp_path / "t.jsonl")
    trust = attested(tmp_path, [tmp_path / "t.jsonl"], emitters=["toyrt.other"])
    for mechanism in ("native", "adapter"):
        klass, anchors = check(descriptor(tmp_path, "soft_priority", "t.jsonl", sha,
                                          mechanism=mechanism), trust)
        assert anchors["t"] == ("unverifiable", "A035") and klass not in GRANTING


def test_a_simulated_trace_never_grants(tmp_path: Path) -> None:
    sha = soft_priority_trace(tmp_path / "t.jsonl",
                              Provenance("MicroRuntime", "1", "toyrt", "0.1"))
    _, anchors = check(descriptor(tmp_path, "soft_priority", "t.jsonl", sha,
                                  mechanism="adapter"))
    assert anchors["t"] == ("unverifiable", "A003")


def test_provenance_is_reported_in_the_json(tmp_path: Path) -> None:
    sha = soft_priority_trace(tmp_path / "t.jsonl")
    (row,) = run_check([descriptor(tmp_path, "soft_priority", "t.jsonl", sha)],
                       [f"toyrt={TREE}"]).rows
    trace: Any = next(a for a in row.anchors if a.id == "t")
    assert json.loads(trace.model_dump_json())["provenance"]["runtime"] == "toyrt"


def test_microruntime_traces_carry_its_provenance_and_never_grant(tmp_path: Path) -> None:
    from residentkv.lowering.descriptor import TraceAnchor
    from residentkv.microruntime.scenario import CLAIM_ID, Reference, run_reference

    trace = run_reference(Reference(usable=80, policy="hard_exclude"), tmp_path / "mr.jsonl")
    first = json.loads(trace.read_text().splitlines()[0])
    assert first["event"] == "stream_started"
    assert first["emitter"]["name"] == "residentkv.microruntime"
    anchor = TraceAnchor(kind="trace", path="mr.jsonl", gate="lifecycle", claim=CLAIM_ID,
                         sha256=hashlib.sha256(trace.read_bytes()).hexdigest())
    _, anchors = check(descriptor(tmp_path, "hard_protected", "mr.jsonl", anchor.sha256,
                                  claim=CLAIM_ID))
    assert anchors["t"] == ("unverifiable", "A003")
