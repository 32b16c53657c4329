"""Operator control while the engine serves: a local unix socket, never an API route.

When ``control_socket`` is configured, the scheduler process listens on that path (created with
mode 0600: the file system permission is the credential; an ordinary API client of the server has
no way to reach it). One JSON object per line in, one per line out:

``{"op": "configure", "event_sink": "...", "failure_injection": [...], "offload_unclaimed": b,
"verify_content": b, "budgets": {"claims": n, "blocks": n, "bytes": n}}``,
``{"op": "release", "claim_ids": [...], "reason": "..."}``, ``{"op": "outcome", "request_id":
"...", "contains": false}``, ``{"op": "status"}``, ``{"op": "flush"}``, ``{"op": "announce",
"channel": "..."}`` (the server's claim outcome middleware says it is there), and for the witness
harness ``{"op": "counter", "name": ..., "value": ..., "request_id": ...}`` (a
``generic_counter`` it read from vLLM's output), and ``{"op": "written", "sink": "..."}`` (the
sha256 of the last stream the engine wrote to that sink and closed, for the live root).
Answers are ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": "..."}``.

``{"op": "watch"}`` keeps the connection open: the answer (``{"ok": true, "result":
{"incarnation": ...}}``) is followed, when the engine stops gracefully, by one line
``{"event": "closed", "reason": "shutdown"}`` and the end of the connection; when the engine
process dies the connection simply ends. The server middleware watches this way, so it learns
that the engine is gone the moment it is, whatever vLLM's front end does with the requests.

:class:`ControlClient` speaks it with the same method names as the in-process
:class:`~residentkv.adapters.vllm.control.Operator`.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import socketserver
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from residentkv.adapters.vllm.config import InjectionRule
from residentkv.adapters.vllm.control import Operator
from residentkv.adapters.vllm.rules import Budgets

__all__ = ["ControlClient", "ControlError", "ControlServer", "serve_control"]


class ControlError(RuntimeError):
    """The control socket refused a command or could not be reached.

    ``gone``: nothing listens on the socket any more, or it hung up without an answer (the
    engine process ended); a timeout is not ``gone`` (the engine may only be slow)."""

    def __init__(self, message: str, *, gone: bool = False) -> None:
        super().__init__(message)
        self.gone = gone


def _rules(raw: Any) -> list[InjectionRule]:
    if not isinstance(raw, list):
        raise ValueError("failure_injection must be a list of rules")
    return [InjectionRule.model_validate(r) for r in raw]


def _budgets(raw: Any) -> Budgets | None:
    """``{"claims", "blocks", "bytes"}``: each a positive integer or null (unbounded)."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or raw.keys() - {"claims", "blocks", "bytes"}:
        raise ValueError("budgets is an object with claims, blocks, bytes (each an integer > 0 "
                         "or null)")
    for key, value in raw.items():
        if value is not None and (type(value) is not int or value <= 0):
            raise ValueError(f"budgets.{key} must be an integer > 0 or null")
    return Budgets(raw.get("claims"), raw.get("blocks"), raw.get("bytes"))


