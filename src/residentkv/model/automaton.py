"""The claim and request automaton of SPEC §4.2, as data: the one legal-run definition.

Every event whose envelope names a claim is a step of that claim's automaton
(:data:`CLAIM_TABLE`); every event that names a request is a step of that request's automaton
(:data:`REQUEST_TABLE`). A cell, (state, event kind), holds ordered rows ``(guard, outcome)``:
the first row whose guard holds decides, and its outcome is the next state, :data:`STAY`, or a
named :class:`Violation`. The last row of every cell is guarded by :attr:`Guard.ALWAYS`, so no
cell is blank: an event the table does not explain is a violation, never ignored.

A violation leaves the automaton in the state it reached (the event is not applied); the gates
report the first one with the seq of the offending event and the state it met. How a guard is
evaluated is up to its reader: the reference semantics asks the whole event list, the streaming
tracker keeps running answers (both in :mod:`residentkv.trace`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from residentkv.model.events import EVENT_MODELS


class Phase(StrEnum):
    """The state of one claim's automaton."""

    START = "start"  # nothing of the claim yet (a carrier's request_started may name it)
    SUBMITTED = "submitted"
    ACCEPTED = "accepted"  # accepted, not yet materialized holding
    RESIDENT = "resident"  # materialized holding, no offload since
    OFFLOADED = "offloaded"  # a copy left the device; no restore cycle open
    RESTORE_REQUIRED = "restore_required"  # a cycle is open, nothing restored yet
    LOAD_FAILED = "load_failed"  # the open cycle's load failed
    RESTORED = "restored"  # the open cycle restored from the offload tier: reuse allowed
    RECOMPUTED = "recomputed"  # the open cycle fell back to recompute: no reuse of it
    REJECTED = "rejected"
    RELEASED = "released"
    DEMOTED = "demoted"
    EXPIRED = "expired"
    HARMED = "harmed"
    FAILED_CLOSED = "failed_closed"


class RequestPhase(StrEnum):
    """The state of one request's automaton."""

    NEW = "new"
    STARTED = "started"
    REFUSED = "refused"  # started, then refused: it may not finish served
    FINISHED = "finished"


class Guard(StrEnum):
    """A condition on the event (and what the claim or request did before) that picks a row."""

    ALWAYS = "always"
    BEST_EFFORT = "best_effort"
    NOT_CARRIER = "not_carrier"
    CHANGED_DEFINITION = "changed_definition"
    HOLDS_CONTRADICTED = "holds_contradicted"
    PROVEN = "proven"
    SAME_TIER = "same_tier"
    LABEL_BELOW = "label_below"
    LABEL_NOT_NEW = "label_not_new"
    WRONG_TIER = "wrong_tier"
    FOREIGN_SCOPE = "foreign_scope"
    OTHER_REQUEST = "other_request"
    OTHER_LABEL = "other_label"
    UNNAMED_FAILURE = "unnamed_failure"
    FAILED_LOAD = "failed_load"
    FALLBACK = "fallback"
    FAILURE_CHAIN = "failure_chain"
    CYCLE_STEP = "cycle_step"
    SERVED = "served"
    LOSS = "loss"
    NOT_OFFLOADED = "not_offloaded"
    OUTCOME_ENVELOPE = "outcome_envelope"
    UNCLAIMED_BRANCH = "unclaimed_branch"
    CARRIER_SCOPE = "carrier_scope"
    SHORT_COPY = "short_copy"
    LOAD_TIER = "load_tier"
    FOREIGN_JOB = "foreign_job"
    EARLIER_INCARNATION = "earlier_incarnation"


