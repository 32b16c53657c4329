"""The executable reference semantics of gate ``fleet_outcome`` (docs/fleet-view.md).

Every requirement is a plain question about the whole event lists of every stream: not
streaming, quadratic where that is clearer. It is the specification; :mod:`.gate` is its
bounded one-pass optimisation and must return the same :class:`FleetJudgement` on every fleet.

Conventions the two share (decided here, see docs/fleet-view.md):

- A request is ``(stream, incarnation, request_id)``: a replica's file may hold one stream per
  engine incarnation (SPEC §9.1), and each starts its request ids afresh. Its
  ``request_started`` is the first one of that id in the incarnation's stream, and it carries a
  claim when that event has a ``claim_ref``. Its *window* is every later event of that stream
  naming the request. A claim-carrying request its incarnation's death cut off (the next
  incarnation's ``stream_started`` follows with no ``stream_closed``) could not finish there.
- Streams are ordered as given for tie-breaks and for "first"; across streams, time is
  ``ts_ns`` (one shared clock is assumed).
- A claim's home is the stream of its earliest ``claim_accepted`` by ``ts_ns`` (ties: the
  earlier stream); its owner scope is that acceptance's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from residentkv.fleet import view as v
from residentkv.fleet.model import (
    Decision,
    FleetClaim,
    FleetJudgement,
    FleetLoss,
    FleetProblem,
    FleetRequest,
    FleetStream,
)
from residentkv.fleet.view import Event
from residentkv.trace.gates import check_events
from residentkv.trace.streams import StreamCursor, StreamEnd

Lines = list[tuple[int, Event]]


@dataclass
class Stream:
    """One replica's file as the reference sees it: every valid event with its line, each
    event's incarnation (the stream of the file that holds it) and how each stream ended."""

    index: int
    path: str
    events: Lines
    problems: list[FleetProblem]
    hidden: int
    usable: bool
    #: per event: the index of its incarnation's stream, and its position (SPEC §9.1)
    incarnation: list[int]
    positions: list[int]
    ends: list[StreamEnd]

    @property
    def replica(self) -> str | None:
        if self.events and self.events[0][1].event == "stream_started":
            return v.replica_name(self.events[0][1])
        return None

    def first_start(self, request: str | None, at: int, *, before: bool = False) -> int | None:
        """Position of the request's first ``request_started`` in the incarnation of the event
        at *at* (*before*: before it)."""
        k = self.incarnation[at]
        stop = at if before else len(self.events)
        for pos in range(self.incarnation.index(k), stop):
            e = self.events[pos][1]
            if self.incarnation[pos] != k:
                break
            if e.event == "request_started" and request is not None and e.request_id == request:
                return pos
        return None

    def cut_off(self, pos: int) -> bool:
        """Whether the incarnation of the event at *pos* died (the next one's stream_started
        follows it with no stream_closed)."""
        return self.ends[self.incarnation[pos]] is StreamEnd.RESTARTED

    @property
    def end_ts(self) -> int:
        """The time of the stream's end: after every event it recorded."""
        return max((int(e.ts_ns) for _, e in self.events), default=0)


@dataclass
class Row:
    """A claim-carrying request, with what the reference decided about it."""

    stream: Stream
    pos: int
    request_id: str
    claim: str
    decision: Decision | None = None
    reject_ts: int | None = None
    reject_line: int | None = None
    failed: bool = False

    @property
    def line(self) -> int:
        return self.stream.events[self.pos][0]


def load(paths: Sequence[str | Path]) -> list[Stream]:
    """Read every stream through the pydantic models."""
    streams = []
    for i, path in enumerate(paths):
        events, opened = v.read_all(path)
        cursor = StreamCursor()
        incarnation: list[int] = []
        positions: list[int] = []
        for _, e in events:
            placed = cursor.restart(e, positions[-1]) if cursor.opens(e) else cursor.enter(e)
            incarnation.append(len(cursor.spans) - 1)
            positions.append(placed.seq)
        cursor.finish()
        streams.append(Stream(i, str(path), events, opened.problems, opened.hidden,
                              opened.usable, incarnation, positions,
                              [s.end for s in cursor.spans]))
    return streams


