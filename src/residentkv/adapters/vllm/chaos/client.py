"""One client request on the wire, with the official ``openai`` client, recorded as seen.

The official client is what an application would deploy, so what it receives -- status, headers,
body, the stream's chunks -- is what this harness records. It runs with ``max_retries=0``: a
retry would send the claim again and hide the first answer, so every exchange is exactly one
request. Whether the client *with its default settings* would have retried a response is asked
of the client itself (its own retry predicate on the real response); a connection that ended
under a sent request would be retried too (the client retries connection errors and timeouts).

Nothing here interprets an outcome: the claim outcome is copied from the response as it came
(``kv_transfer_params.resident_claim`` of the body, the refusal's error object, the
``x-residentkv-claim-*`` headers).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import openai

from residentkv.adapters.vllm.chaos.model import Exchange, Op, Transport
from residentkv.adapters.vllm.config import CLAIM_PARAM

__all__ = ["Request", "Wire", "WireClient"]

OUTCOME_HEADER = "x-residentkv-claim-outcome"
CLAIM_HEADER = "x-residentkv-claim-id"
RETRY_HEADER = "x-should-retry"
REQUEST_ID_HEADER = "x-request-id"


@dataclass(frozen=True)
class Request:
    """What one op sends: the prompt, the ``kv_transfer_params`` (or None), a cache salt."""

    op: Op
    tokens: list[int]
    owner_scope: str | None
    claim_id: str | None
    claim_form: str | None
    kv_transfer_params: dict[str, Any] | None
    cache_salt: str | None = None


@dataclass
class Wire:
    """What came back, before it becomes an :class:`Exchange`."""

    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] | None = None
    tokens: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    stream_error: dict[str, Any] | None = None
    transport: Transport | None = None
    error_message: str | None = None
    would_retry: bool = False
    response_id: str | None = None


def _transport(exc: openai.APIConnectionError) -> Transport:
    if isinstance(exc, openai.APITimeoutError):
        return Transport.TIMEOUT
    cause = type(exc.__cause__).__name__ if exc.__cause__ is not None else ""
    return Transport.REFUSED if cause == "ConnectError" else Transport.LOST


class WireClient:
    """The official client against one server, shared by every client thread."""

    def __init__(self, base_url: str, model: str, *, max_tokens: int, timeout: float,
                 clock: Callable[[], float], incarnation: Callable[[], int],
                 request_prefix: str) -> None:
        self.client = openai.OpenAI(base_url=base_url.rstrip("/") + "/v1", api_key="chaos",
                                    max_retries=0, timeout=timeout)
        self.model = model
        self.max_tokens = max_tokens
        self.clock = clock
        self.incarnation = incarnation
        self.request_prefix = request_prefix

    def close(self) -> None:
        """Close the client's connection pool."""
        self.client.close()

    def send(self, req: Request) -> Exchange:
        """Send one request and record what the client saw."""
        rid = f"{self.request_prefix}{req.op.op_id}"
        sent_at = self.clock()
        incarnation = self.incarnation()
        start = time.perf_counter()
        wire = self._exchange(req, rid)
        latency = (time.perf_counter() - start) * 1e3
        return _record(req, wire, rid=rid, sent_at=sent_at, latency_ms=latency,
                       incarnation=incarnation)

    def _body(self, req: Request) -> dict[str, Any]:
        body: dict[str, Any] = {"ignore_eos": True, "return_token_ids": True}
        if req.kv_transfer_params is not None:
            body["kv_transfer_params"] = req.kv_transfer_params
        if req.cache_salt is not None:
            body["cache_salt"] = req.cache_salt
        return body

    def _exchange(self, req: Request, rid: str) -> Wire:
        wire = Wire()
        args: dict[str, Any] = {
            "model": self.model, "prompt": req.tokens, "max_tokens": self.max_tokens,
            "temperature": 0.0, "extra_body": self._body(req),
            "extra_headers": {"X-Request-Id": rid}}
        try:
            if req.op.stream:
                self._streamed(args, wire)
            else:
                self._plain(args, wire)
        except openai.APIStatusError as exc:
            wire.status = exc.status_code
            wire.headers = {k.lower(): v for k, v in exc.response.headers.items()}
            wire.body = _json_object(exc.response.text)
            wire.error_message = str(exc)
            wire.would_retry = self.client._should_retry(exc.response)
        except openai.APIConnectionError as exc:
            wire.transport = _transport(exc)
            wire.error_message = f"{type(exc).__name__}: {exc} ({exc.__cause__!r})"
            wire.would_retry = True
        return wire

    def _plain(self, args: dict[str, Any], wire: Wire) -> None:
        raw = self.client.completions.with_raw_response.create(**args)
        wire.status = raw.http_response.status_code
        wire.headers = {k.lower(): v for k, v in raw.headers.items()}
        completion = raw.parse()
        wire.response_id = completion.id
        wire.body = completion.model_dump(mode="json")
        if completion.choices:
            choice = completion.choices[0]
            wire.finish_reason = choice.finish_reason
            wire.tokens = list((choice.model_extra or {}).get("token_ids") or [])

    def _streamed(self, args: dict[str, Any], wire: Wire) -> None:
        with self.client.completions.with_streaming_response.create(stream=True,
                                                                    **args) as resp:
            wire.status = resp.http_response.status_code
            wire.headers = {k.lower(): v for k, v in resp.headers.items()}
            try:
                _read_chunks(resp.iter_lines(), wire)
            except openai.APIConnectionError:
                raise
            except Exception as exc:  # the connection ended inside the stream
                wire.error_message = f"stream cut: {type(exc).__name__}: {exc}"
                wire.transport = Transport.LOST
            if wire.finish_reason is None and wire.stream_error is None:
                wire.transport = Transport.LOST  # it ended before its finish
            wire.would_retry = False  # the client does not retry a stream it began reading