#: what each guard asks, for the generated table in docs/trace-gates.md
GUARD_WHY: dict[Guard, str] = {
    Guard.ALWAYS: "otherwise",
    Guard.BEST_EFFORT: "`protection_mode` is `best_effort` (not a claim)",
    Guard.NOT_CARRIER: "a `request_started` named the claim before acceptance on another "
                       "request than the one this `claim_accepted` names",
    Guard.CHANGED_DEFINITION: "it differs from the first `claim_accepted` in a defining field",
    Guard.HOLDS_CONTRADICTED: "`holds` disagrees with what the numbers and the accepted "
                              "footprint prove",
    Guard.PROVEN: "the numbers prove the accepted predicate",
    Guard.SAME_TIER: "`to_tier` equals `from_tier`",
    Guard.LABEL_BELOW: "its `generation` is below an earlier cycle's label",
    Guard.LABEL_NOT_NEW: "its label is not above every earlier cycle's and at least every "
                         "store's or offload's",
    Guard.WRONG_TIER: "`from_tier` is not the tier the stored copy was written to",
    Guard.FOREIGN_SCOPE: "the request's owner scope is not the claim's (or the request has "
                         "none and the claim has one)",
    Guard.OTHER_REQUEST: "another request than the open cycle's",
    Guard.OTHER_LABEL: "a `generation` other than the open cycle's label",
    Guard.UNNAMED_FAILURE: "a substrate failure naming the claim but no request",
    Guard.FAILED_LOAD: "a failed load (`success: false`, or `kv_load_failed` naming an "
                       "invalid block)",
    Guard.FALLBACK: "`source` is `fallback_recompute`",
    Guard.FAILURE_CHAIN: "a failed load, `scheduler_load_failure`, `claim_restore_failed` "
                         "or `active_request_refused`",
    Guard.CYCLE_STEP: "a step of a restore cycle or a reuse (`kv_lookup`, "
                      "`claim_restore_required`, `claim_restored`, `claim_reused`, "
                      "`claim_restore_failed`, a load event)",
    Guard.SERVED: "`status` is `served`",
    Guard.NOT_OFFLOADED: "no `claim_offloaded` of the claim before",
    Guard.LOSS: "an observed loss: an eviction of a needed position (for `offloadable`, "
                "while no stored, offloaded copy is held), a reuse that does not hold, or a "
                "materialization the numbers no longer prove",
    Guard.OUTCOME_ENVELOPE: "its envelope `claim_id` differs from its `outcome_claim_id` "
                            "(null included)",
    Guard.UNCLAIMED_BRANCH: "its envelope names no claim",
    Guard.CARRIER_SCOPE: "the carrying request declared an owner scope other than the claim's",
    Guard.SHORT_COPY: "`block_count` is below the number of positions the accepted "
                      "predicate needs",
    Guard.LOAD_TIER: "a `from_tier` that is not the tier the stored copy was written to",
    Guard.FOREIGN_JOB: "a `job_id` that no `kv_load_started` of the open cycle started",
    Guard.EARLIER_INCARNATION: "the claim was accepted in an earlier stream of the file (it "
                               "was still open when that incarnation's stream ended)",
}


class Violation(StrEnum):
    """A step the automaton does not allow; each fails every gate (``legal_transitions``)."""

    BEFORE_ACCEPTANCE = "before_acceptance"
    NOT_CARRIER = "named_before_acceptance"
    BEST_EFFORT = "best_effort_not_a_claim"
    ACCEPTED_CHANGED = "acceptance_changed"
    DECIDED_TWICE = "decided_twice"
    SUBMITTED_LATE = "submitted_after_acceptance"
    AFTER_TERMINAL = "after_terminal"
    HOLDS_CONTRADICTED = "holds_contradicts_numbers"
    NOT_MATERIALIZED = "before_materialization"
    SAME_TIER = "store_to_same_tier"
    LABEL_DECREASED = "generation_decreased"
    LABEL_NOT_NEW = "generation_not_increasing"
    WRONG_TIER = "restore_from_other_tier"
    NOT_OFFLOADED = "restore_without_copy"
    CYCLE_OPEN = "cycle_open"
    OUTSIDE_CYCLE = "outside_restore_cycle"
    FOREIGN_SCOPE = "foreign_owner_scope"
    OTHER_REQUEST = "other_request_in_cycle"
    OTHER_LABEL = "generation_mismatch"
    UNNAMED_FAILURE = "failure_without_request"
    REUSE_BEFORE_RESTORE = "reuse_before_restore"
    RESTORED_AFTER_FAILURE = "restored_after_failure"
    RESTORED_TWICE = "restored_twice"
    HARM_AFTER_END = "harm_after_end"
    LOST_BEFORE_RELEASE = "lost_before_release"
    STREAM_EVENT = "stream_event_names_claim"
    STARTED_TWICE = "request_started_twice"
    FINISHED_TWICE = "request_finished_twice"
    FAILURE_AFTER_FINISH = "failure_after_finish"
    AFTER_FINISH = "restore_after_finish"
    NOT_STARTED = "request_not_started"
    SERVED_AFTER_REFUSAL = "served_after_refusal"
    UNFINISHED = "failure_never_finished"
    NEVER_DECIDED = "named_never_decided"
    OUTCOME_ENVELOPE = "outcome_envelope_mismatch"
    UNCLAIMED_BRANCH = "failure_branch_names_no_claim"
    CARRIER_SCOPE = "carrier_of_other_scope"
    SHORT_COPY = "offload_short_of_predicate"
    LOAD_TIER = "load_from_other_tier"
    FOREIGN_JOB = "load_job_outside_cycle"
    VANISHED = "vanished"
    DECIDED_ACROSS = "decided_across_incarnations"
    ACCEPTED_AFTER_END = "accepted_after_end"


