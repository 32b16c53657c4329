"""Obligation bundles: shipped ones load through the user path; bad ones are located errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from residentkv.lowering.bundles import OBLIGATIONS, load_bundles, parse_bundle, shipped_bundle_dir
from residentkv.lowering.yamlio import DescriptorError
from residentkv.trace.gates import REQUIREMENTS

GOOD = """\
schema: residentkv.bundle/v1
mode: offloadable
version: 2
summary: user variant
outcomes: [refusal]
obligations:
  claim_identity:
    refines: B1
    summary: id
    requirements: [stable_identity]
    satisfied_by: [[observation]]
  materialization_predicate:
    refines: B2
    summary: predicate
    requirements: [predicate_fixed]
    satisfied_by: [[observation]]
  ordered_lifecycle:
    refines: B3
    summary: order
    requirements: [restored_from_offload]
    satisfied_by: [[lifecycle], [observation, failure_outcome]]
  claim_scoped_outcomes:
    refines: B4
    summary: outcome
    requirements: [refusal_attributed]
    satisfied_by: [[failure_outcome]]
"""


def test_shipped_bundles_cover_the_five_modes() -> None:
    bundles = load_bundles()
    assert set(bundles) == {"soft_priority", "hard_protected", "demotable", "expiring",
                            "offloadable"}
    for b in bundles.values():
        assert list(b.obligations) == list(OBLIGATIONS)
        assert b.digest and b.source.startswith("<package>/")


def test_shipped_bundles_name_only_known_gates_and_requirements() -> None:
    for b in load_bundles().values():
        for ob in b.obligations.values():
            assert ob.gates() <= set(REQUIREMENTS)
            known = {r for g in ob.gates() for r in REQUIREMENTS[g]}
            assert set(ob.requirements) <= known


def test_offloadable_b3_needs_lifecycle_or_both_paths() -> None:
    b3 = load_bundles()["offloadable"].obligations["ordered_lifecycle"]
    assert b3.satisfied_by == [["lifecycle"], ["observation", "failure_outcome"]]


SHIPPED_OFFLOADABLE = shipped_bundle_dir().joinpath("offloadable.yaml").read_text(
    encoding="utf-8")
B3_ALTS = "satisfied_by: [[lifecycle], [observation, failure_outcome]]"
B4_ALTS = "satisfied_by: [[failure_outcome], [attribution]]"


def test_user_bundle_dir_replaces_a_shipped_mode_when_it_tightens(tmp_path: Path) -> None:
    tight = SHIPPED_OFFLOADABLE.replace("version: 1", "version: 2").replace(
        B4_ALTS, "satisfied_by: [[failure_outcome, attribution]]").replace(
        "outcomes: [refusal, harm]", "outcomes: [refusal]")
    (tmp_path / "offloadable.yaml").write_text(tight)
    assert load_bundles(tmp_path)["offloadable"].version == 2


@pytest.mark.parametrize(("old", "new", "what", "line"), [
    (B4_ALTS, "satisfied_by: [[failure_outcome], [observation]]", "admits ['observation']",
     24),
    (B3_ALTS, "satisfied_by: [[lifecycle], [observation]]", "admits ['observation']", 19),
    ("refusal_attributed, ", "", "drops requirement(s) refusal_attributed", 24),
    ("outcomes: [refusal, harm]", "outcomes: [refusal, harm, demotion]",
     "outcomes admit demotion", 7),
    ("refines: B4", "refines: B3", "refines B3", 24),
])
def test_a_user_bundle_that_loosens_is_refused_where_it_loosens(
        tmp_path: Path, old: str, new: str, what: str, line: int) -> None:
    assert old in SHIPPED_OFFLOADABLE
    (tmp_path / "offloadable.yaml").write_text(SHIPPED_OFFLOADABLE.replace(old, new, 1))
    with pytest.raises(DescriptorError) as exc:
        load_bundles(tmp_path)
    assert exc.value.code == "O016" and what in exc.value.message
    assert exc.value.path == str(tmp_path / "offloadable.yaml") and exc.value.line == line


def test_a_new_mode_shows_b4_only_on_an_outcome_gate(tmp_path: Path) -> None:
    weak = SHIPPED_OFFLOADABLE.replace("mode: offloadable", "mode: mine").replace(
        B4_ALTS, "satisfied_by: [[observation]]").replace(
        "claim_load_failed, restore_failed_scoped, refusal_attributed, outcome_before_finish, "
        "no_restore_after_failure", "claim_events_present")
    (tmp_path / "mine.yaml").write_text(weak)
    with pytest.raises(DescriptorError) as exc:
        load_bundles(tmp_path)
    assert exc.value.code == "O016" and "for B4" in exc.value.message
    (tmp_path / "mine.yaml").write_text(SHIPPED_OFFLOADABLE.replace("mode: offloadable",
                                                                    "mode: mine"))
    assert "mine" in load_bundles(tmp_path)


def test_every_shipped_file_parses_alone() -> None:
    for f in shipped_bundle_dir().iterdir():
        if f.name.endswith(".yaml"):
            assert parse_bundle(f.read_text(encoding="utf-8"), f.name).mode == f.name[:-5]


@pytest.mark.parametrize(("old", "new", "code", "line"), [
    ("requirements: [stable_identity]", "requirements: [claim_kept]", "O003", 10),
    ("satisfied_by: [[observation]]\n  materialization", "satisfied_by: [[observaton]]\n"
     "  materialization", "O004", 11),
    ("version: 2", "version: 0", "O001", 3),
    ("summary: id\n", "summary: id\n    extra: 1\n", "O001", 10),
])
def test_bad_bundles_are_located_errors(old: str, new: str, code: str, line: int) -> None:
    with pytest.raises(DescriptorError) as exc:
        parse_bundle(GOOD.replace(old, new, 1), "b.yaml")
    assert exc.value.code == code
    assert exc.value.path == "b.yaml"
    assert exc.value.line == line


def test_empty_obligation_list_is_an_error() -> None:
    text = GOOD.split("obligations:")[0] + "obligations: {}\n"
    with pytest.raises(DescriptorError) as exc:
        parse_bundle(text, "b.yaml")
    assert exc.value.code == "O002"


def test_missing_obligation_is_an_error() -> None:
    text = GOOD.split("  claim_scoped_outcomes:")[0]
    with pytest.raises(DescriptorError) as exc:
        parse_bundle(text, "b.yaml")
    assert exc.value.code == "O002"
    assert "claim_scoped_outcomes" in exc.value.message


def test_duplicate_key_in_bundle_is_an_error() -> None:
    with pytest.raises(DescriptorError) as exc:
        parse_bundle(GOOD.replace("version: 2\n", "version: 2\nversion: 3\n"), "b.yaml")
    assert exc.value.code == "D002"
    assert exc.value.line == 4


def test_empty_bundle_dir_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DescriptorError) as exc:
        load_bundles(tmp_path)
    assert exc.value.code == "O002"
