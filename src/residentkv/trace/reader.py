"""Streaming reader of ``residentkv.event/v1`` JSONL traces.

The reader yields typed events with their line numbers and records every problem it meets —
invalid JSON, unknown event types, unknown or missing fields, values of the wrong JSON type
(strict: a string is never a bool or a number, a float or bool never an int), duplicate keys,
non-increasing ``seq``, over-long lines, binary data, a misplaced ``stream_started``, an event
after its stream's ``stream_closed``, streams of one file that repeat or omit their
incarnation or change their provenance (SPEC §9.1; :mod:`residentkv.trace.streams`) — with
``path:line``, without stopping at the first one. Memory is bounded by the line limit and the
number of problems it keeps (the rest are counted). ``-`` reads standard input; devices, FIFOs
and sockets are refused before anything is read.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal

import msgspec
from pydantic import ValidationError

from residentkv.errors import TraceReadError
from residentkv.findings import Finding
from residentkv.limits import file_kind
from residentkv.model.events import EVENT_ADAPTER, Envelope, StreamStarted
from residentkv.model.fast_events import FAST_DECODER
from residentkv.model.fast_events import DecodeError as FastDecodeError
from residentkv.trace.duplicate_keys import first_duplicate_key, repeated_keys

DEFAULT_MAX_LINE_BYTES = 1 << 20
#: bytes read (and lines decoded together) at a time: 64 KiB (about 280 events) keeps a chunk's
#: bytes and decoded events within the core's cache beside the gates' state (1 MiB chunks read
#: 1.23 M events/s where these read 1.40 M: bench/trace_gates.py, writer layout, same minutes);
#: a line may span any number of chunks (the line limit is separate)
_CHUNK = 1 << 16
MAX_KEPT_PROBLEMS = 1000

_ERROR_CODES = {
    "json_invalid": "T001",
    "model_type": "T001",
    "model_attributes_type": "T001",
    "union_tag_invalid": "T002",
    "union_tag_not_found": "T004",
    "extra_forbidden": "T003",
    "missing": "T004",
}


STDIN = "-"


class DuplicateKeyError(ValueError):
    """A line whose JSON repeats a key (never evidence: which value counts is undefined)."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _decode_strict(raw: bytes) -> Any:
    """The pydantic models in strict mode, then the exact duplicate-key check."""
    event = EVENT_ADAPTER.validate_json(raw, strict=True)
    key = first_duplicate_key(raw)
    if key is not None:
        raise DuplicateKeyError(key)
    return event


#: why a line holds no event: ``None`` (over the limit), ``"nul"``, or the decoding error
_Reason = BaseException | None | Literal["nul"]


@dataclass(frozen=True, slots=True)
class _Refused:
    """A line that holds no event, and why."""

    reason: _Reason


def _decode_chunk(lines: list[bytes | None], fast: bool) -> list[Any]:
    """Each line's event, or its :class:`_Refused`.

    With *fast*, the fast mirror decodes first (whatever it refuses is judged by the strict
    pydantic models) and the duplicate-key check of the fast-decoded lines runs once for the
    whole chunk.
    """
    if fast:
        try:
            # the common case, a chunk of valid lines, in one comprehension
            events: list[Any] = [FAST_DECODER.decode(raw) for raw in lines]  # type: ignore[arg-type]
        except (*FastDecodeError, TypeError, RecursionError):
            pass  # some line is unusual (None stands for an over-long one): line by line
        else:
            return _refuse_repeated_keys(lines, events)  # type: ignore[arg-type]
    outcomes = [_decode_line(raw, fast) for raw in lines]
    at = [i for i, e in enumerate(outcomes) if isinstance(e, msgspec.Struct)]
    raws = [raw for i in at if (raw := lines[i]) is not None]
    decoded = _refuse_repeated_keys(raws, [outcomes[i] for i in at])
    for i, outcome in zip(at, decoded, strict=True):
        outcomes[i] = outcome
    return outcomes


def _decode_line(raw: bytes | None, fast: bool) -> Any:
    """One line's event (a Struct when the fast mirror decoded it), or its :class:`_Refused`."""
    if raw is None or b"\x00" in raw:
        return _Refused(None if raw is None else "nul")
    try:
        if fast:
            try:
                return FAST_DECODER.decode(raw)
            except FastDecodeError:
                pass
        return _decode_strict(raw)
    except (ValidationError, DuplicateKeyError, RecursionError) as error:
        return _Refused(error)


def _refuse_repeated_keys(raws: list[bytes], events: list[Any]) -> list[Any]:
    """*events*, each line whose JSON repeats a key replaced by its :class:`_Refused`."""
    for index, key in repeated_keys(raws, events).items():
        events[index] = _Refused(DuplicateKeyError(key))
    return events