#: the one-line why of every violation (`residentkv explain` and the docs print it)
VIOLATION_WHY: dict[Violation, str] = {
    Violation.BEFORE_ACCEPTANCE: "before acceptance only claim_submitted and the carrying "
                                 "request's request_started may name the claim",
    Violation.NOT_CARRIER: "a request_started named the claim before acceptance, but the "
                           "acceptance names another request",
    Violation.BEST_EFFORT: "best_effort is not a claim; the claim fails every gate",
    Violation.ACCEPTED_CHANGED: "a second claim_accepted changes a defining field",
    Violation.DECIDED_TWICE: "the claim was already accepted or rejected",
    Violation.SUBMITTED_LATE: "claim_submitted after the claim was decided",
    Violation.AFTER_TERMINAL: "released, demoted, expired, harmed or failed closed: no "
                              "materialization, store, offload, restore or reuse afterwards",
    Violation.HOLDS_CONTRADICTED: "a materialization whose holds disagrees with its numbers",
    Violation.NOT_MATERIALIZED: "stores, offloads, reuses and harm need a materialization "
                                "that holds first",
    Violation.SAME_TIER: "a store or offload whose to_tier equals its from_tier",
    Violation.LABEL_DECREASED: "a generation label below an earlier cycle's: labels never "
                               "decrease along the claim's history",
    Violation.LABEL_NOT_NEW: "a new restore cycle's label must exceed every earlier cycle's "
                             "and be at least every store's or offload's",
    Violation.WRONG_TIER: "a restore's from_tier must be the tier the stored copy was "
                          "written to",
    Violation.NOT_OFFLOADED: "a restore cycle needs an offloaded copy",
    Violation.CYCLE_OPEN: "the open restore cycle has neither restored nor failed closed",
    Violation.OUTSIDE_CYCLE: "a load, restore or restore failure with no open restore cycle",
    Violation.FOREIGN_SCOPE: "restores and reuses are by a request of the claim's owner scope",
    Violation.OTHER_REQUEST: "every event of a restore cycle is by the cycle's request",
    Violation.OTHER_LABEL: "every event of a restore cycle names the cycle's label",
    Violation.UNNAMED_FAILURE: "a substrate failure that names a claim must name its request",
    Violation.REUSE_BEFORE_RESTORE: "a reuse needs an offload-tier restore of its cycle, or "
                                    "a residency with no offload since",
    Violation.RESTORED_AFTER_FAILURE: "an offload-tier restore after the cycle's load failed",
    Violation.RESTORED_TWICE: "the cycle was already restored",
    Violation.HARM_AFTER_END: "loss after the claim ended is never harm",
    Violation.LOST_BEFORE_RELEASE: "claim_block_lost_after_release before any release",
    Violation.STREAM_EVENT: "stream_started, stream_closed and observation_gap never name a "
                            "claim",
    Violation.STARTED_TWICE: "a request id starts at most once per stream",
    Violation.FINISHED_TWICE: "a request finishes once",
    Violation.FAILURE_AFTER_FINISH: "the whole failure chain precedes the affected request's "
                                    "first request_finished",
    Violation.AFTER_FINISH: "a finished request restores, loads or reuses nothing more",
    Violation.NOT_STARTED: "a request looks up, restores, loads, reuses, is refused or "
                           "finishes only after its request_started",
    Violation.SERVED_AFTER_REFUSAL: "a refused request that finishes served contradicts the "
                                    "refusal",
    Violation.UNFINISHED: "a request with a failure chain must finish in the stream (checked "
                          "when the stream ends)",
    Violation.NEVER_DECIDED: "a request_started or claim_submitted named the claim, but no "
                             "claim_accepted or claim_rejected ever decided it, so no request "
                             "carries it (checked when the stream ends)",
    Violation.OUTCOME_ENVELOPE: "an outcome event's envelope claim_id equals its "
                                "outcome_claim_id",
    Violation.UNCLAIMED_BRANCH: "a scheduler_load_failure naming no claim explains no "
                                "claim's failure chain",
    Violation.CARRIER_SCOPE: "a claim is carried by a request of its own owner scope",
    Violation.SHORT_COPY: "an offloaded copy must hold every position the predicate needs",
    Violation.LOAD_TIER: "a load of a restore reads the tier the stored copy was written to",
    Violation.FOREIGN_JOB: "a load's job must be one its own restore cycle started",
    Violation.VANISHED: "the claim was open when its stream closed gracefully, or open when its "
                        "incarnation died and not ended among the next stream's first events "
                        "(nothing vanishes; checked where the stream ends)",
    Violation.DECIDED_ACROSS: "the claim was accepted in an earlier incarnation's stream: a "
                              "claim id is decided once, across incarnations",
    Violation.ACCEPTED_AFTER_END: "an ended claim (released, demoted, expired, harmed, failed "
                                  "closed) is never accepted again: a claim id is decided once; "
                                  "a new claim takes a new id",
}


