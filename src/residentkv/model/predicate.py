"""Materialization predicates evaluated on real block positions (SPEC §2)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

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


class _PredicateLike(Protocol):
    """What an accepted predicate carries (the pydantic :class:`PredicateSpec` or the fast
    decoder's twin of it)."""

    @property
    def kind(self) -> object: ...
    @property
    def blocks(self) -> int: ...
    @property
    def start(self) -> int | None: ...


@dataclass(frozen=True, slots=True)
class AcceptedPredicate:
    """The predicate a ``claim_accepted`` fixes, with the footprint it is judged in (SPEC §2,
    §4.1, §4.2): which positions it needs, and whether a materialization's numbers prove it.

    The one value every reader asks (the automaton's streaming and reference readers, the
    gates' tracker, the observer), so the needed-positions test and the proof are written once.
    """

    kind: str
    blocks: int
    start: int
    footprint: int

    @classmethod
    def of(cls, spec: _PredicateLike, footprint: int) -> AcceptedPredicate:
        """*spec* accepted over *footprint* blocks."""
        return cls(str(spec.kind), spec.blocks, spec.start or 0, footprint)

    @property
    def needed(self) -> range:
        """The positions the predicate needs (a leading prefix starts at 0)."""
        return range(self.start, self.start + self.blocks)

    def needs(self, position: int | None) -> bool:
        """Whether the predicate needs block *position*; an unknown position counts (fail
        closed)."""
        return position is None or self.start <= position < self.start + self.blocks

    def proves(self, leading: int, surviving: int) -> bool:
        """Whether a materialization's numbers prove the predicate (SPEC §2, §4.2).

        Positions ``0 .. leading-1`` are present and position ``leading`` is not (when it is
        inside the footprint). With ``surviving == footprint`` every position is present; with
        ``surviving == footprint - 1`` every position but ``leading`` is. Otherwise only the
        leading run is known. Numbers that contradict each other prove nothing (fail closed):
        a leading run shorter than the footprint says position ``leading`` is missing, so not
        every position can survive.
        """
        footprint = self.footprint
        if leading > surviving or surviving > footprint:
            return False
        if leading < footprint and surviving == footprint:
            return False
        if self.kind != PredicateKind.CONTIGUOUS_RANGE:
            return leading >= self.blocks
        start, end = self.start, self.start + self.blocks
        if end > footprint:
            return False  # a range beyond the footprint has no positions to be present
        if end <= leading or surviving == footprint:
            return True
        return surviving == footprint - 1 and not start <= leading < end

    def short(self, block_count: int) -> bool:
        """An offloaded copy of *block_count* blocks cannot hold the positions the predicate
        needs (it could not bring the claim back)."""
        return block_count < self.blocks