def reference_fleet(paths: Sequence[str | Path]) -> FleetJudgement:
    """Judge gate ``fleet_outcome`` over the streams at *paths* (the reference)."""
    return judge_streams(load(paths))


def judge_streams(streams: list[Stream]) -> FleetJudgement:
    """The judgement of streams already read: every requirement, then what the fleet
    records."""
    problems = replicas_identified(streams)
    homes = claim_homes(streams)
    problems += single_home(streams, homes)
    rows, outcome = claimed_requests(streams)
    problems += outcome
    problems += cross_tenant(streams, homes)
    problems += legal_transitions(streams)
    claims = [claim_record(c, homes[c], rows) for c in sorted(homes)]
    paths = [s.path for s in streams]
    ordered = v.sort_problems(problems, paths)
    missing = sorted({p.requirement for p in ordered})
    return FleetJudgement(
        passed=not missing, missing=missing, problems=ordered,
        problem_count=len(ordered) + sum(s.hidden for s in streams),
        streams=[FleetStream(path=s.path, replica=s.replica, events=len(s.events),
                             usable=s.usable) for s in streams],
        claims=claims,
        requests=[FleetRequest(replica=r.stream.replica, path=r.stream.path,
                               request_id=r.request_id, claim_ref=r.claim,
                               decision=r.decision, passed=not r.failed, line=r.line)
                  for r in rows],
    )


# ------------------------------------------------------------------- replicas_identified


def replicas_identified(streams: list[Stream]) -> list[FleetProblem]:
    """Every stream is read without a problem, opens with ``stream_started`` naming a
    non-empty replica, and no two streams name the same replica."""
    out: list[FleetProblem] = [] if streams else [v.empty_fleet()]
    for s in streams:
        out += s.problems
        if not s.events:
            continue
        line, head = s.events[0]
        if head.event != "stream_started":
            out.append(v.no_provenance(s.path, line, head.event))
        elif s.replica is None:
            out.append(v.unnamed_replica(s.path, line))
        else:
            first = next(o for o in streams if o.replica == s.replica)
            if first is not s:
                out.append(v.duplicate_replica(s.path, line, s.replica, first.path))
    return out


# ---------------------------------------------------------------------- claim_single_home


@dataclass
class Accept:
    """A stream's first ``claim_accepted`` of one claim."""

    stream: Stream
    pos: int
    ts: int
    owner: str | None

    @property
    def line(self) -> int:
        return self.stream.events[self.pos][0]


def accepts_of(streams: list[Stream]) -> dict[str, list[Accept]]:
    """claim -> each stream's first acceptance of it, streams in the order given."""
    found: dict[str, list[Accept]] = {}
    for s in streams:
        claims = {e.claim_id for _, e in s.events
                  if e.event == "claim_accepted" and e.claim_id is not None}
        for c in claims:
            pos = next(i for i, (_, e) in enumerate(s.events)
                       if e.event == "claim_accepted" and e.claim_id == c)
            e = s.events[pos][1]
            found.setdefault(c, []).append(Accept(s, pos, int(e.ts_ns), e.owner_scope))
    for accepts in found.values():
        accepts.sort(key=lambda a: a.stream.index)
    return found


def claim_homes(streams: list[Stream]) -> dict[str, Accept]:
    """claim -> its home acceptance: the earliest by ``ts_ns``, ties to the earlier stream."""
    return {c: min(accepts, key=lambda a: (a.ts, a.stream.index))
            for c, accepts in accepts_of(streams).items()}


def single_home(streams: list[Stream], homes: dict[str, Accept]) -> list[FleetProblem]:
    """A claim is accepted on at most one stream: every other acceptance is a problem."""
    out = []
    for c, accepts in accepts_of(streams).items():
        home = homes[c]
        out += [v.two_homes(a.stream.path, a.line, c, home.stream.replica, home.stream.path)
                for a in accepts if a.stream is not home.stream]
    return out


