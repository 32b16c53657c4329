"""The deployment under test: a vLLM OpenAI server the harness starts (and may kill, stop and
restart on the same event sink), or one it attaches to by URL and control socket.

A managed server is the documented one -- ``python -m vllm.entrypoints.openai.api_server`` with
``ResidentClaimConnector``, the claim outcome middleware and a control socket -- on 127.0.0.1,
with a small device cache (``--num-gpu-blocks-override``) so that claimed prefixes leave the
device and reuses restore from the host tier, ``--shutdown-timeout`` so that SIGTERM is a
graceful stop (vLLM drains; its default 0 kills the EngineCore at once), and
``--enable-request-id-headers`` so every response names its request's ticket. Each start is
one *incarnation* on the same sink and port. Every process is stopped by its own id: the server
by its pid (and its process group, which holds the EngineCore and Worker it started), the
EngineCore by the pid found among the server's descendants. An attached server is never
signalled.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from residentkv.adapters.vllm.chaos.model import Incarnation, StopCause
from residentkv.adapters.vllm.control_socket import ControlClient, ControlError
from residentkv.errors import UsageError

__all__ = ["AttachedDeployment", "Deployment", "LoadWindow", "ManagedDeployment", "ServerShape",
           "engine_core_pid", "loopback_url"]

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def loopback_url(url: str) -> str:
    """*url* if it is an ``http`` URL on the loopback interface (traffic stays on the host)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http" or parts.hostname not in LOOPBACK or parts.port is None:
        raise UsageError(f"--url {url!r}: the harness sends traffic to the loopback interface "
                         "only; give http://127.0.0.1:PORT")
    return f"http://{parts.hostname}:{parts.port}"


def _children(pid: int) -> list[int]:
    """Direct children of *pid* (from /proc; nothing is found by name)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            # ppid is the 2nd field after the parenthesised command name
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def engine_core_pid(server_pid: int) -> int | None:
    """The EngineCore among the server's descendants (vLLM titles it ``VLLM::EngineCore``)."""
    todo = [server_pid]
    while todo:
        pid = todo.pop()
        for child in _children(pid):
            with contextlib.suppress(OSError):
                title = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ")
                comm = Path(f"/proc/{child}/comm").read_bytes()
                if b"EngineCore" in title or b"EngineCore" in comm:
                    return child
            todo.append(child)
    return None


@dataclass(frozen=True)
class ServerShape:
    """How a managed server is started: device cache, host tier, batch, context."""

    device_blocks: int = 16
    host_tier_bytes: int = 4 << 20
    max_num_seqs: int = 4
    max_model_len: int = 1024
    #: vLLM's ``--shutdown-timeout``: > 0 drains on SIGTERM (a graceful stop, in which the
    #: connector ends its claims); 0, vLLM's default, aborts and kills the EngineCore at once
    shutdown_timeout_s: int = 30
    ready_timeout_s: float = 300.0


class Deployment:
    """What the harness needs of a deployment (both kinds)."""

    managed = False
    base_url: str
    control_socket: str
    model: str

    def __init__(self) -> None:
        self.up = threading.Event()
        self.incarnations: list[Incarnation] = []
        self._lock = threading.Lock()
        self._t0 = time.monotonic()
        self._down_at: float | None = None
        self._downtime = 0.0

    def went_down(self) -> None:
        """The server stops serving (a fault began)."""
        with self._lock:
            if self.up.is_set():
                self.up.clear()
                self._down_at = self.now()

    def came_up(self) -> None:
        """The server serves (again)."""
        with self._lock:
            if self._down_at is not None:
                self._downtime += self.now() - self._down_at
                self._down_at = None
            self.up.set()

    def downtime(self) -> float:
        """Seconds the server has not served since it first came up."""
        with self._lock:
            current = self.now() - self._down_at if self._down_at is not None else 0.0
            return self._downtime + current

    def set_clock(self, t0: float) -> None:
        """Times recorded from now on are seconds since *t0* (``time.monotonic``)."""
        self._t0 = t0

    def now(self) -> float:
        """Seconds since the run's start."""
        return time.monotonic() - self._t0

    @property
    def incarnation(self) -> int:
        """The index of the current (or last) incarnation."""
        return len(self.incarnations) - 1

    def control(self) -> ControlClient:
        """The engine's control socket."""
        return ControlClient(self.control_socket, timeout=10.0)

    def sink(self) -> str:
        """The engine's event sink, as the engine reports it."""
        try:
            return str(self.control().status()["sink"])
        except (ControlError, KeyError) as exc:
            raise UsageError(f"control socket {self.control_socket}: {exc}") from None

    def wait_up(self, timeout: float) -> bool:
        """Wait until the server serves (it may be restarting)."""
        return self.up.wait(timeout)

    def stop_at_end(self) -> None:
        """End the run's use of the deployment."""

    def kill_engine(self) -> str:
        raise NotImplementedError

    def terminate(self) -> str:
        raise NotImplementedError

    def restart(self) -> str:
        raise NotImplementedError

    def _replace_last(self, **changes: Any) -> None:
        with self._lock:
            last = self.incarnations[-1]
            self.incarnations[-1] = last.model_copy(update=changes)


class LoadWindow:
    """The load's time: seconds the deployment *served* since the load began (a restart's
    downtime does not count), bounded by a wall-clock limit."""

    def __init__(self, deployment: Deployment, duration_s: float, wall_limit_s: float) -> None:
        self.deployment = deployment
        self.duration_s = duration_s
        self.start = deployment.now()
        self.wall_end = self.start + wall_limit_s
        self._downtime0 = deployment.downtime()

    def served(self) -> float:
        """Seconds of serving since the load began."""
        d = self.deployment
        return d.now() - self.start - (d.downtime() - self._downtime0)

    def wall_left(self) -> float:
        """Wall-clock seconds before the limit."""
        return self.wall_end - self.deployment.now()

    def over(self) -> bool:
        """The load has served its duration, or the wall-clock limit passed."""
        return self.served() >= self.duration_s or self.wall_left() <= 0


