"""Property tests of SPEC §7 over generated rows and verification results."""

from __future__ import annotations

import io
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st
from lowering_rows import anchor_spec, result
from ruamel.yaml import YAML

from residentkv.lowering.anchors import AnchorResult, Verifier
from residentkv.lowering.bundles import OBLIGATIONS, load_bundles
from residentkv.lowering.check import _check_row
from residentkv.lowering.classify import GRANTING, POSITIVE, RANK, classify
from residentkv.lowering.descriptor import GATES, Row, parse_descriptor

BUNDLES = load_bundles()
STATUSES = ("satisfied", "partial", "absent", "contradicted", "unknown")
WEAKER = {"satisfied": ("partial", "unknown", "absent", "contradicted"),
          "partial": ("unknown", "absent", "contradicted")}
OUTCOMES = {"source": ("verified", "drifted", "missing", "unverifiable", "failed"),
            "trace": ("verified", "failed", "missing"),
            "doc": ("unverifiable",), "sim": ("unverifiable",)}
Case = tuple[dict[str, Any], dict[str, AnchorResult]]


@st.composite
def cases(draw: st.DrawFn, kinds: tuple[str, ...] = ("source", "trace", "doc", "sim")) -> Case:
    n = draw(st.integers(1, 5))
    anchors: dict[str, dict[str, Any]] = {}
    results: dict[str, AnchorResult] = {}
    for i in range(n):
        kind = draw(st.sampled_from(kinds))
        spec = anchor_spec(kind, draw(st.sampled_from(GATES)))
        anchors[f"a{i}"] = spec
        results[f"a{i}"] = result(f"a{i}", spec, draw(st.sampled_from(OUTCOMES[kind])))
    ids = list(anchors)
    obligations = {o: {"status": draw(st.sampled_from(STATUSES)),
                       "evidence": draw(st.lists(st.sampled_from(ids), min_size=1, max_size=3,
                                                 unique=True))} for o in OBLIGATIONS}
    row = {"id": "r", "runtime": {"name": "rt"}, "mode": "m", "boundary": "b",
           "mechanism": draw(st.sampled_from(("native", "adapter", "patch"))),
           "lowers": draw(st.sampled_from(sorted(BUNDLES))),
           "asserts": draw(st.sampled_from(("conformance", "substrate"))),
           "obligations": obligations, "anchors": anchors}
    return row, results


def klass(row: dict[str, Any], results: dict[str, AnchorResult]) -> str:
    model = Row.model_validate(row)
    return classify(model, results, BUNDLES[model.lowers]).klass


def not_stronger(before: str, after: str) -> bool:
    """SPEC §7: a weakened row never lands in a positive class stronger than before."""
    if after not in POSITIVE:
        return True
    return before in POSITIVE and RANK[after] >= RANK[before]


@settings(max_examples=250, deadline=None)
@given(cases(), st.data())
def test_removing_an_anchor_never_strengthens(case: Case, data: st.DataObject) -> None:
    row, results = case
    assume(len(row["anchors"]) > 1)
    gone = data.draw(st.sampled_from(sorted(row["anchors"])))
    after = {**row, "anchors": {k: v for k, v in row["anchors"].items() if k != gone},
             "obligations": {o: {**ob, "evidence": [a for a in ob["evidence"] if a != gone]}
                             for o, ob in row["obligations"].items()}}
    rest = {k: v for k, v in results.items() if k != gone}
    assert not_stronger(klass(row, results), klass(after, rest))


@settings(max_examples=250, deadline=None)
@given(cases(), st.data())
def test_failing_verification_never_strengthens(case: Case, data: st.DataObject) -> None:
    row, results = case
    verified = sorted(a for a, r in results.items() if r.result == "verified")
    assume(verified)
    aid = data.draw(st.sampled_from(verified))
    broken = "drifted" if results[aid].kind == "source" else "failed"
    after = {**results, aid: result(aid, row["anchors"][aid], broken)}
    assert not_stronger(klass(row, results), klass(row, after))


@settings(max_examples=250, deadline=None)
@given(cases(), st.data())
def test_weakening_a_status_never_strengthens(case: Case, data: st.DataObject) -> None:
    row, results = case
    names = sorted(o for o, ob in row["obligations"].items() if ob["status"] in WEAKER)
    assume(names)
    name = data.draw(st.sampled_from(names))
    ob = row["obligations"][name]
    weaker = data.draw(st.sampled_from(WEAKER[ob["status"]]))
    after = {**row, "obligations": {**row["obligations"], name: {**ob, "status": weaker}}}
    assert not_stronger(klass(row, results), klass(after, results))


@settings(max_examples=250, deadline=None)
@given(cases())
def test_adapter_or_patch_never_native(case: Case) -> None:
    row, results = case
    row = {**row, "mechanism": "adapter" if row["mechanism"] == "native" else row["mechanism"]}
    assert klass(row, results) != "native_conformance"


@settings(max_examples=250, deadline=None)
@given(cases(kinds=("doc", "sim")))
def test_doc_or_sim_evidence_never_grants(case: Case) -> None:
    assert klass(*case) not in GRANTING


@settings(max_examples=250, deadline=None)
@given(cases())
def test_cited_only_evidence_never_grants(case: Case) -> None:
    row, results = case
    cited = {a: r.model_copy(update={"result": "unverifiable"}) for a, r in results.items()}
    assert klass(row, cited) not in GRANTING


CORRUPTIONS = ("unknown_field", "bad_enum", "drop_field", "unknown_anchor", "empty_evidence",
               "unsafe_path", "bad_mode")


def corrupt(row: dict[str, Any], how: str) -> dict[str, Any]:
    row = {**row, "obligations": {k: dict(v) for k, v in row["obligations"].items()}}
    b1 = row["obligations"]["claim_identity"]
    if how == "unknown_field":
        row["surprise"] = True
    elif how == "bad_enum":
        row["mechanism"] = "nativ"
    elif how == "drop_field":
        row.pop("boundary")
    elif how == "unknown_anchor":
        b1["evidence"] = [*b1["evidence"], "zz"]
    elif how == "empty_evidence":
        b1.update(status="satisfied", evidence=[])
    elif how == "unsafe_path":
        row["anchors"] = {**row["anchors"], "a0": {**anchor_spec("trace"), "path": "../t.jsonl"}}
    else:
        row["lowers"] = "best_effort"
    return row


@settings(max_examples=200, deadline=None)
@given(cases(), st.sampled_from(CORRUPTIONS))
def test_invalid_rows_are_always_unknown(case: Case, how: str) -> None:
    row, _ = case
    buf = io.StringIO()
    YAML().dump({"schema": "residentkv.descriptor/v1", "rows": [corrupt(row, how)]}, buf)
    loaded = parse_descriptor(buf.getvalue(), "gen.yaml", set(BUNDLES)).rows[0]
    assert loaded.row is None and loaded.findings
    checked = _check_row(loaded, BUNDLES, Verifier())
    assert checked.klass == "unknown_evidence"
    assert all(f.line is not None for f in checked.findings)
