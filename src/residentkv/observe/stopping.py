"""Stopping an observation: SIGINT/SIGTERM and the deadline, honoured in every state.

Before the subscription starts (reading the claims file, asking the server) a stop ends the
command at once: :func:`interrupting` makes the signal — or the deadline, through an interval
timer — raise :class:`ObservationStopped` wherever the main thread is, a blocked socket read
included. Nothing was observed then, so the command exits 2 (``T052``) and writes no trace.
Once the subscription runs, a signal only sets the stop event (:func:`signalling`): the loop
sees it within one poll, closes each publisher stream's tail, and flushes and closes the trace.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from residentkv.errors import UserInputError

STOPPED_EARLY = "T052"
_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class ObservationStopped(UserInputError):
    """A stop (signal or deadline) came before anything was observed (exit code 2)."""

    code = STOPPED_EARLY


def _stopped(why: str, doing: str) -> ObservationStopped:
    return ObservationStopped(f"{why} while {doing}: nothing was observed and no trace was "
                              "written")


def check(stop: threading.Event | None, deadline: float | None, doing: str) -> None:
    """Raise :class:`ObservationStopped` when *stop* is set or the monotonic *deadline* passed
    (for loops that run outside :func:`interrupting`, e.g. in a test's thread)."""
    if stop is not None and stop.is_set():
        raise _stopped("stopped", doing)
    if deadline is not None and time.monotonic() >= deadline:
        raise _stopped("the deadline (--duration) passed", doing)


@contextmanager
def interrupting(stop: threading.Event, deadline: float | None, doing: str) -> Iterator[None]:
    """Within the block (main thread only), SIGINT/SIGTERM and the monotonic *deadline* raise
    :class:`ObservationStopped` naming *doing*; *stop* is set as well."""
    def _raise(signum: int, frame: FrameType | None) -> None:
        stop.set()
        why = "the deadline (--duration) passed" if signum == signal.SIGALRM else (
            f"stopped by {signal.Signals(signum).name}")
        raise _stopped(why, doing)

    check(stop, deadline, doing)
    previous = {s: signal.signal(s, _raise) for s in (*_SIGNALS, signal.SIGALRM)}
    try:
        if deadline is not None:
            signal.setitimer(signal.ITIMER_REAL, max(1e-3, deadline - time.monotonic()))
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for s, handler in previous.items():
            signal.signal(s, handler)


@contextmanager
def signalling(stop: threading.Event) -> Iterator[None]:
    """Within the block (main thread only), SIGINT/SIGTERM set *stop* and nothing else."""
    def _set(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, _set) for s in _SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
