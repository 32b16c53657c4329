"""The trace gates of SPEC §4 and §9.1, one :class:`Gate` record each.

A record names what a gate asks (its requirement ids), what a result does not show (its
boundary sentence), why each requirement can be missing, and its two judges: the streaming one
run by ``trace check`` (:mod:`residentkv.trace.judges`) and the reference one
(:mod:`residentkv.trace.semantics.judges`) it must agree with. Everything that lists gates —
the checks, the reports, ``explain`` — reads this table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from residentkv.model.vocabulary import GateName
from residentkv.model.vocabulary import Requirement as R
from residentkv.trace import judges as streaming
from residentkv.trace.requirements import (
    ATTRIBUTION_GATE,
    COMMON,
    CONFORMANCE_GATE,
    FAILURE_GATE,
    LIFECYCLE_GATE,
    OBSERVATION_GATE,
    Met,
    Seqs,
    ids,
)
from residentkv.trace.semantics import judges as reference
from residentkv.trace.semantics.stream import ClaimView
from residentkv.trace.semantics.why import WHY

#: the hot path: what the gate's claim meets, from one pass's facts
StreamingJudge = Callable[[streaming.ClaimFacts], Met]
#: the specification: the same from the whole event list and the common requirements met
ReferenceJudge = Callable[[ClaimView, Seqs], Met]


@dataclass(frozen=True, slots=True)
class Gate:
    """One trace gate."""

    name: GateName
    #: every requirement id the gate can report, in report order
    requirements: tuple[R, ...]
    #: what a passing result does not show
    boundary: str
    streaming: StreamingJudge
    reference: ReferenceJudge
    #: what the gate asks of a claim with no event (its requirements that need no claim facts)
    unconditional: tuple[R, ...]
    #: SPEC §9.1: what is open where the reading stops is live, not failed (conformance); the
    #: scenario gates judge the end of the reading as the end of the stream
    live: bool = False

    @property
    def ids(self) -> tuple[str, ...]:
        """The requirement ids as plain strings."""
        return ids(self.requirements)

    @property
    def why(self) -> Mapping[R, str]:
        """requirement id -> the one-line reason the gate reports it missing."""
        return MappingProxyType({r: WHY[r] for r in self.requirements})


GATES: Mapping[GateName, Gate] = MappingProxyType({g.name: g for g in (
    Gate(
        name=GateName.OBSERVATION,
        requirements=OBSERVATION_GATE,
        boundary=("shows one ordered, claim-identified offload/restore/reuse chain in this "
                  "stream; not that every reuse of the claim would succeed, nor anything about "
                  "other streams"),
        streaming=streaming.observation,
        reference=reference.observation,
        unconditional=OBSERVATION_GATE,
    ),
    Gate(
        name=GateName.FAILURE_OUTCOME,
        requirements=FAILURE_GATE,
        boundary=("shows that this controlled load failure of this claim became an ordered, "
                  "claim-scoped refusal before the request finished; not how uncontrolled "
                  "faults behave"),
        streaming=streaming.failure_outcome,
        reference=reference.failure_outcome,
        unconditional=FAILURE_GATE,
    ),
    Gate(
        name=GateName.LIFECYCLE,
        requirements=LIFECYCLE_GATE,
        boundary=("shows the claim's lifecycle paths present in this stream in a legal order; "
                  "not that paths absent from the stream would behave the same"),
        streaming=streaming.lifecycle,
        reference=reference.lifecycle,
        # which path applies depends on the claim's protection mode
        unconditional=COMMON,
    ),
    Gate(
        name=GateName.ATTRIBUTION,
        requirements=ATTRIBUTION_GATE,
        boundary=("shows that in this stream the failure outcome named only the target claim; "
                  "not attribution under other claim mixes or concurrency"),
        streaming=streaming.attribution,
        reference=reference.attribution,
        unconditional=ATTRIBUTION_GATE,
    ),
    Gate(
        name=GateName.CONFORMANCE,
        requirements=CONFORMANCE_GATE,
        boundary=("shows that every event of the claim in these streams is a legal step, that "
                  "it was decided once, that every failure was answered and every loss "
                  "announced, that it did not vanish at a stop or restart and was not open in "
                  "an unseen window; a live claim (open where the reading stopped) is judged "
                  "only on what the stream shows so far; not that the claim's chains were "
                  "exercised (run the scenario gates for that)"),
        streaming=streaming.conformance,
        reference=reference.conformance,
        unconditional=CONFORMANCE_GATE,
        live=True,
    ),
)})


def gates_named(names: Iterable[str]) -> list[Gate]:
    """The records of *names*, in the order given; ValueError names every unknown one."""
    names = list(names)
    unknown = [n for n in names if n not in GATES]
    if unknown:
        raise ValueError(f"unknown gate(s): {', '.join(unknown)}")
    return [GATES[GateName(n)] for n in names]
