"""The fleet view's shared vocabulary: which events decide a request, how a replica's stream is
opened and named, and the located problems both implementations report.

Both the reference (:mod:`.semantics`) and the streaming gate (:mod:`.gate`) read streams with
the project's strict reader and build problems with the functions here, so that equal verdicts
are equal values down to the message text; *deciding* which problems exist is theirs alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from residentkv.codes import lookup
from residentkv.errors import TraceReadError
from residentkv.fleet.model import Decision, FleetProblem
from residentkv.model.vocabulary import FleetRequirement
from residentkv.trace.gates import IllegalStep
from residentkv.trace.reader import TraceReader
from residentkv.trace.tracker import ENDINGS as TRACKER_ENDINGS

#: a v1 event: a pydantic model of residentkv.model.events, or its fast-decoded twin
Event = Any

R = FleetRequirement
IDENTIFIED = R.REPLICAS_IDENTIFIED.value
SINGLE_HOME = R.CLAIM_SINGLE_HOME.value
ONE_OUTCOME = R.ONE_OUTCOME_PER_CLAIMED_REQUEST.value
NO_CROSS_TENANT = R.NO_CROSS_TENANT.value
LEGAL = R.LEGAL_TRANSITIONS.value

#: event type -> the decision it makes for the request it names
DECISION_OF: dict[str, Decision] = {
    "claim_accepted": "accepted",
    "claim_rejected": "rejected",
    "claim_reused": "reused",
    "active_request_refused": "refused",
    "claim_restore_failed": "refused",
}
#: decisions only a claim-carrying request can receive (a refusal may also hit an ordinary
#: request blocked by a claim: that is a capacity conflict, judged by the single-stream gates)
CLAIMED_ONLY = frozenset({"claim_accepted", "claim_rejected", "claim_reused"})
#: events that end a claim in its home stream: the lifecycle's endings, and harm (a harmed
#: claim is no longer held, whatever its mode does next)
ENDINGS = TRACKER_ENDINGS | {"claim_harmed"}
#: events that hand a claim's KV to a request
HANDOVERS = frozenset({"claim_restored", "claim_reused"})


def is_fallback(e: Event) -> bool:
    return bool(e.event == "claim_restored" and e.source == "fallback_recompute")


def names_claim(e: Event, claim: str) -> bool:
    """Whether decision *e* is about *claim*, the claim its request carries. A rejection may
    leave the claim unnamed: it is about the request (whose ``claim_ref`` says which claim it
    asked for). Naming the claim would decide it -- a second decision where the replica decided
    it before (SPEC §4.2), and, for a reference, a decision by a request that may not own the
    claim: a reference never decides one (SPEC §9.1, other tenants change nothing)."""
    if e.claim_id == claim:
        return True
    return e.event == "claim_rejected" and e.claim_id is None


def replica_name(e: Event) -> str | None:
    """The replica a ``stream_started`` names; None when absent or blank."""
    name = getattr(e, "replica", None)
    return name if isinstance(name, str) and name.strip() else None


# ------------------------------------------------------------------------------ reading


class OpenedStream:
    """One replica's stream, opened for one pass: its valid ``(line, event)`` pairs, then the
    reader's problems (available once the pass is over)."""

    def __init__(self, path: str | Path, *, fast: bool) -> None:
        self.path = str(path)
        self.events_read = 0
        self.usable = False
        self.problems: list[FleetProblem] = []
        self.hidden = 0  # reader problems counted but not kept
        self._reader: TraceReader | None = TraceReader(path, fast=fast)

    def __iter__(self) -> Iterator[tuple[int, Event]]:
        reader = self._reader
        if reader is None:
            return
        self._reader = None  # one pass
        try:
            for event in reader.events():
                yield reader.line, event
        except TraceReadError as e:
            self.problems.append(_read_error(self.path, e))
            return
        self.events_read = reader.events_read
        self.problems += [reader_problem(self.path, f.code, f.message, f.line, f.col)
                          for f in reader.problems]
        self.hidden = reader.problem_count - len(reader.problems)
        if reader.events_read == 0:
            self.problems.append(problem("T009", IDENTIFIED, "no valid event in the stream",
                                         path=self.path))
        self.usable = reader.events_read > 0


def _read_error(path: str, e: TraceReadError) -> FleetProblem:
    return problem(e.code, IDENTIFIED, e.message, path=path)


def read_all(path: str | Path) -> tuple[list[tuple[int, Event]], OpenedStream]:
    """Every valid event of one stream, read through the pydantic models (the reference)."""
    opened = OpenedStream(path, fast=False)
    return list(opened), opened


# ----------------------------------------------------------------------------- problems


def problem(code: str, requirement: str, message: str, *, path: str | None = None,
            line: int | None = None, col: int | None = None, request_id: str | None = None,
            claim_id: str | None = None, replica: str | None = None,
            illegal: IllegalStep | None = None) -> FleetProblem:
    """A located problem; a problem about a whole line is placed at its first column."""
    return FleetProblem(code=code, name=lookup(code).name, requirement=requirement,
                        message=message, path=path, line=line,
                        col=col if col is not None or line is None else 1,
                        request_id=request_id, claim_id=claim_id, replica=replica,
                        illegal=illegal)


def reader_problem(path: str, code: str, message: str, line: int | None,
                   col: int | None) -> FleetProblem:
    return problem(code, IDENTIFIED, message, path=path, line=line, col=col)


def sort_problems(problems: Iterable[FleetProblem], paths: list[str]) -> list[FleetProblem]:
    """Stream by stream (in the order given), then by line; fleet-wide problems last."""
    order = {p: i for i, p in reversed(list(enumerate(paths)))}

    def key(p: FleetProblem) -> tuple[int, int, int, str, str, str]:
        where = order.get(p.path, len(paths)) if p.path is not None else len(paths)
        return (where, p.line or 0, p.col or 0, p.code, p.requirement, p.message)

    return sorted(problems, key=key)


