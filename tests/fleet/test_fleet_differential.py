"""Differential properties of gate fleet_outcome over generated fleets (tests/fleet/fleetgen.py).

(a) the streaming gate (:func:`residentkv.fleet.judge_fleet`) returns exactly the reference
    semantics' judgement (:func:`residentkv.fleet.reference_fleet`) — verdict, missing ids,
    located problems, claims and requests — on legal, defective and free-form fleets;
(b) the oracle: a legal fleet passes, and every defect's requirement is missing.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from fleetgen import GenFleet, defective_fleets, free_fleets, legal_fleets
from hypothesis import given, settings

from residentkv.fleet import FleetJudgement, judge_fleet, reference_fleet


def both(f: GenFleet) -> tuple[FleetJudgement, FleetJudgement]:
    with tempfile.TemporaryDirectory() as folder:
        paths = f.files(Path(folder))
        return judge_fleet(paths), reference_fleet(paths)


def agree(f: GenFleet) -> FleetJudgement:
    ours, ref = both(f)
    if ours != ref:
        a, b = ours.to_json(), ref.to_json()
        diff = {k: (a[k], b[k]) for k in a if a[k] != b[k]}
        raise AssertionError(f"streaming differs from the reference (seed {f.seed}): {diff}")
    return ours


@settings(max_examples=150)
@given(legal_fleets())
def test_legal_fleets_pass_in_both(f: GenFleet) -> None:
    judgement = agree(f)
    assert judgement.passed, [p.render() for p in judgement.problems]
    assert judgement.requests and all(r.passed and r.decision for r in judgement.requests)


@settings(max_examples=300)
@given(defective_fleets())
def test_defects_break_their_requirement_in_both(f: GenFleet) -> None:
    judgement = agree(f)
    assert f.must_break <= set(judgement.missing), (f.seed, judgement.missing)
    for req in judgement.missing:  # every missing requirement is explained where it broke
        assert any(p.requirement == req for p in judgement.problems)


@settings(max_examples=400)
@given(free_fleets())
def test_free_fleets_streaming_equals_reference(f: GenFleet) -> None:
    agree(f)
