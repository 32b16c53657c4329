"""The claim and request automaton of SPEC §4.2–§4.3, as data: the one legal-run definition.

Every event whose envelope names a claim is a step of that claim's automaton, and so is every
refusal or deferral that names it in any claim field (:data:`CLAIM_TABLE`); every event that
names a request is a step of that request's automaton (:data:`REQUEST_TABLE`). Both tables are
declared per event kind (:data:`CLAIM_ROWS`, :data:`REQUEST_ROWS`): for each kind, which states
get which cell. A cell holds ordered rows ``(guard, outcome)``: the first row whose guard holds
decides, and its outcome is the next state, :data:`STAY`, or a named :class:`Violation`. The
last row of every cell is unguarded (guard ``None``), so no cell is blank: an event the table
does not explain is a violation, never ignored.

A violation leaves the automaton in the state it reached (the event is not applied); the gates
report the first one with the seq of the offending event and the state it met. Claim guards
(:class:`Guard`) and request guards (:class:`RequestGuard`) are named here; how each is
answered is up to its reader: the reference semantics asks the whole event list, the streaming
acceptor keeps running answers (both in :mod:`residentkv.trace`, each a table of functions).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

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
    """A condition on the event and on what the claim (and the requests naming it) did before,
    that picks a row of a claim cell."""

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
    LOSS = "loss"
    NOT_OFFLOADED = "not_offloaded"
    OUTCOME_ENVELOPE = "outcome_envelope"
    CARRIER_SCOPE = "carrier_scope"
    SHORT_COPY = "short_copy"
    NO_STORE = "no_store"
    LOAD_TIER = "load_tier"
    FOREIGN_JOB = "foreign_job"
    EARLIER_INCARNATION = "earlier_incarnation"
    OFF_CARRIER = "off_carrier"
    LATE_RECORD = "late_record"
    FAIL_BRANCH = "fail_branch"


class RequestGuard(StrEnum):
    """A condition on the event and on what the request did before, that picks a row of a
    request cell."""

    SERVED = "served"
    OUTCOME_ENVELOPE = "outcome_envelope"
    UNCLAIMED_BRANCH = "unclaimed_branch"
    FAILED_LOAD = "failed_load"
    CARRIED_STORE = "carried_store"
    LATE_RECORD = "late_record"


#: what each claim guard asks, for the generated table in docs/trace-gates.md
GUARD_WHY: dict[Guard, str] = {
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
    Guard.FOREIGN_SCOPE: "the request's owner scope is not the claim's (a request without "
                         "one and a scoped claim, or a scoped request and an unscoped claim)",
    Guard.OTHER_REQUEST: "another request than the open cycle's",
    Guard.OTHER_LABEL: "a `generation` other than the open cycle's label",
    Guard.UNNAMED_FAILURE: "a substrate failure naming the claim but no request",
    Guard.FAILED_LOAD: "a failed load (`success: false`, or `kv_load_failed` naming an "
                       "invalid block)",
    Guard.FALLBACK: "`source` is `fallback_recompute`",
    Guard.NOT_OFFLOADED: "no `claim_offloaded` of the claim before",
    Guard.LOSS: "an observed loss: an eviction of a needed position (for `offloadable`, "
                "while no stored, offloaded copy is held), a reuse that does not hold, or a "
                "materialization the numbers no longer prove",
    Guard.OUTCOME_ENVELOPE: "its envelope `claim_id` differs from its `outcome_claim_id` "
                            "(null included)",
    Guard.CARRIER_SCOPE: "the carrying request declared an owner scope other than the claim's",
    Guard.SHORT_COPY: "`block_count` is below the number of positions the accepted "
                      "predicate needs",
    Guard.NO_STORE: "no successful store of the claim to its `to_tier` since the claim's "
                    "acceptance",
    Guard.LOAD_TIER: "a `from_tier` that is not the tier the stored copy was written to",
    Guard.FOREIGN_JOB: "a `job_id` that no `kv_load_started` of the open cycle started",
    Guard.EARLIER_INCARNATION: "the claim was accepted in an earlier stream of the file (it "
                               "was still open when that incarnation's stream ended)",
    Guard.OFF_CARRIER: "its request does not carry the claim (no `claim_accepted`, "
                       "`kv_lookup`, restore or reuse of the claim named it before), and it is "
                       "no conflict with a `hard_protected` claim resident on the device",
    Guard.FAIL_BRANCH: "the runtime's failure branch (policy `fail`) on the open cycle's "
                       "request: the failure's first sign when the failed load is reported "
                       "only after the finish",
    Guard.LATE_RECORD: "a record of the failure that closed the claim or that the mode's ending "
                       "answered: on the failed cycle's request, a `kv_load_failed` naming a "
                       "job that cycle started, or its `claim_restore_failed` after the "
                       "ending, the cycle's load having failed",
}

#: what each request guard asks
REQUEST_GUARD_WHY: dict[RequestGuard, str] = {
    RequestGuard.SERVED: "`status` is `served`",
    RequestGuard.OUTCOME_ENVELOPE: "its envelope `claim_id` differs from its "
                                   "`outcome_claim_id` (null included)",
    RequestGuard.UNCLAIMED_BRANCH: "its envelope names no claim",
    RequestGuard.FAILED_LOAD: "`success` is false",
    RequestGuard.CARRIED_STORE: "a store completion of a claim the request carried (its "
                                "`claim_accepted`, lookup, restore or reuse named it): vLLM "
                                "saves at finish",
    RequestGuard.LATE_RECORD: "a late record of a failure a refusal of this request answered "
                              "before its finish: `kv_load_failed` naming a job the request "
                              "loaded for that claim, its `claim_restore_failed`, or the "
                              "refusal repeated",
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
    NAMED_AFTER_FINISH = "after_request_finished"
    NOT_STARTED = "request_not_started"
    SERVED_AFTER_REFUSAL = "served_after_refusal"
    UNFINISHED = "failure_never_finished"
    NEVER_DECIDED = "named_never_decided"
    OUTCOME_ENVELOPE = "outcome_envelope_mismatch"
    UNCLAIMED_BRANCH = "failure_branch_names_no_claim"
    CARRIER_SCOPE = "carrier_of_other_scope"
    SHORT_COPY = "offload_short_of_predicate"
    NO_STORE = "offload_without_store"
    LOAD_TIER = "load_from_other_tier"
    FOREIGN_JOB = "load_job_outside_cycle"
    OFF_CARRIER = "refusal_of_non_carrier"
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
    Violation.FOREIGN_SCOPE: "restores and reuses are by a request of the claim's owner scope; "
                             "an unscoped claim's only by unscoped requests",
    Violation.OTHER_REQUEST: "every event of a restore cycle is by the cycle's request",
    Violation.OTHER_LABEL: "every event of a restore cycle names the cycle's label",
    Violation.UNNAMED_FAILURE: "a substrate failure that names a claim must name its request",
    Violation.REUSE_BEFORE_RESTORE: "a reuse needs an offload-tier restore of its cycle, or "
                                    "a residency with no offload since",
    Violation.RESTORED_AFTER_FAILURE: "nothing of the claim is restored between its failure "
                                      "and the failure's last record, a fallback "
                                      "recompute included",
    Violation.RESTORED_TWICE: "the cycle was already restored",
    Violation.HARM_AFTER_END: "loss after the claim ended is never harm",
    Violation.LOST_BEFORE_RELEASE: "claim_block_lost_after_release before any release",
    Violation.STREAM_EVENT: "stream_started, stream_closed and observation_gap never name a "
                            "claim",
    Violation.STARTED_TWICE: "a request id starts at most once per stream",
    Violation.FINISHED_TWICE: "a request finishes once",
    Violation.FAILURE_AFTER_FINISH: "after the affected request's first finish only the late "
                                    "records of a failure its outcome answered may follow "
                                    "(the outcome precedes the finish)",
    Violation.AFTER_FINISH: "a finished request looks up, restores, loads or reuses nothing "
                            "more",
    Violation.NAMED_AFTER_FINISH: "after its first request_finished a request is named only by "
                                  "store completions of a claim it carried and the late "
                                  "records of an answered failure",
    Violation.NOT_STARTED: "a request's first event is its request_started: nothing names it "
                           "before (requests start first)",
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
    Violation.NO_STORE: "a claim_offloaded needs a stored copy of the claim in that tier: a "
                        "successful store to it since the claim's acceptance",
    Violation.LOAD_TIER: "a load of a restore reads the tier the stored copy was written to",
    Violation.FOREIGN_JOB: "a load's job must be one its own restore cycle started",
    Violation.OFF_CARRIER: "a refusal or deferral naming the claim is on a request that "
                           "carries it, or, for hard_protected, on a conflicting request while "
                           "the claim is resident; anywhere else it is a smear",
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
G_ = TypeVar("G_", Guard, RequestGuard)
#: a row: its guard (None: unguarded, the cell's last row) and its outcome
Row = tuple[G_ | None, Outcome]
Cell = tuple[Row[G_], ...]
ClaimCell = Cell[Guard]
RequestCell = Cell[RequestGuard]

P, G, RG, V = Phase, Guard, RequestGuard, Violation

#: every event kind, in schema order
KINDS: tuple[str, ...] = tuple(EVENT_MODELS)

# ------------------------------------------------------------------------ groups of states
PRE: frozenset[Phase] = frozenset({P.START, P.SUBMITTED})
#: an open restore cycle
CYCLE: frozenset[Phase] = frozenset(
    {P.RESTORE_REQUIRED, P.LOAD_FAILED, P.RESTORED, P.RECOMPUTED})
#: accepted, not ended
LIVE: frozenset[Phase] = frozenset({P.ACCEPTED, P.RESIDENT, P.OFFLOADED}) | CYCLE
#: a cycle that is neither restored nor closed: no new cycle, offload, store or ending yet
UNSETTLED: frozenset[Phase] = frozenset({P.RESTORE_REQUIRED, P.LOAD_FAILED})
#: a cycle that restored or recomputed: a new cycle, offload or store may follow
SETTLED: frozenset[Phase] = frozenset({P.RESTORED, P.RECOMPUTED})
#: materialized, and no unsettled cycle open: stores, offloads and new cycles may follow
HELD: frozenset[Phase] = frozenset({P.RESIDENT, P.OFFLOADED}) | SETTLED
#: live, with no restore cycle open
OUTSIDE: frozenset[Phase] = frozenset({P.ACCEPTED, P.RESIDENT, P.OFFLOADED})
#: the claim is held on the device: a materialization that no longer holds is a loss, and a
#: hard_protected claim here may be named by a conflicting request's refusal (SPEC §4.3)
ON_DEVICE: frozenset[Phase] = frozenset({P.RESIDENT, P.RESTORED})

# ------------------------------------------------------------- the ending states, once
#: the events that end a claim, and the terminal state each leaves it in (SPEC §2)
ENDING_STATE: dict[str, Phase] = {
    "claim_released": P.RELEASED, "claim_demoted": P.DEMOTED, "claim_expired": P.EXPIRED,
    "claim_harmed": P.HARMED, "claim_restore_failed": P.FAILED_CLOSED}
#: terminal: decided against, or ended
TERMINAL: frozenset[Phase] = frozenset(ENDING_STATE.values()) | {P.REJECTED}
#: endings after which a loss is post-release loss, never harm (SPEC §2)
RELEASES: frozenset[str] = frozenset({"claim_released", "claim_demoted", "claim_expired"})
RELEASED_STATES: frozenset[Phase] = frozenset(ENDING_STATE[k] for k in RELEASES)
#: endings after which the claim makes no further promise (SPEC §4.1: "released, expired,
#: failed closed"; demotion ends it too, SPEC §2); harm is a broken promise, judged as loss
PROMISE_ENDINGS: frozenset[str] = RELEASES | {"claim_restore_failed"}
#: what may end a claim the previous incarnation left open, at the head of the next stream
#: (SPEC §9.1): the stream's first events while each is one of these naming such a claim
HEAD_ENDINGS: frozenset[str] = RELEASES | {"claim_harmed"}
#: the mode's own outcomes that answer a failure of the claim (SPEC §4.3: "the attributed
#: outcome — refusal, or the mode's demotion/expiry/harm")
OUTCOME_ENDINGS: frozenset[str] = frozenset({"claim_demoted", "claim_expired", "claim_harmed"})
#: the terminal states after which the late records of a failure may still come: the claim
#: failed closed on it, or the mode's ending answered it (SPEC §4.3)
ANSWERED_ENDS: frozenset[Phase] = frozenset(
    {P.FAILED_CLOSED, *(ENDING_STATE[k] for k in OUTCOME_ENDINGS)})
#: the violations of "decided once" (SPEC §9.1)
DECIDED_AGAIN: frozenset[Violation] = frozenset(
    {V.DECIDED_TWICE, V.DECIDED_ACROSS, V.ACCEPTED_AFTER_END})

# --------------------------------------------------------------------- kinds by their role
#: a request carries a claim from the first of these naming both (SPEC §4.3: "its
#: claim_accepted, lookup, restore or reuse names that request")
CARRYING_KINDS: frozenset[str] = frozenset(
    {"claim_accepted", "kv_lookup", "claim_restore_required", "claim_restored", "claim_reused"})
#: what may name a request after its first finish besides late records: vLLM saves at finish
STORE_COMPLETIONS: frozenset[str] = frozenset(
    {"kv_store_started", "kv_store_finished", "claim_offloaded"})
#: the late records of an answered failure (SPEC §4.3)
LATE_RECORDS: frozenset[str] = frozenset(
    {"kv_load_failed", "claim_restore_failed", "active_request_refused"})
#: events a claim names in its claim fields too: a step of every claim they name
REFUSALS: frozenset[str] = frozenset({"active_request_refused", "active_request_deferred"})
#: events that may name claims beyond their envelope (outcome_claim_id, blocking_claim_ids)
NAMING_KINDS: frozenset[str] = REFUSALS | {"claim_restore_failed"}
#: the steps of a restore cycle, and a reuse: what only a started, unfinished request does
CYCLE_KINDS: frozenset[str] = frozenset(
    {"kv_lookup", "claim_restore_required", "claim_restored", "claim_reused",
     "claim_restore_failed", "kv_load_started", "kv_load_finished", "kv_load_failed"})
_STREAM_KINDS = ("stream_started", "stream_closed", "observation_gap")


# ------------------------------------------------------------------------ building cells
def _only(outcome: Outcome) -> tuple[tuple[None, Outcome]]:
    return ((None, outcome),)


S = TypeVar("S", Phase, RequestPhase)


def _by(states: Iterable[S], *groups: tuple[Iterable[S], Cell[G_]]) -> dict[S, Cell[G_]]:
    """One kind's cells: each group of states gets its cell. The groups must cover every
    state exactly once (no blank cell, no cell given twice)."""
    out: dict[S, Cell[G_]] = {}
    for group, cell in groups:
        for state in group:
            assert state not in out, f"state {state} given two cells"
            assert cell and cell[-1][0] is None and all(g is not None for g, _ in cell[:-1])
            out[state] = cell
    missing = set(states) - set(out)
    assert not missing, f"no cell for {sorted(missing)}"
    return out


def _claim(*groups: tuple[Iterable[Phase], ClaimCell]) -> dict[Phase, ClaimCell]:
    return _by(Phase, *groups)


_ALL: frozenset[Phase] = frozenset(Phase)
#: after the claim was decided
_POST: frozenset[Phase] = _ALL - PRE
_BEFORE = (PRE, _only(V.BEFORE_ACCEPTANCE))
_AFTER_END = (TERMINAL, _only(V.AFTER_TERMINAL))
#: a step inside the open cycle: the claim's scope, the cycle's request and label
_IN_CYCLE: ClaimCell = ((G.FOREIGN_SCOPE, V.FOREIGN_SCOPE), (G.OTHER_REQUEST, V.OTHER_REQUEST),
                        (G.OTHER_LABEL, V.OTHER_LABEL))
_HOLDS = (G.HOLDS_CONTRADICTED, V.HOLDS_CONTRADICTED)
_COPY_ORDER: tuple[tuple[Iterable[Phase], ClaimCell], ...] = (
    _BEFORE, _AFTER_END, ({P.ACCEPTED}, _only(V.NOT_MATERIALIZED)),
    (UNSETTLED, _only(V.CYCLE_OPEN)))
_STORE = _claim(*_COPY_ORDER, (HELD, ((G.UNNAMED_FAILURE, V.UNNAMED_FAILURE),
                                      (G.SAME_TIER, V.SAME_TIER),
                                      (G.LABEL_BELOW, V.LABEL_DECREASED), (None, STAY))))
#: a load's end inside the open cycle
_LOAD_END: ClaimCell = ((G.UNNAMED_FAILURE, V.UNNAMED_FAILURE), *_IN_CYCLE,
                        (G.LOAD_TIER, V.LOAD_TIER), (G.FOREIGN_JOB, V.FOREIGN_JOB),
                        (G.FAILED_LOAD, P.LOAD_FAILED), (None, STAY))
#: kinds that only name the claim (no lifecycle step): legal once it was decided
_MENTION = _claim(_BEFORE, (_POST, _only(STAY)))


def _ending(kind: str) -> dict[Phase, ClaimCell]:
    """claim_released / claim_demoted / claim_expired."""
    freed = (RELEASED_STATES - {P.RELEASED}) if kind == "claim_released" else frozenset()
    # SPEC §4.3: the mode's demotion or expiry is an outcome that answers a failed load, as a
    # harm is; a release answers nothing, so it waits for the cycle to settle
    answers = frozenset({P.LOAD_FAILED}) if kind in OUTCOME_ENDINGS else frozenset()
    # ruling: freeing what the mode's own ending let go is no step of the claim (SPEC §4.2
    # bans materialization, store, offload, restore and reuse after a terminal state)
    return _claim(_BEFORE, (UNSETTLED - answers, _only(V.CYCLE_OPEN)),
                  ((LIVE - UNSETTLED) | answers, _only(ENDING_STATE[kind])),
                  (freed, _only(STAY)), (TERMINAL - freed, _only(V.AFTER_TERMINAL)))


#: the claim table, declared per event kind: kind -> state -> rows (first holding guard decides)
CLAIM_ROWS: dict[str, dict[Phase, ClaimCell]] = {
    **{k: _claim((_ALL, _only(V.STREAM_EVENT))) for k in _STREAM_KINDS},
    "claim_submitted": _claim((PRE, _only(P.SUBMITTED)), (_POST, _only(V.SUBMITTED_LATE))),
    "claim_accepted": _claim(
        (PRE, ((G.BEST_EFFORT, V.BEST_EFFORT), (G.NOT_CARRIER, V.NOT_CARRIER),
               (G.CARRIER_SCOPE, V.CARRIER_SCOPE), (None, P.ACCEPTED))),
        ({P.REJECTED}, _only(V.DECIDED_TWICE)),
        # SPEC §9.1: a released (or otherwise ended) claim stays so
        (TERMINAL - {P.REJECTED}, _only(V.ACCEPTED_AFTER_END)),
        (LIVE, ((G.EARLIER_INCARNATION, V.DECIDED_ACROSS),
                (G.CHANGED_DEFINITION, V.ACCEPTED_CHANGED), (None, STAY)))),
    "claim_rejected": _claim((PRE, _only(P.REJECTED)), (_POST, _only(V.DECIDED_TWICE))),
    # the carrier's intake may name the claim before its decision (checked at acceptance)
    "request_started": _claim((_ALL, _only(STAY))),
    **{k: _MENTION for k in ("request_finished", "active_request_admitted", "kv_lookup",
                             "future_reuse_admitted", "future_reuse_denied", "generic_counter")},
    "active_request_refused": _claim(_BEFORE, (_POST, (
        (G.OUTCOME_ENVELOPE, V.OUTCOME_ENVELOPE), (G.OFF_CARRIER, V.OFF_CARRIER), (None, STAY)))),
    "active_request_deferred": _claim(_BEFORE, (_POST, (
        (G.OFF_CARRIER, V.OFF_CARRIER), (None, STAY)))),
    "block_evicted": _claim(_BEFORE, (TERMINAL | {P.ACCEPTED}, _only(STAY)),
                            (LIVE - {P.ACCEPTED}, ((G.LOSS, P.HARMED), (None, STAY)))),
    "claim_materialized": _claim(
        _BEFORE, _AFTER_END,
        (UNSETTLED, (_HOLDS, (G.PROVEN, V.CYCLE_OPEN), (None, STAY))),
        # no longer proved while held on the device: a loss
        (ON_DEVICE, (_HOLDS, (G.PROVEN, P.RESIDENT), (None, P.HARMED))),
        ({P.ACCEPTED, P.OFFLOADED, P.RECOMPUTED}, (_HOLDS, (G.PROVEN, P.RESIDENT), (None, STAY)))),
    "kv_store_started": _STORE,
    "kv_store_finished": _STORE,
    "claim_offloaded": _claim(*_COPY_ORDER, (HELD, (
        (G.SHORT_COPY, V.SHORT_COPY), (G.NO_STORE, V.NO_STORE), (G.SAME_TIER, V.SAME_TIER),
        (G.LABEL_BELOW, V.LABEL_DECREASED), (None, P.OFFLOADED)))),
    # materialized ⇄ offloaded (SPEC §2): a resident claim whose copy was offloaded may still
    # be restored from that copy
    "claim_restore_required": _claim(
        _BEFORE, _AFTER_END, ({P.ACCEPTED}, _only(V.NOT_OFFLOADED)),
        (UNSETTLED, _only(V.CYCLE_OPEN)),
        (HELD, ((G.NOT_OFFLOADED, V.NOT_OFFLOADED), (G.FOREIGN_SCOPE, V.FOREIGN_SCOPE),
                (G.LABEL_NOT_NEW, V.LABEL_NOT_NEW), (G.WRONG_TIER, V.WRONG_TIER),
                (None, P.RESTORE_REQUIRED)))),
    "kv_load_started": _claim(_BEFORE, _AFTER_END, (OUTSIDE, _only(V.OUTSIDE_CYCLE)),
                              (CYCLE, (*_IN_CYCLE, (G.LOAD_TIER, V.LOAD_TIER), (None, STAY)))),
    "kv_load_finished": _claim(
        _BEFORE, _AFTER_END,
        (OUTSIDE, ((G.UNNAMED_FAILURE, V.UNNAMED_FAILURE), (None, V.OUTSIDE_CYCLE))),
        (CYCLE, _LOAD_END)),
    "kv_load_failed": _claim(
        _BEFORE,
        # SPEC §4.3: the invalid-block report of the failure that closed the claim, or that
        # the mode's ending answered, may follow
        (ANSWERED_ENDS, ((G.LATE_RECORD, STAY), (None, V.AFTER_TERMINAL))),
        (TERMINAL - ANSWERED_ENDS, _only(V.AFTER_TERMINAL)),
        (OUTSIDE, ((G.UNNAMED_FAILURE, V.UNNAMED_FAILURE), (None, V.OUTSIDE_CYCLE))),
        (CYCLE, _LOAD_END)),
    # SPEC §4.3/§9: in vLLM's order the branch is the failure's first sign in the cycle
    "scheduler_load_failure": _claim(
        _BEFORE, ({P.RESTORE_REQUIRED}, ((G.UNNAMED_FAILURE, V.UNNAMED_FAILURE),
                                         (G.FAIL_BRANCH, P.LOAD_FAILED), (None, STAY))),
        (_POST - {P.RESTORE_REQUIRED}, ((G.UNNAMED_FAILURE, V.UNNAMED_FAILURE), (None, STAY)))),
    "claim_restored": _claim(
        _BEFORE, _AFTER_END, (OUTSIDE, _only(V.OUTSIDE_CYCLE)),
        ({P.RESTORE_REQUIRED}, (*_IN_CYCLE, (G.FALLBACK, P.RECOMPUTED), (None, P.RESTORED))),
        ({P.LOAD_FAILED}, _only(V.RESTORED_AFTER_FAILURE)),
        (SETTLED, _only(V.RESTORED_TWICE))),
    "claim_reused": _claim(
        _BEFORE, _AFTER_END, ({P.ACCEPTED}, _only(V.NOT_MATERIALIZED)),
        ({P.RESIDENT}, ((G.FOREIGN_SCOPE, V.FOREIGN_SCOPE), (G.LOSS, P.HARMED), (None, STAY))),
        ({P.RESTORED}, (*_IN_CYCLE, (G.LOSS, P.HARMED), (None, STAY))),
        ({P.OFFLOADED, P.RESTORE_REQUIRED, P.LOAD_FAILED, P.RECOMPUTED},
         _only(V.REUSE_BEFORE_RESTORE))),
    "claim_restore_failed": _claim(
        _BEFORE,
        # SPEC §4.3: the cycle's restore failure may follow the ending that answered it
        (ANSWERED_ENDS - {P.FAILED_CLOSED}, ((G.LATE_RECORD, STAY), (None, V.AFTER_TERMINAL))),
        ((TERMINAL - ANSWERED_ENDS) | {P.FAILED_CLOSED}, _only(V.AFTER_TERMINAL)),
        (OUTSIDE, _only(V.OUTSIDE_CYCLE)),
        (UNSETTLED, ((G.OUTCOME_ENVELOPE, V.OUTCOME_ENVELOPE), *_IN_CYCLE,
                     (None, P.FAILED_CLOSED))),
        (SETTLED, _only(V.RESTORED_TWICE))),
    **{k: _ending(k) for k in RELEASES},
    "claim_harmed": _claim(_BEFORE, (TERMINAL, _only(V.HARM_AFTER_END)),
                           ({P.ACCEPTED}, _only(V.NOT_MATERIALIZED)),
                           (LIVE - {P.ACCEPTED}, _only(P.HARMED))),
    "claim_block_lost_after_release": _claim(
        _BEFORE, (RELEASED_STATES, _only(STAY)),
        (_POST - RELEASED_STATES, _only(V.LOST_BEFORE_RELEASE))),
}


def _request(*groups: tuple[Iterable[RequestPhase], RequestCell]) -> dict[RequestPhase,
                                                                          RequestCell]:
    return _by(RequestPhase, *groups)


_R = RequestPhase
_RUNNING = (_R.STARTED, _R.REFUSED)
_UNSTARTED = ((_R.NEW,), _only(V.NOT_STARTED))
_LATE: RequestCell = ((RG.LATE_RECORD, STAY), (None, V.FAILURE_AFTER_FINISH))


def _while_running(after_finish: RequestCell) -> dict[RequestPhase, RequestCell]:
    """A kind that a running request may do: illegal before the start, *after_finish* once
    it finished."""
    return _request(_UNSTARTED, (_RUNNING, _only(STAY)), ((_R.FINISHED,), after_finish))


#: the request table, declared per event kind (SPEC §4.2 Requests, §4.3)
REQUEST_ROWS: dict[str, dict[RequestPhase, RequestCell]] = {
    **{k: _while_running(_only(V.NAMED_AFTER_FINISH)) for k in KINDS},
    **{k: _while_running(_only(V.AFTER_FINISH)) for k in CYCLE_KINDS - LATE_RECORDS},
    **{k: _while_running(((RG.CARRIED_STORE, STAY), (None, V.NAMED_AFTER_FINISH)))
       for k in STORE_COMPLETIONS},
    "kv_load_finished": _while_running(((RG.FAILED_LOAD, V.FAILURE_AFTER_FINISH),
                                        (None, V.AFTER_FINISH))),
    "kv_load_failed": _while_running(_LATE),
    "claim_restore_failed": _while_running(_LATE),
    "scheduler_load_failure": _while_running(_only(V.FAILURE_AFTER_FINISH)),
    "request_started": _request(((_R.NEW,), _only(_R.STARTED)),
                                ((*_RUNNING, _R.FINISHED), _only(V.STARTED_TWICE))),
    "request_finished": _request(
        _UNSTARTED, ((_R.STARTED,), _only(_R.FINISHED)),
        ((_R.REFUSED,), ((RG.SERVED, V.SERVED_AFTER_REFUSAL), (None, _R.FINISHED))),
        ((_R.FINISHED,), _only(V.FINISHED_TWICE))),
    "active_request_refused": _request(_UNSTARTED, (_RUNNING, _only(_R.REFUSED)),
                                       ((_R.FINISHED,), _LATE)),
}
#: rows every state's cell of a kind starts with (they ask the event alone)
_REQUEST_FIRST: dict[str, RequestCell] = {
    "active_request_refused": ((RG.OUTCOME_ENVELOPE, V.OUTCOME_ENVELOPE),),
    "claim_restore_failed": ((RG.OUTCOME_ENVELOPE, V.OUTCOME_ENVELOPE),),
    "scheduler_load_failure": ((RG.UNCLAIMED_BRANCH, V.UNCLAIMED_BRANCH),),
}

#: (claim state, event kind) -> rows; built once, never changed
CLAIM_TABLE: dict[tuple[Phase, str], ClaimCell] = {
    (state, kind): CLAIM_ROWS[kind][state] for state in Phase for kind in KINDS}
#: (request state, event kind) -> rows
REQUEST_TABLE: dict[tuple[RequestPhase, str], RequestCell] = {
    (state, kind): (*_REQUEST_FIRST.get(kind, ()), *REQUEST_ROWS[kind][state])
    for state in RequestPhase for kind in KINDS}
assert set(CLAIM_ROWS) == set(REQUEST_ROWS) == set(KINDS), "every event kind has its cells"


def decide(cell: Cell[G_], holds: Callable[[G_], bool]) -> Outcome:
    """The outcome of the first row whose guard *holds* (the unguarded last row otherwise)."""
    for guard, outcome in cell:
        if guard is None or holds(guard):
            return outcome
    raise AssertionError("every cell ends with an unguarded row")  # pragma: no cover


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
    """The automaton as Markdown: every cell of both tables, then the guards and violations.

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
    out += ["", "| claim guard | holds when |", "|---|---|"]
    out += [f"| `{g.value}` | {GUARD_WHY[g]} |" for g in Guard]
    out += ["", "| request guard | holds when |", "|---|---|"]
    out += [f"| `{g.value}` | {REQUEST_GUARD_WHY[g]} |" for g in RequestGuard]
    out += ["", "| violation | why |", "|---|---|"]
    out += [f"| `{v.value}` | {VIOLATION_WHY[v]} |" for v in Violation]
    return "\n".join(out) + "\n"


