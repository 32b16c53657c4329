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
  for one that held it.

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
import json
import os
import sys
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from residentkv.adapters.vllm.config import CLAIM_PARAM, CLAIM_REF_PARAM
from residentkv.adapters.vllm.control_socket import ControlClient, ControlError

__all__ = ["NO_OUTCOME_CHANNEL", "REFUSAL_STATUS", "ClaimOutcomeMiddleware",
           "control_socket_path", "lacks_outcome_channel"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: not retried by the official openai client when sent with ``x-should-retry: false``
REFUSAL_STATUS = 409
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


def _claimed(body: bytes) -> tuple[bool, bool]:
    """Whether the request carries a claim or a claim reference (whatever its shape: the
    engine rejects a malformed one, and that outcome must reach the client too) and whether it
    asks for a stream."""
    try:
        data = json.loads(body)
    except ValueError:
        return False, False
    if not isinstance(data, dict):
        return False, False
    params = data.get("kv_transfer_params")
    carried = isinstance(params, dict) and any(
        params.get(key) is not None for key in (CLAIM_PARAM, CLAIM_REF_PARAM))
    return carried, bool(data.get("stream"))


def _sse_verdict(buffered: bytes) -> str | None:
    """``error`` if the stream's first decisive data line is an error, ``tokens`` once a
    token arrived, ``None`` while undecided."""
    for line in buffered.split(b"\n"):
        if not line.startswith(b"data: ") or line.strip() == b"data: [DONE]":
            continue
        try:
            chunk = json.loads(line[6:])
        except ValueError:
            continue
        if not isinstance(chunk, dict):
            continue
        if "error" in chunk:
            return "error"
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            if choice.get("text") or delta.get("content") or choice.get("token_ids") \
                    or choice.get("finish_reason"):
                return "tokens"
    return None


class ClaimOutcomeMiddleware:
    """ASGI middleware; see the module docstring."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        path = control_socket_path()
        self.control = ControlClient(path, timeout=5.0) if path else None
        self.announced = False
        if self.control is None:
            print("residentkv: ClaimOutcomeMiddleware has no control socket "
                  "(set control_socket in kv_connector_extra_config); the engine rejects "
                  "claims sent through this server", file=sys.stderr)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST" \
                or scope.get("path") not in PATHS:
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive)
        claimed, stream = _claimed(body)
        replay = _replay(body, receive)
        if not claimed:
            await self.app(scope, replay, send)
            return
        await self._announce()
        ticket = TICKET_PREFIX + uuid.uuid4().hex
        headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"x-request-id"]
        scope = dict(scope, headers=[*headers, (b"x-request-id", ticket.encode())])
        watcher = _Watcher(self, send, ticket, stream)
        await self.app(scope, replay, watcher.send)
        await watcher.finish()

    async def _announce(self) -> None:
        """Tell the engine this server has an outcome channel (before its first claim)."""
        if self.announced or self.control is None:
            return
        control = self.control
        try:
            await asyncio.to_thread(control.announce, CHANNEL)
        except ControlError as exc:
            # not announced: the engine rejects this claim, and the next one tries again
            print(f"residentkv: cannot announce the outcome channel: {exc}", file=sys.stderr)
            return
        self.announced = True

    async def outcome(self, ticket: str) -> dict[str, Any] | None:
        """The claim outcome of the request with this ticket, from the engine."""
        if self.control is None:
            return None
        control = self.control
        try:
            result = await asyncio.to_thread(control.call, "outcome", request_id=ticket,
                                             contains=True)
        except ControlError:
            return None
        return result if isinstance(result, dict) else None


class _Watcher:
    """Holds a claimed request's response until its claim outcome is decided."""

    def __init__(self, mw: ClaimOutcomeMiddleware, send: Send, ticket: str,
                 stream: bool) -> None:
        self.mw = mw
        self.downstream = send
        self.ticket = ticket
        self.stream = stream
        self.start: Message | None = None
        self.held: list[Message] = []
        self.passing = False
        self.done = False

    async def send(self, message: Message) -> None:
        if self.passing or self.done:
            if not self.done:
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
            await self._decide(failed=verdict == "error", body=None)
        elif not more:
            await self._decide(failed=status >= 500, body=buffered)

    async def _decide(self, failed: bool, body: bytes | None) -> None:
        outcome = await self.mw.outcome(self.ticket)
        if outcome is None and body is not None:
            outcome = _body_outcome(body)
        if failed and outcome is not None and outcome.get("outcome") == "refused":
            await self._refuse(outcome)
            return
        assert self.start is not None
        start = dict(self.start)
        extra = []
        if outcome is not None:
            extra = [(OUTCOME_HEADER, str(outcome.get("outcome")).encode()),
                     (CLAIM_HEADER, str(outcome.get("claim_id")).encode())]
        start["headers"] = [*self.start.get("headers", []), *extra]
        await self.downstream(start)
        for message in self.held:
            await self.downstream(message)
        self.held = []
        self.passing = True

    async def _refuse(self, outcome: dict[str, Any]) -> None:
        payload = json.dumps({"error": {
            "message": f"resident claim {outcome.get('claim_id')!r} refused: "
                       f"{outcome.get('reason')}",
            "type": "resident_claim_refused", "code": "resident_claim_refused", "param": None,
            CLAIM_PARAM: outcome, "request_id": self.ticket,
        }}).encode()
        await self.downstream({"type": "http.response.start", "status": REFUSAL_STATUS,
                               "headers": [(b"content-type", b"application/json"),
                                           (b"content-length", str(len(payload)).encode()),
                                           (b"x-should-retry", b"false"),
                                           (OUTCOME_HEADER, b"refused"),
                                           (CLAIM_HEADER, str(outcome.get("claim_id")).encode())]})
        await self.downstream({"type": "http.response.body", "body": payload,
                               "more_body": False})
        self.done = True  # the rest of vLLM's error response is dropped

    async def finish(self) -> None:
        """The app returned: decide on whatever is still held (an empty or cut response)."""
        if not (self.passing or self.done) and self.start is not None:
            body = b"".join(m.get("body", b"") for m in self.held)
            await self._decide(failed=self.start["status"] >= 500, body=body)


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
