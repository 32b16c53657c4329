"""The server middleware when the engine dies or stops under claimed requests (SPEC §9.1:
every claimed response carries its outcome), without vLLM: a fake app and a fake engine on a
unix socket speaking the control protocol (``announce``, ``watch``, ``outcome``).

The same answers are checked on real vLLM behind the OpenAI server in ``test_vllm_life.py``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from residentkv.adapters.vllm.server import ClaimOutcomeMiddleware

Message = dict[str, Any]
CLAIM = {"resident_claim": {"claim_id": "c1", "owner_scope": "tenant:a"}}


class FakeEngine:
    """Answers the control socket; its watchers end when it stops (a closing line) or dies
    (the connection just ends)."""

    def __init__(self, path: Path, outcomes: dict[str, dict[str, Any]] | None = None) -> None:
        self.path = path
        self.outcomes = outcomes or {}
        self.stopped = asyncio.Event()
        self.graceful = False
        self.server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        self.server = await asyncio.start_unix_server(self._serve, str(self.path))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = await reader.readline()
        cmd = json.loads(line)
        if cmd["op"] == "watch":
            writer.write(b'{"ok": true, "result": {"incarnation": "x"}}\n')
            await writer.drain()
            await self.stopped.wait()
            if self.graceful:
                writer.write(b'{"event": "closed", "reason": "shutdown"}\n')
        elif cmd["op"] == "outcome":
            found = next((v for k, v in self.outcomes.items() if k in cmd["request_id"]), None)
            writer.write(json.dumps({"ok": True, "result": found}).encode() + b"\n")
        else:
            writer.write(b'{"ok": true, "result": true}\n')
        writer.close()

    async def stop(self, *, graceful: bool) -> None:
        self.graceful = graceful
        if self.server is not None:
            self.server.close()
            self.path.unlink(missing_ok=True)  # nothing listens any more
        self.stopped.set()


async def _call(mw: ClaimOutcomeMiddleware, params: dict[str, Any],
                stream: bool = False) -> list[Message]:
    body = json.dumps({"prompt": [1, 2], "stream": stream,
                       "kv_transfer_params": params}).encode()
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/v1/completions", "headers": []}
    await mw(scope, receive, send)
    return sent


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
         app: Callable[[Any, Any, Any], Awaitable[None]],
         scenario: Callable[[ClaimOutcomeMiddleware, FakeEngine], Awaitable[Any]],
         outcomes: dict[str, dict[str, Any]] | None = None) -> Any:
    path = tmp_path / "e.sock"
    monkeypatch.setenv("RESIDENTKV_CONTROL_SOCKET", str(path))

    async def main() -> Any:
        engine = FakeEngine(path, outcomes)
        await engine.start()
        return await asyncio.wait_for(scenario(ClaimOutcomeMiddleware(app), engine), 30)

    return asyncio.run(main())


def _answer(sent: list[Message]) -> tuple[int, dict[bytes, bytes], dict[str, Any]]:
    start = sent[0]
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return start["status"], dict(start["headers"]), json.loads(body)


@pytest.mark.parametrize("graceful", [False, True])
def test_a_request_the_engine_dies_under_is_answered_by_name_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, graceful: bool) -> None:
    cancelled = asyncio.Event()

    async def hanging_app(scope: Any, receive: Any, send: Any) -> None:
        try:
            await asyncio.Event().wait()  # vLLM's front end waiting for a dead engine
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def scenario(mw: ClaimOutcomeMiddleware, engine: FakeEngine) -> Any:
        call = asyncio.ensure_future(_call(mw, CLAIM))
        await asyncio.sleep(0.2)
        await engine.stop(graceful=graceful)
        return await call, cancelled.is_set()

    sent, app_cancelled = _run(tmp_path, monkeypatch, hanging_app, scenario)
    status, headers, body = _answer(sent)
    assert status == 503 and headers[b"x-should-retry"] == b"false"
    assert headers[b"x-residentkv-claim-outcome"] == b"engine_stopped"
    outcome = body["error"]["resident_claim"]
    assert outcome["claim_id"] == "c1" and outcome["outcome"] == "engine_stopped"
    cause = "cause shutdown" if graceful else "engine_restarted"
    assert cause in outcome["reason"] and app_cancelled


def test_an_empty_success_without_an_outcome_is_never_passed_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def aborted_app(scope: Any, receive: Any, send: Any) -> None:
        # what vLLM answers for a request it turned away while shutting down
        body = json.dumps({"choices": [{"text": "", "finish_reason": "abort"}]}).encode()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body, "more_body": False})

    async def scenario(mw: ClaimOutcomeMiddleware, engine: FakeEngine) -> Any:
        return await _call(mw, CLAIM)

    status, headers, body = _answer(_run(tmp_path, monkeypatch, aborted_app, scenario))
    assert status == 503 and headers[b"x-should-retry"] == b"false"
    assert "did not take the request in" in body["error"]["resident_claim"]["reason"]


def test_an_error_in_a_stream_under_way_names_the_claim(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def dying_stream(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "more_body": True,
                    "body": b'data: {"choices": [{"text": "", "token_ids": [5]}]}\n\n'})
        await send({"type": "http.response.body", "more_body": False,
                    "body": b'data: {"error": {"message": "EngineCore encountered an issue",'
                            b' "code": 500}}\n\ndata: [DONE]\n\n'})

    async def scenario(mw: ClaimOutcomeMiddleware, engine: FakeEngine) -> Any:
        return await _call(mw, CLAIM, stream=True)

    outcomes = {"rkv-": {"claim_id": "c1", "outcome": "engine_stopped",
                         "reason": "engine stopped (shutdown)", "seq": 12}}
    sent = _run(tmp_path, monkeypatch, dying_stream, scenario, outcomes)
    assert sent[0]["status"] == 200
    assert dict(sent[0]["headers"])[b"x-residentkv-claim-outcome"] == b"engine_stopped"
    last = sent[-1]["body"].split(b"\n")[0]
    error = json.loads(last[len(b"data: "):])["error"]
    assert error["type"] == "resident_claim_engine_stopped"
    assert error["resident_claim"] == outcomes["rkv-"]


# vLLM's default --shutdown-timeout 0 aborts the running requests on SIGTERM (each answered
# finish_reason "abort", no tokens, no kv_transfer_params) and ends the engine a moment later.
TOKEN = b'data: {"choices": [{"text": "", "token_ids": [5], "finish_reason": null}]}\n\n'
ABORT = b'data: {"choices": [{"text": "", "token_ids": [], "finish_reason": "abort"}]}\n\n'
DONE = b"data: [DONE]\n\n"
HELD = {"rkv-": {"claim_id": "c1", "outcome": "offloaded", "reason": None, "seq": 7}}


def _vllm_answer(chunks: list[bytes], status: int = 200,
                 then: asyncio.Event | None = None) -> Callable[[Any, Any, Any], Awaitable[None]]:
    """An app that answers as vLLM's OpenAI server does, one message per chunk; with *then*,
    it waits for that event before it returns (vLLM's handler still running)."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": status, "headers": []})
        for chunk in chunks:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        if then is not None:
            await then.wait()
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


def _after_the_app(answered: asyncio.Event, stream: bool = False,
                   graceful: bool = False) -> Callable[[ClaimOutcomeMiddleware, FakeEngine],
                                                      Awaitable[Any]]:
    """The engine ends once the app answered: vLLM's abort reached the middleware first."""

    async def scenario(mw: ClaimOutcomeMiddleware, engine: FakeEngine) -> Any:
        call = asyncio.ensure_future(_call(mw, CLAIM, stream=stream))
        await answered.wait()
        await asyncio.sleep(0.2)  # the middleware holds the abort, waiting for the engine
        await engine.stop(graceful=graceful)
        return await call

    return scenario


def _stream_lines(sent: list[Message]) -> list[bytes]:
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return [line for line in body.split(b"\n") if line.startswith(b"data: ")]


@pytest.mark.parametrize("engine_ends", ["after the app returned", "while the app runs"])
def test_a_stream_vllm_aborts_as_its_engine_stops_ends_with_the_claim_scoped_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine_ends: str) -> None:
    answered, hanging = asyncio.Event(), engine_ends == "while the app runs"

    async def app(scope: Any, receive: Any, send: Any) -> None:
        inner = _vllm_answer([TOKEN, ABORT, DONE], then=asyncio.Event() if hanging else None)

        async def sending(message: Any) -> None:
            await send(message)
            if message.get("body") == DONE:
                answered.set()

        await inner(scope, receive, sending)

    sent = _run(tmp_path, monkeypatch, app, _after_the_app(answered, stream=True), HELD)
    assert sent[0]["status"] == 200  # the first token went out with the claim's outcome
    assert dict(sent[0]["headers"])[b"x-residentkv-claim-outcome"] == b"offloaded"
    lines = _stream_lines(sent)
    assert b'"abort"' not in b"".join(lines)  # vLLM's anonymous end never reaches the client
    assert lines[0] == TOKEN.strip() and lines[-1] == DONE.strip()
    error = json.loads(lines[-2][len(b"data: "):])["error"]
    assert error["type"] == "resident_claim_engine_stopped"
    assert error["resident_claim"]["claim_id"] == "c1"
    assert "engine_restarted" in error["resident_claim"]["reason"]
    assert not sent[-1].get("more_body")


