"""Requirement ``legal_transitions`` of gate ``fleet_outcome``, streaming: the automaton of
SPEC §4.2–§4.3 run over one replica's stream (the fleet gate applies it per replica stream).

One :class:`~residentkv.trace.acceptor.Acceptor` per replica's file, fed as the single-stream
gates feed it. Memory is O(claims + requests) of the stream, never O(events); besides the
runs, only the line of each event whose step was refused (or that opened a failure chain,
which the stream's end may refuse) is kept, so that the problem can point at it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from residentkv.fleet.view import Event
from residentkv.model.automaton import Step
from residentkv.trace.acceptor import Acceptor
from residentkv.trace.gates import IllegalStep, illegal_step
from residentkv.trace.streams import STREAM_KINDS

__all__ = ["StreamLegality"]


@dataclass(slots=True)
class StreamLegality:
    """The automaton over one replica's stream, fed event by event (:meth:`feed`)."""

    acceptor: Acceptor = field(default_factory=Acceptor)
    #: position -> line of the events a violation may point at
    lines: dict[int, int] = field(default_factory=dict)
    previous: int = -1

    def feed(self, line: int, e: Event) -> None:
        """Take the next valid event of the file (in order)."""
        acceptor = self.acceptor
        if acceptor.slow or e.event in STREAM_KINDS:
            placed = acceptor.place(e, self.previous)
            e = placed.event
            if e.event in STREAM_KINDS:
                self.lines[e.seq] = line  # where a claim may vanish
            if placed.ended is not None:
                acceptor.forget_requests()  # requests are per stream
        self.previous = e.seq
        if acceptor.step(e):
            self.lines[e.seq] = line

    def end(self) -> list[tuple[str, IllegalStep, int | None]]:
        """The file is over: (claim, its first illegal step, that event's line) for every
        claim whose run, or the run of a request naming it, the automaton refused (the end of
        the reading is the end of the last stream, as for the scenario gates)."""
        self.acceptor.finish()
        out = []
        for claim, run in self.acceptor.claims.items():
            step: Step | None = run.violation
            shown = illegal_step(step)
            if step is not None and shown is not None:
                out.append((claim, shown, self.lines.get(step.seq)))
        return out