# -------------------------------------------------------- one_outcome_per_claimed_request


def claimed_requests(streams: list[Stream]) -> tuple[list[Row], list[FleetProblem]]:
    """Every claim-carrying request gets exactly one decision naming its claim, before it
    finishes in its own stream, never by fallback recompute, and is served by one replica."""
    rows: list[Row] = []
    out: list[FleetProblem] = []
    restarts: dict[tuple[int, int, str], list[FleetProblem]] = {}
    for s in streams:
        for pos, (line, e) in enumerate(s.events):
            if e.event != "request_started":
                continue
            if e.request_id is None:
                if e.claim_ref is not None:
                    out.append(v.claimed_without_id(s.path, line, e.claim_ref))
                continue
            first = s.first_start(e.request_id, pos)
            assert first is not None
            if first == pos:
                if e.claim_ref is not None:
                    rows.append(Row(s, pos, e.request_id, e.claim_ref))
                continue
            head_line, head = s.events[first]
            if e.claim_ref is not None or head.claim_ref is not None:
                found = v.restarted(s.path, line, e.request_id, head_line)
                # a restart of a claimed request is a problem of that request
                key = ((s.index, first, e.request_id) if head.claim_ref is not None
                       else (-1, -1, ""))
                restarts.setdefault(key, []).append(found)
    out += restarts.pop((-1, -1, ""), [])
    for row in rows:
        of_row = judge_row(row, rows) + restarts.get((row.stream.index, row.pos,
                                                      row.request_id), [])
        row.failed = bool(of_row)
        out += of_row
    out += orphans(streams)
    if not rows:
        out.append(v.no_claimed_request())
    return rows, out


def window(row: Row) -> Lines:
    """The events of the row's stream (its incarnation's) after its start that name the
    request."""
    s, k = row.stream, row.stream.incarnation[row.pos]
    return [(line, e) for pos, (line, e) in enumerate(s.events) if pos > row.pos
            and s.incarnation[pos] == k and e.request_id == row.request_id]


def judge_row(row: Row, rows: list[Row]) -> list[FleetProblem]:
    s, r, c = row.stream, row.request_id, row.claim
    events = window(row)
    finish = next(((line, i) for i, (line, e) in enumerate(events)
                   if e.event == "request_finished"), None)
    out: list[FleetProblem] = []
    named: Lines = []
    for i, (line, e) in enumerate(events):
        if v.is_fallback(e):
            out.append(v.fallback(s.path, line, r, e.claim_id))
            continue
        if e.event not in v.DECISION_OF:
            continue
        if not v.names_claim(e, c):
            out.append(v.other_claim(s.path, line, r, c, e.event, e.claim_id))
            continue
        named.append((line, e))
        if finish is not None and i > finish[1]:
            out.append(v.after_finish(s.path, line, r, c, e.event, finish[0]))
    out += _kinds(row, named)
    if finish is None and not s.cut_off(row.pos):
        out.append(v.unfinished(s.path, row.line, r, c))
    # the first other stream carrying the same request id (rows are in stream order)
    other = next((o for o in rows if o.request_id == r and o.stream is not s), None)
    if other is not None:
        out.append(v.in_two_streams(s.path, row.line, r, c, other.stream.path))
    return out


def _kinds(row: Row, named: Lines) -> list[FleetProblem]:
    """One decision kind, each decision event at most once; sets the row's decision."""
    s, r, c = row.stream, row.request_id, row.claim
    if not named:
        return [v.no_decision(s.path, row.line, r, c)]
    out = []
    kinds = list(dict.fromkeys(v.DECISION_OF[e.event] for _, e in named))
    for i, (line, e) in enumerate(named):
        if any(o.event == e.event for _, o in named[:i]):
            out.append(v.repeated_decision(s.path, line, r, c, e.event))
        elif v.DECISION_OF[e.event] != kinds[0] and all(
                v.DECISION_OF[o.event] != v.DECISION_OF[e.event] for _, o in named[:i]):
            out.append(v.conflicting_decision(s.path, line, r, c, e.event, kinds[0]))
    row.decision = kinds[0] if len(kinds) == 1 else None
    rejection = next(((line, e) for line, e in named if e.event == "claim_rejected"), None)
    if rejection is not None:
        row.reject_line, row.reject_ts = rejection[0], int(rejection[1].ts_ns)
    return out


