"""Claims through vLLM's OpenAI server need an outcome channel, or they are not taken.

Without the claim outcome middleware a refusal would reach the official client as HTTP 500, the
client would retry it, and the retry -- carrying the same claim -- would be answered 200 by
recompute. The engine therefore rejects claims that arrive through the server when no middleware
announced itself on the control socket (or the request bypassed it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from residentkv.adapters.vllm.control import Operator
from residentkv.adapters.vllm.control_socket import dispatch
from residentkv.adapters.vllm.server import NO_OUTCOME_CHANNEL, lacks_outcome_channel


@pytest.mark.parametrize(("request_id", "announced", "lacks"), [
    ("cmpl-0f3a-0-1a2b3c4d", False, True),             # plain server
    ("cmpl-0f3a-0-1a2b3c4d", True, True),              # the middleware did not ticket it
    ("cmpl-rkv-0f3a-0-1a2b3c4d", True, False),         # through the middleware
    ("cmpl-rkv-0f3a-0-1a2b3c4d", False, True),         # a forged ticket, nothing announced
    ("chatcmpl-rkv-9e-1a2b3c4d", True, False),
    ("chatcmpl-9e-1a2b3c4d", True, True),
    ("generate-tokens-9e-1a2b3c4d", True, True),      # a route the middleware does not cover
    ("0-1a2b3c4d", False, False),                      # offline LLM: reads outcomes itself
    ("17", False, False),
])
def test_which_requests_lack_an_outcome_channel(request_id: str, announced: bool,
                                                lacks: bool) -> None:
    assert lacks_outcome_channel(request_id, announced) is lacks


def test_announce_over_the_control_protocol(tmp_path: Path) -> None:
    pytest.importorskip("vllm")
    from residentkv.adapters.vllm.config import ConnectorConfig

    op = Operator(ConnectorConfig.model_validate(
        {"host_tier_bytes": 1 << 20, "event_sink": str(tmp_path / "t.jsonl")}))
    assert op.status()["outcome_channel"] is None
    with pytest.raises(ValueError, match="channel"):
        dispatch(op, {"op": "announce", "channel": ""})
    assert dispatch(op, {"op": "announce", "channel": "ClaimOutcomeMiddleware"}) is True
    assert op.status()["outcome_channel"] == "ClaimOutcomeMiddleware"


@pytest.mark.vllm
def test_plain_server_rejects_claims_and_no_retry_launders_them(tmp_path: Path) -> None:
    pytest.importorskip("vllm")
    openai = pytest.importorskip("openai")
    from residentkv.adapters.vllm.engine import (
        SERVED_MODEL_NAME,
        ServerProcess,
        transfer_config,
        write_tiny_model,
    )
    from residentkv.adapters.vllm.witness import BLOCK, make_claim

    trace = tmp_path / "engine.jsonl"
    transfer = transfer_config(event_sink=trace,
                               extra={"control_socket": str(tmp_path / "engine.sock")})
    model = write_tiny_model(tmp_path / "model")
    claim = make_claim("c-1", "tenant:a/session:1", SERVED_MODEL_NAME, "obj")
    prompt = [3 + i % 1000 for i in range(2 * BLOCK + 10)]
    with ServerProcess(model, transfer, log=tmp_path / "server.log", middleware=False) as srv:
        srv.wait_ready()
        client = openai.OpenAI(base_url=srv.base_url + "/v1", api_key="none")  # retries on
        outcomes: list[dict[str, Any]] = []
        for _ in range(2):   # the same claim again: still not taken
            r = client.completions.create(
                model=SERVED_MODEL_NAME, prompt=prompt, max_tokens=2, temperature=0.0,
                extra_body={"kv_transfer_params": {"resident_claim": claim}})
            outcomes.append(r.kv_transfer_params["resident_claim"])
    assert [(o["claim_id"], o["outcome"], o["reason"]) for o in outcomes] == [
        ("c-1", "rejected", NO_OUTCOME_CHANNEL)] * 2
    events = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    kinds = [e["event"] for e in events]
    assert "claim_accepted" not in kinds and "claim_offloaded" not in kinds
    rejected = [e for e in events if e["event"] == "claim_rejected"]
    assert [e["reason"] for e in rejected] == [NO_OUTCOME_CHANNEL] * 2
    assert all(e["claim_id"] is None for e in rejected)     # nothing of a claim was opened
    started = [e for e in events if e["event"] == "request_started"]
    assert [e["claim_ref"] for e in started] == ["c-1", "c-1"]   # two sends, no retry