def _render_cell(cell: Cell[G_]) -> str:
    parts = []
    for guard, outcome in cell:
        shown = (f"**{outcome.value}**" if isinstance(outcome, Violation)
                 else f"→ `{outcome.value}`")
        parts.append(shown if guard is None else f"`{guard.value}` {shown}")
    return "; ".join(parts)


# ------------------------------------------------------------------ facts of one event alone
def failed_load(event: object) -> bool:
    """A load failure: ``kv_load_finished(success=false)`` or a ``kv_load_failed`` naming at
    least one invalid block (one naming none reports no failure)."""
    name = getattr(event, "event", None)
    if name == "kv_load_finished":
        return not getattr(event, "success", True)
    return name == "kv_load_failed" and bool(getattr(event, "invalid_block_ids", ()))


def substrate_failure(event: object) -> bool:
    """A failure the substrate reports, which the claim's outcome must answer on its request
    (SPEC §4.2 Failures): a failed store or load, or the scheduler's failure branch (SPEC §4.1
    lists "store/load failure" among the failure events)."""
    name = getattr(event, "event", None)
    if name == "kv_store_finished":
        return not getattr(event, "success", True)
    return name == "scheduler_load_failure" or failed_load(event)


def outcome_envelope_mismatch(event: object) -> bool:
    """SPEC §4.1: an outcome event's envelope ``claim_id`` equals its ``outcome_claim_id``."""
    return getattr(event, "claim_id", None) != getattr(event, "outcome_claim_id", None)


def failure_chain_event(event: object) -> bool:
    """Part of a failure chain (its request must finish in the stream): a failed load, the
    scheduler's branch, a restore failure or a refusal."""
    name = getattr(event, "event", None)
    return name in ("scheduler_load_failure", "claim_restore_failed",
                    "active_request_refused") or failed_load(event)


def refusal_names(event: object) -> list[str]:
    """The claims an event names in any claim field (envelope, outcome, blocking), each once,
    in that order (SPEC §4.3: a refusal or deferral is a step of each)."""
    names = [getattr(event, "claim_id", None), getattr(event, "outcome_claim_id", None),
             *getattr(event, "blocking_claim_ids", ())]
    return list(dict.fromkeys(n for n in names if n is not None))