def orphans(streams: list[Stream]) -> list[FleetProblem]:
    """An accepted, rejected or reused decision belongs to a request that started earlier in
    the same stream carrying a claim_ref."""
    out = []
    for s in streams:
        for pos, (line, e) in enumerate(s.events):
            if e.event not in v.CLAIMED_ONLY:
                continue
            start = s.first_start(e.request_id, pos, before=True)
            if start is None or s.events[start][1].claim_ref is None:
                out.append(v.orphan(s.path, line, e.request_id, e.event, e.claim_id))
    return out


# ------------------------------------------------------------------------ no_cross_tenant


def cross_tenant(streams: list[Stream], homes: dict[str, Accept]) -> list[FleetProblem]:
    """No accepted claim is restored or reused, on any replica, for a request whose
    ``request_started`` (before the event, in the same stream) declares another owner scope;
    a request with no such start is of unknown owner, so never the claim's. One problem per
    request and claim, at its first offending event."""
    out = []
    for s in streams:
        seen: set[tuple[int, str | None, str]] = set()
        for pos, (line, e) in enumerate(s.events):
            if e.event not in v.HANDOVERS or e.claim_id not in homes:
                continue
            key = (s.incarnation[pos], e.request_id, e.claim_id)
            start = s.first_start(e.request_id, pos, before=True)
            owner = None if start is None else s.events[start][1].owner_scope
            claim_owner = homes[e.claim_id].owner
            if key in seen or (start is not None and owner == claim_owner):
                continue
            seen.add(key)
            out.append(v.cross_tenant(s.path, line, e.request_id, e.claim_id, e.event, owner,
                                      start is not None, claim_owner))
    return out


# ---------------------------------------------------------------------- legal_transitions


def legal_transitions(streams: list[Stream]) -> list[FleetProblem]:
    """SPEC §4.2, per replica: every claim the file names has a legal history there, as the
    single-stream gates judge it (their ``legal_transitions``, on that file alone, its
    incarnations' streams followed as SPEC §9.1 says). One problem per file and claim, at the
    claim's first illegal step (its seq a position in the file)."""
    out = []
    for s in streams:
        events = [e for _, e in s.events]
        lines = {p: line for p, (line, _) in zip(s.positions, s.events, strict=True)}
        for c in dict.fromkeys(e.claim_id for e in events if e.claim_id is not None):
            (result,) = check_events(events, ("observation",), claim_id=c)
            if result.illegal is not None:
                out.append(v.illegal_transition(s.path, lines.get(result.illegal.seq),
                                                s.replica, c, result.illegal))
    return out


# ----------------------------------------------------------------------------- findings


def claim_record(claim: str, home: Accept, rows: list[Row]) -> FleetClaim:
    """Where the claim lives and how it stands at the end: ended in its home stream, lost
    (open there, then rejected on another replica after the home stream's last event), or
    held."""
    h = home.stream
    ended = any(e.event in v.ENDINGS and e.claim_id == claim for _, e in h.events[home.pos:])
    status, loss = "ended" if ended else "held", None
    if not ended:
        late = [r for r in rows if r.claim == claim and r.stream is not h
                and r.decision == "rejected" and r.reject_ts is not None
                and r.reject_ts > h.end_ts]
        if late:
            first = min(late, key=lambda r: (r.reject_ts or 0, r.stream.index,
                                             r.reject_line or 0))
            status = "lost"
            loss = FleetLoss(replica=first.stream.replica, path=first.stream.path,
                             request_id=first.request_id, line=first.reject_line or 0,
                             ts_ns=first.reject_ts or 0)
    return FleetClaim(claim_id=claim, home=h.replica, home_path=h.path,
                      owner_scope=home.owner, status=status,
                      lost_by_request=loss.request_id if loss else None, lost_by=loss)
