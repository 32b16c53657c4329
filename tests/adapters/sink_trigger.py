"""Act on a running engine the moment its trace shows something, from a process of its own.

A life test stops an engine under claimed requests (SPEC §9.1): it waits until the trace shows
the requests running, then kills, signals or pauses the engine, and the requests must still be
running when that lands -- they decode for a few seconds. The test process is no place to watch
from: it runs the clients (an ``openai`` stream turns every chunk into objects in Python, in a
thread of the watching process), and on a loaded machine it can be off the CPU for longer than
the requests run. Measured with the watch in the test process (2 cores, CPU-bound work beside
it, some in the test's own session): a 0.1 s poll sleep that returned after 5.7 s, the test's
main thread runnable and waiting for a CPU 7.6 s out of 10.3 s, so the kill landed 5.7 s after
the awaited events were in the file, when both requests had been served. (Under Linux's
autogroup scheduling the CPU is shared between sessions first: the same work in sessions of its
own delayed no poll by more than 8 ms.)

This module, run as a script, is the watcher: started in a session of its own, it imports only
the standard library, reads the lines appended to the sink after the offset it is given, and
acts as soon as every wanted ``(event, claim_id)`` pair has been written -- it sends a signal to
a process, or POSTs to a URL. It prints one JSON line once it watches and one when it acted:
what it did, and the sha256 of the bytes it had read, so that a test can check that what was
written before the act is still in the sink afterwards.

:class:`SinkTrigger` starts it from a test.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

#: how often the watcher reads the sink's new lines, in seconds
POLL_S = 0.02


class SinkTrigger:
    """The watcher, started and watching when the constructor returns; use as a context
    manager (a watcher still running at exit is killed by its PID)."""

    def __init__(self, sink: str | Path, wanted: Iterable[tuple[str, str]], *,
                 signal_to: tuple[int, int] | None = None, post: str | None = None,
                 timeout: float = 120) -> None:
        assert (signal_to is None) != (post is None), "one action: a signal or a POST"
        self.sink = Path(sink)
        self.offset = self.sink.stat().st_size  # the wanted events are written after this
        cmd = [sys.executable, "-I", "-S", __file__, str(self.sink), str(self.offset),
               "--timeout", str(timeout)]
        cmd += [a for event, cid in wanted for a in ("--want", f"{event}={cid}")]
        if signal_to is not None:
            cmd += ["--signal", str(signal_to[0]), str(signal_to[1])]
        if post is not None:
            cmd += ["--post", post]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True,
                                     start_new_session=True)
        assert self.proc.stdout is not None
        ready = self.proc.stdout.readline()
        assert ready and json.loads(ready).get("watching"), ready

    def acted(self, timeout: float = 180) -> dict[str, Any]:
        """The watcher's report once it acted; fails when it never could (the trace never
        showed the wanted events, the process was gone, the POST was not answered 200)."""
        out, _ = self.proc.communicate(timeout=timeout)
        lines = out.strip().splitlines()
        assert self.proc.returncode == 0 and lines, (self.proc.returncode, out)
        report = json.loads(lines[-1])
        assert report.get("status", 200) == 200, report  # a POST was answered OK
        # nothing written before the act is lost
        with self.sink.open("rb") as fh:
            fh.seek(self.offset)
            read = fh.read(report["read_bytes"])
        assert hashlib.sha256(read).hexdigest() == report["read_sha256"]
        return dict(report)

    def __enter__(self) -> SinkTrigger:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _act(args: argparse.Namespace) -> dict[str, Any]:
    if args.signal is not None:
        pid, signum = args.signal
        os.kill(pid, signum)
        return {"signal": signum, "pid": pid}
    req = urllib.request.Request(args.post, data=b"", method="POST")
    with urllib.request.urlopen(req, timeout=60) as r:
        return {"post": args.post, "status": int(r.status)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("sink")
    parser.add_argument("offset", type=int)
    parser.add_argument("--want", action="append", default=[], metavar="EVENT=CLAIM_ID")
    parser.add_argument("--signal", nargs=2, type=int, metavar=("PID", "SIGNUM"))
    parser.add_argument("--post", metavar="URL")
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args(argv)
    pending = {tuple(w.split("=", 1)) for w in args.want}
    digest = hashlib.sha256()
    read, tail = 0, b""
    deadline = time.monotonic() + args.timeout
    print(json.dumps({"watching": sorted(pending)}), flush=True)
    with open(args.sink, "rb") as fh:
        fh.seek(args.offset)
        while pending:
            chunk = fh.read()
            if chunk:
                lines = (tail + chunk).split(b"\n")
                tail = lines.pop()  # a line not yet written whole
                for line in lines:
                    digest.update(line + b"\n")
                    read += len(line) + 1
                    if line.strip():
                        e = json.loads(line)
                        pending.discard((e["event"], e.get("claim_id")))
                continue
            if time.monotonic() > deadline:
                print(json.dumps({"error": "the trace never showed it",
                                  "pending": sorted(pending)}), flush=True)
                return 1
            time.sleep(POLL_S)
    report = {"read_bytes": read, "read_sha256": digest.hexdigest(),
              "acted_ns": time.monotonic_ns()}
    try:
        report |= _act(args)
    except OSError as exc:
        print(json.dumps(report | {"error": repr(exc)}), flush=True)
        return 1
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
