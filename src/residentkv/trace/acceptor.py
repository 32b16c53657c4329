"""The streaming reader of the automaton table (:mod:`residentkv.model.automaton`).

One :class:`ClaimRun` per claim and one :class:`RequestRun` per request keep the running
answers every guard needs (the last cycle's label and request, the copy's tier, the highest
labels so far, ...), so a step costs one table lookup and the guards of one cell. Memory is
O(claims + requests): no event is kept. The reference semantics reads the same table over the
whole event list (:mod:`residentkv.trace.semantics.legal`); both must agree on every trace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from residentkv.model.automaton import (
    CLAIM_TABLE,
    REQUEST_TABLE,
    STAY,
    Cell,
    Guard,
    Phase,
    RequestPhase,
    Step,
    Violation,
    decide,
    failed_load,
    failure_chain_event,
    proves,
    request_guard,
    substrate_failure,
)
from residentkv.model.events import IDENTITY_FIELDS

#: fields of claim_accepted that define the claim (with its predicate): a second acceptance may
#: not change them
ACCEPTED_FIELDS = (*IDENTITY_FIELDS, "registration", "protection_mode", "footprint_blocks",
                   "owner_scope", "expires_after_s")

Event = Any


def defining(e: Event) -> tuple[Any, ...]:
    """What a ``claim_accepted`` fixes about its claim."""
    p = e.predicate
    return (*(_plain(getattr(e, f)) for f in ACCEPTED_FIELDS), p.id, str(p.kind), p.blocks,
            p.start)


def _plain(value: Any) -> Any:
    return str(value) if value is not None and not isinstance(value, int | float) else value


def earlier(a: Step | None, b: Step | None) -> Step | None:
    """The violation that comes first (by seq, then by id, so every reader picks the same)."""
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b, key=lambda s: (s.seq, s.violation.value))


@dataclass(slots=True, eq=False)
class ClaimRun:
    """One claim's automaton, with the running answers of its guards."""

    claim_id: str
    phase: Phase = Phase.START
    #: the first violation of the claim's own run, and the first of it or of a request that
    #: names the claim
    own: Step | None = None
    violation: Step | None = None
    carriers: set[str | None] = field(default_factory=set)
    submitted: bool = False
    submitted_scope: str | None = None
    scope: str | None = None
    definition: tuple[Any, ...] | None = None
    predicate: tuple[str, int, int, int] | None = None  # kind, blocks, start, footprint
    top_cycle_label: int = -1
    top_copy_label: int = -1
    store_tier: str | None = None
    offload_tier: str | None = None
    cycle_request: str | None = None
    cycle_label: int = -1
    mode: str | None = None
    offloaded: bool = False
    copy_lost: bool = False

    def step(self, e: Event, scopes: dict[str, str | None],
             request: RequestRun | None = None) -> bool:
        """Feed one event that names this claim (*request*: the run of the request it names,
        which shares a violation of this step with every claim it names); True when it was
        illegal."""
        cell: Cell = CLAIM_TABLE[self.phase, e.event]
        if len(cell) == 1:
            outcome = cell[0][1]
        else:
            outcome = decide(cell, lambda g: self._holds(g, e, scopes))
        if isinstance(outcome, Violation):
            step = Step(e.seq, e.event, self.phase.value, outcome)
            self.own = earlier(self.own, step)
            self.violation = earlier(self.violation, step)
            if request is not None:
                request.violate(step)
            return True
        self._apply(e)
        if outcome is not STAY:
            self.phase = outcome  # type: ignore[assignment]
        return False

    def _holds(self, g: Guard, e: Event, scopes: dict[str, str | None]) -> bool:
        gen = getattr(e, "generation", None)
        if g is Guard.FOREIGN_SCOPE:
            rid = e.request_id
            return self.scope is not None and (rid is None or scopes.get(rid) != self.scope)
        if g is Guard.OTHER_REQUEST:
            return bool(e.request_id != self.cycle_request)
        if g is Guard.OTHER_LABEL:
            return gen is not None and gen != self.cycle_label
        if g is Guard.UNNAMED_FAILURE:
            return e.request_id is None and substrate_failure(e)
        if g is Guard.FAILED_LOAD:
            return failed_load(e)
        if g is Guard.SAME_TIER:
            return bool(e.from_tier == e.to_tier)
        if g is Guard.LABEL_BELOW:
            return gen is not None and gen < self.top_cycle_label
        if g is Guard.LABEL_NOT_NEW:
            label = int(e.generation)  # required on claim_restore_required
            return label <= self.top_cycle_label or label < self.top_copy_label
        if g is Guard.WRONG_TIER:
            copy = self.offload_tier if self.store_tier is None else self.store_tier
            return copy is None or bool(e.from_tier != copy)
        if g is Guard.FALLBACK:
            return bool(e.source == "fallback_recompute")
        if g is Guard.HOLDS_CONTRADICTED:
            return bool(e.holds) != self._proves(e)
        if g is Guard.PROVEN:
            return self._proves(e)
        if g is Guard.BEST_EFFORT:
            return str(e.protection_mode) == "best_effort"
        if g is Guard.NOT_CARRIER:
            return any(r != e.request_id for r in self.carriers)
        if g is Guard.CHANGED_DEFINITION:
            return defining(e) != self.definition
        if g is Guard.LOSS:
            return self._loss(e)
        if g is Guard.NOT_OFFLOADED:
            return not self.offloaded
        raise ValueError(f"guard {g} is not a claim guard")  # pragma: no cover

    def _needs(self, position: int | None) -> bool:
        p = self.predicate
        if position is None or p is None:
            return True  # an unknown position counts (fail closed)
        return p[2] <= position < p[2] + p[1]

    def _loss(self, e: Event) -> bool:
        """SPEC §4.1/§4.2: an observed loss (see :attr:`Guard.LOSS`)."""
        name = e.event
        if name == "claim_reused":
            return not e.holds
        if name == "claim_materialized":
            return not self._proves(e)
        if not self._needs(e.position):
            return False
        held = (self.mode == "offloadable" and self.store_tier is not None and self.offloaded
                and not self.copy_lost)
        return not held or (e.medium is not None and e.medium == self.store_tier)

    def _proves(self, e: Event) -> bool:
        p = self.predicate
        return p is not None and proves(p[0], p[1], p[2], p[3], e.leading, e.surviving)

    def _apply(self, e: Event) -> None:
        """What a legal step teaches the guards."""
        name = e.event
        gen = getattr(e, "generation", None)
        if name == "request_started":
            if self.phase in (Phase.START, Phase.SUBMITTED):
                self.carriers.add(e.request_id)
        elif name == "claim_submitted":
            if not self.submitted:
                self.submitted, self.submitted_scope = True, e.owner_scope
        elif name == "claim_accepted":
            if self.definition is None:
                self.definition = defining(e)
                p = e.predicate
                self.predicate = (str(p.kind), p.blocks, p.start or 0, e.footprint_blocks)
                self.scope = e.owner_scope if e.owner_scope is not None else (
                    self.submitted_scope)
                self.mode = str(e.protection_mode)
        elif name in ("kv_store_started", "kv_store_finished", "claim_offloaded"):
            if gen is not None and gen > self.top_copy_label:
                self.top_copy_label = gen
            if name == "kv_store_finished" and e.success:
                self.store_tier, self.copy_lost = e.to_tier, False
            elif name == "claim_offloaded":
                self.offload_tier, self.offloaded = e.to_tier, True
        elif name == "block_evicted":
            if e.medium is not None and e.medium == self.store_tier and self._needs(e.position):
                self.copy_lost = True
        elif name == "claim_restore_required":
            self.top_cycle_label = self.cycle_label = int(e.generation)
            self.cycle_request = e.request_id


