"""Claim outcomes the client of vLLM's OpenAI server can see, through unpatched vLLM.

vLLM 0.32 finishes a request whose claimed restore failed under policy ``fail`` with
``FINISHED_ERROR``; its OpenAI server turns that into an anonymous HTTP 500 (or, streaming, an
error chunk after a 200), which the official ``openai`` client retries by default -- and the
retry, served by recompute, hides the fail-closed outcome. Loaded with
``--middleware residentkv.adapters.vllm.server.ClaimOutcomeMiddleware``, this ASGI middleware
watches requests that carry ``kv_transfer_params.resident_claim`` or a reuse reference
``kv_transfer_params.resident_claim_ref``:

- it gives each one a fresh ``X-Request-Id`` (vLLM builds its request id from it), so the
  claim outcome can be looked up on the engine's control socket by that ticket alone;
- a response that failed (HTTP >= 500, or a stream whose first decisive chunk is an error)
  whose claim outcome is ``refused`` becomes **HTTP 409** with ``x-should-retry: false`` and an
  OpenAI-style error body ``{"error": {"message", "type": "resident_claim_refused", "code",
  "resident_claim": {"claim_id", "outcome", "reason", "seq"}, "request_id"}}`` -- streaming
  requests get the same response, since a refusal always comes before the first token;
- every other response of a claimed request carries ``x-residentkv-claim-outcome`` (and
  ``x-residentkv-claim-id``), so a request served without its claim (``rejected``,
  ``fallback_recompute``; a reference to a claim this replica does not hold) is never mistaken
  for one that held it;
- a claimed request whose engine died or stopped under it -- or which the engine never took in
  because it was stopping -- becomes **HTTP 503** with ``x-should-retry: false`` and outcome
  ``engine_stopped`` naming the claim and the loss (``seq`` null: the engine's trace records the
  loss itself, at its next start or before it closes its stream); a stream already under way
  ends with that error as its last ``data:`` line. Never an anonymous 500, never an empty 200.
  A request vLLM ends with ``finish_reason: "abort"`` that the engine had taken in is held back
  until the engine's fate is known: vLLM's default ``--shutdown-timeout 0`` aborts the running
  requests on SIGTERM and the engine ends a moment later, so an engine that ends within
  :data:`ABORT_GRACE_S` answers it ``engine_stopped`` too (never a bare abort as its end); one
  that lives on (``/pause``, which aborts) lets the abort through with the claim's outcome.
  The middleware learns that the engine is gone from a ``watch`` connection to its control
  socket (it ends when the engine process does), answers at once, and cancels vLLM's handler
  (which may otherwise wait for an engine that will never answer).

The engine's control socket is taken from ``RESIDENTKV_CONTROL_SOCKET`` or from
``control_socket`` in the server's ``--kv-transfer-config``. Responses of requests without a claim
pass through untouched.

Before it forwards its first claimed request the middleware **announces** itself on the control
socket. The engine accepts a claim that arrives through vLLM's OpenAI server only when an outcome
channel was announced and the request carries the middleware's ticket
(:func:`lacks_outcome_channel`): without one a refusal would reach the client as an anonymous
HTTP 500, the client would retry, and the retry would be answered 200 by recompute -- the
refusal laundered. Such claims are rejected at intake instead (:data:`NO_OUTCOME_CHANNEL`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any, Literal

from residentkv.adapters.vllm.config import CLAIM_PARAM, CLAIM_REF_PARAM
from residentkv.adapters.vllm.control_socket import ControlClient, ControlError

__all__ = ["ENGINE_STOPPED", "NO_OUTCOME_CHANNEL", "REFUSAL_STATUS", "STOPPED_STATUS",
           "ClaimOutcomeMiddleware", "Lookup", "control_socket_path", "lacks_outcome_channel"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: not retried by the official openai client when sent with ``x-should-retry: false``
REFUSAL_STATUS = 409
#: the engine stopped (or is stopping) under a claimed request: claim-scoped, not retried
STOPPED_STATUS = 503
#: the claim outcome of a request the engine gave none, because it stopped under it
ENGINE_STOPPED = "engine_stopped"
#: one outcome lookup on the control socket, and how often a slow engine is asked
LOOKUP_TIMEOUT_S = 5.0
LOOKUP_ATTEMPTS = 3
#: how long a request vLLM aborted waits for the engine's end before the abort is let through.
#: Stopped by its server with ``--shutdown-timeout 0``, the engine is killed right after it
#: aborts; stopped by a signal of its own, it tears down first (2.3 s measured on the CPU
#: backend; vLLM waits up to 5 + 4 s for its workers). Only an engine that lives on pays the
#: wait: one aborted by ``/pause`` (a dev-mode route).
ABORT_GRACE_S = 15.0
PATHS = ("/v1/completions", "/v1/chat/completions")
OUTCOME_HEADER = b"x-residentkv-claim-outcome"
CLAIM_HEADER = b"x-residentkv-claim-id"
#: the middleware's request ids (``X-Request-Id``), which vLLM puts after its own prefix
TICKET_PREFIX = "rkv-"
#: request id prefixes of vLLM 0.32's OpenAI server routes that take ``kv_transfer_params``
#: (completions, chat completions -- also behind the Anthropic route -- and token generation)
SERVER_REQUEST_PREFIXES = ("cmpl-", "chatcmpl-", "generate-tokens-")
CHANNEL = "ClaimOutcomeMiddleware"
NO_OUTCOME_CHANNEL = (
    "no outcome channel: start the server with --middleware "
    "residentkv.adapters.vllm.server.ClaimOutcomeMiddleware and control_socket in "
    "kv_connector_extra_config, so a refusal reaches the client and no retry can launder it")


def lacks_outcome_channel(request_id: str, announced: bool) -> bool:
    """Whether a claim on *request_id* arrived through vLLM's OpenAI server with no claim
    outcome middleware in front of it (none announced, or the request bypassed it).

    Offline engines (``LLM``: numeric ids) read outcomes from the engine itself and are not
    affected."""
    for prefix in SERVER_REQUEST_PREFIXES:
        if request_id.startswith(prefix):
            return not (announced and request_id[len(prefix):].startswith(TICKET_PREFIX))
    return False


def control_socket_path(argv: list[str] | None = None) -> str | None:
    """The engine's control socket: ``RESIDENTKV_CONTROL_SOCKET`` or the server's
    ``--kv-transfer-config`` ``kv_connector_extra_config.control_socket``."""
    env = os.environ.get("RESIDENTKV_CONTROL_SOCKET")
    if env:
        return env
    args = sys.argv if argv is None else argv
    for i, arg in enumerate(args):
        raw = None
        if arg in ("--kv-transfer-config", "--kv_transfer_config") and i + 1 < len(args):
            raw = args[i + 1]
        elif arg.startswith(("--kv-transfer-config=", "--kv_transfer_config=")):
            raw = arg.split("=", 1)[1]
        if raw is None:
            continue
        try:
            extra = json.loads(raw).get("kv_connector_extra_config") or {}
        except (ValueError, AttributeError):
            return None
        path = extra.get("control_socket") if isinstance(extra, dict) else None
        return path if isinstance(path, str) else None
    return None


@dataclass(frozen=True)
class _Carried:
    """What the middleware reads of a claimed request: whether it streams, and the claim id
    it names (None when that is not a non-empty string)."""

    stream: bool
    claim_id: str | None


def _claimed(body: bytes) -> _Carried | None:
    """The request's claim or claim reference (whatever its shape: the engine rejects a
    malformed one, and that outcome must reach the client too), or None."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    params = data.get("kv_transfer_params")
    if not isinstance(params, dict):
        return None
    carried = [params[key] for key in (CLAIM_REF_PARAM, CLAIM_PARAM)
               if params.get(key) is not None]
    if not carried:
        return None
    cid = carried[0].get("claim_id") if isinstance(carried[0], dict) else None
    return _Carried(bool(data.get("stream")), cid if isinstance(cid, str) and cid else None)