#: what every stream of one file must say alike (SPEC §9.1: one sink, one emitter, one runtime)
_PROVENANCE_FIELDS = ("emitter", "runtime", "replica", "rank")


def _provenance(event: Any) -> StreamStarted:
    """The pydantic form of a ``stream_started`` event (the fast reader yields a Struct)."""
    if isinstance(event, StreamStarted):
        return event
    return StreamStarted.model_validate(msgspec.to_builtins(event))


class TraceReader:
    """Iterate ``(line_number, event)`` over one trace; problems accumulate in ``problems``.

    With ``fast=True`` valid events come from :mod:`residentkv.model.fast_events` (the same
    attributes, decoded several times faster); a line the fast decoder refuses is validated by
    the pydantic models as usual, so accepted lines and reported problems are the same.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        stream: BinaryIO | None = None,
        fast: bool = False,
    ) -> None:
        self.fast = fast
        self.path = Path(path)
        self.display = str(path)
        self._stream = stream
        self.max_line_bytes = max_line_bytes
        self.problems: list[Finding] = []
        self.problem_count = 0
        self.events_read = 0
        self.line = 0
        #: the stream's provenance: its first event, when that is ``stream_started`` (in a
        #: file of several streams, the first stream's: every later one must agree with it)
        self.provenance: StreamStarted | None = None
        #: the line of each stream's ``stream_started`` (SPEC §9.1: one stream per
        #: incarnation; empty for a file without provenance)
        self.stream_lines: list[int] = []
        self._incarnations: dict[str | None, int] = {}

    def _problem(self, code: str, line: int | None, message: str, col: int | None = None) -> None:
        self.problem_count += 1
        if len(self.problems) < MAX_KEPT_PROBLEMS:
            self.problems.append(
                Finding(code=code, message=message, path=self.display, line=line, col=col)
            )

    def _open(self) -> Any:
        if self._stream is not None:
            return self._stream
        if self.display == STDIN:
            return os.fdopen(os.dup(sys.stdin.fileno()), "rb")
        try:
            kind = file_kind(self.path)
            if kind == "directory":
                raise TraceReadError(
                    "is a directory, not a trace file", code="T010", path=self.display
                )
            if kind != "file":
                raise TraceReadError(
                    f"is a {kind}, not a trace file (special files are refused: they may block "
                    "or never end; use '-' to read standard input)", code="T021",
                    path=self.display
                )
            return open(self.path, "rb")
        except OSError as e:
            raise TraceReadError(
                f"cannot open trace: {e.strerror or e}", code="T010", path=self.display
            ) from None

    def __iter__(self) -> Iterator[tuple[int, Envelope]]:
        for event in self.events():
            yield self.line, event

    def events(self) -> Iterator[Envelope]:
        """The valid events in order; ``self.line`` is the line of the one just yielded."""
        count = 0
        try:
            for events, lines in self._valid_chunks(numbered=True):
                for line, event in zip(lines, events, strict=True):
                    count += 1
                    self.line = line
                    yield event
        finally:
            self.events_read = count

    def event_chunks(self) -> Iterator[list[Envelope]]:
        """The valid events in order, a read chunk at a time (``self.line`` is not kept).

        The fastest way through a trace: ``itertools.chain.from_iterable`` of it iterates
        events without resuming a generator for each.
        """
        count = 0
        try:
            for events, _ in self._valid_chunks(numbered=False):
                count += len(events)
                yield events
        finally:
            self.events_read = count

    def _valid_chunks(self, *, numbered: bool) -> Iterator[tuple[list[Envelope], list[int]]]:
        """Each read chunk's valid events, with their line numbers when *numbered*."""
        # the hot loop: a chunk's lines are decoded together, then walked in order; everything
        # unusual is an outcome that is not an event
        fast, last_seq, last_line, count, closed = self.fast, -1, 0, 0, False
        with self._open() as fh:
            for first, lines in self._batches(fh):
                line_no = first - 1
                valid: list[Envelope] = []
                numbers: list[int] = []
                for raw, event in zip(lines, _decode_chunk(lines, fast), strict=True):
                    line_no += 1
                    if type(event) is _Refused:
                        if not self._refused(raw, line_no, event.reason):
                            yield valid, numbers
                            return
                        continue
                    name = event.event
                    if closed or (name == "stream_started" and count):
                        # SPEC §9.1: a later stream_started opens the next stream (seq starts
                        # afresh); nothing of a stream follows its stream_closed
                        if not self._next_stream(event, name, line_no):
                            continue
                        last_seq, closed = -1, False
                    if event.seq <= last_seq:
                        self._problem("T006", line_no, f"seq {event.seq} is not greater than "
                                      f"seq {last_seq} on line {last_line}")
                        continue
                    last_seq, last_line = event.seq, line_no
                    if name == "stream_started" and not count:
                        self.provenance = _provenance(event)
                        self.stream_lines.append(line_no)
                    elif name == "stream_closed":
                        closed = True
                    count += 1
                    valid.append(event)
                    if numbered:
                        numbers.append(line_no)
                yield valid, numbers

    def _next_stream(self, event: Any, name: str, line_no: int) -> bool:
        """An event after the first, when the stream has closed or *event* is a
        ``stream_started``: whether it opens the next stream (else it is reported and
        dropped)."""
        if name != "stream_started":
            self._problem("T031", line_no, f"{name} after the stream's stream_closed; "
                          "expected the next incarnation's stream_started or nothing")
            return False
        if self.provenance is None:
            self._problem("T022", line_no, "stream_started is not the first event of the "
                          "stream")
            return False
        first, opened = self.provenance, _provenance(event)
        if len(self.stream_lines) == 1:
            self._incarnations[first.incarnation] = self.stream_lines[0]
            if first.incarnation is None:
                self._problem("T033", self.stream_lines[0], "stream_started names no "
                              "incarnation, but the file holds several streams")
        if opened.incarnation is None:
            self._problem("T033", line_no, "stream_started names no incarnation, but the file "
                          "holds several streams")
        elif opened.incarnation in self._incarnations:
            self._problem("T032", line_no, f"incarnation {opened.incarnation!r} already "
                          f"opened the stream on line {self._incarnations[opened.incarnation]}")
        self._incarnations.setdefault(opened.incarnation, line_no)
        changed = [f for f in _PROVENANCE_FIELDS if getattr(opened, f) != getattr(first, f)]
        if changed:
            self._problem("T034", line_no, f"stream_started changes {', '.join(changed)} from "
                          f"the first stream's (line {self.stream_lines[0]})")
        self.stream_lines.append(line_no)
        return True

    def _refused(self, raw: bytes | None, line_no: int, outcome: _Reason) -> bool:
        """Report a line that holds no event; ``False`` when reading must stop there."""
        if outcome is None:
            self._problem("T007", line_no, f"line longer than {self.max_line_bytes} bytes")
        elif outcome == "nul":
            # NUL never occurs in a JSONL trace: the file is binary, stop
            self._problem("T008", line_no, "NUL byte: binary data, not a JSONL trace")
            return False
        elif isinstance(outcome, ValidationError):
            self._slow_path(raw or b"", line_no, outcome)
        elif isinstance(outcome, DuplicateKeyError):
            self._problem("T020", line_no, f"key {outcome.key!r} appears twice in one JSON "
                          "object")
        else:
            # msgspec recurses per nesting level (about 1,000 levels); the pydantic path
            # reports shallower nesting as invalid JSON itself
            self._problem("T001", line_no, "invalid JSON: nested too deeply (recursion limit "
                          "exceeded)")
        return True

    def _batches(self, fh: Any) -> Iterator[tuple[int, list[bytes | None]]]:
        """The lines of each large chunk read, with the number of the first one; ``None``
        stands for a line over the limit.

        Memory stays bounded: a partial line is kept only up to the limit, the rest of an
        over-long line is skipped without being stored.
        """
        limit, number, partial, skipping = self.max_line_bytes, 0, b"", False
        first = True
        while chunk := fh.read(_CHUNK):
            if first:
                # SPEC §4.2: a UTF-8 byte-order mark before the first line is ignored
                first = False
                if chunk.startswith(b"\xef\xbb\xbf"):
                    chunk = chunk[3:]
                elif len(chunk) < 3 and b"\xef\xbb\xbf".startswith(chunk):
                    chunk += fh.read(3 - len(chunk))
                    chunk = chunk.removeprefix(b"\xef\xbb\xbf")
                    if not chunk:
                        continue
            # NUL never occurs in a JSONL trace: stop at the first one, even inside a line
            # that never ends (/dev/zero through a pipe)
            nul = chunk.find(b"\x00")
            if nul >= 0:
                chunk = chunk[:nul]
            lines: list[bytes | None] = list(chunk.split(b"\n"))
            tail = lines.pop()  # after the last newline: the start of the next line
            if lines:
                if skipping:
                    lines[0], skipping = None, False
                elif partial:
                    lines[0] = partial + (lines[0] or b"")
                partial = b""
                if max(map(len, filter(None, lines)), default=0) > limit:
                    lines = [line if line is None or len(line) <= limit else None
                             for line in lines]
                yield number + 1, lines
                number += len(lines)
            if nul >= 0:
                yield number + 1, [b"\x00"]  # the line that holds the NUL
                return
            if skipping:
                continue
            partial += tail or b""
            if len(partial) > limit:
                partial, skipping = b"", True
        if skipping:
            yield number + 1, [None]
        elif partial:
            yield number + 1, [partial if len(partial) <= limit else None]

    def _slow_path(self, raw: bytes, line_no: int, error: ValidationError) -> None:
        """Classify a line the validator refused: blank, not UTF-8, or invalid (reported)."""
        stripped = raw.strip()
        if not stripped:
            return
        try:
            stripped.decode("utf-8")
        except UnicodeDecodeError as e:
            self._problem("T008", line_no, f"not UTF-8 text (byte {e.start + 1})", col=e.start + 1)
            return
        self._report_validation(error, line_no)

    def _report_validation(self, error: ValidationError, line_no: int) -> None:
        for item in error.errors(include_url=False):
            kind = item["type"]
            code = _ERROR_CODES.get(kind, "T005")
            loc = [str(p) for p in item["loc"]]
            if kind == "union_tag_invalid":
                message = f"unknown event type {item['input'].get('event')!r}" if isinstance(
                    item["input"], dict) else "unknown event type"
            elif kind == "union_tag_not_found":
                message = "missing envelope field 'event'"
            elif kind == "json_invalid":
                message = f"invalid JSON: {item['msg'].removeprefix('Invalid JSON: ')}"
            elif kind in ("model_type", "model_attributes_type") or not loc:
                code, message = "T001", "not a JSON object"
            else:
                field = ".".join(loc[1:]) if len(loc) > 1 else ".".join(loc)
                event = loc[0] if loc else "?"
                message = f"{event}: field {field!r}: {item['msg']}"
                if kind == "extra_forbidden":
                    message = f"{event}: unknown field {field!r}"
                elif kind == "missing":
                    message = f"{event}: missing field {field!r}"
            self._problem(code, line_no, message)