def empty_fleet() -> FleetProblem:
    return problem("F001", IDENTIFIED, "no stream given: a fleet needs at least one replica's "
                   "stream")


def no_provenance(path: str, line: int, event: str) -> FleetProblem:
    return problem("F002", IDENTIFIED, f"the stream opens with {event}, expected "
                   "stream_started naming the replica", path=path, line=line)


def unnamed_replica(path: str, line: int) -> FleetProblem:
    return problem("F003", IDENTIFIED, "stream_started names no replica; expected a non-empty "
                   "replica name", path=path, line=line)


def duplicate_replica(path: str, line: int, replica: str, first: str) -> FleetProblem:
    return problem("F004", IDENTIFIED, f"replica {replica!r} is already the replica of "
                   f"{first}; expected one stream per replica", path=path, line=line)


def two_homes(path: str, line: int, claim: str, home: str | None,
              home_path: str) -> FleetProblem:
    return problem("F005", SINGLE_HOME, f"claim {claim!r} is accepted here and on replica "
                   f"{home!r} ({home_path}), which accepted it first; expected one home",
                   path=path, line=line, claim_id=claim)


def no_decision(path: str, line: int, request: str, claim: str) -> FleetProblem:
    return problem("F006", ONE_OUTCOME, f"request {request!r} names claim {claim!r} but gets "
                   "no decision naming it (accepted, rejected, reused or refused)",
                   path=path, line=line, request_id=request, claim_id=claim)


def repeated_decision(path: str, line: int, request: str, claim: str,
                      event: str) -> FleetProblem:
    return problem("F007", ONE_OUTCOME, f"request {request!r}: {event} for claim {claim!r} a "
                   "second time; expected each decision event at most once", path=path,
                   line=line, request_id=request, claim_id=claim)


def conflicting_decision(path: str, line: int, request: str, claim: str, event: str,
                         first: str) -> FleetProblem:
    return problem("F007", ONE_OUTCOME, f"request {request!r}: {event} decides "
                   f"{DECISION_OF[event]} for claim {claim!r}, but it was already {first}; "
                   "expected exactly one decision", path=path, line=line, request_id=request,
                   claim_id=claim)


def other_claim(path: str, line: int, request: str, claim: str, event: str,
                named: str | None) -> FleetProblem:
    return problem("F008", ONE_OUTCOME, f"request {request!r} names claim {claim!r}, but its "
                   f"{event} names {'no claim' if named is None else repr(named)}",
                   path=path, line=line, request_id=request, claim_id=claim)


def after_finish(path: str, line: int, request: str, claim: str, event: str,
                 finish_line: int) -> FleetProblem:
    return problem("F009", ONE_OUTCOME, f"request {request!r}: {event} for claim {claim!r} "
                   f"comes after the request finished (line {finish_line})", path=path,
                   line=line, request_id=request, claim_id=claim)


def unfinished(path: str, line: int, request: str, claim: str) -> FleetProblem:
    return problem("F010", ONE_OUTCOME, f"request {request!r} (claim {claim!r}) never finishes "
                   "in this replica's stream", path=path, line=line, request_id=request,
                   claim_id=claim)


def fallback(path: str, line: int, request: str, claim: str | None) -> FleetProblem:
    return problem("F011", ONE_OUTCOME, f"request {request!r}: claim {claim!r} restored by "
                   "fallback_recompute, a silent recompute presented as the claim", path=path,
                   line=line, request_id=request, claim_id=claim)


def in_two_streams(path: str, line: int, request: str, claim: str,
                   other: str) -> FleetProblem:
    return problem("F012", ONE_OUTCOME, f"request {request!r} carries a claim_ref here and in "
                   f"{other}; expected one serving replica", path=path, line=line,
                   request_id=request, claim_id=claim)


def restarted(path: str, line: int, request: str, first_line: int) -> FleetProblem:
    return problem("F013", ONE_OUTCOME, f"request {request!r} started again (first started on "
                   f"line {first_line})", path=path, line=line, request_id=request)


def orphan(path: str, line: int, request: str | None, event: str,
           claim: str | None) -> FleetProblem:
    return problem("F014", ONE_OUTCOME, f"{event} for request {request!r}, which did not start "
                   "before it with a claim_ref in this stream", path=path, line=line,
                   request_id=request, claim_id=claim)


def claimed_without_id(path: str, line: int, claim: str) -> FleetProblem:
    return problem("F015", ONE_OUTCOME, f"request_started with claim_ref {claim!r} names no "
                   "request_id", path=path, line=line, claim_id=claim)


def no_claimed_request() -> FleetProblem:
    return problem("F016", ONE_OUTCOME, "no stream holds a request_started with a claim_ref; "
                   "the fleet shows nothing about claim outcomes")


def cross_tenant(path: str, line: int, request: str | None, claim: str, event: str,
                 owner: str | None, known: bool, claim_owner: str | None) -> FleetProblem:
    who = f"owner_scope {owner!r}" if known else "no request_started before it"
    return problem("F017", NO_CROSS_TENANT, f"{event} of claim {claim!r} (owner_scope "
                   f"{claim_owner!r}) for request {request!r} with {who}", path=path,
                   line=line, request_id=request, claim_id=claim)


def illegal_transition(path: str, line: int | None, replica: str | None, claim: str,
                       step: IllegalStep) -> FleetProblem:
    return problem("F018", LEGAL, f"replica {replica!r}: claim {claim!r}: seq {step.seq}: "
                   f"{step.event} in state {step.state} is {step.violation} ({step.why})",
                   path=path, line=line, claim_id=claim, replica=replica, illegal=step)