def _chunks(body: bytes, stream: bool) -> Iterator[dict[str, Any]]:
    """The JSON objects of a response body: its ``data:`` lines (a stream), or the body."""
    raws = [line[6:] for line in body.split(b"\n") if line.startswith(b"data: ")] \
        if stream else [body]
    for raw in raws:
        try:
            chunk = json.loads(raw)
        except ValueError:  # ``[DONE]``, a line cut between two messages
            continue
        if isinstance(chunk, dict):
            yield chunk


def _choices(chunk: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in chunk.get("choices") or () if isinstance(c, dict)]


def _aborted(body: bytes, stream: bool) -> bool:
    """Whether vLLM ended the response with ``finish_reason: "abort"``: a cause the client did
    not make (a client that hangs up reads nothing more) -- the engine stopping (vLLM's
    default ``--shutdown-timeout 0`` aborts every running request), or a ``/pause``."""
    return b'"abort"' in body and any(  # (a cheap look first: every token passes here)
        choice.get("finish_reason") == "abort"
        for chunk in _chunks(body, stream) for choice in _choices(chunk))


def _sse_verdict(buffered: bytes) -> str | None:
    """``abort`` if vLLM aborted the stream (its end, whatever came before), else ``error``
    if the stream's first decisive data line is an error, ``tokens`` once a token arrived,
    ``None`` while undecided."""
    if _aborted(buffered, stream=True):
        return "abort"
    for chunk in _chunks(buffered, stream=True):
        if "error" in chunk:
            return "error"
        for choice in _choices(chunk):
            delta = choice.get("delta") or {}
            if choice.get("text") or delta.get("content") or choice.get("token_ids") \
                    or choice.get("finish_reason"):
                return "tokens"
    return None


