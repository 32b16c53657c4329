"""The decision procedure of SPEC §7: every rule reached, and the six classes end to end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lowering_rows import anchor_spec, make_row, result

from residentkv.lowering.bundles import OBLIGATIONS, load_bundles
from residentkv.lowering.check import run_check
from residentkv.lowering.classify import classify, effective
from residentkv.trust.policy import load_policy
from residentkv.trust.roots import TraceTrust

DATA = Path(__file__).resolve().parents[1] / "data" / "lowering"
BUNDLES = load_bundles()
B1, B2, B3, B4 = OBLIGATIONS
SAT = dict.fromkeys(OBLIGATIONS, "satisfied")
TRACES = {"o": anchor_spec("trace", "observation"), "l": anchor_spec("trace", "lifecycle"),
          "f": anchor_spec("trace", "failure_outcome")}
FULL = {B1: ["o"], B2: ["o"], B3: ["l"], B4: ["f"]}


def run(statuses: dict[str, str], evidence: dict[str, list[str]],
        anchors: dict[str, dict[str, Any]], outcomes: dict[str, str] | None = None,
        **kw: str) -> tuple[str, list[str]]:
    row = make_row(statuses, evidence, anchors, **kw)
    outcomes = outcomes or {}
    results = {a: result(a, s, outcomes.get(a, "verified")) for a, s in anchors.items()}
    v = classify(row, results, BUNDLES[row.lowers])
    return v.klass, v.reasons


# --- effective status ------------------------------------------------------------------------

def _eff(status: str, kinds: list[tuple[str, str | None, str]], name: str = B1,
         mode: str = "offloadable") -> tuple[str, str, bool]:
    anchors = {f"a{i}": anchor_spec(k, g) for i, (k, g, _) in enumerate(kinds)}
    row = make_row({**SAT, name: status}, {**{n: ["a0"] for n in OBLIGATIONS},
                                            name: list(anchors)}, anchors, lowers=mode)
    results = {f"a{i}": result(f"a{i}", anchors[f"a{i}"], o) for i, (_, _, o) in enumerate(kinds)}
    ob = effective(name, getattr(row.obligations, name), results,
                   BUNDLES[mode].obligations[name])
    return ob.effective, ob.strength, ob.established


def test_no_usable_evidence_is_unknown() -> None:
    assert _eff("satisfied", [("source", None, "drifted")]) == ("unknown", "none", False)
    assert _eff("absent", [("trace", "observation", "failed")]) == ("unknown", "none", False)


def test_satisfied_needs_verified_evidence_the_bundle_accepts() -> None:
    assert _eff("satisfied", [("trace", "observation", "verified")]) == (
        "satisfied", "verified", True)
    assert _eff("satisfied", [("source", None, "verified")]) == ("satisfied", "verified", True)
    assert _eff("satisfied", [("doc", None, "unverifiable")]) == ("unknown", "cited", False)
    assert _eff("satisfied", [("source", None, "unverifiable")]) == ("unknown", "cited", False)


def test_source_cannot_satisfy_b4_and_wrong_gate_does_not_count() -> None:
    assert _eff("satisfied", [("source", None, "verified")], B4)[2] is False
    assert _eff("satisfied", [("trace", "observation", "verified")], B4)[2] is False
    assert _eff("satisfied", [("trace", "failure_outcome", "verified")], B4)[2] is True


def test_alternative_needs_every_gate_of_it() -> None:
    both = [("trace", "observation", "verified"), ("trace", "failure_outcome", "verified")]
    assert _eff("satisfied", both, B3)[2] is True
    assert _eff("satisfied", both[:1], B3)[2] is False


def test_refusing_statuses_may_rest_on_cited_evidence() -> None:
    assert _eff("absent", [("doc", None, "unverifiable")]) == ("absent", "cited", False)
    assert _eff("contradicted", [("sim", None, "unverifiable")]) == (
        "contradicted", "cited", False)
    assert _eff("partial", [("source", None, "verified")]) == ("partial", "verified", False)
    assert _eff("unknown", [("source", None, "verified")]) == ("unknown", "verified", False)


def test_missing_result_counts_as_missing_evidence() -> None:
    row = make_row(SAT, FULL, TRACES)
    ob = effective(B1, row.obligations.claim_identity, {}, BUNDLES["offloadable"].obligations[B1])
    assert (ob.effective, ob.anchors[0].result) == ("unknown", "missing")


# --- rules -----------------------------------------------------------------------------------

def test_rule5_rejected_on_cited_absence() -> None:
    anchors = {**TRACES, "d": anchor_spec("doc")}
    klass, why = run({**SAT, B4: "absent"}, {**FULL, B4: ["d"]}, anchors,
                     {"d": "unverifiable"})
    assert klass == "rejected_mapping"
    assert "B4 absent (anchor d, cited)" in why[0]


def test_rule5_needs_a_conformance_assertion() -> None:
    anchors = {**TRACES, "d": anchor_spec("doc")}
    assert run({**SAT, B4: "absent"}, {**FULL, B4: ["d"]}, anchors, {"d": "unverifiable"},
               asserts="substrate")[0] == "approximation_substrate"


def test_rule1_native_conformance() -> None:
    assert run(SAT, FULL, TRACES)[0] == "native_conformance"


@pytest.mark.parametrize("mechanism", ["adapter", "patch"])
def test_rule2_adapter_or_patch_policy_evidence(mechanism: str) -> None:
    assert run(SAT, FULL, TRACES, mechanism=mechanism)[0] == "adapter_policy_evidence"


def test_rule1_and_2_need_the_conformance_assertion() -> None:
    assert run(SAT, FULL, TRACES, asserts="substrate")[0] == "approximation_substrate"


def test_rule3_observational_adapter() -> None:
    evidence = {B1: ["o"], B2: ["o"], B3: ["o"], B4: ["f"]}
    klass, why = run(SAT, evidence, TRACES, {"f": "failed"}, mechanism="adapter")
    assert klass == "adapter_observational_evidence"
    assert "observation trace o" in why[0]


def test_rule3_never_for_native_and_needs_the_observation_trace() -> None:
    evidence = {B1: ["o"], B2: ["o"], B3: ["o"], B4: ["f"]}
    assert run(SAT, evidence, TRACES, {"f": "failed"})[0] == "approximation_substrate"
    src = {"s": anchor_spec("source"), "f": TRACES["f"]}
    by_source = {B1: ["s"], B2: ["s"], B3: ["s"], B4: ["f"]}
    assert run(SAT, by_source, src, {"f": "failed"}, mechanism="adapter")[0] == (
        "approximation_substrate")


def test_rule4_substrate_on_cited_doc() -> None:
    docs = {"d": anchor_spec("doc")}
    statuses = dict.fromkeys(OBLIGATIONS, "absent")
    assert run(statuses, {n: ["d"] for n in OBLIGATIONS}, docs, {"d": "unverifiable"},
               asserts="substrate")[0] == "approximation_substrate"


def test_rule4_needs_a_real_primitive_not_a_simulation() -> None:
    sims = {"s": anchor_spec("sim")}
    statuses = dict.fromkeys(OBLIGATIONS, "absent")
    assert run(statuses, {n: ["s"] for n in OBLIGATIONS}, sims, {"s": "unverifiable"},
               asserts="substrate")[0] == "unknown_evidence"


def test_rule4_conformance_row_needs_an_established_obligation() -> None:
    docs = {"d": anchor_spec("doc")}
    assert run(SAT, {n: ["d"] for n in OBLIGATIONS}, docs, {"d": "unverifiable"})[0] == (
        "unknown_evidence")
    partial_b4 = run({**SAT, B4: "partial"}, FULL, TRACES)
    assert partial_b4[0] == "approximation_substrate"


def test_rule4_not_for_conformance_rows_admitting_an_absence() -> None:
    klass, _ = run({**SAT, B4: "absent"}, FULL, TRACES, {"f": "failed"})
    assert klass == "unknown_evidence"


def test_rule6_default_when_nothing_usable() -> None:
    klass, why = run(SAT, FULL, TRACES, {"o": "failed", "l": "failed", "f": "failed"})
    assert klass == "unknown_evidence"
    assert why[0].startswith("no rule applies")


# --- end to end: the six classes through real descriptors, trees and traces -------------------

EXPECTED = {
    "toy/native/offloadable": "native_conformance",
    "toy/adapter/offloadable": "adapter_policy_evidence",
    "toy/adapter-observe/offloadable": "adapter_observational_evidence",
    "toy/retention/soft_priority": "approximation_substrate",
    "toy/retention/hard_protected": "rejected_mapping",
    "toy/drifted/soft_priority": "unknown_evidence",
}


def test_six_classes_end_to_end() -> None:
    result = run_check([DATA / "six_classes.yaml"], [f"toyrt={DATA / 'tree'}"], trust=TRUSTED)
    assert {r.id: r.klass for r in result.rows} == EXPECTED
    assert result.exit_code == 0
    drifted = next(r for r in result.rows if r.id == "toy/drifted/soft_priority")
    assert {a.id: a.result for a in drifted.anchors} == {"s_old": "drifted", "s_gone": "missing"}


def test_without_sources_source_anchors_are_only_cited() -> None:
    result = run_check([DATA / "six_classes.yaml"])
    classes = {r.id: r.klass for r in result.rows}
    assert classes["toy/retention/hard_protected"] == "rejected_mapping"
    assert classes["toy/retention/soft_priority"] == "approximation_substrate"
    assert classes["toy/drifted/soft_priority"] == "approximation_substrate"
    assert result.exit_code == 1  # the drifted row's expect no longer matches


def test_expect_mismatch_is_an_error_never_an_override(data_copy: Path) -> None:
    path = data_copy / "six_classes.yaml"
    path.write_text(path.read_text().replace("expect: native_conformance",
                                             "expect: adapter_policy_evidence"))
    result = run_check([path], [f"toyrt={data_copy / 'tree'}"], trust=TRUSTED)
    row = result.rows[0]
    assert row.klass == "native_conformance"
    assert [(f.code, f.severity, f.line) for f in row.findings] == [("O010", "error", 27)]
    assert result.exit_code == 1


def test_overclaim_without_expect_is_an_error(data_copy: Path) -> None:
    path = data_copy / "six_classes.yaml"
    path.write_text(path.read_text().replace("    expect: rejected_mapping\n", ""))
    result = run_check([path], [f"toyrt={data_copy / 'tree'}"])
    row = next(r for r in result.rows if r.id == "toy/retention/hard_protected")
    assert [f.severity for f in row.findings if f.code == "O011"] == ["error"]
    assert result.exit_code == 1


def test_invalid_row_is_unknown_with_located_errors(data_copy: Path) -> None:
    path = data_copy / "six_classes.yaml"
    path.write_text(path.read_text().replace("mechanism: adapter\n", "mechanism: adaptr\n", 1))
    result = run_check([path], [f"toyrt={data_copy / 'tree'}"])
    row = result.rows[1]
    assert (row.klass, row.rule) == ("unknown_evidence", 0)
    assert (row.findings[0].code, row.findings[0].line) == ("D004", 33)


def test_duplicate_row_id_across_files(data_copy: Path) -> None:
    path = data_copy / "six_classes.yaml"
    result = run_check([path, path], [f"toyrt={data_copy / 'tree'}"])
    assert all(r.klass == "unknown_evidence" for r in result.rows[6:])
    assert {f.code for r in result.rows[6:] for f in r.findings} >= {"D010"}


TRUSTED = TraceTrust(policy=load_policy(DATA / "trust" / "policy.yaml"))


def test_six_classes_without_a_root_of_trust_grant_nothing() -> None:
    # the same descriptor, the same verified traces, no --trust: every granting row falls
    # back, and says that its evidence is cited, not trusted (O015)
    result = run_check([DATA / "six_classes.yaml"], [f"toyrt={DATA / 'tree'}"])
    assert not any(r.klass in ("native_conformance", "adapter_policy_evidence",
                               "adapter_observational_evidence") for r in result.rows)
    notes = [f for r in result.rows for f in r.findings if f.code == "O015"]
    assert notes and all("evidence cited, not trusted" in f.message for f in notes)
