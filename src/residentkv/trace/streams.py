"""Several streams in one file (SPEC §9.1): which event opens a stream, how each stream ended,
and where an event of a later stream sits in the file's order.

A sink may hold one stream per engine incarnation. Each is opened by ``stream_started`` naming
its ``incarnation``; ``seq`` increases strictly within a stream and starts afresh at the next
opener. The rules, shared by the reader (which reports a shape that breaks them), the streaming
gates and the reference semantics (which judge claims across the streams):

- A file whose first event is ``stream_started`` may hold several streams: every later
  ``stream_started`` opens the next one. A file whose first event is anything else is one
  stream without provenance, and a later ``stream_started`` is misplaced (``T022``).
- A stream ends *closed* at its ``stream_closed`` (a graceful stop; nothing of the stream may
  follow it, ``T031``), *restarted* at the next opener (its incarnation died), or *open* where
  the reading stops.

The gates order events by **position**: an event's ``seq`` in the file's first stream, and
``offset + seq`` in a later one, where a stream's offset is the position of the previous
stream's last event plus one. Positions increase through the whole file, so everything the
gates compare by seq compares across streams; in a single-stream file a position is the seq.
Every ``seq`` a gate result reports (evidence, the illegal step) is a position.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import msgspec
from pydantic import BaseModel

from residentkv.model.event_record import EventRecord

__all__ = ["CLOSER", "OPENER", "StreamCursor", "StreamEnd", "StreamSpan", "at_position"]

OPENER = "stream_started"
CLOSER = "stream_closed"
#: the kinds the cursor must see (every other event only moves to its position)
STREAM_KINDS = frozenset({OPENER, CLOSER})


class StreamEnd(StrEnum):
    """How a stream of the file ended (SPEC §9.1)."""

    #: its ``stream_closed``: a graceful stop; a claim open there vanished
    CLOSED = "closed"
    #: the next incarnation's ``stream_started``: the incarnation died; a claim open there
    #: must end among the next stream's first events
    RESTARTED = "restarted"
    #: the reading stopped in it with no close: what is open there is live
    OPEN = "open"


@dataclass(slots=True)
class StreamSpan:
    """One stream of the file as a pass saw it."""

    index: int
    #: its opener's incarnation (None: no opener, or an opener naming none)
    incarnation: str | None
    #: position of its opener (None: the file's single stream has no opener)
    opener: int | None
    #: its events sit at ``offset + seq``
    offset: int
    #: position and reason of its (first) ``stream_closed``
    closed: int | None = None
    reason: str | None = None
    end: StreamEnd = StreamEnd.OPEN


def at_position(event: Any, offset: int) -> Any:
    """*event* with its seq moved to its position (a copy; events are frozen)."""
    seq = event.seq + offset
    if isinstance(event, BaseModel):
        return event.model_copy(update={"seq": seq})
    return msgspec.structs.replace(event, seq=seq)


class StreamCursor:
    """Where a pass is in a file of streams. The pass hands it the first event, every
    opener and closer, and every event of a later stream (the rest of the first stream needs
    nothing: its positions are its seqs)."""

    __slots__ = ("_first", "offset", "spans")

    def __init__(self) -> None:
        self.spans: list[StreamSpan] = []
        #: the positions of the current stream's events are ``offset + seq``
        self.offset = 0
        self._first: bool | None = None  # whether the file's first event is an opener

    def opens(self, event: EventRecord) -> bool:
        """Whether *event* opens a stream after the first (the caller ends the current stream,
        then :meth:`restart` moves into the new one)."""
        return bool(self._first) and event.event == OPENER

    def enter(self, event: EventRecord) -> Any:
        """Take *event*, which opens no later stream; return it at its position."""
        if self._first is None:
            self._first = event.event == OPENER
            self.spans.append(StreamSpan(0, _incarnation(event) if self._first else None,
                                         event.seq if self._first else None, 0))
        positioned = event if not self.offset else at_position(event, self.offset)
        span = self.spans[-1]
        if event.event == CLOSER and span.closed is None:
            span.closed, span.reason = positioned.seq, getattr(event, "reason", None)
        return positioned

    def restart(self, event: EventRecord, previous: int) -> Any:
        """*event* opens the next stream after the event at position *previous*: the current
        stream ended (closed if it saw its ``stream_closed``, else restarted); return the
        opener at its position."""
        self.spans[-1].end = self.ended()
        self.offset = previous + 1
        self.spans.append(StreamSpan(len(self.spans), _incarnation(event),
                                     self.offset + event.seq, self.offset))
        return self.enter(event)

    def ended(self) -> StreamEnd:
        """How the current stream ends if the next event opens a stream."""
        return StreamEnd.CLOSED if self.closed else StreamEnd.RESTARTED

    def finish(self) -> StreamEnd:
        """The reading stopped: how the last stream ended (open, unless it closed)."""
        if not self.spans:
            return StreamEnd.OPEN
        span = self.spans[-1]
        span.end = StreamEnd.CLOSED if span.closed is not None else StreamEnd.OPEN
        return span.end

    @property
    def closed(self) -> bool:
        """Whether the current stream has seen its ``stream_closed``."""
        return bool(self.spans) and self.spans[-1].closed is not None


def _incarnation(event: EventRecord) -> str | None:
    value = getattr(event, "incarnation", None)
    return value if isinstance(value, str) else None
