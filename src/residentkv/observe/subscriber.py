"""The subscription's I/O: ZeroMQ sockets in, the sequence tracker's inputs out.

This module reads frames and does nothing else: each message becomes an input of the pure
:class:`~residentkv.observe.sequence.SequenceTracker`, whose actions go to the observer —
except :class:`~residentkv.observe.sequence.AskReplay`, which this module carries out without
blocking (a DEALER per request, polled beside the live sockets; the answer comes back as
``Replayed`` or ``ReplayFailed``).

vLLM's publisher *binds* ``ipc://``/``inproc://`` and wildcard endpoints and *connects* to
``tcp://host:port``; the observer does the opposite (``bind=True`` for a connecting publisher).
A socket monitor reports a dropped connection. Bounds: a frame above ``max_message_bytes`` is
refused by ZeroMQ before it is read (the connection drops, and the batch becomes a gap); a
message is read frame by frame and frames past the format's are dropped as they are read; at
most ``hwm`` messages queue in ZeroMQ per socket (``RCVHWM``: past it ZeroMQ stops reading the
connection, the publisher's own queue fills, and what the publisher then drops is a gap by its
numbers); every wait — replay included — is a poll of at most 100 ms between which the deadline
and the stop signal are checked, and the end of the run waits at most ``end_budget_s`` from
the moment the stop was seen.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType

import zmq
from zmq.utils.monitor import recv_monitor_message

from residentkv.observe.intake import is_end, read_message, read_replayed, recv_frames
from residentkv.observe.observer import Observer
from residentkv.observe.sequence import (
    Action,
    AskReplay,
    Dropped,
    Ended,
    Input,
    Replayed,
    ReplayFailed,
    SequenceTracker,
    SourceKey,
)
from residentkv.observe.wire import Batch, Dialect

#: how long one replay request may take before the window counts as missed
REPLAY_TIMEOUT_S = 3.0
#: at the end of the run, how long the tail replays may take by default, from the moment the
#: stop was seen (with the last poll, the verdict and the exit, within a second of SIGTERM)
END_BUDGET_S = 0.4
#: batches (and bytes) one replay answer may hold before it is given up (bounded memory)
MAX_REPLAYED = 100_000
MAX_REPLAYED_BYTES = 128 << 20
MAX_MESSAGE_BYTES = 1 << 20
HWM = 1000
_POLL_MS = 100
#: messages read from one socket before the loop looks at the clock and the stop signal again
_SLICE = 500


@dataclass(frozen=True)
class Endpoint:
    """One publisher: its PUB endpoint, its replay endpoint, its topic, and the data-parallel
    rank it serves when known (discovery names it; replay requests are routed by it)."""

    kv_events: str
    replay: str | None = None
    topic: bytes = b""
    bind: bool = False
    rank: int | None = None

    def serves(self, key: SourceKey) -> bool:
        return key[0] == self.topic and (self.rank is None or key[1] in (None, self.rank))


@dataclass
class _PendingReplay:
    key: SourceKey
    start: int
    socket: zmq.Socket  # type: ignore[type-arg]
    deadline: float
    topic: bytes
    batches: list[Batch] = field(default_factory=list)
    readable: bool = True
    size: int = 0


class Subscription:
    """SUB sockets on *endpoints*, the tracker over them, and replay requests in flight."""

    def __init__(self, endpoints: Sequence[Endpoint], *, dialect: Dialect = Dialect.VLLM,
                 max_message_bytes: int = MAX_MESSAGE_BYTES, hwm: int = HWM,
                 end_budget_s: float = END_BUDGET_S) -> None:
        self.endpoints = list(endpoints)
        self.end_budget_s = end_budget_s
        self.dialect = dialect
        self.max_message_bytes = max_message_bytes
        self.hwm = hwm
        self.ctx = zmq.Context()
        self.subs: list[tuple[zmq.Socket, zmq.Socket, Endpoint]] = []  # type: ignore[type-arg]
        try:
            for ep in self.endpoints:
                self.subs.append(self._open(ep, hwm))
        except zmq.ZMQError:
            self.close()
            raise
        self.tracker = SequenceTracker(self.has_replay, [ep.topic for ep in self.endpoints])
        self.connected: set[int] = set()
        self.received = 0
        self._replays: dict[SourceKey, _PendingReplay] = {}
        self._polled: list[zmq.Socket] = []  # type: ignore[type-arg]
        self._poll = zmq.Poller()

    def _open(self, ep: Endpoint, hwm: int) -> tuple[zmq.Socket, zmq.Socket, Endpoint]:  # type: ignore[type-arg]
        sub = self.ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.MAXMSGSIZE, self.max_message_bytes)
        sub.set_hwm(hwm)
        sub.setsockopt(zmq.LINGER, 0)
        sub.setsockopt(zmq.SUBSCRIBE, ep.topic)
        monitor = sub.get_monitor_socket(
            zmq.EVENT_CONNECTED | zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED)
        if ep.bind:
            sub.bind(ep.kv_events)
        else:
            sub.connect(ep.kv_events)
        return sub, monitor, ep

    def has_replay(self, key: SourceKey) -> bool:
        """Whether *key*'s publisher has a replay endpoint."""
        return any(ep.replay is not None and ep.serves(key) for ep in self.endpoints)

    # -------------------------------------------------------------------------- the loop
    def run(self, observer: Observer, stop: threading.Event, *, deadline: float | None = None,
            tick: Callable[[], None] | None = None, tick_every_s: float = 0.5,
            flush: Callable[[], None] | None = None) -> None:
        """Feed *observer* until *stop* is set or the monotonic *deadline* passes; then close
        every source's tail (replay, within ``end_budget_s``) and return."""
        next_tick = 0.0
        while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
            left_ms = _POLL_MS if deadline is None else int((deadline - time.monotonic()) * 1000)
            self._round(observer, max(0, min(_POLL_MS, left_ms)))
            if flush is not None:
                flush()
            if tick is not None and time.monotonic() >= next_tick:
                tick()
                next_tick = time.monotonic() + tick_every_s
        self._finish(observer)
        if tick is not None:
            tick()

    def _poller(self) -> zmq.Poller:
        """The sockets to wait on (rebuilt only when a socket opens or closes)."""
        sockets = [s for sub, monitor, _ in self.subs for s in (sub, monitor)] + [
            p.socket for p in self._replays.values()]
        if sockets != self._polled:
            self._polled = sockets
            self._poll = zmq.Poller()
            for sock in sockets:
                self._poll.register(sock, zmq.POLLIN)
        return self._poll

    def _round(self, observer: Observer, timeout_ms: int) -> None:
        ready = dict(self._poller().poll(timeout_ms))
        for i, (sub, monitor, ep) in enumerate(list(self.subs)):
            if monitor in ready:
                self._monitor_event(i, observer)
            if sub in ready and self.subs[i][0] is sub:    # not reopened meanwhile
                self._drain(sub, ep, observer)
        self._replay_round(ready, observer)

    def _feed(self, event: Input, observer: Observer) -> None:
        actions = self.tracker.step(event)
        self._act(actions, observer)

    def _act(self, actions: list[Action], observer: Observer) -> None:
        for a in actions:
            if isinstance(a, AskReplay):
                self._ask(a, observer)
            else:
                observer.act((a,))

    def _drain(self, sub: zmq.Socket, ep: Endpoint, observer: Observer) -> bool:  # type: ignore[type-arg]
        """Read up to a slice of messages; whether more may be waiting."""
        for _ in range(_SLICE):
            try:
                parts, frames = recv_frames(sub)
            except zmq.Again:
                return False
            self.received += 1
            event = read_message(parts, ep.topic, self.dialect, frames)
            if event is not None:
                self._feed(event, observer)
        return True

    def _monitor_event(self, i: int, observer: Observer) -> None:
        _, monitor, ep = self.subs[i]
        while True:
            try:
                msg = recv_monitor_message(monitor, zmq.NOBLOCK)
            except zmq.Again:
                return
            event = msg["event"]
            if event in (zmq.EVENT_CONNECTED, zmq.EVENT_ACCEPTED):
                self.connected.add(i)
            elif event == zmq.EVENT_DISCONNECTED and i in self.connected:
                self.connected.discard(i)
                if not ep.bind:
                    self._reopen(i, observer)
                self._feed(Dropped(), observer)
                return

    def _reopen(self, i: int, observer: Observer) -> None:
        """A new socket for a dropped connection: ZeroMQ does not reconnect after it refused a
        message (``MAXMSGSIZE``), and disconnecting a socket that still holds messages trips
        an assertion in libzmq. What the old socket holds is read first; what is published
        until the new one joins is a gap, found by its numbers."""
        sub, monitor, ep = self.subs[i]
        while self._drain(sub, ep, observer):
            pass
        sub.disable_monitor()
        monitor.close(linger=0)
        sub.close(linger=0)
        self.subs[i] = self._open(ep, self.hwm)

    # -------------------------------------------------------------------------- replay
    def _ask(self, ask: AskReplay, observer: Observer) -> None:
        old = self._replays.pop(ask.key, None)
        if old is not None:
            old.socket.close(linger=0)
        ep = next((e for e in self.endpoints if e.replay is not None and e.serves(ask.key)),
                  None)
        if ep is None or ep.replay is None:
            self._feed(ReplayFailed(ask.key, ask.start, "no replay endpoint"), observer)
            return
        dealer = self.ctx.socket(zmq.DEALER)
        dealer.setsockopt(zmq.MAXMSGSIZE, self.max_message_bytes)
        dealer.setsockopt(zmq.LINGER, 0)
        dealer.connect(ep.replay)
        dealer.send_multipart([b"", ask.start.to_bytes(8, "big")])
        self._replays[ask.key] = _PendingReplay(ask.key, ask.start, dealer,
                                                time.monotonic() + REPLAY_TIMEOUT_S, ep.topic)

    def _replay_round(self, ready: dict[zmq.Socket, int], observer: Observer,  # type: ignore[type-arg]
                      until: float | None = None) -> None:
        for key, p in list(self._replays.items()):
            if until is not None:
                p.deadline = min(p.deadline, until)
            answer: Input | None = None
            if p.socket in ready:
                answer = self._read_replay(p)
            if answer is None and time.monotonic() >= p.deadline:
                answer = ReplayFailed(key, p.start, (
                    "the run ended before the replay endpoint answered" if until is not None
                    else f"the replay endpoint did not answer within {REPLAY_TIMEOUT_S:g} s"))
            if answer is not None:
                if self._replays.get(key) is p:
                    del self._replays[key]
                p.socket.close(linger=0)
                self._feed(answer, observer)

    def _read_replay(self, p: _PendingReplay) -> Input | None:
        for _ in range(_SLICE):
            if time.monotonic() >= p.deadline:
                return None                    # an endless answer never holds the loop
            try:
                parts, frames = recv_frames(p.socket, 4)
            except zmq.Again:
                return None
            parts, frames = parts[1:], frames - 1              # the empty delimiter
            if frames == 3 and is_end(parts):
                return Replayed(p.key, p.start, p.batches, p.readable)
            batch = read_replayed(parts, p.topic, self.dialect, frames)
            if batch is None:
                p.readable = False
            elif batch.rank == p.key[1]:                       # this stream's batches only
                p.batches.append(batch)
                p.size += len(batch.payload)
            if len(p.batches) > MAX_REPLAYED or p.size > MAX_REPLAYED_BYTES:
                return ReplayFailed(p.key, p.start, f"the replay sent more than {MAX_REPLAYED} "
                                                    f"batches or {MAX_REPLAYED_BYTES >> 20} MiB")
        return None

    # -------------------------------------------------------------------------- the end
    def _finish(self, observer: Observer) -> None:
        """The run is over: every source's tail is asked from replay or is a gap."""
        self._feed(Ended(), observer)
        end = time.monotonic() + self.end_budget_s
        while self._replays and time.monotonic() < end:
            left_ms = max(1, int((end - time.monotonic()) * 1000))
            self._replay_only_round(observer, min(_POLL_MS, left_ms), end)
        while self._replays:                   # a failed window may ask for its tail next
            key, p = next(iter(self._replays.items()))
            del self._replays[key]
            p.socket.close(linger=0)
            self._feed(ReplayFailed(key, p.start, "the run ended before the replay endpoint "
                                                  "answered"), observer)

    def _replay_only_round(self, observer: Observer, timeout_ms: int, until: float) -> None:
        poller = zmq.Poller()
        for p in self._replays.values():
            poller.register(p.socket, zmq.POLLIN)
        self._replay_round(dict(poller.poll(timeout_ms)), observer, until)

    def close(self) -> None:
        """Close every socket."""
        for p in self._replays.values():
            p.socket.close(linger=0)
        self._replays.clear()
        for sub, monitor, _ in self.subs:
            sub.disable_monitor()
            monitor.close(linger=0)
            sub.close(linger=0)
        self.subs = []
        self.ctx.term()

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