def dispatch(op: Operator, cmd: dict[str, Any]) -> Any:
    """Run one control command against *op*."""
    name = cmd.get("op")
    if name == "configure":
        verify = cmd.get("verify_content")
        if verify is not None and not isinstance(verify, bool):
            raise ValueError("verify_content must be true or false")
        op.configure(
            event_sink=cmd.get("event_sink"),
            failure_injection=_rules(cmd["failure_injection"])
            if "failure_injection" in cmd else None,
            offload_unclaimed=cmd.get("offload_unclaimed"),
            verify_content=verify,
            budgets=_budgets(cmd.get("budgets")),
        )
        return op.status()
    if name == "release":
        ids = cmd.get("claim_ids")
        if not isinstance(ids, list) or not all(isinstance(c, str) for c in ids):
            raise ValueError("claim_ids must be a list of strings")
        return op.release_claims(ids, str(cmd.get("reason") or "operator release"))
    if name == "outcome":
        rid = cmd.get("request_id")
        if not isinstance(rid, str) or not rid:
            raise ValueError("request_id must be a non-empty string")
        return op.outcome_for(rid, contains=bool(cmd.get("contains")))
    if name == "counter":
        # A runtime counter the harness read from vLLM's own output: it names no claim and can
        # never satisfy an obligation; written here because the engine is the stream's writer.
        with op.lock:
            ev = op.emit("generic_counter", source="harness", request_id=cmd.get("request_id"),
                         name=str(cmd["name"]), value=int(cmd["value"]))
            op.end_step()
        return ev["seq"]
    if name == "announce":
        channel = cmd.get("channel")
        if not isinstance(channel, str) or not channel:
            raise ValueError("channel must be a non-empty string")
        op.announce_outcome_channel(channel)
        return True
    if name == "status":
        return op.status()
    if name == "flush":
        op.flush()
        return True
    if name == "written":
        sink = cmd.get("sink")
        if not isinstance(sink, str) or not sink:
            raise ValueError("sink must be a non-empty string")
        return op.written_sha256(sink)
    raise ValueError(f"unknown op {name!r}; one of configure, release, outcome, status, flush, "
                     "announce, counter, watch, written")


class _Handler(socketserver.StreamRequestHandler):
    server: ControlServer

    def handle(self) -> None:
        for line in self.rfile:
            try:
                cmd = json.loads(line)
                if not isinstance(cmd, dict):
                    raise ValueError("a command is a JSON object")
                if cmd.get("op") == "watch":
                    self._watch()
                    return
                reply = {"ok": True, "result": dispatch(self.server.operator, cmd)}
            except (ValueError, KeyError, ValidationError) as exc:
                reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            self.wfile.write(json.dumps(reply).encode() + b"\n")
            self.wfile.flush()

    def _watch(self) -> None:
        """Hold the connection until the engine closes (one closing line) or the watcher
        hangs up."""
        closed = self.server.watch_closed
        reply = {"ok": True, "result": {"incarnation": self.server.operator.incarnation}}
        self.wfile.write(json.dumps(reply).encode() + b"\n")
        self.wfile.flush()
        while not closed.wait(0.5):
            readable, _, _ = select.select([self.connection], [], [], 0)
            if readable and not self.connection.recv(1, socket.MSG_PEEK):
                return  # the watcher hung up
        line = {"event": "closed", "reason": self.server.closed_reason}
        with contextlib.suppress(OSError):
            self.wfile.write(json.dumps(line).encode() + b"\n")
            self.wfile.flush()


class ControlServer(socketserver.ThreadingUnixStreamServer):
    """The control socket of one engine, served on a daemon thread."""

    daemon_threads = True

    def __init__(self, path: str | Path, op: Operator) -> None:
        self.path = str(path)
        self.operator = op
        #: set when the engine closed gracefully: watchers get one closing line
        self.watch_closed = threading.Event()
        self.closed_reason = ""
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)  # a stale socket of an earlier engine
        old = os.umask(0o177)  # the socket is created 0600: only its owner may connect
        try:
            super().__init__(self.path, _Handler)
        finally:
            os.umask(old)
        self.thread = threading.Thread(target=self.serve_forever, name="residentkv-control",
                                       daemon=True)
        self.thread.start()

    def engine_closed(self, reason: str) -> None:
        """The engine closed its last stream: tell every watcher (the engine is gone)."""
        self.closed_reason = reason
        self.watch_closed.set()

    def close(self) -> None:
        """Stop serving and remove the socket file."""
        self.engine_closed("control socket closed")
        self.shutdown()
        self.server_close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


_SERVERS: dict[str, ControlServer] = {}