@dataclass(slots=True, eq=False)
class RequestRun:
    """One request's automaton, with the claims it named (they share its violations)."""

    phase: RequestPhase = RequestPhase.NEW
    #: the first violation of the request's own run; of it or of a claim step on it
    own: Step | None = None
    violation: Step | None = None
    claims: list[ClaimRun] = field(default_factory=list)
    #: the first failure-chain event of the request (it must finish in the stream)
    failure_seq: int | None = None
    failure_kind: str | None = None

    def step(self, e: Event) -> bool:
        """Feed one event that names this request; True when it was illegal."""
        cell = REQUEST_TABLE[self.phase, e.event]
        outcome = cell[0][1] if len(cell) == 1 else decide(cell, lambda g: request_guard(g, e))
        if self.failure_seq is None and failure_chain_event(e):
            self.failure_seq, self.failure_kind = e.seq, e.event
        if isinstance(outcome, Violation):
            step = Step(e.seq, e.event, self.phase.value, outcome)
            self.own = earlier(self.own, step)
            self.violate(step)
            return True
        if outcome is not STAY:
            self.phase = outcome  # type: ignore[assignment]
        return False

    def end(self) -> None:
        """The stream ended: a request with a failure chain must have finished."""
        if self.failure_seq is not None and self.phase is not RequestPhase.FINISHED:
            step = Step(self.failure_seq, self.failure_kind or "", self.phase.value,
                        Violation.UNFINISHED)
            self.own = earlier(self.own, step)
            self.violate(step)

    def violate(self, step: Step) -> None:
        """A step of this request was illegal: every claim it names shares the violation."""
        self.violation = earlier(self.violation, step)
        for run in self.claims:
            run.violation = earlier(run.violation, step)

    def names(self, run: ClaimRun) -> None:
        """The request names *run*'s claim: it shares the request's violations."""
        if run not in self.claims:
            self.claims.append(run)
            if self.violation is not None:
                run.violation = earlier(run.violation, self.violation)