class _Stay(StrEnum):
    STAY = "stay"


#: the outcome "legal, the state does not change"
STAY = _Stay.STAY

Outcome = Phase | RequestPhase | Violation | _Stay
Row = tuple[Guard, Outcome]
Cell = tuple[Row, ...]

P, G, V = Phase, Guard, Violation

#: every event kind, in schema order
KINDS: tuple[str, ...] = tuple(EVENT_MODELS)

TERMINAL: frozenset[Phase] = frozenset(
    {P.REJECTED, P.RELEASED, P.DEMOTED, P.EXPIRED, P.HARMED, P.FAILED_CLOSED})
PRE: frozenset[Phase] = frozenset({P.START, P.SUBMITTED})
#: an open restore cycle
CYCLE: frozenset[Phase] = frozenset(
    {P.RESTORE_REQUIRED, P.LOAD_FAILED, P.RESTORED, P.RECOMPUTED})
#: accepted, not ended
LIVE: frozenset[Phase] = frozenset({P.ACCEPTED, P.RESIDENT, P.OFFLOADED}) | CYCLE
#: a cycle that is neither restored nor closed: no new cycle, offload, store or ending yet
UNSETTLED: frozenset[Phase] = frozenset({P.RESTORE_REQUIRED, P.LOAD_FAILED})
#: the claim is held on the device: a materialization that no longer holds is a loss
ON_DEVICE: frozenset[Phase] = frozenset({P.RESIDENT, P.RESTORED})
#: what may end a claim the previous incarnation left open, at the head of the next stream
#: (SPEC §9.1): the stream's first events while each is one of these naming such a claim
HEAD_ENDINGS: frozenset[str] = frozenset(
    {"claim_harmed", "claim_released", "claim_expired", "claim_demoted"})
#: the violations of "decided once" (SPEC §9.1)
DECIDED_AGAIN: frozenset[Violation] = frozenset(
    {V.DECIDED_TWICE, V.DECIDED_ACROSS, V.ACCEPTED_AFTER_END})

_ALWAYS = G.ALWAYS
#: kinds that only name a claim (no lifecycle step): legal once accepted, whatever the state
_MENTIONS = ("request_started", "request_finished", "active_request_admitted",
             "active_request_deferred", "active_request_refused", "future_reuse_admitted",
             "future_reuse_denied", "kv_lookup", "block_evicted", "generic_counter")
_ENDING_STATE = {"claim_released": P.RELEASED, "claim_demoted": P.DEMOTED,
                 "claim_expired": P.EXPIRED}
