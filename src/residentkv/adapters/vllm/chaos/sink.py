"""The engine's event sink as the history checker reads it: streams, requests, claims.

A sink holds one stream per engine incarnation, each opened by ``stream_started`` (SPEC §9.1).
This module splits the file at those events and indexes, per stream, each request's events and
each claim's events, with their line numbers. It reads what the engine wrote and nothing else:
a line that is not a JSON object (a process killed in the middle of a write) is counted, never
repaired. The formal judgement of the same file is the ``conformance`` gate's.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Event", "Sink", "SinkStream", "TraceRequest", "read_sink", "ticket_of"]

#: vLLM 0.32's OpenAI server request ids: ``cmpl-<X-Request-Id>-<prompt index>-<suffix>``
_REQUEST_ID = re.compile(r"^(?:cmpl|chatcmpl|generate-tokens)-(?P<ticket>.+)-\d+-[0-9a-f]+$")


def ticket_of(request_id: str) -> str | None:
    """The caller's ``X-Request-Id`` inside a vLLM request id (None for other ids)."""
    found = _REQUEST_ID.match(request_id)
    return found.group("ticket") if found else None


@dataclass(frozen=True, slots=True)
class Event:
    """One event of the sink with its line number."""

    line: int
    data: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.data.get("event"))

    @property
    def seq(self) -> int | None:
        seq = self.data.get("seq")
        return seq if isinstance(seq, int) else None

    @property
    def claim(self) -> str | None:
        cid = self.data.get("claim_id")
        return cid if isinstance(cid, str) else None

    @property
    def request(self) -> str | None:
        rid = self.data.get("request_id")
        return rid if isinstance(rid, str) else None


@dataclass
class TraceRequest:
    """Every event of one request in one stream."""

    request_id: str
    stream: int
    events: list[Event] = field(default_factory=list)

    @property
    def started(self) -> Event | None:
        return next((e for e in self.events if e.name == "request_started"), None)

    @property
    def finished(self) -> Event | None:
        return next((e for e in self.events if e.name == "request_finished"), None)


@dataclass
class SinkStream:
    """One stream of the sink (one engine incarnation)."""

    index: int
    first_line: int
    events: list[Event] = field(default_factory=list)
    requests: dict[str, TraceRequest] = field(default_factory=dict)
    claims: dict[str, list[Event]] = field(default_factory=dict)
    by_seq: dict[int, Event] = field(default_factory=dict)

    @property
    def stream_id(self) -> str | None:
        head = self.events[0].data if self.events else {}
        sid = head.get("stream_id") if head.get("event") == "stream_started" else None
        return sid if isinstance(sid, str) else None

    @property
    def closed(self) -> Event | None:
        """The graceful stop's closing event, if the stream has one."""
        return next((e for e in reversed(self.events) if e.name == "stream_closed"), None)

    def head(self) -> list[Event]:
        """The events before the stream's first request (where an incarnation ends the
        claims its predecessor left open)."""
        out = []
        for e in self.events:
            if e.name == "request_started":
                break
            out.append(e)
        return out

    def add(self, event: Event) -> None:
        self.events.append(event)
        if event.seq is not None:
            self.by_seq.setdefault(event.seq, event)
        if event.request is not None:
            self.requests.setdefault(
                event.request, TraceRequest(event.request, self.index)).events.append(event)
        if event.claim is not None:
            self.claims.setdefault(event.claim, []).append(event)


@dataclass
class Sink:
    """Every stream of a sink, and the lines that held no event."""

    path: str
    streams: list[SinkStream]
    bad_lines: list[int]

    def find_request(self, ticket: str) -> TraceRequest | None:
        """The request whose id carries *ticket* (the middleware's or the caller's)."""
        return self._by_ticket.get(ticket)

    def __post_init__(self) -> None:
        self._by_ticket: dict[str, TraceRequest] = {}
        for stream in self.streams:
            for rid, req in stream.requests.items():
                self._by_ticket.setdefault(ticket_of(rid) or rid, req)


def read_sink(path: str | Path) -> Sink:
    """Read the sink file: streams split at ``stream_started``; undecodable lines counted."""
    streams: list[SinkStream] = []
    bad: list[int] = []
    with Path(path).open("rb") as fh:
        for number, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                data = json.loads(raw)
            except ValueError:
                bad.append(number)
                continue
            if not isinstance(data, dict):
                bad.append(number)
                continue
            if data.get("event") == "stream_started" or not streams:
                streams.append(SinkStream(index=len(streams), first_line=number))
            streams[-1].add(Event(number, data))
    return Sink(str(path), streams, bad)