# at most 20 digits: a seq is a 64-bit integer, and a longer run (a hostile line) must not
# reach int(), which refuses strings past 4,300 digits
_SEQ = re.compile(rb'"seq"\s*:\s*(\d{1,20})(?!\d)')


def seq_lines(path: str | Path, seqs: Iterable[int],
              streams: Sequence[Any] = (), *,
              max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> dict[int, int]:
    """seq -> 1-based line number in the trace file, for the seqs asked (first occurrence).

    In a file of several streams the gates' seqs are positions (:mod:`residentkv.trace.streams`):
    *streams* gives each stream's opener ``line`` and ``offset`` (the
    :class:`~residentkv.trace.results.StreamSummary` of each), and a line's position is its
    stream's offset plus its seq. Memory is bounded like the reader's: a line longer than
    *max_line_bytes* is skipped, never held (it holds no event the gates saw).
    """
    wanted = set(seqs)
    found: dict[int, int] = {}
    if not wanted or str(path) == STDIN:  # stdin is consumed: it has no lines to point at
        return found
    starts = [(s.line, s.offset) for s in streams if s.line is not None]
    try:
        with open(path, "rb") as fh:
            offset, k = 0, 0
            for number, line in enumerate(_bounded_lines(fh, max_line_bytes), start=1):
                while k < len(starts) and starts[k][0] <= number:
                    offset, k = starts[k][1], k + 1
                m = _SEQ.search(line) if line is not None else None
                if m is not None and offset + int(m.group(1)) in wanted:
                    found.setdefault(offset + int(m.group(1)), number)
                    if len(found) == len(wanted):
                        break
    except OSError:
        return found
    return found


def _bounded_lines(fh: BinaryIO, limit: int) -> Iterator[bytes | None]:
    """The lines of *fh* without their newline; ``None`` for a line over *limit* bytes, whose
    rest is skipped to the next newline without being held (at most *limit* plus one read
    chunk of a line is ever in memory)."""
    partial, skipping = b"", False
    while chunk := fh.read(_CHUNK):
        parts = chunk.split(b"\n")
        tail = parts.pop()
        for part in parts:
            if skipping:
                yield None
            else:
                line = partial + part
                yield line if len(line) <= limit else None
            partial, skipping = b"", False
        if not skipping:
            partial += tail
            if len(partial) > limit:
                partial, skipping = b"", True
    if skipping:
        yield None
    elif partial:
        yield partial if len(partial) <= limit else None
