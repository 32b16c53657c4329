"""Materialization predicates evaluated on real block positions (SPEC §2)."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

from residentkv.model.claim import PredicateKind, PredicateSpec


class PredicateResult(BaseModel):
    """What a predicate saw: how many positions survive, the leading run, and the verdict."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    surviving: int
    leading: int
    required: int
    holds: bool


def leading_run(present: Iterable[int]) -> int:
    """Length of the run of present positions 0, 1, 2, ..."""
    positions = set(present)
    n = 0
    while n in positions:
        n += 1
    return n


def evaluate_predicate(spec: PredicateSpec, present: Iterable[int]) -> PredicateResult:
    """Evaluate *spec* on the set of present block positions.

    Block survival is not materialization: 59 surviving positions without position 0 have a
    leading run of 0 and satisfy no leading-prefix predicate.
    """
    positions = {p for p in present if p >= 0}
    leading = leading_run(positions)
    if spec.kind is PredicateKind.LEADING_PREFIX_AT_LEAST:
        holds = leading >= spec.blocks
    else:
        start = spec.start or 0
        holds = all(p in positions for p in range(start, start + spec.blocks))
    return PredicateResult(
        surviving=len(positions), leading=leading, required=spec.blocks, holds=holds
    )