_STORES = ("kv_store_started", "kv_store_finished")
_LOADS = ("kv_load_started", "kv_load_finished", "kv_load_failed")


def _cycle_step(state: Phase, then: Outcome) -> Cell:
    """A step inside the open cycle: the cycle's request and label, the claim's scope."""
    return ((G.FOREIGN_SCOPE, V.FOREIGN_SCOPE), (G.OTHER_REQUEST, V.OTHER_REQUEST),
            (G.OTHER_LABEL, V.OTHER_LABEL), (_ALWAYS, then))


def _claim_cell(state: Phase, kind: str) -> Cell:
    """The rows of one cell (written per kind, so the whole table reads as one page)."""
    if kind in ("stream_started", "stream_closed", "observation_gap"):
        return ((_ALWAYS, V.STREAM_EVENT),)
    if kind == "claim_submitted":
        return ((_ALWAYS, P.SUBMITTED if state in PRE else V.SUBMITTED_LATE),)
    if kind == "claim_accepted":
        if state in PRE:
            return ((G.BEST_EFFORT, V.BEST_EFFORT), (G.NOT_CARRIER, V.NOT_CARRIER),
                    (G.CARRIER_SCOPE, V.CARRIER_SCOPE), (_ALWAYS, P.ACCEPTED))
        if state is P.REJECTED:
            return ((_ALWAYS, V.DECIDED_TWICE),)
        if state in TERMINAL:  # SPEC §9.1: a released (or otherwise ended) claim stays so
            return ((_ALWAYS, V.ACCEPTED_AFTER_END),)
        return ((G.EARLIER_INCARNATION, V.DECIDED_ACROSS),
                (G.CHANGED_DEFINITION, V.ACCEPTED_CHANGED), (_ALWAYS, STAY))
    if kind == "claim_rejected":
        return ((_ALWAYS, P.REJECTED if state in PRE else V.DECIDED_TWICE),)
    if state in PRE:
        if kind == "request_started":
            return ((_ALWAYS, STAY),)  # the carrier's intake (checked at acceptance)
        return ((_ALWAYS, V.BEFORE_ACCEPTANCE),)
    if kind == "block_evicted" and state in LIVE - {P.ACCEPTED}:
        return ((G.LOSS, P.HARMED), (_ALWAYS, STAY))
    if kind == "active_request_refused":
        return ((G.OUTCOME_ENVELOPE, V.OUTCOME_ENVELOPE), (_ALWAYS, STAY))
    if kind in _MENTIONS:
        return ((_ALWAYS, STAY),)
    if kind == "scheduler_load_failure":
        return ((G.UNNAMED_FAILURE, V.UNNAMED_FAILURE), (_ALWAYS, STAY))
    if kind == "claim_block_lost_after_release":
        ended = state in TERMINAL - {P.HARMED, P.FAILED_CLOSED, P.REJECTED}
        return ((_ALWAYS, STAY if ended else V.LOST_BEFORE_RELEASE),)
    if kind == "claim_released" and state in (P.EXPIRED, P.DEMOTED):
        # ruling: freeing what the mode's own ending let go is no step of the claim (SPEC §4.2
        # bans materialization, store, offload, restore and reuse after a terminal state)
        return ((_ALWAYS, STAY),)
    if state in TERMINAL:
        if kind == "claim_harmed":
            return ((_ALWAYS, V.HARM_AFTER_END),)
        return ((_ALWAYS, V.AFTER_TERMINAL),)
    # ----- the claim is live: accepted and not ended
    if kind == "claim_materialized":
        if state in UNSETTLED:
            return ((G.HOLDS_CONTRADICTED, V.HOLDS_CONTRADICTED), (G.PROVEN, V.CYCLE_OPEN),
                    (_ALWAYS, STAY))
        lost = P.HARMED if state in ON_DEVICE else STAY  # no longer proved: a loss
        return ((G.HOLDS_CONTRADICTED, V.HOLDS_CONTRADICTED), (G.PROVEN, P.RESIDENT),
                (_ALWAYS, lost))
    if kind in (*_STORES, "claim_offloaded"):
        if state is P.ACCEPTED:
            return ((_ALWAYS, V.NOT_MATERIALIZED),)
        if state in UNSETTLED:
            return ((_ALWAYS, V.CYCLE_OPEN),)
        then = P.OFFLOADED if kind == "claim_offloaded" else STAY
        unnamed: Cell = ((G.UNNAMED_FAILURE, V.UNNAMED_FAILURE),) if kind in _STORES else (
            (G.SHORT_COPY, V.SHORT_COPY),)
        return (*unnamed, (G.SAME_TIER, V.SAME_TIER), (G.LABEL_BELOW, V.LABEL_DECREASED),
                (_ALWAYS, then))
    if kind == "claim_restore_required":
        if state is P.ACCEPTED:
            return ((_ALWAYS, V.NOT_OFFLOADED),)
        if state is P.RESTORE_REQUIRED:
            return ((_ALWAYS, V.CYCLE_OPEN),)
        # materialized ⇄ offloaded (SPEC §2): a resident claim whose copy was offloaded may
        # still be restored from that copy
        return ((G.NOT_OFFLOADED, V.NOT_OFFLOADED), (G.FOREIGN_SCOPE, V.FOREIGN_SCOPE),
                (G.LABEL_NOT_NEW, V.LABEL_NOT_NEW),
                (G.WRONG_TIER, V.WRONG_TIER), (_ALWAYS, P.RESTORE_REQUIRED))
    if kind in _LOADS:
        if state not in CYCLE:
            return ((G.UNNAMED_FAILURE, V.UNNAMED_FAILURE), (_ALWAYS, V.OUTSIDE_CYCLE))
        tier = (G.LOAD_TIER, V.LOAD_TIER)
        if kind == "kv_load_started":
            return (*_cycle_step(state, STAY)[:-1], tier, (_ALWAYS, STAY))
        return ((G.UNNAMED_FAILURE, V.UNNAMED_FAILURE), *_cycle_step(state, STAY)[:-1], tier,
                (G.FOREIGN_JOB, V.FOREIGN_JOB), (G.FAILED_LOAD, P.LOAD_FAILED), (_ALWAYS, STAY))
    if kind == "claim_restored":
        if state is P.RESTORE_REQUIRED:
            return (*_cycle_step(state, STAY)[:-1], (G.FALLBACK, P.RECOMPUTED),
                    (_ALWAYS, P.RESTORED))
        if state is P.LOAD_FAILED:
            return (*_cycle_step(state, STAY)[:-1], (G.FALLBACK, P.RECOMPUTED),
                    (_ALWAYS, V.RESTORED_AFTER_FAILURE))
        if state in CYCLE:
            return ((_ALWAYS, V.RESTORED_TWICE),)
        return ((_ALWAYS, V.OUTSIDE_CYCLE),)
    if kind == "claim_reused":
        if state is P.ACCEPTED:
            return ((_ALWAYS, V.NOT_MATERIALIZED),)
        if state is P.RESIDENT:
            return ((G.FOREIGN_SCOPE, V.FOREIGN_SCOPE), (G.LOSS, P.HARMED), (_ALWAYS, STAY))
        if state is P.RESTORED:
            return (*_cycle_step(state, STAY)[:-1], (G.LOSS, P.HARMED), (_ALWAYS, STAY))
        return ((_ALWAYS, V.REUSE_BEFORE_RESTORE),)
    if kind == "claim_restore_failed":
        if state in UNSETTLED:
            return ((G.OUTCOME_ENVELOPE, V.OUTCOME_ENVELOPE), *_cycle_step(state, P.FAILED_CLOSED))
        if state in CYCLE:
            return ((_ALWAYS, V.RESTORED_TWICE),)
        return ((_ALWAYS, V.OUTSIDE_CYCLE),)
    if kind in _ENDING_STATE:
        if state in UNSETTLED:
            return ((_ALWAYS, V.CYCLE_OPEN),)
        return ((_ALWAYS, _ENDING_STATE[kind]),)
    if kind == "claim_harmed":
        if state is P.ACCEPTED:
            return ((_ALWAYS, V.NOT_MATERIALIZED),)
        return ((_ALWAYS, P.HARMED),)
    raise ValueError(f"no rows for {kind!r}")  # pragma: no cover - every kind is listed


