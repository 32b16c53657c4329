import pytest
from hypothesis import given
from hypothesis import strategies as st

from residentkv.model.claim import PredicateSpec
from residentkv.model.predicate import evaluate_predicate, leading_run


def lead(n: int) -> PredicateSpec:
    return PredicateSpec(id="p", kind="leading_prefix_at_least", blocks=n)


def rng(start: int, n: int) -> PredicateSpec:
    return PredicateSpec(id="p", kind="contiguous_range", start=start, blocks=n)


def test_59_scattered_survivors_without_block_0_satisfy_nothing() -> None:
    result = evaluate_predicate(lead(8), range(1, 60))
    assert (result.surviving, result.leading, result.required, result.holds) == (59, 0, 8, False)
    assert not evaluate_predicate(lead(1), range(1, 60)).holds


@pytest.mark.parametrize(
    ("present", "n", "leading", "holds"),
    [
        ([], 1, 0, False),
        ([0], 1, 1, True),
        ([0, 1, 2], 3, 3, True),
        ([0, 1, 3], 3, 2, False),
        ([0, 1, 2, 3, 9], 4, 4, True),
        (range(60), 60, 60, True),
        (range(60), 61, 60, False),
    ],
)
def test_leading_prefix_at_least(present: list[int], n: int, leading: int, holds: bool) -> None:
    r = evaluate_predicate(lead(n), present)
    assert (r.leading, r.holds, r.required) == (leading, holds, n)


@pytest.mark.parametrize(
    ("present", "start", "n", "holds"),
    [
        ([2, 3, 4], 2, 3, True),
        ([2, 4], 2, 3, False),
        ([0, 1], 2, 1, False),
        ([5], 5, 1, True),
        (range(1, 60), 1, 59, True),  # a range need not start at 0 ...
        (range(1, 60), 0, 2, False),  # ... but one that does needs block 0
    ],
)
def test_contiguous_range(present: list[int], start: int, n: int, holds: bool) -> None:
    assert evaluate_predicate(rng(start, n), present).holds is holds


def test_duplicates_and_negative_positions_do_not_count() -> None:
    r = evaluate_predicate(lead(2), [0, 0, 1, -1])
    assert (r.surviving, r.leading, r.holds) == (2, 2, True)


@pytest.mark.parametrize(
    "bad",
    [
        {"id": "p", "kind": "contiguous_range", "blocks": 2},
        {"id": "p", "kind": "leading_prefix_at_least", "blocks": 2, "start": 0},
        {"id": "p", "kind": "leading_prefix_at_least", "blocks": 0},
        {"id": "p", "kind": "suffix", "blocks": 2},
        {"id": "", "kind": "leading_prefix_at_least", "blocks": 2},
    ],
)
def test_invalid_predicates_rejected(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        PredicateSpec.model_validate(bad)


@given(st.sets(st.integers(0, 80)), st.integers(1, 80))
def test_leading_predicate_matches_definition(present: set[int], n: int) -> None:
    r = evaluate_predicate(lead(n), present)
    assert r.leading == leading_run(present)
    assert r.holds == all(i in present for i in range(n))
    assert r.surviving == len(present)


@given(st.sets(st.integers(0, 80)), st.integers(0, 40), st.integers(1, 40))
def test_range_predicate_matches_definition(present: set[int], start: int, n: int) -> None:
    assert evaluate_predicate(rng(start, n), present).holds == set(
        range(start, start + n)
    ).issubset(present)