class AttachedDeployment(Deployment):
    """A server someone else runs: the harness sends requests and operator commands, never
    signals."""

    def __init__(self, base_url: str, control_socket: str) -> None:
        super().__init__()
        self.base_url = loopback_url(base_url)
        if not Path(control_socket).exists():
            raise UsageError(f"--control-socket {control_socket}: no such socket")
        self.control_socket = control_socket
        self.model = _served_model(self.base_url)
        self.incarnations = [Incarnation(index=0, started_at=0.0, ready_at=0.0)]
        self.came_up()

    def stop_at_end(self) -> None:
        self._replace_last(stopped_by=StopCause.ATTACHED)


def _served_model(base_url: str) -> str:
    try:
        with urllib.request.urlopen(base_url + "/v1/models", timeout=10) as r:
            data = json.load(r)
        return str(data["data"][0]["id"])
    except (OSError, ValueError, KeyError, IndexError) as exc:
        raise UsageError(f"{base_url}/v1/models: cannot read the served model: {exc}") from None


class ManagedDeployment(Deployment):
    """The documented server, started by the harness on 127.0.0.1, restarted on one sink."""

    managed = True

    def __init__(self, work_dir: Path, shape: ServerShape) -> None:
        from residentkv.adapters.vllm.engine import (
            SERVED_MODEL_NAME,
            free_port,
            transfer_config,
            write_tiny_model,
        )

        super().__init__()
        self.work_dir = work_dir
        self.shape = shape
        self.model_dir = write_tiny_model(work_dir / "tiny-llama")
        self.model = SERVED_MODEL_NAME
        self.event_sink = work_dir / "trace.jsonl"
        # short and absolute: unix socket paths are limited to 107 bytes
        self.control_socket = f"/tmp/rkv-chaos-{os.getpid()}-{id(self):x}.sock"
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.transfer = transfer_config(event_sink=self.event_sink, policy="fail",
                                        host_tier_bytes=shape.host_tier_bytes,
                                        extra={"control_socket": self.control_socket})
        self.server: Any = None

    def _args(self) -> list[str]:
        s = self.shape
        return ["--num-gpu-blocks-override", str(s.device_blocks),
                "--max-model-len", str(s.max_model_len), "--max-num-seqs", str(s.max_num_seqs),
                "--shutdown-timeout", str(s.shutdown_timeout_s), "--enable-request-id-headers"]

    def start(self) -> str:
        """Start one incarnation and wait until it serves."""
        from residentkv.adapters.vllm.engine import ServerProcess

        index = len(self.incarnations)
        log = self.work_dir / f"server-{index}.log"
        started = self.now()
        self.server = ServerProcess(self.model_dir, self.transfer, log=log, port=self.port,
                                    extra_args=self._args())
        with self._lock:
            self.incarnations.append(Incarnation(index=index, started_at=round(started, 3),
                                                 pid=self.server.proc.pid, log=str(log)))
        try:
            self.server.wait_ready(self.shape.ready_timeout_s)
        except RuntimeError:
            self._replace_last(stopped_at=round(self.now(), 3), stopped_by=StopCause.DIED)
            raise
        ready = self.now()
        self._replace_last(ready_at=round(ready, 3))
        self.came_up()
        return f"incarnation {index} (pid {self.server.proc.pid}) ready in {ready - started:.1f} s"

    def _ended(self, cause: StopCause) -> None:
        """The server is gone (or going): record it and reap its whole group."""
        self.server.stop(signal.SIGKILL, timeout=10.0)
        self._replace_last(stopped_at=round(self.now(), 3), stopped_by=cause)

    def _wait_exit(self, timeout: float) -> int | None:
        try:
            return int(self.server.proc.wait(timeout))
        except Exception:  # subprocess.TimeoutExpired: it did not end by itself
            return None

    def kill_engine(self) -> str:
        """SIGKILL the EngineCore; the API server notices and exits."""
        self.went_down()
        core = engine_core_pid(self.server.proc.pid)
        if core is None:
            self._ended(StopCause.DIED)
            return "no EngineCore process under the server; the server was stopped"
        os.kill(core, signal.SIGKILL)
        code = self._wait_exit(60.0)
        self._ended(StopCause.KILLED_ENGINE)
        return (f"EngineCore pid {core} killed; the API server (pid {self.server.proc.pid}) "
                + (f"exited with {code}" if code is not None else "did not exit, was killed"))

    def terminate(self) -> str:
        """SIGTERM to the API server process (a graceful stop), as an operator would."""
        self.went_down()
        pid = self.server.proc.pid
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        code = self._wait_exit(self.shape.shutdown_timeout_s + 60.0)
        self._ended(StopCause.TERMINATED)
        return (f"SIGTERM to the API server (pid {pid}); "
                + (f"exited with {code}" if code is not None else "did not exit, was killed"))

    def restart(self) -> str:
        """A new incarnation on the same sink, port and control socket."""
        return self.start()

    def stop_at_end(self) -> None:
        """The final, graceful stop (SIGTERM to the API server)."""
        if self.server is None or self.server.proc.poll() is not None:
            return
        self.terminate()
        self._replace_last(stopped_by=StopCause.FINAL_STOP)

    def close(self) -> None:
        """Make sure nothing started here outlives the run (nor its control socket file)."""
        if self.server is not None and self.server.proc.poll() is None:
            self._ended(StopCause.DIED)
        elif self.server is not None:
            self.server.stop(signal.SIGKILL, timeout=5.0)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.control_socket)