#: (claim state, event kind) -> rows; built once, never changed
CLAIM_TABLE: dict[tuple[Phase, str], Cell] = {
    (state, kind): _claim_cell(state, kind) for state in Phase for kind in KINDS}


#: the steps of a restore cycle, and a reuse: what only a started, unfinished request does
_CYCLE_KINDS = frozenset({"kv_lookup", "claim_restore_required", "claim_restored", "claim_reused",
                          "claim_restore_failed", "kv_load_started", "kv_load_finished",
                          "kv_load_failed"})


def _request_cell(state: RequestPhase, kind: str) -> Cell:
    own = _request_rows(state, kind)
    if kind in ("active_request_refused", "claim_restore_failed"):
        return ((G.OUTCOME_ENVELOPE, V.OUTCOME_ENVELOPE), *own)
    if kind == "scheduler_load_failure":
        return ((G.UNCLAIMED_BRANCH, V.UNCLAIMED_BRANCH), *own)
    return own


def _request_rows(state: RequestPhase, kind: str) -> Cell:
    R = RequestPhase
    if kind == "request_started":
        return ((_ALWAYS, R.STARTED if state is R.NEW else V.STARTED_TWICE),)
    if kind == "request_finished":
        if state is R.FINISHED:
            return ((_ALWAYS, V.FINISHED_TWICE),)
        if state is R.REFUSED:
            return ((G.SERVED, V.SERVED_AFTER_REFUSAL), (_ALWAYS, R.FINISHED))
        if state is R.NEW:  # a finish of a run the stream never began
            return ((_ALWAYS, V.NOT_STARTED),)
        return ((_ALWAYS, R.FINISHED),)
    if state is R.FINISHED:
        return ((G.FAILURE_CHAIN, V.FAILURE_AFTER_FINISH), (G.CYCLE_STEP, V.AFTER_FINISH),
                (_ALWAYS, STAY))
    if state is R.NEW:
        # a refusal of a request that has not started refuses nothing the stream shows, and a
        # request_started after it would begin a run the refusal never touched
        if kind == "active_request_refused":
            return ((_ALWAYS, V.NOT_STARTED),)
        return ((_ALWAYS, V.NOT_STARTED if kind in _CYCLE_KINDS else STAY),)
    if kind == "active_request_refused":
        return ((_ALWAYS, R.REFUSED),)
    return ((_ALWAYS, STAY),)


