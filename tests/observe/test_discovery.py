"""Where a server's KV events are: vLLM's /kv_event_sources answer read into endpoints (the
request itself runs against real vLLM in test_observe_vllm)."""

from __future__ import annotations

from typing import Any

import pytest

from residentkv.errors import UserInputError
from residentkv.observe.discovery import parse_sources
from residentkv.observe.subscriber import Endpoint

URL = "http://10.1.2.3:8000"


def source(endpoint: str, replay: str | None = None, topic: str = "kv") -> dict[str, Any]:
    return {"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": endpoint,
            "replay_endpoint": replay, "buffer_steps": 10000, "hwm": 100000,
            "max_queue_size": 100000, "topic": topic}


def test_each_rank_its_publisher_reachable_from_here() -> None:
    got = parse_sources(URL, {
        "0": source("tcp://*:5557", "tcp://*:5558"),
        "1": source("ipc:///run/ev_dp1.sock", "ipc:///run/replay_dp1.sock"),
        "2": source("tcp://10.9.9.9:6000", None, topic="")})
    assert got == [
        Endpoint("tcp://10.1.2.3:5557", replay="tcp://10.1.2.3:5558", topic=b"kv", rank=0),
        Endpoint("ipc:///run/ev_dp1.sock", replay="ipc:///run/replay_dp1.sock", topic=b"kv",
                 rank=1),
        Endpoint("tcp://10.9.9.9:6000", topic=b"", bind=True, rank=2)]   # it connects: bind


@pytest.mark.parametrize(("body", "words"), [
    ({}, "names no KV event publisher"),
    ([], "names no KV event publisher"),
    ({"0": source("inproc://cache")}, "inside the server's process"),
    ({"0": {**source("tcp://*:1"), "publisher": "null"}}, "expected zmq"),
    ({"x": source("tcp://*:1")}, "not a KV event publisher configuration"),
])
def test_nothing_to_subscribe_to_is_t051(body: Any, words: str) -> None:
    with pytest.raises(UserInputError) as e:
        parse_sources(URL, body)
    assert e.value.code == "T051" and words in e.value.message
