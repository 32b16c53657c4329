"""An independent, whole-list acceptor of v1 traces, written from SPEC §2–§4 (§4.1–§4.3) alone.

It shares nothing with the gates but the event schema (``residentkv.model.events``): no
automaton table, no tracker, no reference semantics. For every claim named in a stream it
decides whether every event *of that claim*, and every event of a request that names it, is
legal; it does not decide whether a gate's required chain is present (a legal but incomplete
history is "legal" here). Each violation carries the gates it condemns: almost every rule
condemns all four (SPEC §4.2: "a violation in every gate"); the few that SPEC scopes more
narrowly say so (an open failure fails failure_outcome, lifecycle and attribution).

Where the SPEC text is silent, the acceptor still rules the way an expert would under default
deny, but as a *reading* (:data:`READINGS`): a reading is reported beside the text-backed rules
(``survey.py``) and is not what the differential property asserts, so the property fails only
on what the SPEC's sentences decide.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pydantic import ValidationError

from residentkv.model.events import EVENT_ADAPTER

OBSERVATION, FAILURE_OUTCOME, LIFECYCLE, ATTRIBUTION = (
    "observation", "failure_outcome", "lifecycle", "attribution")
GATES: tuple[str, ...] = (OBSERVATION, FAILURE_OUTCOME, LIFECYCLE, ATTRIBUTION)
ALL: frozenset[str] = frozenset(GATES)
#: SPEC §4.2 Failures: an open failure fails these three (observation is not named); B4's
#: attribution of outcomes is theirs too
FAILURE_GATES: frozenset[str] = frozenset({FAILURE_OUTCOME, LIFECYCLE, ATTRIBUTION})
#: not a gate: what `attribution` requires of a claim when it is a non-target (SPEC §4.2
#: Attribution: "a request that carries a non-target ... fails non_targets_served")
AS_NON_TARGET = "attribution:non_target"
NON_TARGET_ONLY: frozenset[str] = frozenset({AS_NON_TARGET})

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
BOM = b"\xef\xbb\xbf"

CLAIM_MODES = frozenset({"soft_priority", "hard_protected", "demotable", "expiring",
                         "offloadable"})
TERMINAL_EVENTS = {"claim_released": "released", "claim_demoted": "demoted",
                   "claim_expired": "expired", "claim_harmed": "harmed"}
IDENTITY = ("object_id", "cache_identity", "request_token_map_id", "predicate_id")
#: every field of claim_accepted but the envelope's ordering/emitter fields and its request
#: READING: the carrying request is not a defining field of the claim
NOT_DEFINING = frozenset({"seq", "ts_ns", "source", "request_id"})
LOAD_EVENTS = frozenset({"kv_load_started", "kv_load_finished", "kv_load_failed",
                         "scheduler_load_failure"})


class Rule(StrEnum):
    """Why an event is not legal (one id per rule; the test groups disagreements by it)."""

    MALFORMED = "malformed"                       # §3/§4.1: strict typing, duplicate keys
    NUMBER_RANGE = "number_range"                 # §4.2 Numbers: signed 64-bit
    SEQ_ORDER = "seq_order"                       # §3: seq strictly increasing
    NOT_ACCEPTED = "not_accepted"                 # §4: accepted, pre-registered, first
    BEFORE_ACCEPT = "before_accept"               # §4.2 Before acceptance
    POST_HOC = "post_hoc"                         # §2: post-hoc never satisfies B1
    MODE = "mode"                                 # §4.2 Modes
    AMBIGUOUS = "ambiguous_identity"              # §4 stable_identity, §4.1, §4.2 scope
    PREDICATE_FIXED = "predicate_fixed"           # §4 predicate_fixed
    SUBMIT_ORDER = "submit_order"                 # reading of §2 submitted -> accepted
    HOLDS_CONTRADICTION = "holds_contradiction"   # §4.1/§4.2 Predicates
    SILENT_LOSS = "silent_loss"                   # §4.1 loss, §4.2 Tiers
    STORE_ORDER = "store_before_materialization"  # §4.2 Order
    OFFLOAD_ORDER = "offload_before_materialization"  # §4.2 Order
    STORE_TIER = "store_same_tier"                # §4.2 Tiers
    RESTORE_TIER = "restore_tier"                 # §4.2 Tiers
    RESTORE_NO_COPY = "restore_without_copy"      # §2 offloaded -> restore_required
    RESTORE_NO_STORE = "restore_without_store"    # reading of §4.2 Tiers: the copy is stored
    LABEL_ORDER = "label_order"                   # §4.2 Generations
    LABEL_CYCLE = "label_cycle"                   # §4.2 Generations: one label per cycle
    CYCLE_ORDER = "cycle_order"                   # §2/§4.2 required -> restored|failed -> reused
    LOAD_OUTSIDE_CYCLE = "load_outside_cycle"     # §4.2 Generations: loads in the open cycle
    LOAD_AFTER_CYCLE = "load_after_closed_cycle"  # reading: a cycle closes with reuse/failure
    FAILURE_OUTSIDE_CYCLE = "failure_branch_outside_cycle"  # reading: the branch is the cycle's
    REUSE_ORDER = "reuse_without_restore"         # §4.2 Order
    RESTORE_VOIDED = "restore_from_voided_load"   # §4.2 Failures: kv_load_failed voids
    AFTER_TERMINAL = "after_terminal"             # §4.2 Terminal states
    VACUOUS_PATH = "vacuous_path"                 # §4.2 No vacuous path
    LOST_BEFORE_RELEASE = "lost_before_release"   # reading of §2 post-release loss
    SCOPE = "owner_scope"                         # §4.2 Requests
    FAILURE_NO_REQUEST = "failure_without_request"  # §4.2 Failures
    OUTCOME_ENVELOPE = "outcome_envelope"         # §4.1 Attribution
    OPEN_FAILURE = "open_failure"                 # §4.2 Failures, §4.3 B4 is the outcome
    RESTORED_BEFORE_RECORD = "restored_before_last_record"  # §4.3 B4: nothing restored between
    REFUSAL_NOT_CARRIER = "refusal_not_carrier"   # §4.3 Refusals name carriers
    OFFLOAD_NO_STORE = "offload_without_store"    # §4.3 Copies
    UNFINISHED = "failure_request_unfinished"     # §4.2 whole failure chain
    HARNESS_ONLY = "harness_only"                 # §4.2 Arbiters
    SMEAR = "blocking_claim_smear"                # §1 B4: blocking_claim_ids == [claim]
    NOT_SERVED = "not_served_unexplained"         # §4.2 Attribution: non_targets_served
    NAMED_BY_FAILURE = "named_by_failure"         # §4.1 Attribution: failures name the target
    UNCLAIMED_FAILURE = "unclaimed_failure"       # §4.1 Attribution: ... or name no claim
    REQ_RESTART = "request_restarted"             # §4.2 Requests
    REQ_NOT_STARTED = "request_not_started"       # §4.3 Requests start first
    REQ_AFTER_FINISH = "after_request_finished"   # §4.3 only late records after the finish
    REQ_ACTS_AFTER_FINISH = "acts_after_finished"  # §4.3 only store completions after it
    REFUSED_SERVED = "refused_then_served"        # §4.1
    FAIL_BRANCH_SERVED = "fail_branch_then_served"  # reading of §4.1 (branch without refusal)
    OBSERVATION_GAP = "observation_gap"           # §4.2 via the v1 event: unknown, never pass


#: rules the SPEC text does not state; the acceptor applies them, the property does not assert
READINGS: frozenset[Rule] = frozenset({
    Rule.SUBMIT_ORDER, Rule.LOAD_AFTER_CYCLE, Rule.FAILURE_OUTSIDE_CYCLE,
    Rule.LOST_BEFORE_RELEASE, Rule.FAIL_BRANCH_SERVED, Rule.RESTORE_NO_STORE,
})
#: the failure chain of SPEC §4.2 (and a second finish, §4.1): these after the first finish
CHAIN = frozenset({"kv_load_failed", "scheduler_load_failure", "claim_restore_failed",
                   "active_request_refused", "request_finished"})
#: SPEC §4.3: a request carries a claim once "its claim_accepted, lookup, restore or reuse names
#: that request"
CARRYING = frozenset({"claim_accepted", "kv_lookup", "claim_restore_required", "claim_restored",
                      "claim_reused"})
#: SPEC §4.3: the store completions that may name a request after its first finish
STORE_COMPLETIONS = frozenset({"kv_store_started", "kv_store_finished", "claim_offloaded"})
#: SPEC §4.3: the mode's outcomes (beside a refusal) that answer a failure
MODE_OUTCOMES = frozenset({"claim_demoted", "claim_expired", "claim_harmed"})


@dataclass(frozen=True)
class Violation:
    """One illegal event: where (seq; -1 when it is an absence), which rule, the gates it fails."""

    seq: int
    rule: Rule
    why: str
    gates: frozenset[str] = ALL

    @property
    def reading(self) -> bool:
        return self.rule in READINGS


@dataclass
class Verdict:
    """The acceptor's ruling on one claim: its illegal events (``violations``) and, apart, what
    fails `attribution` for another target when this claim is a non-target (``as_non_target``:
    a failure or outcome naming it, a request of it not served and unexplained)."""

    claim_id: str
    found: list[Violation] = field(default_factory=list)

    @property
    def violations(self) -> list[Violation]:
        return [v for v in self.found if v.gates != NON_TARGET_ONLY]

    @property
    def as_non_target(self) -> list[Violation]:
        return [v for v in self.found if v.gates == NON_TARGET_ONLY]

    @property
    def legal(self) -> bool:
        return not self.violations

    def legal_for(self, gate: str, readings: bool = False) -> bool:
        """No violation condemns *gate* (by the SPEC's text; with *readings*, by any rule)."""
        return not self.against(gate, readings)

    def against(self, gate: str, readings: bool = False) -> list[Violation]:
        """The violations that fail *gate* (with the acceptor's readings, if asked)."""
        return [v for v in self.violations if gate in v.gates and (readings or not v.reading)]

    def against_non_target(self, readings: bool = False) -> list[Violation]:
        """What fails `attribution` for another claim when this one is its non-target."""
        return [v for v in self.found if v.gates & {ATTRIBUTION, AS_NON_TARGET}
                and (readings or not v.reading)]

    def pairs(self) -> list[tuple[int, str]]:
        """(seq, reason) per violation, in stream order."""
        return sorted((v.seq, f"{v.rule}: {v.why}") for v in self.violations)


# --- reading ------------------------------------------------------------------------------------

class _Duplicate(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate(f"duplicate key {key!r}")
        out[key] = value
    return out


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse(data: bytes) -> tuple[list[dict[str, Any]], list[str]]:
    """Lines of *data* as JSON objects, and the problems of the lines that are not.

    SPEC §4.2 Numbers: a UTF-8 BOM before the first line is ignored; blank lines carry nothing.
    """
    events: list[dict[str, Any]] = []
    problems: list[str] = []
    for number, raw in enumerate(data.removeprefix(BOM).split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates,
                             parse_constant=_reject_constant)
        except (ValueError, UnicodeDecodeError) as exc:
            problems.append(f"line {number}: {exc}")
            continue
        if not isinstance(obj, dict):
            problems.append(f"line {number}: not an object")
            continue
        events.append(obj)
    return events, problems


def _ints(value: Any) -> Iterable[int]:
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _ints(v)
    elif isinstance(value, list):
        for v in value:
            yield from _ints(v)


def stream_problems(events: Sequence[Mapping[str, Any]]) -> list[Violation]:
    """Problems of the stream as a whole: every claim fails every gate on them."""
    out: list[Violation] = []
    last: int | None = None
    for index, e in enumerate(events):
        seq = e.get("seq")
        at = seq if isinstance(seq, int) and not isinstance(seq, bool) else -1
        try:
            EVENT_ADAPTER.validate_json(json.dumps(dict(e)), strict=True)
        except (ValidationError, TypeError, ValueError) as exc:
            out.append(Violation(at, Rule.MALFORMED, f"event #{index} does not validate: "
                                 f"{str(exc).splitlines()[0:3]}"))
        if any(not INT64_MIN <= n <= INT64_MAX for n in _ints(dict(e))):
            out.append(Violation(at, Rule.NUMBER_RANGE, f"event #{index}: integer out of int64"))
        if isinstance(seq, int) and not isinstance(seq, bool):
            if not 0 <= seq <= INT64_MAX:
                out.append(Violation(at, Rule.NUMBER_RANGE, "seq outside 0 .. 2^63-1"))
            if last is not None and seq <= last:
                out.append(Violation(at, Rule.SEQ_ORDER, f"seq {seq} after {last}"))
            last = seq
    return out


# --- predicates ---------------------------------------------------------------------------------

def holds_from_numbers(footprint: int, predicate: Mapping[str, Any], surviving: Any,
                       leading: Any) -> bool:
    """Whether the event's numbers prove the accepted predicate (SPEC §2, §4.2 Predicates).

    Known present: positions 0..L-1; all F positions when S == F; every position but L when
    S == F-1. Numbers that contradict each other prove nothing.
    """
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in (surviving, leading)):
        return False
    kind, blocks = predicate.get("kind"), predicate.get("blocks")
    start = predicate.get("start") or 0
    if not isinstance(blocks, int) or not isinstance(start, int):
        return False
    s, lead, f = surviving, leading, footprint
    if s > f or lead > s or (s == f and lead != f):
        return False
    needed = range(start, start + blocks)
    if kind == "leading_prefix_at_least":
        return lead >= blocks
    if kind != "contiguous_range" or start < 0 or start + blocks > f:
        return False
    if s == f:
        return True
    if s == f - 1:
        return lead not in needed
    return all(p < lead for p in needed)


def needed_positions(predicate: Mapping[str, Any]) -> range:
    start = predicate.get("start") or 0
    blocks = predicate.get("blocks") or 0
    if predicate.get("kind") == "leading_prefix_at_least":
        start = 0
    return range(start, start + blocks)


# --- requests -----------------------------------------------------------------------------------

@dataclass
class _Request:
    scope: str | None = None
    started_at: int | None = None        # index of its (first) request_started
    finished_at: int | None = None       # index of its first request_finished
    finish_status: Any = None
    violations: list[Violation] = field(default_factory=list)


def _defining(e: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in e.items() if k not in NOT_DEFINING}


def _failed_here(e: Mapping[str, Any]) -> bool:
    """A failure of the claim its envelope names (SPEC §4.1: store/load failure; §4.2: the
    scheduler's failure branch)."""
    kind = e.get("event")
    if kind in ("kv_store_finished", "kv_load_finished"):
        return e.get("success") is not True
    if kind == "kv_load_failed":
        return bool(e.get("invalid_block_ids"))
    return kind == "scheduler_load_failure"


def answered_failures(events: Sequence[Mapping[str, Any]], request: str,
                      before: int) -> set[str]:
    """SPEC §4.3: the claims whose failure on *request* an outcome answered before index
    *before* (its finish): a failure of the claim named on the request, then a refusal of the
    request naming the claim, or the claim's demotion, expiry or harm."""
    failed: set[str] = set()
    answered: set[str] = set()
    for e in events[:before]:
        c = e.get("claim_id")
        if e.get("request_id") == request and isinstance(c, str) and _failed_here(e):
            failed.add(c)
        outcome = e.get("outcome_claim_id") if e.get("event") == "active_request_refused" \
            else (c if e.get("event") in MODE_OUTCOMES else None)
        mine = e.get("event") in MODE_OUTCOMES or e.get("request_id") == request
        if mine and outcome in failed:
            answered.add(outcome)
    return answered


def _late_record(events: Sequence[Mapping[str, Any]], index: int, request: str,
                 finished_at: int) -> bool:
    """SPEC §4.3: a late record of a failure an outcome answered before the request's finish:
    ``kv_load_failed`` naming the failed job (a job the request loaded for that claim), the
    claim's ``claim_restore_failed``, or a refusal of the request naming the claim repeated."""
    e = events[index]
    answered = answered_failures(events, request, finished_at)
    kind = e.get("event")
    if kind == "claim_restore_failed":
        return e.get("claim_id") in answered
    if kind == "active_request_refused":
        return e.get("outcome_claim_id") in answered and any(
            x.get("event") == "active_request_refused" and x.get("request_id") == request
            and x.get("outcome_claim_id") == e.get("outcome_claim_id")
            for x in events[:finished_at])
    if kind != "kv_load_failed" or e.get("job_id") is None:
        return False
    loaded = {x.get("claim_id") for x in events[:finished_at]
              if x.get("event") in ("kv_load_started", "kv_load_finished")
              and x.get("request_id") == request and x.get("job_id") == e.get("job_id")}
    return any(c in answered and e.get("claim_id") in (None, c) for c in loaded)


def _carried_before(events: Sequence[Mapping[str, Any]], request: str, claim: Any,
                    before: int) -> bool:
    """SPEC §4.3: the request carried *claim* before index *before*."""
    return any(x.get("event") in CARRYING and x.get("request_id") == request
               and x.get("claim_id") == claim for x in events[:before])


def _requests(events: Sequence[Mapping[str, Any]]) -> dict[str, _Request]:
    """Per request id: its scope (first declaration), first finish, and its own violations."""
    out: dict[str, _Request] = defaultdict(_Request)
    started: set[str] = set()
    refused: dict[str, bool] = {}  # request -> refused (True) or only its fail branch fired
    for index, e in enumerate(events):
        r = e.get("request_id")
        if not isinstance(r, str):
            continue
        req, kind, seq = out[r], e.get("event"), _seq(e)
        if req.finished_at is not None and not (
                (kind in STORE_COMPLETIONS
                 and _carried_before(events, r, e.get("claim_id"), req.finished_at))
                or _late_record(events, index, r, req.finished_at)):
            late = kind in CHAIN or (kind == "kv_load_finished" and e.get("success") is not True)
            req.violations.append(Violation(
                seq, Rule.REQ_AFTER_FINISH if late else Rule.REQ_ACTS_AFTER_FINISH,
                f"{kind} of {r} after its first request_finished"))
        if kind == "request_started":
            if r in started:
                req.violations.append(Violation(seq, Rule.REQ_RESTART, f"{r} started again"))
            else:
                req.scope, req.started_at = e.get("owner_scope"), index
            started.add(r)
            continue
        if r not in started:
            req.violations.append(Violation(seq, Rule.REQ_NOT_STARTED,
                                            f"{kind} names {r} before its request_started"))
        if kind == "active_request_refused":
            refused[r] = True
        elif kind == "scheduler_load_failure" and e.get("policy") == "fail":
            refused.setdefault(r, False)
        if kind == "request_finished" and req.finished_at is None:
            req.finished_at, req.finish_status = index, e.get("status")
            if e.get("status") == "served" and r in refused:
                rule = Rule.REFUSED_SERVED if refused[r] else Rule.FAIL_BRANCH_SERVED
                req.violations.append(Violation(
                    seq, rule, f"{r} finishes served after it was refused"
                    + ("" if refused[r] else " (its policy=fail branch fired)")))
    return out


def is_failure_or_outcome(e: Mapping[str, Any]) -> bool:
    """SPEC §4.1 Attribution's list: store/load failure, restore failure, refusal, demotion,
    expiry, harm."""
    kind = e.get("event")
    if kind in ("kv_store_finished", "kv_load_finished"):
        return e.get("success") is not True
    return kind in ("kv_load_failed", "scheduler_load_failure", "claim_restore_failed",
                    "active_request_refused", "claim_demoted", "claim_expired", "claim_harmed")


def _unclaimed_failures(events: Sequence[Mapping[str, Any]]) -> list[Violation]:
    """Failures that name no claim: attribution cannot pass beside them (for any target)."""
    return [Violation(_seq(e), Rule.UNCLAIMED_FAILURE, f"{e.get('event')} names no claim",
                      frozenset({ATTRIBUTION}))
            for e in events if is_failure_or_outcome(e) and e.get("claim_id") is None
            and e.get("outcome_claim_id") is None and not e.get("blocking_claim_ids")]


def _seq(e: Mapping[str, Any]) -> int:
    seq = e.get("seq")
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else -1


# --- claims -------------------------------------------------------------------------------------

def names(e: Mapping[str, Any], claim: str) -> bool:
    """The event names *claim*: in its envelope, or as a refusal's outcome or blocker."""
    if e.get("claim_id") == claim or e.get("outcome_claim_id") == claim:
        return True
    blocking = e.get("blocking_claim_ids")
    return isinstance(blocking, list) and claim in blocking


def claims_named(events: Iterable[Mapping[str, Any]]) -> list[str]:
    found: dict[str, None] = {}
    for e in events:
        for c in (e.get("claim_id"), e.get("outcome_claim_id")):
            if isinstance(c, str):
                found[c] = None
        blocking = e.get("blocking_claim_ids")
        if isinstance(blocking, list):
            for c in blocking:
                if isinstance(c, str):
                    found[c] = None
    return list(found)


@dataclass
class _Cycle:
    label: Any
    request: str
    state: str = "required"          # required -> restored | failed -> reused
    source: Any = None
    ok_jobs: set[Any] = field(default_factory=set)
    voided: bool = False             # some successful load was voided


class _ClaimWalk:
    """One claim's history, walked in stream order under SPEC §4.2's rules."""

    def __init__(self, claim: str, events: Sequence[Mapping[str, Any]],
                 requests: Mapping[str, _Request]) -> None:
        self.claim, self.events, self.requests = claim, events, requests
        self.out: list[Violation] = []
        self.accepted: Mapping[str, Any] | None = None
        accepts = [e for e in events
                   if e.get("event") == "claim_accepted" and e.get("claim_id") == claim]
        self.carrying = accepts[0].get("request_id") if accepts else None
        self.scope = self._claim_scope(events, accepts)
        self.identity: dict[str, Any] = {}
        self.mode: Any = None
        self.footprint = 0
        self.predicate: Mapping[str, Any] = {}
        self.terminal: str | None = None
        self.materialized = False        # a holding materialization happened
        self.resident = False            # ... and no offload or loss since
        self.offloaded = False
        self.stored_tiers: set[Any] = set()
        self.max_cycle: int | None = None
        self.max_copy: int | None = None  # largest label of a store or claim_offloaded
        self.cycles: dict[str, _Cycle] = {}  # the latest cycle of each request
        self.failures: list[tuple[int, str]] = []  # (index, request) of substrate failures
        self.outcomes: dict[str, list[int]] = defaultdict(list)  # request -> restore_failed idx
        self.failure_requests: set[str] = set()
        self.refusal_arbiters: list[Any] = []
        self.index = 0  # of the event being walked

    def bad(self, e: Mapping[str, Any], rule: Rule, why: str,
            gates: frozenset[str] = ALL) -> None:
        self.out.append(Violation(_seq(e), rule, why, gates))

    def _claim_scope(self, events: Sequence[Mapping[str, Any]],
                     accepts: list[Mapping[str, Any]]) -> Any:
        if accepts and accepts[0].get("owner_scope") is not None:
            return accepts[0].get("owner_scope")
        for e in events:
            if e.get("event") == "claim_submitted" and e.get("claim_id") == self.claim \
                    and e.get("owner_scope") is not None:
                return e.get("owner_scope")
        return None

    # --- the walk ---
    def run(self) -> list[Violation]:
        seen_accept = False
        first_seq: int | None = None
        for index, e in enumerate(self.events):
            if not names(e, self.claim) and e.get("event") != "observation_gap":
                continue
            if first_seq is None and e.get("event") != "observation_gap":
                first_seq = _seq(e)
            kind = e.get("event")
            if kind == "observation_gap":  # names no claim: it concerns every open one
                if seen_accept and self.terminal is None:
                    self.bad(e, Rule.OBSERVATION_GAP, "the emitter missed part of the open "
                             "claim's history")
                continue
            if kind == "claim_accepted" and e.get("claim_id") == self.claim:
                self.accept(e, first=not seen_accept)
                seen_accept = True
                continue
            if not seen_accept:
                self.before_accept(e, kind)
                continue
            self.identity_of(e)
            self.index = index
            self.step(index, e, kind)
        if not seen_accept:
            self.out.append(Violation(first_seq if first_seq is not None else -1,
                                      Rule.NOT_ACCEPTED, "the claim is never accepted"))
        else:
            self.at_end()
        return self.out

    def before_accept(self, e: Mapping[str, Any], kind: Any) -> None:
        if kind == "claim_submitted" and e.get("claim_id") == self.claim:
            self.identity_of(e)
            scope = e.get("owner_scope")
            if scope is not None and self.scope is not None and scope != self.scope:
                self.bad(e, Rule.AMBIGUOUS, "claim_submitted owner_scope differs from the "
                         "claim's owner scope")
            return
        if kind == "request_started" and e.get("request_id") == self.carrying \
                and self.carrying is not None:
            return
        self.bad(e, Rule.BEFORE_ACCEPT, f"{kind} names the claim before claim_accepted")

    def identity_of(self, e: Mapping[str, Any]) -> None:
        if not str(e.get("event", "")).startswith("claim_") or e.get("claim_id") != self.claim:
            return
        for name in IDENTITY:
            value = e.get(name)
            if value is None:
                continue
            if name not in self.identity:
                self.identity[name] = value
            elif self.identity[name] != value:
                self.bad(e, Rule.AMBIGUOUS, f"{name} takes a second value")

    def accept(self, e: Mapping[str, Any], first: bool) -> None:
        if not first:
            assert self.accepted is not None
            a, b = _defining(self.accepted), _defining(e)
            if a != b:
                changed = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
                self.bad(e, Rule.AMBIGUOUS, f"second claim_accepted changes {changed}")
            return
        self.accepted = e
        self.identity_of(e)
        self.mode = e.get("protection_mode")
        if self.mode not in CLAIM_MODES:
            self.bad(e, Rule.MODE, f"protection_mode {self.mode!r} is not a claim mode")
        if e.get("registration") != "pre_registered":
            self.bad(e, Rule.POST_HOC, "registration is not pre_registered")
        predicate = e.get("predicate")
        self.predicate = predicate if isinstance(predicate, dict) else {}
        if e.get("predicate_id") is not None and self.predicate.get("id") != e.get("predicate_id"):
            self.bad(e, Rule.PREDICATE_FIXED, "predicate_id differs from the predicate's id")
        footprint = e.get("footprint_blocks")
        self.footprint = footprint if isinstance(footprint, int) else 0
        submitted = [x for x in self.events if x.get("event") == "claim_submitted"
                     and x.get("claim_id") == self.claim and x.get("owner_scope") is not None]
        if e.get("owner_scope") is not None and any(
                x.get("owner_scope") != e.get("owner_scope") for x in submitted):
            self.bad(e, Rule.AMBIGUOUS, "claim_accepted and claim_submitted owner scopes differ")

    def step(self, index: int, e: Mapping[str, Any], kind: Any) -> None:
        r = e.get("request_id")
        mine = e.get("claim_id") == self.claim
        if is_failure_or_outcome(e):
            self.bad(e, Rule.NAMED_BY_FAILURE, f"{kind} names the claim", NON_TARGET_ONLY)
        if kind in ("active_request_refused", "active_request_deferred"):
            self.carrier(index, e)
        if kind == "active_request_refused":
            self.refusal(index, e)
            return
        if not mine:
            return
        if self.terminal is not None and self._forbidden_after_terminal(e, kind):
            self.bad(e, Rule.AFTER_TERMINAL, f"{kind} after the claim is {self.terminal}")
            return
        if kind == "claim_submitted":
            self.bad(e, Rule.SUBMIT_ORDER, "claim_submitted after claim_accepted")
        elif kind == "claim_rejected":
            self.bad(e, Rule.SUBMIT_ORDER, "claim_rejected after claim_accepted")
        elif kind == "claim_materialized":
            self.materialization(e)
        elif kind == "block_evicted":
            position = e.get("position")
            if position is None or position in needed_positions(self.predicate):
                self.loss(e, "eviction of a needed position")
        elif kind in ("kv_store_started", "kv_store_finished"):
            self.store(e, kind)
        elif kind == "claim_offloaded":
            self.offload(e)
        elif kind == "claim_restore_required":
            self.restore_required(e, r)
        elif kind in LOAD_EVENTS:
            self.load(index, e, kind, r)
        elif kind == "claim_restored":
            self.restored(e, r)
        elif kind == "claim_reused":
            self.reused(e, r)
        elif kind == "claim_restore_failed":
            self.restore_failed(index, e, r)
        elif kind in TERMINAL_EVENTS:
            if kind in ("claim_expired", "claim_demoted") and not self.materialized:
                self.bad(e, Rule.VACUOUS_PATH, f"{kind} before any holding materialization")
            self.terminal = self.terminal or TERMINAL_EVENTS[kind]
            self.resident = False
        elif kind == "claim_block_lost_after_release" and self.terminal is None:
            self.bad(e, Rule.LOST_BEFORE_RELEASE, "lost 'after release' before any end")

    @staticmethod
    def _forbidden_after_terminal(e: Mapping[str, Any], kind: Any) -> bool:
        if kind == "kv_load_finished":
            return e.get("success") is True
        return kind in ("claim_materialized", "kv_store_started", "kv_store_finished",
                        "claim_offloaded", "claim_restore_required", "claim_restored",
                        "claim_reused", "kv_load_started")

    # --- rules per event kind ---
    def materialization(self, e: Mapping[str, Any]) -> None:
        proven = holds_from_numbers(self.footprint, self.predicate, e.get("surviving"),
                                    e.get("leading"))
        # the numbers decide (SPEC §4.2 Predicates); `holds: true` they do not prove is a
        # claim the event cannot back. READING: `holds: false` over proving numbers is the
        # emitter's understatement, not a violation.
        if e.get("holds") is True and not proven:
            self.bad(e, Rule.HOLDS_CONTRADICTION, "holds=true but the numbers do not prove "
                     "the predicate")
        if proven:
            self.materialized = self.resident = True
        else:
            self.loss(e, "an evaluation that does not hold")

    def loss(self, e: Mapping[str, Any], what: str) -> None:
        if self.terminal is not None or not self.resident:
            return
        self.resident = False
        if self.mode == "offloadable" and self.offloaded and self.stored_tiers:
            return  # a stored, offloaded copy is held
        self.bad(e, Rule.SILENT_LOSS, f"{what} with no {self._promised()} before it")

    def _promised(self) -> str:
        return {"soft_priority": "harm", "expiring": "expiry", "demotable": "demotion",
                "offloadable": "stored, offloaded copy"}.get(str(self.mode), "outcome (never)")

    def _label(self, e: Mapping[str, Any]) -> int | None:
        g = e.get("generation")
        return g if isinstance(g, int) and not isinstance(g, bool) else None

    def store(self, e: Mapping[str, Any], kind: str) -> None:
        if not self.materialized:
            self.bad(e, Rule.STORE_ORDER, f"{kind} before a holding claim_materialized")
        if e.get("from_tier") == e.get("to_tier"):
            self.bad(e, Rule.STORE_TIER, "store to the tier it comes from")
        self.copy_label(e)
        if kind == "kv_store_finished":
            if e.get("success") is True:
                if self.materialized:
                    self.stored_tiers.add(e.get("to_tier"))
            elif e.get("request_id") is None:
                self.bad(e, Rule.FAILURE_NO_REQUEST, "store failure names no request")

    def copy_label(self, e: Mapping[str, Any]) -> None:
        g = self._label(e)
        if g is None:
            return
        if self.max_cycle is not None and g < self.max_cycle:
            self.bad(e, Rule.LABEL_ORDER, f"copy labelled {g} after cycle {self.max_cycle}")
        self.max_copy = g if self.max_copy is None else max(self.max_copy, g)

    def offload(self, e: Mapping[str, Any]) -> None:
        if not self.materialized:
            self.bad(e, Rule.OFFLOAD_ORDER, "claim_offloaded before a holding claim_materialized")
        elif e.get("to_tier") not in self.stored_tiers:
            self.bad(e, Rule.OFFLOAD_NO_STORE, f"claim_offloaded to {e.get('to_tier')!r}, which "
                     "no successful store of the claim wrote")
        self.copy_label(e)
        self.offloaded = True
        self.resident = False

    def scope_ok(self, e: Mapping[str, Any], r: Any, what: str) -> None:
        req = self.requests.get(r) if isinstance(r, str) else None
        # the scope the request has declared by now (a later start declares it too late)
        scope = req.scope if req is not None and req.started_at is not None \
            and req.started_at < self.index else None
        # SPEC §4.3: an unscoped claim is restored or reused only by unscoped requests
        if scope != self.scope:
            self.bad(e, Rule.SCOPE, f"{what} by a request of scope {scope!r}, claim's is "
                     f"{self.scope!r}")

    def restore_required(self, e: Mapping[str, Any], r: Any) -> None:
        if not isinstance(r, str):
            self.bad(e, Rule.CYCLE_ORDER, "claim_restore_required names no request")
            return
        self.scope_ok(e, r, "restore")
        if not self.offloaded:
            self.bad(e, Rule.RESTORE_NO_COPY, "restore required with no offloaded copy")
        elif not self.stored_tiers:
            self.bad(e, Rule.RESTORE_NO_STORE, "restore required of an offload no store wrote")
        elif e.get("from_tier") not in self.stored_tiers:
            self.bad(e, Rule.RESTORE_TIER, f"restore from {e.get('from_tier')!r}, the copy is on "
                     f"{sorted(map(str, self.stored_tiers))}")
        g = self._label(e)
        if g is not None:
            if self.max_cycle is not None and g <= self.max_cycle:
                self.bad(e, Rule.LABEL_ORDER, f"cycle {g} after cycle {self.max_cycle}")
            if self.max_copy is not None and g < self.max_copy:
                self.bad(e, Rule.LABEL_ORDER, f"cycle {g} after a copy labelled {self.max_copy}")
            self.max_cycle = g if self.max_cycle is None else max(self.max_cycle, g)
        self.cycles[r] = _Cycle(g, r)

    def cycle_of(self, e: Mapping[str, Any], r: Any, what: str) -> _Cycle | None:
        cycle = self.cycles.get(r) if isinstance(r, str) else None
        rule = Rule.CYCLE_ORDER
        if what == "load":
            branch = e.get("event") == "scheduler_load_failure"
            rule = Rule.FAILURE_OUTSIDE_CYCLE if branch else Rule.LOAD_OUTSIDE_CYCLE
            # SPEC §4.3: the failed job's kv_load_failed may follow the cycle's restore failure
            record = e.get("event") == "kv_load_failed" and cycle is not None \
                and cycle.state == "failed"
            if cycle is not None and cycle.state in ("reused", "failed") and not record:
                cycle = None
                rule = Rule.FAILURE_OUTSIDE_CYCLE if branch else Rule.LOAD_AFTER_CYCLE
        if cycle is None:
            self.bad(e, rule, f"{e.get('event')} with no open restore cycle of the claim on "
                     f"request {r!r}")
        return cycle

    def load(self, index: int, e: Mapping[str, Any], kind: str, r: Any) -> None:
        failure = kind in ("kv_load_failed", "scheduler_load_failure") or (
            kind == "kv_load_finished" and e.get("success") is not True)
        if failure and not isinstance(r, str):
            self.bad(e, Rule.FAILURE_NO_REQUEST, f"{kind} names the claim but no request")
            return
        cycle = self.cycle_of(e, r, "load")
        if failure:
            assert isinstance(r, str)
            self.failures.append((index, r))
            self.failure_requests.add(r)
        if cycle is None:
            return
        g = self._label(e)
        if g is not None and g != cycle.label:
            self.bad(e, Rule.LABEL_CYCLE, f"{kind} labelled {g} in cycle {cycle.label}")
        if kind == "kv_load_finished" and e.get("success") is True:
            cycle.ok_jobs.add(_job(e.get("job_id")))
        elif kind == "kv_load_failed":
            job = e.get("job_id")
            before = len(cycle.ok_jobs)
            if job is None:
                cycle.ok_jobs.clear()
            else:
                cycle.ok_jobs.discard(_job(job))
            cycle.voided = cycle.voided or len(cycle.ok_jobs) < before
            if cycle.state in ("restored", "reused") and cycle.source == "offload_tier" \
                    and cycle.voided and not cycle.ok_jobs:
                self.bad(e, Rule.RESTORE_VOIDED, "voids the load the restore came from")
        elif kind == "kv_load_finished":
            cycle.voided = True  # a failed load: the restore has no evidence from it

    def restored(self, e: Mapping[str, Any], r: Any) -> None:
        cycle = self.cycle_of(e, r, "restored")
        if cycle is None:
            return
        self.scope_ok(e, r, "restore")
        g = self._label(e)
        if g != cycle.label:
            self.bad(e, Rule.LABEL_CYCLE, f"claim_restored labelled {g} in cycle {cycle.label}")
        if cycle.state != "required":
            self.bad(e, Rule.CYCLE_ORDER, f"claim_restored in a cycle already {cycle.state}")
            return
        if e.get("source") == "offload_tier" and cycle.voided and not cycle.ok_jobs:
            self.bad(e, Rule.RESTORE_VOIDED, "restored from the offload tier after its loads "
                     "failed or were voided")
        cycle.state, cycle.source = "restored", e.get("source")

    def reused(self, e: Mapping[str, Any], r: Any) -> None:
        self.scope_ok(e, r, "reuse")
        g = self._label(e)
        cycle = self.cycles.get(r) if isinstance(r, str) else None
        if cycle is not None and cycle.label == g and cycle.source == "offload_tier" \
                and cycle.state in ("restored", "reused"):
            cycle.state = "reused"
            return
        if self.resident:
            floor = max((x for x in (self.max_cycle, self.max_copy) if x is not None),
                        default=None)
            if g is not None and floor is not None and g < floor:
                self.bad(e, Rule.LABEL_ORDER, f"reuse labelled {g} after label {floor}")
            return
        self.bad(e, Rule.REUSE_ORDER, f"claim_reused (generation {g}) with no "
                 "restore from the offload tier of that generation on this request, and not "
                 "resident since a materialization")

    def restore_failed(self, index: int, e: Mapping[str, Any], r: Any) -> None:
        if e.get("outcome_claim_id") != self.claim:
            self.bad(e, Rule.OUTCOME_ENVELOPE, "outcome_claim_id differs from the envelope's")
        if not isinstance(r, str):
            self.bad(e, Rule.FAILURE_NO_REQUEST, "claim_restore_failed names no request")
            return
        self.failure_requests.add(r)
        cycle = self.cycle_of(e, r, "restore_failed")
        if cycle is not None:
            g = self._label(e)
            if g != cycle.label:
                self.bad(e, Rule.LABEL_CYCLE,
                         f"claim_restore_failed labelled {g} in cycle {cycle.label}")
            if cycle.state != "required":
                self.bad(e, Rule.CYCLE_ORDER, f"claim_restore_failed in a cycle already "
                         f"{cycle.state}")
            cycle.state = "failed"
        if e.get("outcome_claim_id") == self.claim:
            self.outcomes[r].append(index)
            self.terminal = self.terminal or "failed_closed"
            self.resident = False

    def carrier(self, index: int, e: Mapping[str, Any]) -> None:
        """SPEC §4.3: a refusal or deferral naming the claim is on a request that carries it,
        or, for hard_protected, on a conflicting request while the claim is resident."""
        r = e.get("request_id")
        if isinstance(r, str) and _carried_before(self.events, r, self.claim, index):
            return
        if self.mode == "hard_protected" and self.resident and self.terminal is None:
            return
        self.bad(e, Rule.REFUSAL_NOT_CARRIER, f"{e.get('event')} of {r!r} names the claim, "
                 "which the request does not carry")

    def refusal(self, index: int, e: Mapping[str, Any]) -> None:
        if e.get("claim_id") != e.get("outcome_claim_id"):
            self.bad(e, Rule.OUTCOME_ENVELOPE, "refusal's envelope claim_id differs from its "
                     "outcome_claim_id")
        if e.get("outcome_claim_id") == self.claim:
            self.refusal_arbiters.append(e.get("arbiter"))
        if e.get("blocking_claim_ids") != [e.get("outcome_claim_id")]:
            self.bad(e, Rule.SMEAR, f"refusal blocks {e.get('blocking_claim_ids')}, its outcome "
                     f"names {e.get('outcome_claim_id')!r}", FAILURE_GATES)

    def at_end(self) -> None:
        self.served_or_explained()
        for index, r in self.failures:
            if self._record(index, r):
                continue  # SPEC §4.3: the record of an answered failure opens none
            why = self._unanswered(index, r)
            if why is not None:
                self.out.append(Violation(
                    _seq(self.events[index]), Rule.OPEN_FAILURE,
                    f"{self.events[index].get('event')} on {r}: {why}", FAILURE_GATES))
            self._restored_before_last_record(index, r)
        for r in sorted(self.failure_requests):
            req = self.requests.get(r)
            if req is None or req.finished_at is None:
                self.out.append(Violation(-1, Rule.UNFINISHED, f"failure request {r} never "
                                          "finishes in the stream", FAILURE_GATES))
        if self.mode == "hard_protected" and self.refusal_arbiters and all(
                a == "harness" for a in self.refusal_arbiters):
            self.out.append(Violation(-1, Rule.HARNESS_ONLY, "every refusal naming the claim "
                                      "is harness-arbitrated", frozenset({LIFECYCLE})))


    def _answer(self, e: Mapping[str, Any], r: str) -> bool:
        """SPEC §4.3: the attributed outcome: a refusal of the request naming the claim, or
        the mode's demotion, expiry or harm of the claim."""
        if e.get("event") == "active_request_refused":
            return e.get("request_id") == r and e.get("outcome_claim_id") == self.claim
        return e.get("event") in MODE_OUTCOMES and e.get("claim_id") == self.claim

    def _record(self, index: int, r: str) -> bool:
        """A kv_load_failed after an outcome answered an earlier failure on its request."""
        if self.events[index].get("event") != "kv_load_failed":
            return False
        earlier = [i for i, q in self.failures if q == r and i < index]
        return any(any(self._answer(self.events[j], r) for j in range(i + 1, index))
                   for i in earlier)

    def _unanswered(self, index: int, r: str) -> str | None:
        """SPEC §4.3: "a failure is open when no outcome answered it before the finish, or when
        a record it needs never comes" (its claim_restore_failed, unless the outcome ended the
        claim)."""
        req = self.requests.get(r)
        finish = req.finished_at if req is not None and req.finished_at is not None \
            and req.finished_at > index else len(self.events)
        answers = [j for j in range(index + 1, finish) if self._answer(self.events[j], r)]
        if not answers:
            return "no outcome (refusal, demotion, expiry, harm) answered it before the finish"
        if any(self.events[j].get("event") in MODE_OUTCOMES for j in answers):
            return None
        if any(j > index for j in self.outcomes.get(r, ())):
            return None
        return "its claim_restore_failed never comes"

    def _restored_before_last_record(self, index: int, r: str) -> None:
        """SPEC §4.3: nothing of the claim is restored or reused between the failure and its
        last record (its restore failure, the failed job's report, a repeated refusal)."""
        records = [j for j in range(index + 1, len(self.events))
                   if self.events[j].get("request_id") == r and (
                       j in self.outcomes.get(r, ())
                       or (self.events[j].get("event") == "kv_load_failed"
                           and self.events[j].get("claim_id") == self.claim)
                       or (self.events[j].get("event") == "active_request_refused"
                           and self.events[j].get("outcome_claim_id") == self.claim))]
        if not records:
            return
        for k in range(index + 1, records[-1]):
            e = self.events[k]
            if e.get("claim_id") == self.claim and e.get("event") in ("claim_restored",
                                                                       "claim_reused"):
                self.out.append(Violation(_seq(e), Rule.RESTORED_BEFORE_RECORD,
                                          f"{e.get('event')} before the last record of the "
                                          f"failure on {r}"))

    def served_or_explained(self) -> None:
        """SPEC §4.2 Attribution: a request that carries the claim (READING: any request whose
        events name it in their envelope) finishes served, or an outcome on it names the claim."""
        carried: dict[str, None] = {}
        explained: set[str] = set()
        for e in self.events:
            r = e.get("request_id")
            if not isinstance(r, str):
                continue
            if e.get("claim_id") == self.claim and e.get("event") != "active_request_refused":
                carried[r] = None
            if e.get("outcome_claim_id") == self.claim or (
                    e.get("claim_id") == self.claim and e.get("event") in TERMINAL_EVENTS):
                explained.add(r)
        for r in carried:
            req = self.requests.get(r)
            if req is None or req.finished_at is None:
                continue  # it did not finish (yet): nothing finished other than served
            status = req.finish_status
            if status != "served" and r not in explained:
                self.out.append(Violation(-1, Rule.NOT_SERVED, f"{r} names the claim and "
                                          f"finishes {status} with no outcome naming it",
                                          NON_TARGET_ONLY))


def _job(job: Any) -> Any:
    return ("int", job) if isinstance(job, int) else ("str", job)


def judge(events: Sequence[Mapping[str, Any]]) -> dict[str, Verdict]:
    """Rule on every claim the stream names: legal, or the violations with their seqs."""
    stream = stream_problems(events) + _unclaimed_failures(events)
    requests = _requests(events)
    verdicts: dict[str, Verdict] = {}
    for claim in claims_named(events):
        verdict = Verdict(claim, list(stream))
        verdict.found.extend(_ClaimWalk(claim, events, requests).run())
        named = {e.get("request_id") for e in events
                 if names(e, claim) and isinstance(e.get("request_id"), str)}
        for r in sorted(named):
            verdict.found.extend(requests[r].violations)
        verdicts[claim] = verdict
    return verdicts


def judge_bytes(data: bytes) -> dict[str, Verdict]:
    """:func:`judge` over the bytes of a trace file; unreadable lines condemn every claim."""
    events, problems = parse(data)
    verdicts = judge(events)
    for verdict in verdicts.values():
        verdict.found.extend(Violation(-1, Rule.MALFORMED, p) for p in problems)
    return verdicts