def _json_object(text: str) -> dict[str, Any] | None:
    """*text* as a JSON object, or None."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _read_chunks(lines: Iterable[str], wire: Wire) -> None:
    """Tokens, finish reason, id and an in-stream error of an SSE completion stream."""
    for line in lines:
        if not line.startswith("data: ") or line.strip() == "data: [DONE]":
            continue
        chunk = _json_object(line[6:])
        if chunk is None:
            continue
        if "error" in chunk:
            wire.stream_error = chunk["error"] if isinstance(chunk["error"], dict) else {
                "message": str(chunk["error"])}
            continue
        wire.response_id = wire.response_id or chunk.get("id")
        if isinstance(chunk.get("kv_transfer_params"), dict):
            wire.body = {"kv_transfer_params": chunk["kv_transfer_params"]}
        for choice in chunk.get("choices") or ():
            wire.tokens += list(choice.get("token_ids") or ())
            wire.finish_reason = choice.get("finish_reason") or wire.finish_reason


def _delivered_outcome(wire: Wire) -> dict[str, Any] | None:
    """The claim outcome the response carried in its body, its error object or the error
    that ended its stream (the last word wins), verbatim."""
    body = wire.body or {}
    for error in (wire.stream_error, body.get("error")):
        found = error.get(CLAIM_PARAM) if isinstance(error, dict) else None
        if isinstance(found, dict):
            return found
    params = body.get("kv_transfer_params")
    found = params.get(CLAIM_PARAM) if isinstance(params, dict) else None
    return found if isinstance(found, dict) else None


def _ticket(wire: Wire) -> str | None:
    """The request's ticket as the response named it."""
    if REQUEST_ID_HEADER in wire.headers:
        return wire.headers[REQUEST_ID_HEADER]
    if wire.response_id and wire.response_id.startswith("cmpl-"):
        return wire.response_id[len("cmpl-"):]
    error = (wire.body or {}).get("error")
    rid = error.get("request_id") if isinstance(error, dict) else None
    return rid if isinstance(rid, str) else None


def _record(req: Request, wire: Wire, *, rid: str, sent_at: float, latency_ms: float,
            incarnation: int) -> Exchange:
    error = (wire.body or {}).get("error")
    error = error if isinstance(error, dict) else wire.stream_error
    return Exchange(
        op_id=req.op.op_id, client=req.op.client, kind=req.op.kind, stream=req.op.stream,
        session=req.op.session, owner_scope=req.owner_scope, claim_id=req.claim_id,
        claim_form=req.claim_form, prompt=req.op.prompt, sent_at=round(sent_at, 4),
        latency_ms=round(latency_ms, 3), incarnation=incarnation, request_id_sent=rid,
        ticket=_ticket(wire), status=wire.status, transport=wire.transport,
        outcome=_delivered_outcome(wire), outcome_header=wire.headers.get(OUTCOME_HEADER),
        claim_header=wire.headers.get(CLAIM_HEADER),
        should_retry_header=wire.headers.get(RETRY_HEADER), would_retry=wire.would_retry,
        error_type=str(error.get("type")) if isinstance(error, dict) else None,
        error_message=(str(error.get("message")) if isinstance(error, dict)
                       else wire.error_message),
        tokens=wire.tokens, finish_reason=wire.finish_reason)
