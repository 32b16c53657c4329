"""What the client records of a response (pure parts; the real run covers the wire)."""

from __future__ import annotations

import json

from residentkv.adapters.vllm.chaos.client import Wire, _delivered_outcome, _read_chunks, _ticket


def _sse(*chunks: object) -> list[str]:
    return [f"data: {json.dumps(c)}" for c in chunks] + ["data: [DONE]"]


def test_a_stream_gives_its_tokens_finish_and_id() -> None:
    wire = Wire(headers={})
    _read_chunks(_sse({"id": "cmpl-rkv-1", "choices": [{"token_ids": [5, 6]}]},
                      {"id": "cmpl-rkv-1", "choices": [{"token_ids": [7],
                                                        "finish_reason": "length"}]}), wire)
    assert (wire.tokens, wire.finish_reason, wire.response_id) == ([5, 6, 7], "length",
                                                                   "cmpl-rkv-1")
    assert _ticket(wire) == "rkv-1" and _delivered_outcome(wire) is None


def test_the_error_that_ends_a_stream_has_the_last_word_on_the_outcome() -> None:
    stopped = {"claim_id": "c-1", "outcome": "engine_stopped", "reason": "stop", "seq": None}
    wire = Wire(headers={"x-request-id": "rkv-2", "x-residentkv-claim-outcome": "restored"})
    _read_chunks(_sse({"choices": [{"token_ids": [5]}]},
                      {"error": {"type": "resident_claim_engine_stopped",
                                 "resident_claim": stopped}}), wire)
    assert wire.finish_reason is None and wire.stream_error is not None
    assert _delivered_outcome(wire) == stopped and _ticket(wire) == "rkv-2"


def test_a_refusal_names_its_ticket_and_outcome_in_the_error_object() -> None:
    refused = {"claim_id": "c-1", "outcome": "refused", "reason": "x", "seq": 9}
    wire = Wire(headers={}, body={"error": {"resident_claim": refused, "request_id": "rkv-3"}})
    assert _delivered_outcome(wire) == refused and _ticket(wire) == "rkv-3"
