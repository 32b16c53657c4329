"""The one event writer every emitter in residentkv uses.

Each writer numbers its own stream: ``seq`` starts at 0 (or *first_seq*) for every new writer,
so a stream is totally ordered by construction and no writer depends on another's count. Writes
are buffered and thread-safe: the lock covers both the ``seq`` assignment and the write, so file
order equals ``seq`` order. Every byte written is also hashed as it is written: the process
that wrote a trace can say what it wrote (:meth:`EventWriter.written_sha256`, the live root of
SPEC §7.2), whatever happens to the file afterwards.

A sink may hold several streams, one after the other (SPEC §9.1: one per engine incarnation).
A writer that appends to a file whose last line was torn (its writer was killed mid-write) ends
that line first, so its own stream starts on a line of its own; :func:`sink_events` reads back
the events of chosen kinds from a sink, for an emitter resuming on its own journal.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any, TypeVar

import msgspec

from residentkv.model.events import SCHEMA_ID
from residentkv.model.fast_events import FAST_STRUCTS

_ENCODE = msgspec.json.Encoder().encode
T = TypeVar("T")


@dataclass(frozen=True)
class Provenance:
    """Who writes a stream and about which runtime release: its ``stream_started`` event."""

    emitter_name: str
    emitter_version: str
    runtime_name: str
    runtime_version: str
    stream_id: str | None = None
    replica: str | None = None
    rank: int | None = None
    #: the engine incarnation (SPEC §9.1): one stream per incarnation on a shared sink
    incarnation: str | None = None

    def fields(self) -> dict[str, Any]:
        """The event fields of ``stream_started``."""
        return {
            "emitter": {"name": self.emitter_name, "version": self.emitter_version},
            "runtime": {"name": self.runtime_name, "version": self.runtime_version},
            "stream_id": self.stream_id,
            "replica": self.replica,
            "rank": self.rank,
            "incarnation": self.incarnation,
        }


class EventWriter:
    """Append v1 events to one JSONL stream.

    ``emit`` validates the event against the strict mirror of its model (an emitter bug must
    not write a trace the reader would reject), assigns ``seq`` and ``ts_ns``, and returns the
    event's fields. A failed validation raises :class:`ValueError`. With *provenance* the
    stream opens with its ``stream_started`` event (SPEC §4.1), written before anything else.
    """

    def __init__(
        self,
        sink: str | Path | IO[str],
        *,
        source: str,
        validate: bool = True,
        buffer_lines: int = 256,
        provenance: Provenance | None = None,
        first_seq: int = 0,
    ) -> None:
        self._written = hashlib.sha256()
        if isinstance(sink, (str, Path)):
            Path(sink).parent.mkdir(parents=True, exist_ok=True)
            torn = _ends_torn(Path(sink))
            self._fh: IO[str] = open(sink, "a", encoding="utf-8")  # noqa: SIM115
            if torn:
                self._fh.write("\n")  # the torn line stays a (reported) line of its own
                self._written.update(b"\n")
            self._owns = True
        else:
            self._fh = sink
            self._owns = False
        self.source = source
        self.validate = validate
        self._buffer: list[str] = []
        self._buffer_lines = buffer_lines
        self._lock = threading.Lock()
        self._seq = itertools.count(first_seq)
        self.count = 0
        if provenance is not None:
            self.emit("stream_started", **provenance.fields())

    def emit(
        self,
        event: str,
        *,
        claim_id: str | None = None,
        request_id: str | None = None,
        source: str | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """Write one event and return its fields (defaults the line leaves out included)."""
        struct = FAST_STRUCTS.get(event)
        if struct is None:
            raise ValueError(f"unknown event type {event!r}")
        with self._lock:
            record: dict[str, Any] = {
                "schema": SCHEMA_ID,
                "seq": next(self._seq),
                "ts_ns": time.monotonic_ns(),
                "source": source or self.source,
                "event": event,
                "claim_id": claim_id,
                "request_id": request_id,
                **fields,
            }
            # the strict mirror of the event model: whatever it accepts, the reader accepts;
            # written from the mirror, optional fields left at their default are left out
            # (the reader fills them in, and settles such lines fastest)
            line = _ENCODE(msgspec.convert(record, struct) if self.validate else record)
            self._buffer.append(line.decode())
            self.count += 1
            if len(self._buffer) >= self._buffer_lines:
                self._flush_locked()
        return record

    def flush(self) -> None:
        """Write buffered lines through to the sink."""
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        if self._buffer:
            text = "\n".join(self._buffer) + "\n"
            self._fh.write(text)
            self._written.update(text.encode("utf-8"))
            self._buffer.clear()
        self._fh.flush()

    def written_sha256(self) -> str:
        """sha256 of every byte this writer has written through to its sink (a file the
        writer created holds exactly those bytes, unless something else wrote to it)."""
        with self._lock:
            return self._written.hexdigest()

    def close(self) -> None:
        """Flush and close the sink if this writer opened it."""
        self.flush()
        if self._owns:
            self._fh.close()

    def __enter__(self) -> EventWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _ends_torn(path: Path) -> bool:
    """Whether *path* exists and its last byte is not a newline (a cut-off last line)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            if fh.tell() == 0:
                return False
            fh.seek(-1, os.SEEK_END)
            return fh.read(1) != b"\n"
    except FileNotFoundError:
        return False


def sink_events(path: str | Path, kinds: Iterable[str],
                as_type: type[T] = dict[str, Any]) -> Iterator[T]:  # type: ignore[assignment]
    """The events of *kinds* in the sink at *path*, in file order, decoded as *as_type* (plain
    dicts, or a ``msgspec.Struct`` naming only the fields the caller reads: faster).

    Streaming and cheap on large sinks: a line is decoded only when its ``event`` value is one
    of *kinds*. Lines that do not decode (a torn line) are skipped -- the reader reports them;
    this is for an emitter resuming on its own sink, not for judging one. A missing file holds
    no events.
    """
    wanted = sorted(set(kinds))
    pattern = re.compile(rb'"event"\s*:\s*"(?:' + b"|".join(
        re.escape(k.encode()) for k in wanted) + rb')"')
    decode = msgspec.json.Decoder(as_type).decode
    try:
        fh = open(path, "rb")  # noqa: SIM115
    except FileNotFoundError:
        return
    with fh:
        for line in fh:
            if pattern.search(line) is None:
                continue
            try:
                event = decode(line)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
            yield event