def serve_control(path: str, op: Operator) -> ControlServer:
    """Serve *op* on *path* (once per path and process; a new operator takes over the path)."""
    server = _SERVERS.get(path)
    if server is not None:
        server.operator = op
        server.watch_closed.clear()
    else:
        server = _SERVERS[path] = ControlServer(path, op)
    op.on_close.append(server.engine_closed)
    return server


class ControlClient:
    """Talks to an engine's control socket; mirrors the in-process operator's methods."""

    def __init__(self, path: str | Path, timeout: float = 30.0) -> None:
        self.path = str(path)
        self.timeout = timeout

    def call(self, op: str, **args: Any) -> Any:
        """Send one command and return its result (raises :class:`ControlError`)."""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(self.timeout)
                sock.connect(self.path)
                sock.sendall(json.dumps({"op": op, **args}).encode() + b"\n")
                data = b""
                while not data.endswith(b"\n"):
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    data += chunk
        except OSError as exc:
            gone = isinstance(exc, (ConnectionRefusedError, FileNotFoundError,
                                    ConnectionResetError, BrokenPipeError))
            raise ControlError(f"control socket {self.path}: {exc}", gone=gone) from None
        try:
            reply = json.loads(data)
        except ValueError:
            raise ControlError(f"control socket {self.path}: no answer",
                               gone=not data) from None
        if not reply.get("ok"):
            raise ControlError(str(reply.get("error")))
        return reply.get("result")

    def configure(self, *, event_sink: str | Path | None = None,
                  failure_injection: Sequence[InjectionRule | dict[str, Any]] | None = None,
                  offload_unclaimed: bool | None = None,
                  verify_content: bool | None = None,
                  budgets: Budgets | None = None) -> dict[str, Any]:
        """Swap the sink, the injection rules, the unclaimed-offload switch, content
        verification or the per-owner budgets."""
        args: dict[str, Any] = {}
        if event_sink is not None:
            args["event_sink"] = str(event_sink)
        if failure_injection is not None:
            args["failure_injection"] = [
                r.model_dump(mode="json", exclude_defaults=True)
                if isinstance(r, InjectionRule) else r for r in failure_injection]
        if offload_unclaimed is not None:
            args["offload_unclaimed"] = offload_unclaimed
        if verify_content is not None:
            args["verify_content"] = verify_content
        if budgets is not None:
            args["budgets"] = {"claims": budgets.claims, "blocks": budgets.blocks,
                               "bytes": budgets.bytes}
        result: dict[str, Any] = self.call("configure", **args)
        return result

    def release_claims(self, claim_ids: list[str], reason: str = "operator release") -> int:
        """End live claims; returns how many were live."""
        return int(self.call("release", claim_ids=list(claim_ids), reason=reason))

    def outcome_for(self, request_id: str) -> dict[str, Any] | None:
        """The claim outcome of a request (final or current)."""
        result: dict[str, Any] | None = self.call("outcome", request_id=request_id)
        return result

    def status(self) -> dict[str, Any]:
        """Sink, events written, injections fired, live claims, rules."""
        result: dict[str, Any] = self.call("status")
        return result

    def announce(self, channel: str) -> None:
        """Tell the engine that claim outcomes reach the server's clients through *channel*."""
        self.call("announce", channel=channel)

    def counter(self, name: str, value: int, request_id: str | None = None) -> int:
        """Write a ``generic_counter`` read from vLLM's output (harness only); returns its seq."""
        return int(self.call("counter", name=name, value=value, request_id=request_id))

    def flush(self) -> None:
        """Ask the engine to write buffered events through (they already are, per step)."""
        self.call("flush")

    @property
    def sink(self) -> str:
        """The current event sink."""
        return str(self.status()["sink"])

    def written_sha256(self, sink: str | Path) -> str | None:
        """sha256 of the last stream the engine's writer wrote to *sink* and closed."""
        result: str | None = self.call("written", sink=str(sink))
        return result

    @property
    def injections_fired(self) -> int:
        """How many loads the injection rules have failed so far."""
        return int(self.status()["injections_fired"])
