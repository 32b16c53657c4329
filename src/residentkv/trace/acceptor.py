"""The streaming reader of the automaton table (:mod:`residentkv.model.automaton`).

One :class:`ClaimRun` per claim and one :class:`RequestRun` per request keep the running
answers every guard needs (the last cycle's label and request, the copy's tier, the highest
labels so far, ...), so a step costs one table lookup and the guards of one cell. Memory is
O(claims + requests): no event is kept. The reference semantics reads the same table over the
whole event list (:mod:`residentkv.trace.semantics.legal`); both must agree on every trace.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from residentkv.model.automaton import (
    CLAIM_TABLE,
    REQUEST_TABLE,
    STAY,
    Guard,
    Phase,
    RequestPhase,
    Step,
    Violation,
    decide,
    failed_load,
    failure_chain_event,
    outcome_envelope_mismatch,
    proves,
    request_guard,
    short_copy,
    substrate_failure,
)
from residentkv.model.event_record import EventRecord, required_label
from residentkv.model.events import IDENTITY_FIELDS

#: fields of claim_accepted that define the claim (with its predicate): a second acceptance may
#: not change them
ACCEPTED_FIELDS = (*IDENTITY_FIELDS, "registration", "protection_mode", "footprint_blocks",
                   "owner_scope", "expires_after_s")

#: a v1 event: a pydantic model of residentkv.model.events, or its fast-decoded twin
Event = EventRecord


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
    #: the load jobs the open cycle's kv_load_started events started
    cycle_jobs: set[int | str | None] = field(default_factory=set)
    mode: str | None = None
    offloaded: bool = False
    copy_lost: bool = False

    def step(self, e: Event, scopes: dict[str, str | None],
             request: RequestRun | None = None) -> bool:
        """Feed one event that names this claim (*request*: the run of the request it names,
        which shares a violation of this step with every claim it names); True when it was
        illegal."""
        rows = _COMPILED[self.phase][e.event]
        outcome = rows[-1][1]
        for guard, then in rows:  # the first row whose guard holds decides (None: ALWAYS)
            if guard is None or guard(self, e, scopes):
                outcome = then
                break
        if outcome.__class__ is Violation:
            step = Step(e.seq, e.event, self.phase.value, outcome)
            self.own = earlier(self.own, step)
            self.violation = earlier(self.violation, step)
            if request is not None:
                request.violate(step)
            return True
        if e.event in _TEACHING:
            self._apply(e)
        if outcome is not STAY:
            self.phase = outcome
        return False

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
            self.top_cycle_label = self.cycle_label = required_label(e)
            self.cycle_request = e.request_id
            self.cycle_jobs = set()
        elif name == "kv_load_started" and e.job_id is not None:
            self.cycle_jobs.add(e.job_id)


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
        name = e.event
        cell = _REQUEST_CELLS[self.phase][name]
        if cell is _STAY_CELL:
            if self.failure_seq is None and name in _FAILURE_KINDS and failure_chain_event(e):
                self.failure_seq, self.failure_kind = e.seq, name
            return False
        outcome = cell[0][1] if len(cell) == 1 else decide(cell, partial(request_guard, event=e))
        if self.failure_seq is None and name in _FAILURE_KINDS and failure_chain_event(e):
            self.failure_seq, self.failure_kind = e.seq, name
        if outcome.__class__ is Violation:
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
        claims = self.claims
        if claims and claims[-1] is run:
            return
        if all(c is not run for c in claims):
            self.claims.append(run)
            if self.violation is not None:
                run.violation = earlier(run.violation, self.violation)


# ------------------------------------------------------------------ compiled forms of the table
def _gen(e: Event) -> int | None:
    g: int | None = getattr(e, "generation", None)
    return g


def _foreign_scope(r: ClaimRun, e: Event, scopes: dict[str, str | None]) -> bool:
    rid = e.request_id
    return r.scope is not None and (rid is None or scopes.get(rid) != r.scope)


def _copy_tier(r: ClaimRun) -> str | None:
    return r.offload_tier if r.store_tier is None else r.store_tier


def _wrong_tier(r: ClaimRun, e: Event, scopes: dict[str, str | None]) -> bool:
    copy = _copy_tier(r)
    return copy is None or bool(e.from_tier != copy)


def _load_tier(r: ClaimRun, e: Event, scopes: dict[str, str | None]) -> bool:
    tier = getattr(e, "from_tier", None)
    return tier is not None and bool(tier != _copy_tier(r))


def _carrier_scope(r: ClaimRun, e: Event, scopes: dict[str, str | None]) -> bool:
    mine = e.owner_scope if e.owner_scope is not None else r.submitted_scope
    rid = e.request_id
    theirs = None if rid is None else scopes.get(rid)
    return mine is not None and theirs is not None and str(theirs) != str(mine)


def _short_copy(r: ClaimRun, e: Event, scopes: dict[str, str | None]) -> bool:
    p = r.predicate
    return p is None or short_copy(e.block_count, p[1])


def _foreign_job(r: ClaimRun, e: Event, scopes: dict[str, str | None]) -> bool:
    job = getattr(e, "job_id", None)
    return job is not None and job not in r.cycle_jobs


def _label_not_new(r: ClaimRun, e: Event, scopes: dict[str, str | None]) -> bool:
    label = required_label(e)
    return label <= r.top_cycle_label or label < r.top_copy_label


def _label_below(r: ClaimRun, e: Event, scopes: dict[str, str | None]) -> bool:
    g = _gen(e)
    return g is not None and g < r.top_cycle_label


def _other_label(r: ClaimRun, e: Event, scopes: dict[str, str | None]) -> bool:
    g = _gen(e)
    return g is not None and g != r.cycle_label


GuardFn = Callable[[ClaimRun, Event, dict[str, str | None]], bool]

#: every claim guard, answered from the running facts of one claim (see :class:`Guard`)
_CLAIM_GUARDS: dict[Guard, GuardFn] = {
    Guard.FOREIGN_SCOPE: _foreign_scope,
    Guard.OTHER_REQUEST: lambda r, e, s: bool(e.request_id != r.cycle_request),
    Guard.OTHER_LABEL: _other_label,
    Guard.UNNAMED_FAILURE: lambda r, e, s: e.request_id is None and substrate_failure(e),
    Guard.FAILED_LOAD: lambda r, e, s: failed_load(e),
    Guard.SAME_TIER: lambda r, e, s: bool(e.from_tier == e.to_tier),
    Guard.LABEL_BELOW: _label_below,
    Guard.LABEL_NOT_NEW: _label_not_new,
    Guard.WRONG_TIER: _wrong_tier,
    Guard.FALLBACK: lambda r, e, s: bool(e.source == "fallback_recompute"),
    Guard.HOLDS_CONTRADICTED: lambda r, e, s: bool(e.holds) != r._proves(e),
    Guard.PROVEN: lambda r, e, s: r._proves(e),
    Guard.BEST_EFFORT: lambda r, e, s: str(e.protection_mode) == "best_effort",
    Guard.NOT_CARRIER: lambda r, e, s: any(c != e.request_id for c in r.carriers),
    Guard.CHANGED_DEFINITION: lambda r, e, s: defining(e) != r.definition,
    Guard.LOSS: lambda r, e, s: r._loss(e),
    Guard.NOT_OFFLOADED: lambda r, e, s: not r.offloaded,
    Guard.OUTCOME_ENVELOPE: lambda r, e, s: outcome_envelope_mismatch(e),
    Guard.CARRIER_SCOPE: _carrier_scope,
    Guard.SHORT_COPY: _short_copy,
    Guard.LOAD_TIER: _load_tier,
    Guard.FOREIGN_JOB: _foreign_job,
}
_ALWAYS = Guard.ALWAYS
#: the table by state, then by event kind (one lookup less per event than the pair key)
STAY_CELL = _STAY_CELL = ((Guard.ALWAYS, STAY),)
CLAIM_CELLS = _CLAIM_CELLS = {
    p: {k: (_STAY_CELL if c == _STAY_CELL else c) for (q, k), c in CLAIM_TABLE.items()
        if q is p} for p in Phase}
REQUEST_CELLS = _REQUEST_CELLS = {
    p: {k: (_STAY_CELL if c == _STAY_CELL else c) for (q, k), c in REQUEST_TABLE.items()
        if q is p} for p in RequestPhase}
#: event kinds a failure chain may hold (``failure_chain_event`` decides)
FAILURE_KINDS = _FAILURE_KINDS = frozenset({
    "kv_load_finished", "kv_load_failed", "scheduler_load_failure", "claim_restore_failed",
    "active_request_refused"})
#: event kinds whose legal step teaches a guard something (see ``ClaimRun._apply``)
TEACHING = _TEACHING = frozenset({"request_started", "claim_submitted", "claim_accepted",
                       "kv_store_started", "kv_store_finished", "claim_offloaded",
                       "block_evicted", "claim_restore_required", "kv_load_started"})
#: state -> kinds whose step must run (not a plain "stay", or it teaches a guard something);
#: the pass skips the others inline
CLAIM_STEPS: dict[Phase, frozenset[str]] = {
    p: frozenset(k for k, c in cells.items() if c is not _STAY_CELL or k in _TEACHING)
    for p, cells in _CLAIM_CELLS.items()}
REQUEST_STEPS: dict[RequestPhase, frozenset[str]] = {
    p: frozenset(k for k, c in cells.items() if c is not _STAY_CELL or k in _FAILURE_KINDS)
    for p, cells in _REQUEST_CELLS.items()}
#: the claim table with each guard replaced by its function (None for ALWAYS)
_COMPILED: dict[Phase, dict[str, tuple[tuple[GuardFn | None, Any], ...]]] = {
    p: {k: tuple((None if g is _ALWAYS else _CLAIM_GUARDS[g], o) for g, o in cell)
        for k, cell in cells.items()} for p, cells in _CLAIM_CELLS.items()}
