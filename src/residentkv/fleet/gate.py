"""Gate ``fleet_outcome``, streaming: one pass over each replica's stream in turn.

The optimisation of :mod:`residentkv.fleet.semantics` (which it must equal on every fleet).
Nothing keeps events. Per stream, while it is read: each request id's first start (line, owner
scope, whether it carried a claim) and, per claim-carrying request, a handful of facts (the
decision kinds and events seen, the first rejection, the first finish). An *open obligation* —
a claim-carrying request still unfinished or undecided — stays in :attr:`_Pass.open` until it
finishes; afterwards only its compact record is kept (a late decision can still fail it). When a
stream ends, its per-request state is dropped and what the fleet still needs is kept: one row per
claim-carrying request, each claim's first acceptance per stream (with whether it ended there),
the stream's end time and each request's first handover of a claim (to judge owners once every
claim's home is known). Memory is O(claim-carrying requests + claims x replicas + handover
requests), never O(events).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from residentkv.fleet import view as v
from residentkv.fleet.legal import StreamLegality
from residentkv.fleet.model import (
    Decision,
    FleetClaim,
    FleetJudgement,
    FleetLoss,
    FleetProblem,
    FleetRequest,
    FleetStream,
)
from residentkv.fleet.view import Event, OpenedStream


@dataclass(slots=True)
class _Row:
    """A claim-carrying request: its public record, filled in as the stream is read."""

    stream: int
    path: str
    replica: str | None
    request_id: str
    claim: str
    line: int
    decision: Decision | None = None
    reject: tuple[int, int] | None = None  # (ts_ns, line) of its first claim_rejected
    failed: bool = False
    #: told of the first request of its id another replica's stream carries (F012)
    twinned: bool = False


@dataclass(slots=True)
class _Req:
    """The working state of one claim-carrying request within its stream."""

    row: _Row
    names: set[str] = field(default_factory=set)
    kinds: list[Decision] = field(default_factory=list)
    finish_line: int | None = None


@dataclass(slots=True)
class _Start:
    line: int
    claimed: bool
    owner: str | None


@dataclass(slots=True)
class _Handover:
    """A request's handovers of one claim: the first before its start (owner unknown) and
    the first after it (owner known)."""

    stream: int
    path: str
    request_id: str | None
    claim: str
    unknown: tuple[int, str] | None = None
    known: tuple[int, str, str | None] | None = None


@dataclass(slots=True)
class _Accept:
    claim: str
    stream: int
    path: str
    line: int
    ts: int
    owner: str | None
    ended: bool = False


class _Pass:
    """The state of one stream while it is read."""

    def __init__(self, gate: FleetGate, index: int, path: str) -> None:
        self.gate, self.index, self.path = gate, index, path
        self.events = 0
        self.replica: str | None = None
        self.end_ts: int | None = None
        self.starts: dict[str, _Start] = {}
        #: open obligations: claim-carrying requests not finished yet
        self.open: dict[str, _Req] = {}
        #: claim-carrying requests that finished (their verdict can only get worse)
        self.closed: dict[str, _Req] = {}
        self.accepts: dict[str, _Accept] = {}
        self.handovers: dict[tuple[str | None, str], _Handover] = {}
        self.legal = StreamLegality()
        #: SPEC §9.1: the file opened with stream_started (a later one opens the next
        #: incarnation's stream), and the current stream saw its stream_closed
        self.provenanced = False
        self.closing = False

    def feed(self, line: int, e: Event) -> None:
        """Take the next valid event of the stream."""
        if not self.events:
            self._head(line, e)
            self.provenanced = e.event == "stream_started"
        elif self.provenanced and e.event == "stream_started":
            self._next_incarnation()
        self.closing = self.closing or e.event == "stream_closed"
        self.events += 1
        ts = int(e.ts_ns)
        self.end_ts = ts if self.end_ts is None else max(self.end_ts, ts)
        self.legal.feed(line, e)
        name, r = e.event, e.request_id
        if name == "request_started":
            self._start(line, e)
            return
        req = None if r is None else self.open.get(r) or self.closed.get(r)
        if req is not None:
            self._window(req, line, e)
        if name in v.CLAIMED_ONLY and (r is None or not self._claimed(r)):
            self.gate.add(v.orphan(self.path, line, r, name, e.claim_id))
        self._claim_facts(line, e)

    def _claimed(self, r: str) -> bool:
        start = self.starts.get(r)
        return start is not None and start.claimed

    def _head(self, line: int, e: Event) -> None:
        if e.event != "stream_started":
            self.gate.add(v.no_provenance(self.path, line, e.event))
            return
        self.replica = v.replica_name(e)
        if self.replica is None:
            self.gate.add(v.unnamed_replica(self.path, line))
            return
        first = self.gate.replicas.setdefault(self.replica, self.path)
        if self.gate.replica_stream.setdefault(self.replica, self.index) != self.index:
            self.gate.add(v.duplicate_replica(self.path, line, self.replica, first))

    def _start(self, line: int, e: Event) -> None:
        r, claim = e.request_id, e.claim_ref
        if r is None:
            if claim is not None:
                self.gate.add(v.claimed_without_id(self.path, line, claim))
            return
        head = self.starts.get(r)
        if head is None:
            self.starts[r] = _Start(line, claim is not None, e.owner_scope)
            if claim is not None:
                row = self.gate.new_row(_Row(self.index, self.path, self.replica, r, claim,
                                             line))
                self.open[r] = _Req(row)
            return
        if claim is not None or head.claimed:
            found = v.restarted(self.path, line, r, head.line)
            req = self.open.get(r) or self.closed.get(r)
            self.gate.add(found, req.row if req is not None else None)

    def _window(self, req: _Req, line: int, e: Event) -> None:
        """An event of a claim-carrying request, after its start."""
        row = req.row
        if e.event == "request_finished":
            if req.finish_line is None:
                req.finish_line = line
                self.closed[row.request_id] = self.open.pop(row.request_id)
            return
        if v.is_fallback(e):
            self.gate.add(v.fallback(self.path, line, row.request_id, e.claim_id), row)
            return
        kind = v.DECISION_OF.get(e.event)
        if kind is None:
            return
        if not v.names_claim(e, row.claim):
            self.gate.add(v.other_claim(self.path, line, row.request_id, row.claim, e.event,
                                        e.claim_id), row)
            return
        if req.finish_line is not None:
            self.gate.add(v.after_finish(self.path, line, row.request_id, row.claim, e.event,
                                         req.finish_line), row)
        if e.event in req.names:
            self.gate.add(v.repeated_decision(self.path, line, row.request_id, row.claim,
                                              e.event), row)
        elif req.kinds and kind not in req.kinds:
            self.gate.add(v.conflicting_decision(self.path, line, row.request_id, row.claim,
                                                 e.event, req.kinds[0]), row)
        req.names.add(e.event)
        if kind not in req.kinds:
            req.kinds.append(kind)
        if e.event == "claim_rejected" and row.reject is None:
            row.reject = (int(e.ts_ns), line)

    def _claim_facts(self, line: int, e: Event) -> None:
        """Acceptances, endings and handovers: what the fleet judges once every stream is in."""
        c, name = e.claim_id, e.event
        if c is None:
            return
        if name == "claim_accepted" and c not in self.accepts:
            self.accepts[c] = _Accept(c, self.index, self.path, line, int(e.ts_ns), e.owner_scope)
        elif name in v.ENDINGS and c in self.accepts:
            self.accepts[c].ended = True
        elif name in v.HANDOVERS:
            self._handover(line, e, c)

    def _handover(self, line: int, e: Event, c: str) -> None:
        r = e.request_id
        h = self.handovers.get((r, c))
        if h is None:
            h = self.handovers[(r, c)] = _Handover(self.index, self.path, r, c)
        start = None if r is None else self.starts.get(r)
        if start is None:
            if h.unknown is None:
                h.unknown = (line, e.event)
        elif h.known is None:
            h.known = (line, e.event, start.owner)

    def _next_incarnation(self) -> None:
        """The next incarnation's stream begins: the current one's requests are settled (a
        request its death cut off could not finish) and forgotten: ids start afresh."""
        self._settle_requests(cut=not self.closing)
        self.gate.handovers += self.handovers.values()
        for kept in (self.starts, self.open, self.closed, self.handovers):
            kept.clear()
        self.closing = False

    def _settle_requests(self, *, cut: bool) -> None:
        for req in [*self.open.values(), *self.closed.values()]:
            self._settle(req, cut=cut)

    def end(self, opened: OpenedStream) -> FleetStream:
        """The stream is over: settle its requests, hand its claim facts to the fleet."""
        self._settle_requests(cut=False)
        for claim, step, line in self.legal.end():
            self.gate.add(v.illegal_transition(self.path, line, self.replica, claim, step))
        for found in opened.problems:
            self.gate.add(found)
        self.gate.hidden += opened.hidden
        self.gate.end_ts.append(self.end_ts or 0)
        for accept in self.accepts.values():
            self.gate.accepts.setdefault(accept.claim, []).append(accept)
        self.gate.handovers += self.handovers.values()
        return FleetStream(path=self.path, replica=self.replica, events=self.events,
                           usable=opened.usable)

    def _settle(self, req: _Req, *, cut: bool) -> None:
        row = req.row
        if not req.kinds:
            self.gate.add(v.no_decision(self.path, row.line, row.request_id, row.claim), row)
        row.decision = req.kinds[0] if len(req.kinds) == 1 else None
        if req.finish_line is None and not cut:
            self.gate.add(v.unfinished(self.path, row.line, row.request_id, row.claim), row)


class FleetGate:
    """Gate ``fleet_outcome`` fed one stream at a time (see :func:`judge_fleet`)."""

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = list(paths)
        self.problems: list[FleetProblem] = []
        self.hidden = 0
        self.rows: list[_Row] = []
        self.claimed: dict[str, list[_Row]] = {}
        self.replicas: dict[str, str] = {}  # replica name -> path of its first stream
        self.replica_stream: dict[str, int] = {}
        self.accepts: dict[str, list[_Accept]] = {}
        self.end_ts: list[int] = []
        self.handovers: list[_Handover] = []
        self.streams: list[FleetStream] = []
        self.current: _Pass | None = None

    def add(self, found: FleetProblem, row: _Row | None = None) -> None:
        """Record a problem; one attached to a claim-carrying request fails that request."""
        self.problems.append(found)
        if row is not None:
            row.failed = True

    def new_row(self, row: _Row) -> _Row:
        # one request id carried in two replicas' streams (its incarnations' streams in one
        # file start their ids afresh: a repeat there is another request)
        earlier = self.claimed.setdefault(row.request_id, [])
        others = [r for r in earlier if r.stream != row.stream]
        if others:
            self.add(v.in_two_streams(row.path, row.line, row.request_id, row.claim,
                                      others[0].path), row)
            row.twinned = True
        for first in others:  # each earlier carrier learns of its first twin
            if not first.twinned:
                first.twinned = True
                self.add(v.in_two_streams(first.path, first.line, first.request_id,
                                          first.claim, row.path), first)
        earlier.append(row)
        self.rows.append(row)
        return row

    def begin(self, path: str) -> _Pass:
        """Start reading the next stream."""
        self.current = _Pass(self, len(self.streams), path)
        return self.current

    def end(self, opened: OpenedStream) -> None:
        """The current stream is fully read."""
        assert self.current is not None
        self.streams.append(self.current.end(opened))
        self.current = None

    def open_requests(self) -> set[tuple[str, str]]:
        """(path, request_id) of the open obligations of the stream being read."""
        if self.current is None:
            return set()
        p = self.current
        return {(p.path, r) for r, req in [*p.open.items(), *p.closed.items()]
                if req.finish_line is None or not req.kinds}

    def result(self) -> FleetJudgement:
        """The judgement, once every stream is read."""
        if not self.streams:
            self.add(v.empty_fleet())
        homes = {c: min(accepts, key=lambda a: (a.ts, a.stream))
                 for c, accepts in self.accepts.items()}
        for c, accepts in self.accepts.items():
            home = homes[c]
            for a in accepts:
                if a is not home:
                    self.add(v.two_homes(a.path, a.line, c, self.streams[home.stream].replica,
                                         home.path))
        self._owners(homes)
        if not self.rows:
            self.add(v.no_claimed_request())
        problems = v.sort_problems(self.problems, self.paths)
        missing = sorted({p.requirement for p in problems})
        return FleetJudgement(
            passed=not missing, missing=missing, problems=problems,
            problem_count=len(problems) + self.hidden, streams=self.streams,
            claims=self._claims(homes),
            requests=[FleetRequest(replica=r.replica, path=r.path, request_id=r.request_id,
                                   claim_ref=r.claim, decision=r.decision, passed=not r.failed,
                                   line=r.line) for r in self.rows],
        )

    def _owners(self, homes: dict[str, _Accept]) -> None:
        for h in self.handovers:
            home = homes.get(h.claim)
            if home is None:
                continue
            if h.unknown is not None:
                line, event = h.unknown
                self.add(v.cross_tenant(h.path, line, h.request_id, h.claim, event, None,
                                        False, home.owner))
            elif h.known is not None and h.known[2] != home.owner:
                line, event, owner = h.known
                self.add(v.cross_tenant(h.path, line, h.request_id, h.claim, event, owner,
                                        True, home.owner))

    def _claims(self, homes: dict[str, _Accept]) -> list[FleetClaim]:
        rejected: dict[str, list[_Row]] = {}
        for r in self.rows:
            if r.decision == "rejected" and r.reject is not None:
                rejected.setdefault(r.claim, []).append(r)
        out = []
        for c in sorted(homes):
            home = homes[c]
            status, loss = ("ended" if home.ended else "held"), None
            end = self.end_ts[home.stream]
            late = [r for r in rejected.get(c, [])
                    if r.stream != home.stream and r.reject is not None and r.reject[0] > end]
            if not home.ended and late:
                first = min(late, key=_loss_order)
                ts, line = first.reject or (0, 0)
                status = "lost"
                loss = FleetLoss(replica=first.replica, path=first.path,
                                 request_id=first.request_id, line=line, ts_ns=ts)
            out.append(FleetClaim(claim_id=c, home=self.streams[home.stream].replica,
                                  home_path=home.path, owner_scope=home.owner, status=status,
                                  lost_by_request=loss.request_id if loss else None,
                                  lost_by=loss))
        return out


def _loss_order(r: _Row) -> tuple[int, int, int]:
    ts, line = r.reject or (0, 0)
    return ts, r.stream, line


def judge_fleet(paths: Sequence[str | Path]) -> FleetJudgement:
    """Judge gate ``fleet_outcome`` over the replicas' streams at *paths*.

    Each path is one replica's ``residentkv.event/v1`` stream (JSONL), read once, in the order
    given, with the project's strict reader. Never raises for a bad input: an unreadable file,
    an ill-formed line or a stream that names no replica becomes a located problem of
    requirement ``replicas_identified`` (and a stream that could not be read at all makes
    :attr:`FleetJudgement.evaluated` false). See docs/fleet-view.md for every requirement.
    """
    gate = FleetGate([str(p) for p in paths])
    for path in paths:
        opened = OpenedStream(path, fast=True)
        current = gate.begin(str(path))
        for line, event in opened:
            current.feed(line, event)
        gate.end(opened)
    return gate.result()
