"""Run a page's command blocks as a newcomer would paste them, in a scratch folder.

Each command runs in ``bash`` in the page's scratch folder, with the environment of a fresh
shell (:func:`newcomer_env`: no ``VLLM_*``, ``RESIDENTKV_*`` or ``OPENAI_*`` setting leaks in
from the test process) and this Python's ``bin`` first on ``PATH`` (so ``python`` and
``residentkv`` are the installed ones). A script whose last command starts a server
(:data:`SERVERS`) runs in the background, in its own process group, until the page ends; the
page's setup says when it is ready.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from docblocks import Block, matches

#: commands that run until stopped: a script ending with one runs in the background
SERVERS = ("python -m vllm.entrypoints.openai.api_server", "residentkv observe")
#: what a fresh shell of the reader has; everything else of the test process stays out
KEPT_ENV = ("HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH", "CI",
            "XDG_CACHE_HOME", "RESIDENTKV_CACHE")
COMMAND_TIMEOUT = 600.0
#: what bash itself says when a pasted line cannot run (a missing command or file, bad syntax)
SHELL_ERROR = re.compile(r"^bash: (line \d+: )?")


def newcomer_env() -> dict[str, str]:
    """The environment of a fresh shell, with this interpreter's ``bin`` first on PATH."""
    env = {k: os.environ[k] for k in KEPT_ENV if k in os.environ}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent),
                                   os.environ.get("PATH", "/usr/bin:/bin")])
    return env


@dataclass
class Background:
    """A server a script started; stopped with its whole process group."""

    command: str
    proc: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 30) -> str:
        text = self.log.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        for sig, wait in ((signal.SIGINT, 30.0), (signal.SIGTERM, 15.0), (signal.SIGKILL, 10.0)):
            if self.proc.poll() is not None:
                break
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(wait)
        # children (vLLM's EngineCore and workers) may outlive the server: end the group
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)


@dataclass
class Scratch:
    """A page's scratch folder, the words its setup replaces, and the servers it started."""

    folder: Path
    #: word -> replacement in every command (e.g. the page's port 8000 -> a free port)
    subs: dict[str, str] = field(default_factory=dict)
    #: called with a started server until it is ready (raises when it cannot become ready)
    ready: Callable[[Background], None] | None = None
    env: dict[str, str] = field(default_factory=newcomer_env)
    servers: list[Background] = field(default_factory=list)

    def substitute(self, command: str) -> str:
        for word, new in self.subs.items():
            command = re.sub(rf"(?<![\w.]){re.escape(word)}(?![\w])", new, command)
        return command

    def stop(self) -> None:
        for server in reversed(self.servers):
            server.stop()
        self.servers.clear()


@contextlib.contextmanager
def scratch(folder: Path, **kw: object) -> Iterator[Scratch]:
    """A :class:`Scratch` whose servers are stopped whatever happens."""
    s = Scratch(folder, **kw)  # type: ignore[arg-type]
    try:
        yield s
    finally:
        s.stop()


def _last_command(script: str) -> str:
    """The script's last command: its last line that starts in the first column (continuation
    lines, a quoted JSON argument's included, are indented), comments left out."""
    starts = [ln for ln in script.splitlines()
              if ln.strip() and not ln[0].isspace() and not ln.startswith("#")]
    return starts[-1] if starts else ""


def starts_server(block: Block) -> bool:
    return block.kind == "script" and _last_command(block.text).startswith(SERVERS)


def run_block(block: Block, s: Scratch) -> list[str]:
    """Run every command of *block*; return its outputs. Raises AssertionError (naming the
    page line, the command and its output) when a command fails or shows other output."""
    if starts_server(block):
        _start(block, s)
        return []
    outputs = []
    for step in block.steps:
        command = s.substitute(step.command)
        code, out = run_command(command, s)
        outputs.append(out)
        where = f"{block.where()}: {command!r} exited {code}"
        if step.shown:
            assert matches(step.shown, out), (
                f"{where}; the page shows:\n" + "\n".join(step.shown) + f"\nit printed:\n{out}")
        else:
            shell_errors = [ln for ln in out.splitlines() if SHELL_ERROR.match(ln)]
            assert code == 0 and not shell_errors, f"{where}:\n{out}"
    return outputs


def run_command(script: str, s: Scratch) -> tuple[int, str]:
    """Run *script* in bash (its own process group, ended whole if it hangs): exit code and
    output (standard output and error together, as a terminal shows them)."""
    proc = subprocess.Popen(["bash", "-c", script], cwd=s.folder, env=s.env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=COMMAND_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"{script!r} did not end within {COMMAND_TIMEOUT:.0f}s:\n"
                             + out.decode("utf-8", errors="replace")) from None
    finally:
        # whatever the script left running in the background (a server it did not stop)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, out.decode("utf-8", errors="replace")


def _start(block: Block, s: Scratch) -> None:
    command = s.substitute(block.steps[0].command)
    log = s.folder / f".server-{len(s.servers)}.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen(["bash", "-c", command], cwd=s.folder, env=s.env,
                                stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    server = Background(_last_command(command), proc, log)
    s.servers.append(server)
    assert s.ready is not None, f"{block.where()}: the page's setup says nothing of servers"
    s.ready(server)


def wait_http(url: str, timeout: float = 600.0) -> Callable[[Background], None]:
    """Readiness: *url* answers 200 (the server dying first is a failure, with its log)."""
    import urllib.request

    def ready(server: Background) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert server.proc.poll() is None, (
                f"{server.command!r} exited {server.proc.returncode}:\n{server.tail()}")
            with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
            time.sleep(1.0)
        raise AssertionError(f"{server.command!r} not ready after {timeout:.0f}s:\n"
                             + server.tail())
    return ready