@dataclass(frozen=True)
class Lookup:
    """The engine's answer for a ticket: the claim outcome (None: the engine has none), or
    that the engine is ``gone`` (nothing listens; it died or stopped) or ``silent`` (it did not
    answer in time)."""

    outcome: dict[str, Any] | None
    engine: Literal["answered", "gone", "silent"] = "answered"


class ClaimOutcomeMiddleware:
    """ASGI middleware; see the module docstring."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        path = control_socket_path()
        self.control = ControlClient(path, timeout=LOOKUP_TIMEOUT_S) if path else None
        self.announced = False
        self._gone: asyncio.Event | None = None
        #: why the engine is gone, once it is (see :meth:`_watch`)
        self.gone_reason: str | None = None
        self._watcher: asyncio.Task[None] | None = None
        if self.control is None:
            print("residentkv: ClaimOutcomeMiddleware has no control socket "
                  "(set control_socket in kv_connector_extra_config); the engine rejects "
                  "claims sent through this server", file=sys.stderr)

    @property
    def gone(self) -> asyncio.Event:
        """Set once the engine is gone (created in the server's event loop)."""
        if self._gone is None:
            self._gone = asyncio.Event()
        return self._gone

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST" \
                or scope.get("path") not in PATHS:
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive)
        carried = _claimed(body)
        replay = _replay(body, receive)
        if carried is None:
            await self.app(scope, replay, send)
            return
        await self._announce()
        ticket = TICKET_PREFIX + uuid.uuid4().hex
        headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"x-request-id"]
        scope = dict(scope, headers=[*headers, (b"x-request-id", ticket.encode())])
        watcher = _Watcher(self, send, ticket, carried)
        if self.gone.is_set():
            await watcher.engine_stopped()  # no engine to forward to
            return
        await self._run(self.app(scope, replay, watcher.send), watcher)

    async def _run(self, app_call: Awaitable[None], watcher: _Watcher) -> None:
        """Run the app for a claimed request, racing it against the engine's end: when the
        engine goes, the request is answered at once, by name, and the app is cancelled
        (vLLM's front end may otherwise wait for an engine that will never answer)."""
        app_task = asyncio.ensure_future(app_call)
        gone_task = asyncio.ensure_future(self.gone.wait())
        try:
            await asyncio.wait({app_task, gone_task}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            app_task.cancel()
            raise
        finally:
            gone_task.cancel()
        if app_task.done():
            app_task.result()
            await watcher.finish()
            return
        await watcher.engine_stopped()
        app_task.cancel()
        with contextlib.suppress(BaseException):
            await app_task

    async def _announce(self) -> None:
        """Tell the engine this server has an outcome channel (before its first claim), and
        start watching the engine."""
        if self.control is None:
            return
        if self._watcher is None or (self._watcher.done() and not self.gone.is_set()):
            self._watcher = asyncio.ensure_future(self._watch(self.control.path))
        if self.announced:
            return
        control = self.control
        try:
            await asyncio.to_thread(control.announce, CHANNEL)
        except ControlError as exc:
            # not announced: the engine rejects this claim, and the next one tries again
            print(f"residentkv: cannot announce the outcome channel: {exc}", file=sys.stderr)
            return
        self.announced = True

    async def _watch(self, path: str) -> None:
        """Hold a ``watch`` connection to the engine's control socket: its end is the engine's
        end (a closing line when it stopped gracefully, nothing when it died)."""
        try:
            reader, writer = await asyncio.open_unix_connection(path)
        except OSError:
            return  # not watching: the next claimed request tries again
        reason: str | None = None
        try:
            writer.write(json.dumps({"op": "watch"}).encode() + b"\n")
            await writer.drain()
            if await reader.readline():
                line = await reader.readline()
                closing = json.loads(line) if line.strip() else {}
                if isinstance(closing, dict) and isinstance(closing.get("reason"), str):
                    reason = closing["reason"]
        except (OSError, ValueError):
            pass
        finally:
            writer.close()
        self.gone_reason = reason
        self.gone.set()

    async def lookup(self, ticket: str) -> Lookup:
        """The claim outcome of the request with this ticket, from the engine."""
        if self.control is None:
            return Lookup(None, "gone")
        control = self.control
        for _ in range(LOOKUP_ATTEMPTS):
            try:
                result = await asyncio.to_thread(control.call, "outcome", request_id=ticket,
                                                 contains=True)
            except ControlError as exc:
                if exc.gone:
                    return Lookup(None, "gone")
                continue  # slow, not gone: ask again
            return Lookup(result if isinstance(result, dict) else None)
        return Lookup(None, "silent")

    def stopped_reason(self, lookup: Lookup | None) -> str:
        """What a client is told when the engine gave its request no claim outcome."""
        if lookup is not None and lookup.engine == "silent":
            return ("the engine did not say what became of the claim (it did not answer in "
                    "time); do not count on it being held")
        if lookup is not None and lookup.engine == "answered" and not self.gone.is_set():
            return ("the engine has no claim outcome for this request: it did not take the "
                    "request in (it is stopping); nothing was registered or reused for it")
        if self.gone_reason is not None:
            return (f"the engine stopped ({self.gone_reason}) under this request: the claims "
                    f"it held ended with the stop (claim_harmed, cause {self.gone_reason}); "
                    "register again under a new claim id")
        return ("the engine stopped under this request (its process ended): a claim it held "
                "is lost with its host tier, and the engine's next start on this sink ends it "
                "(claim_harmed, cause engine_restarted); register again under a new claim id")


class _Watcher:
    """Holds a claimed request's response until its claim outcome is decided."""

    def __init__(self, mw: ClaimOutcomeMiddleware, send: Send, ticket: str,
                 carried: _Carried) -> None:
        self.mw = mw
        self.downstream = send
        self.ticket = ticket
        self.stream = carried.stream
        self.claim_id = carried.claim_id
        self.start: Message | None = None
        self.held: list[Message] = []
        self.passing = False
        self.done = False  # the client has its whole answer; the app's later messages drop
        #: vLLM ended the response with an abort: it and the rest are held (see :meth:`finish`)
        self.aborted = False

    async def send(self, message: Message) -> None:
        if self.done:
            return
        if self.aborted or (self.passing and message["type"] == "http.response.body"
                            and _aborted(message.get("body", b""), self.stream)):
            # Not passed on yet: an abort the engine's stop caused must not end the stream
            # before the claim-scoped error does (see finish).
            self.aborted = True
            self.held.append(message)
            return
        if self.passing:
            if message["type"] == "http.response.body" and b'"error"' in message.get(
                    "body", b""):
                message = dict(message, body=await self._claim_scoped_errors(message["body"]))
            self.done = not message.get("more_body", False)
            await self.downstream(message)
            return
        if message["type"] == "http.response.start":
            self.start = message
            return
        self.held.append(message)
        more = message.get("more_body", False)
        status = self.start["status"] if self.start else 500
        buffered = b"".join(m.get("body", b"") for m in self.held)
        if self.stream and status < 400:
            verdict = _sse_verdict(buffered)
            if verdict is None and more:
                return
            if verdict in ("abort", None):
                # vLLM aborted it; aborted before its first token, it ends with neither a token
                # nor an error (vLLM skips the empty abort chunk). Decided in finish.
                self.aborted = True
                return
            await self._decide(failed=verdict == "error", body=None)
        elif not more:
            if status < 400 and _aborted(buffered, stream=False):
                self.aborted = True  # decided in finish
                return
            await self._decide(failed=status >= 500, body=buffered)

    async def _decide(self, failed: bool, body: bytes | None) -> None:
        found = await self.mw.lookup(self.ticket)
        outcome = found.outcome
        if outcome is None and body is not None:
            outcome = _body_outcome(body)
        assert self.start is not None
        if outcome is None and not (400 <= self.start["status"] < 500):
            # No outcome for a claimed request is never a success (an empty 200 of a request
            # the engine never took in) nor an anonymous 500.
            await self._unanswered(self.mw.stopped_reason(found))
            return
        if failed and outcome is not None and outcome.get("outcome") == "refused":
            await self._error(REFUSAL_STATUS, outcome, "refused",
                              f"resident claim {outcome.get('claim_id')!r} refused: "
                              f"{outcome.get('reason')}")
            return
        if failed and outcome is not None and outcome.get("outcome") == "engine_stopped":
            await self._unanswered(str(outcome.get("reason")), outcome)
            return
        start = dict(self.start)
        extra = []
        if outcome is not None:
            extra = [(OUTCOME_HEADER, str(outcome.get("outcome")).encode()),
                     (CLAIM_HEADER, str(outcome.get("claim_id")).encode())]
        start["headers"] = [*self.start.get("headers", []), *extra]
        await self.downstream(start)
        await self._pass_held()

    async def _pass_held(self) -> None:
        """Pass on what the app sent and the watcher held; what follows passes through."""
        held, self.held = self.held, []
        for message in held:
            await self.downstream(message)
        self.passing = True
        self.done = bool(held) and not held[-1].get("more_body", False)

    def _stopped(self, reason: str) -> dict[str, Any]:
        return {"claim_id": self.claim_id, "outcome": ENGINE_STOPPED, "reason": reason,
                "seq": None}

    async def _unanswered(self, reason: str, outcome: dict[str, Any] | None = None) -> None:
        outcome = outcome or self._stopped(reason)
        await self._error(STOPPED_STATUS, outcome, ENGINE_STOPPED,
                          f"resident claim {self.claim_id!r}: {reason}")

    async def _error(self, status: int, outcome: dict[str, Any], kind: str,
                     message: str) -> None:
        """Answer the request with a claim-scoped error the official client does not retry;
        the rest of the app's response is dropped."""
        payload = json.dumps({"error": _error_body(outcome, kind, message,
                                                   self.ticket)}).encode()
        await self.downstream({"type": "http.response.start", "status": status,
                               "headers": [(b"content-type", b"application/json"),
                                           (b"content-length", str(len(payload)).encode()),
                                           (b"x-should-retry", b"false"),
                                           (OUTCOME_HEADER, kind.encode()),
                                           (CLAIM_HEADER, str(outcome.get("claim_id")).encode())]})
        await self.downstream({"type": "http.response.body", "body": payload,
                               "more_body": False})
        self.done = True

    async def _claim_scoped_errors(self, body: bytes) -> bytes:
        """A stream already under way carries an error (the engine failed under it): the
        error line names the claim and what became of it."""
        out = []
        for line in body.split(b"\n"):
            chunk = None
            if line.startswith(b"data: {"):
                with contextlib.suppress(ValueError):
                    chunk = json.loads(line[6:])
            if isinstance(chunk, dict) and isinstance(chunk.get("error"), dict):
                found = await self.mw.lookup(self.ticket)
                outcome = found.outcome if found.engine == "answered" and found.outcome and \
                    found.outcome.get("outcome") in ("refused", ENGINE_STOPPED) else None
                outcome = outcome or self._stopped(self.mw.stopped_reason(found))
                kind = str(outcome.get("outcome"))
                message = f"resident claim {self.claim_id!r}: {outcome.get('reason')}"
                line = b"data: " + json.dumps({"error": _error_body(
                    outcome, kind, message, self.ticket)}).encode()
            out.append(line)
        return b"\n".join(out)

    async def engine_stopped(self) -> None:
        """The engine is gone: answer now, by name, whatever the app has sent so far (an
        abort held back is dropped: the claim-scoped error is the stream's end)."""
        if self.done:
            return
        reason = self.mw.stopped_reason(None)
        if not self.passing:
            await self._unanswered(reason)
            return
        outcome = self._stopped(reason)
        error = _error_body(outcome, ENGINE_STOPPED, f"resident claim {self.claim_id!r}: "
                            f"{reason}", self.ticket)
        await self.downstream({"type": "http.response.body", "more_body": False,
                               "body": b"data: " + json.dumps({"error": error}).encode()
                               + b"\n\ndata: [DONE]\n\n"})
        self.done = True

    async def finish(self) -> None:
        """The app returned: decide on whatever is still held (an empty or cut response)."""
        if self.aborted and not self.done:
            if await self._engine_ends():
                await self.engine_stopped()
                return
            if self.passing:  # the engine outlived the abort (a pause): it goes out as sent
                await self._pass_held()
                return
        if not (self.passing or self.done) and self.start is not None:
            body = b"".join(m.get("body", b"") for m in self.held)
            await self._decide(failed=self.start["status"] >= 500, body=body)

    async def _engine_ends(self) -> bool:
        """Whether the engine is gone, or goes within :data:`ABORT_GRACE_S`, after vLLM
        aborted this request. vLLM's default ``--shutdown-timeout 0`` aborts the running
        requests on SIGTERM and ends the engine a moment later; the abort can reach the
        client first, and a claim that ends with the engine (``claim_harmed`` in the trace)
        must not read as a request vLLM merely cut. A request the engine never took in (no
        outcome: it was stopping) is answered at once by :meth:`_decide`."""
        if not self.mw.gone.is_set():
            found = await self.mw.lookup(self.ticket)
            if found.engine == "gone":
                return True
            if found.engine == "answered" and found.outcome is None:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.mw.gone.wait(), ABORT_GRACE_S)
        return self.mw.gone.is_set()


def _error_body(outcome: dict[str, Any], kind: str, message: str,
                ticket: str) -> dict[str, Any]:
    """The OpenAI-style error object of a claim-scoped answer."""
    return {"message": message, "type": f"resident_claim_{kind}",
            "code": f"resident_claim_{kind}", "param": None, CLAIM_PARAM: outcome,
            "request_id": ticket}


def _body_outcome(body: bytes) -> dict[str, Any] | None:
    try:
        data = json.loads(body)
    except ValueError:
        return None
    params = data.get("kv_transfer_params") if isinstance(data, dict) else None
    found = params.get(CLAIM_PARAM) if isinstance(params, dict) else None
    return found if isinstance(found, dict) else None


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