#: (request state, event kind) -> rows
REQUEST_TABLE: dict[tuple[RequestPhase, str], Cell] = {
    (state, kind): _request_cell(state, kind) for state in RequestPhase for kind in KINDS}


def decide(cell: Cell, holds: Callable[[Guard], bool]) -> Outcome:
    """The outcome of the first row whose guard *holds*."""
    for guard, outcome in cell:
        if guard is G.ALWAYS or holds(guard):
            return outcome
    raise AssertionError("every cell ends with an ALWAYS row")  # pragma: no cover


@dataclass(frozen=True, slots=True)
class Step:
    """A violation found: the offending event's seq and kind, the state it met, and why."""

    seq: int
    kind: str
    state: str
    violation: Violation

    def describe(self) -> str:
        return (f"seq {self.seq}: {self.kind} in state {self.state}: {self.violation.value} "
                f"({VIOLATION_WHY[self.violation]})")


def render_table() -> str:
    """The automaton as Markdown: one row per state, the cells that are not a plain "stay".

    docs/trace-gates.md embeds this text between markers; a test keeps the two in sync.
    """
    out = ["| claim state | event kind | rows (first matching guard decides) |",
           "|---|---|---|"]
    for state in Phase:
        for kind in KINDS:
            out.append(f"| `{state.value}` | `{kind}` | {_render_cell(CLAIM_TABLE[state, kind])} |")
    out += ["", "| request state | event kind | rows |", "|---|---|---|"]
    for rstate in RequestPhase:
        for kind in KINDS:
            out.append(f"| `{rstate.value}` | `{kind}` | "
                       f"{_render_cell(REQUEST_TABLE[rstate, kind])} |")
    out += ["", "| guard | holds when |", "|---|---|"]
    out += [f"| `{g.value}` | {GUARD_WHY[g]} |" for g in Guard]
    out += ["", "| violation | why |", "|---|---|"]
    out += [f"| `{v.value}` | {VIOLATION_WHY[v]} |" for v in Violation]
    return "\n".join(out) + "\n"


