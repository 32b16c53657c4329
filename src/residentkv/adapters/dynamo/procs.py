"""Process launch, readiness waits and stop by PID, for the processes of one fleet run.

Every process starts in its own session (its own process group), so stopping it by its PID's
group also stops the children vLLM forks or spawns (EngineCore, Worker). Nothing is found or
killed by name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

__all__ = ["Proc", "StepError", "http_get", "loopback_up", "start", "stderr_to", "wait_until"]


class StepError(Exception):
    """A step of the fleet run failed; ``step`` names it, ``detail`` is what to show."""

    def __init__(self, step: str, message: str, detail: str = "") -> None:
        super().__init__(f"{step}: {message}")
        self.step = step
        self.message = message
        self.detail = detail


@dataclass
class Proc:
    """One started process (and its process group) with its log file."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    _fh: IO[bytes] | None = field(default=None, repr=False)
    killed_at: float | None = None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, lines: int = 30) -> str:
        if self._fh is not None:
            self._fh.flush()
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def group_pids(self) -> list[int]:
        """PIDs still in this process's group (the process and what it started)."""
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = (entry / "stat").read_text()
                # pgrp is the 3rd field after the parenthesised command name
                if int(stat.rsplit(")", 1)[1].split()[2]) == self.pid:
                    pids.append(int(entry.name))
        return pids

    def kill_hard(self) -> None:
        """SIGKILL the whole process group at once (a replica's abrupt death)."""
        self.killed_at = time.monotonic()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        self.popen.wait(30)

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM the group, SIGKILL it if anything in it outlives *timeout*."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout)
        deadline = time.monotonic() + timeout
        while self.group_pids() and time.monotonic() < deadline:
            time.sleep(0.2)
        if self.group_pids():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(10)
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def start(name: str, cmd: list[str], env: dict[str, str], log: Path, cwd: Path) -> Proc:
    """Start *cmd* in its own session with *env* added to ours, output to *log*."""
    log.parent.mkdir(parents=True, exist_ok=True)
    fh = log.open("ab")
    popen = subprocess.Popen(cmd, env={**os.environ, **env}, stdout=fh, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, cwd=cwd, start_new_session=True)
    return Proc(name, popen, log, fh)


@contextlib.contextmanager
def stderr_to(log: Path) -> Iterator[None]:
    """Send this process's file descriptor 2 to *log* for the block, then restore it.

    Dynamo's runtime writes its logs to stderr; the harness's own Dynamo client logs every
    routed or direct request there, and no DYN_LOG directive or logging config file reaches
    those per-request span lines (docs/fleet.md). The harness prints nothing itself inside the
    block: its results and errors come after it, on the restored stderr.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    with log.open("ab") as fh:
        os.dup2(fh.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def loopback_up() -> None:
    """Bring up ``lo`` in the fresh namespace (it starts down)."""
    try:
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise StepError("namespace", f"cannot bring up loopback: {exc}") from None


def in_private_netns() -> bool:
    """Whether this process's network namespace has nothing but loopback."""
    # not /sys/class/net: sysfs shows the namespace it was mounted in, not ours
    import socket

    return {name for _, name in socket.if_nameindex()} == {"lo"}


def http_get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    """(status, body) of a GET; status 0 when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return int(r.status), r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")
    except (OSError, ValueError):
        return 0, ""


def wait_until(step: str, check: Callable[[], Any], *, timeout: float, watch: Iterable[Proc],
               interval: float = 1.0, what: str = "") -> Any:
    """Poll *check* until it returns something truthy; fail the step with the log tail of the
    first watched process that died, or of all of them on timeout."""
    watched = list(watch)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc in watched:
            if not proc.alive():
                raise StepError(step, f"{proc.name} (pid {proc.pid}) exited with "
                                f"{proc.popen.returncode} while waiting for {what or step}",
                                f"--- {proc.log} (tail) ---\n{proc.tail()}")
        result = check()
        if result:
            return result
        time.sleep(interval)
    tails = "\n".join(f"--- {p.log} (tail) ---\n{p.tail(15)}" for p in watched)
    raise StepError(step, f"timed out after {timeout:.0f}s waiting for {what or step}", tails)
