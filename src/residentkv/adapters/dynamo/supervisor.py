"""The fleet's process supervisor: when a worker's process exits, its discovery records go.

A worker killed outright cannot deregister itself, and Dynamo's file discovery only forgets it
when its records age past the store's TTL (docs/fleet.md: 6.7-10 s, during which the KV router
keeps choosing the dead worker and its clients get anonymous HTTP 500s). The fastest signal of
the death is the kernel's: a pidfd becomes readable the moment the process has exited. The
supervisor holds one per worker, opened while the worker is alive (so a reused PID can never
be mistaken for it), and on that signal deletes exactly the records the dead instance
published (:func:`.discovery.withdraw`); every watcher of the discovery root, the frontend's
router first, drops the worker at once. It is what an orchestrator does when a pod dies.

It watches every worker from registration to the end of the run and reacts to any exit the
same way; it is never told that, or when, the harness kills one. Each reaction is recorded
(:class:`Withdrawal`, CLOCK_MONOTONIC like the kill time and the traces' ``ts_ns``).
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from residentkv.adapters.dynamo.discovery import withdraw

__all__ = ["Supervisor", "Withdrawal"]


@dataclass(frozen=True)
class Withdrawal:
    """A worker's exit as the supervisor saw it, and the records it withdrew."""

    replica: str
    pid: int
    instance_id: int
    exited_ns: int  # monotonic: when the exit was seen
    withdrawn_ns: int  # monotonic: when its records were gone
    records: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Watched:
    """One worker to watch: its main process (the one that registered) and its instance."""

    replica: str
    pid: int
    instance_id: int


@dataclass
class Supervisor:
    """Watches the given workers on a thread of its own until :meth:`close`."""

    discovery_dir: Path
    _done: list[Withdrawal] = field(default_factory=list)
    _pidfds: dict[int, Watched] = field(default_factory=dict)
    _wake: tuple[int, int] = (-1, -1)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, workers: Mapping[str, tuple[int, int]]) -> None:
        """Watch each replica -> (pid, instance id). A worker already gone is withdrawn now."""
        for replica, (pid, instance) in workers.items():
            w = Watched(replica, pid, instance)
            try:
                self._pidfds[os.pidfd_open(pid)] = w
            except ProcessLookupError:
                self._react(w)
        self._wake = os.pipe()
        self._thread = threading.Thread(target=self._run, name="fleet-supervisor", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop watching (before the graceful stop of the fleet, which deregisters itself)."""
        if self._thread is not None:
            os.write(self._wake[1], b"x")
            self._thread.join(10)
            self._thread = None
        for fd in (*self._pidfds, *self._wake):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._pidfds.clear()
        self._wake = (-1, -1)

    def withdrawals(self) -> list[Withdrawal]:
        """Every exit seen so far, in order."""
        with self._lock:
            return list(self._done)

    def _run(self) -> None:
        open_fds = set(self._pidfds)
        while open_fds:
            ready, _, _ = select.select([*open_fds, self._wake[0]], [], [])
            if self._wake[0] in ready:
                return
            for fd in ready:
                open_fds.discard(fd)
                self._react(self._pidfds[fd])

    def _react(self, w: Watched) -> None:
        exited = time.monotonic_ns()
        records = withdraw(self.discovery_dir, w.instance_id)
        done = Withdrawal(w.replica, w.pid, w.instance_id, exited, time.monotonic_ns(),
                          tuple(records))
        with self._lock:
            self._done.append(done)
