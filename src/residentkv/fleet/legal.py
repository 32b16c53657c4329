"""Requirement ``legal_transitions`` of gate ``fleet_outcome``, streaming: the automaton of
SPEC §4.2 run over one replica's stream (the fleet gate applies it per replica stream).

One :class:`~residentkv.trace.acceptor.ClaimRun` per claim the stream names and one
:class:`~residentkv.trace.acceptor.RequestRun` per request, fed as the single-stream gates feed
them: a request's step first, then its claim's step (which shares a violation with every claim
the request names). Memory is O(claims + requests) of the stream, never O(events); besides the
runs, only the line of each event whose step was refused (or that opened a failure chain, which
the stream's end may refuse) is kept, so that the problem can point at it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from residentkv.fleet.view import Event
from residentkv.model.automaton import Step
from residentkv.trace.acceptor import (
    CLAIM_STEPS,
    REQUEST_STEPS,
    ClaimRun,
    Incarnations,
    RequestRun,
    end_stream,
)
from residentkv.trace.gates import IllegalStep, illegal_step
from residentkv.trace.streams import STREAM_KINDS, StreamEnd

__all__ = ["StreamLegality"]

@dataclass(slots=True)
class StreamLegality:
    """The automaton over one replica's stream, fed event by event (:meth:`feed`)."""

    claims: dict[str, ClaimRun] = field(default_factory=dict)
    requests: dict[str, RequestRun] = field(default_factory=dict)
    #: request -> the owner scope its first request_started declared
    scopes: dict[str, str | None] = field(default_factory=dict)
    #: position -> line of the events a violation may point at
    lines: dict[int, int] = field(default_factory=dict)
    files: Incarnations = field(default_factory=Incarnations)
    previous: int = -1

    def feed(self, line: int, e: Event) -> None:
        """Take the next valid event of the file (in order)."""
        if self.files.slow or e.event in STREAM_KINDS:
            placed = self.files.place(e, self.previous, self.claims.values)
            e = placed.event
            if e.event in STREAM_KINDS:
                self.lines[e.seq] = line  # where a claim may vanish
            if placed.ended is not None:
                self._end(placed.ended)
        self.previous = e.seq
        name, rid, cid, seq = e.event, e.request_id, e.claim_id, e.seq
        req = None
        if rid is not None:
            req = self.requests.get(rid)
            if req is None:
                req = self.requests[rid] = RequestRun()
            if name == "request_started" and rid not in self.scopes:
                self.scopes[rid] = e.owner_scope
            if name in REQUEST_STEPS[req.phase]:
                chain = req.failure_seq
                if req.step(e) or (chain is None and req.failure_seq is not None):
                    self.lines[seq] = line
        if cid is None:
            return
        run = self.claims.get(cid)
        if run is None:
            run = self.claims[cid] = ClaimRun(cid)
        if name in CLAIM_STEPS[run.phase] and run.step(e, self.scopes, req):
            self.lines[seq] = line
        if req is not None:
            req.names(run)

    def _end(self, how: StreamEnd) -> None:
        """A stream of the file ended: its accepting conditions; requests are per stream."""
        end_stream(self.requests.values(), self.claims.values(), how)
        self.requests.clear()
        self.scopes.clear()

    def end(self) -> list[tuple[str, IllegalStep, int | None]]:
        """The file is over: (claim, its first illegal step, that event's line) for every
        claim whose run, or the run of a request naming it, the automaton refused (the end of
        the reading is the end of the last stream, as for the scenario gates)."""
        how, _ = self.files.finish()
        end_stream(self.requests.values(), self.claims.values(), how)
        out = []
        for claim, run in self.claims.items():
            step: Step | None = run.violation
            shown = illegal_step(step)
            if step is not None and shown is not None:
                out.append((claim, shown, self.lines.get(step.seq)))
        return out