@pytest.mark.parametrize("stream", [False, True])
def test_a_request_vllm_aborts_before_answering_is_answered_engine_stopped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stream: bool) -> None:
    answered = asyncio.Event()
    # a stream aborted before its first token has no abort chunk: vLLM skips empty chunks
    body = DONE if stream else json.dumps(
        {"choices": [{"text": "", "finish_reason": "abort"}]}).encode()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await _vllm_answer([body])(scope, receive, send)
        answered.set()

    sent = _run(tmp_path, monkeypatch, app, _after_the_app(answered, stream, graceful=True),
                HELD)
    status, headers, answer = _answer(sent)
    assert status == 503 and headers[b"x-should-retry"] == b"false"
    outcome = answer["error"]["resident_claim"]
    assert outcome["claim_id"] == "c1" and outcome["outcome"] == "engine_stopped"
    assert "cause shutdown" in outcome["reason"]


def test_an_abort_the_engine_outlives_goes_out_with_the_claims_outcome(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("residentkv.adapters.vllm.server.ABORT_GRACE_S", 0.3)

    async def scenario(mw: ClaimOutcomeMiddleware, engine: FakeEngine) -> Any:
        return await _call(mw, CLAIM, stream=True)  # the engine lives on (a /pause)

    sent = _run(tmp_path, monkeypatch, _vllm_answer([TOKEN, ABORT, DONE]), scenario, HELD)
    assert dict(sent[0]["headers"])[b"x-residentkv-claim-outcome"] == b"offloaded"
    assert _stream_lines(sent) == [TOKEN.strip(), ABORT.strip(), DONE.strip()]