def _render_cell(cell: Cell) -> str:
    parts = []
    for guard, outcome in cell:
        shown = (f"**{outcome.value}**" if isinstance(outcome, Violation)
                 else f"→ `{outcome.value}`")
        parts.append(shown if guard is G.ALWAYS else f"`{guard.value}` {shown}")
    return "; ".join(parts)


# ------------------------------------------------------------------ facts of one event alone
def proves(kind: str, blocks: int, start: int, footprint: int, leading: int,
           surviving: int) -> bool:
    """Whether a materialization's numbers prove the accepted predicate.

    Positions ``0 .. leading-1`` are present and position ``leading`` is not (when it is inside
    the footprint). With ``surviving == footprint`` every position is present; with
    ``surviving == footprint - 1`` every position but ``leading`` is. Otherwise only the
    leading run is known. Numbers that contradict each other prove nothing (fail closed):
    a leading run shorter than the footprint says position ``leading`` is missing, so not
    every position can survive.
    """
    if leading > surviving or surviving > footprint:
        return False
    if leading < footprint and surviving == footprint:
        return False
    if kind != "contiguous_range":
        return leading >= blocks
    end = start + blocks
    if end > footprint:
        return False  # a range beyond the footprint has no positions to be present
    if end <= leading or surviving == footprint:
        return True
    return surviving == footprint - 1 and not start <= leading < end


def failed_load(event: object) -> bool:
    """A load failure: ``kv_load_finished(success=false)`` or a ``kv_load_failed`` naming at
    least one invalid block (one naming none reports no failure)."""
    name = getattr(event, "event", None)
    if name == "kv_load_finished":
        return not getattr(event, "success", True)
    return name == "kv_load_failed" and bool(getattr(event, "invalid_block_ids", ()))


def opens_failure(event: object) -> bool:
    """A failure the claim's outcome must follow on its request (SPEC §4.2 Failures): a
    failed store or load, or the scheduler's failure branch (SPEC §4.1 lists "store/load
    failure" among the failure events)."""
    return substrate_failure(event)


def substrate_failure(event: object) -> bool:
    """A failure the substrate reports: a failed store or load, or the scheduler's branch."""
    name = getattr(event, "event", None)
    if name == "kv_store_finished":
        return not getattr(event, "success", True)
    return name == "scheduler_load_failure" or failed_load(event)


def outcome_envelope_mismatch(event: object) -> bool:
    """SPEC §4.1: an outcome event's envelope ``claim_id`` equals its ``outcome_claim_id``."""
    return getattr(event, "claim_id", None) != getattr(event, "outcome_claim_id", None)


def short_copy(block_count: int, blocks: int) -> bool:
    """An offloaded copy of *block_count* blocks cannot hold the *blocks* positions the
    predicate needs."""
    return block_count < blocks


def cycle_step(event: object) -> bool:
    """A step of a restore cycle, or a reuse: what only a started, unfinished request does."""
    return getattr(event, "event", None) in _CYCLE_KINDS


def request_guard(guard: Guard, event: object) -> bool:
    """The request table's guards (they ask the event alone)."""
    if guard is Guard.FAILURE_CHAIN:
        return failure_chain_event(event)
    if guard is Guard.CYCLE_STEP:
        return cycle_step(event)
    if guard is Guard.SERVED:
        return getattr(event, "status", None) == "served"
    if guard is Guard.OUTCOME_ENVELOPE:
        return outcome_envelope_mismatch(event)
    if guard is Guard.UNCLAIMED_BRANCH:
        return getattr(event, "claim_id", None) is None
    raise ValueError(f"guard {guard} is not a request guard")  # pragma: no cover


#: request events that belong to a failure chain (SPEC §4.2: all before the first finish)
def failure_chain_event(event: object) -> bool:
    """Part of a failure chain: a failed load, the scheduler's branch, a restore failure or a
    refusal."""
    name = getattr(event, "event", None)
    return name in ("scheduler_load_failure", "claim_restore_failed",
                    "active_request_refused") or failed_load(event)
