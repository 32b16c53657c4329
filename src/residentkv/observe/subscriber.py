"""The subscription to a runtime's KV event publisher (ZeroMQ SUB) and its replay endpoint.

vLLM's publisher *binds* ``ipc://``/``inproc://`` and wildcard endpoints and *connects* to
``tcp://host:port``; the observer does the opposite (``bind=True`` for a connecting publisher).
A socket monitor reports a dropped connection to the observer, so the batches published while
it was down become a gap unless the replay endpoint still holds them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType

import zmq
from zmq.utils.monitor import recv_monitor_message

from residentkv.observe.observer import Observer
from residentkv.observe.wire import END_SEQ, Frame, WireError, decode_frame

#: how long one replay request may take before the batches not received count as missed
REPLAY_TIMEOUT_S = 3.0
_POLL_MS = 100


class Subscription:
    """A SUB socket on *endpoint* (connect, or bind with *bind*), filtered by *topic*."""

    def __init__(self, endpoint: str, *, bind: bool = False, topic: bytes = b"",
                 replay_endpoint: str | None = None) -> None:
        self.ctx = zmq.Context()
        self.sub = self.ctx.socket(zmq.SUB)
        self.sub.set_hwm(0)  # never drop on our side: a slow observer must not invent gaps
        self.sub.setsockopt(zmq.SUBSCRIBE, topic)
        self.monitor = self.sub.get_monitor_socket(
            zmq.EVENT_CONNECTED | zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED)
        if bind:
            self.sub.bind(endpoint)
        else:
            self.sub.connect(endpoint)
        self.topic = topic
        self.replay_endpoint = replay_endpoint
        self.connected = False
        self.received = 0

    def replay(self, start: int) -> list[Frame]:
        """Ask the replay endpoint for every buffered batch from *start* (empty without one, or
        when it does not answer within :data:`REPLAY_TIMEOUT_S`)."""
        if self.replay_endpoint is None:
            return []
        dealer = self.ctx.socket(zmq.DEALER)
        dealer.connect(self.replay_endpoint)
        frames: list[Frame] = []
        try:
            dealer.send_multipart([b"", start.to_bytes(8, "big")])
            deadline = time.monotonic() + REPLAY_TIMEOUT_S
            while (left := deadline - time.monotonic()) > 0:
                if not dealer.poll(int(left * 1000)):
                    break
                parts = dealer.recv_multipart()[1:]  # drop the empty delimiter
                if len(parts) == 3 and parts[1] == END_SEQ:
                    break
                if not parts or not parts[0].startswith(self.topic):
                    continue
                try:
                    frames.append(decode_frame(parts))
                except WireError:
                    continue  # an undecodable replay fills nothing: it stays missed
        finally:
            dealer.close(linger=0)
        return frames

    def run(self, observer: Observer, stop: threading.Event, *, deadline: float | None = None,
            tick: Callable[[], None] | None = None, tick_every_s: float = 0.5) -> None:
        """Feed *observer* until *stop* is set or the monotonic *deadline* passes."""
        poller = zmq.Poller()
        poller.register(self.sub, zmq.POLLIN)
        poller.register(self.monitor, zmq.POLLIN)
        next_tick = 0.0
        while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
            ready = dict(poller.poll(_POLL_MS))
            if self.monitor in ready:
                self._monitor_event(observer)
            if self.sub in ready:
                self._drain(observer)
                observer.writer.flush()
            if tick is not None and time.monotonic() >= next_tick:
                tick()
                next_tick = time.monotonic() + tick_every_s

    def _drain(self, observer: Observer) -> None:
        while True:
            try:
                parts = self.sub.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            self.received += 1
            try:
                frame = decode_frame(parts)
            except WireError:
                if len(parts) == 3 and len(parts[1]) == 8:
                    observer.on_undecodable(int.from_bytes(parts[1], "big"))
                continue
            observer.on_frame(frame)

    def _monitor_event(self, observer: Observer) -> None:
        while True:
            try:
                msg = recv_monitor_message(self.monitor, zmq.NOBLOCK)
            except zmq.Again:
                return
            event = msg["event"]
            if event in (zmq.EVENT_CONNECTED, zmq.EVENT_ACCEPTED):
                self.connected = True
            elif event == zmq.EVENT_DISCONNECTED and self.connected:
                self.connected = False
                observer.on_disconnect()

    def close(self) -> None:
        """Close the sockets."""
        self.sub.disable_monitor()
        self.monitor.close(linger=0)
        self.sub.close(linger=0)
        self.ctx.term()

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
