"""Tensor parallelism 2 on CPU behind vLLM's OpenAI server: two worker ranks, one stream.

Each worker rank reports its facts through the connector's worker metadata; the scheduler side
writes one event per job naming both ranks, and a failure on a rank is the job's failure.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("vllm")
pytest.importorskip("openai")

from residentkv.adapters.vllm.witness import SCENARIOS, Witness

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def tp2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Witness]:
    witness = Witness(tmp_path_factory.mktemp("tp2"), policy="fail", shape="tp2")
    try:
        yield witness
    finally:
        witness.close()


@pytest.mark.parametrize("scenario", ["success_path", "claimed_load_failure",
                                      "multi_claim_targeted_failure", "corrupted_restore"])
def test_tp2_scenarios_give_spec_gate_results(tp2: Witness, tmp_path: Path,
                                              scenario: str) -> None:
    run = tp2.run(scenario, 0, tmp_path)
    assert run.error is None, run.error
    assert run.gates == SCENARIOS[scenario].expects, run.trace
    assert run.matched, (run.checks, run.trace)
    with open(run.trace, encoding="utf-8") as fh:
        events = [json.loads(line) for line in fh if line.strip()]
    worker = [e for e in events if e["source"].startswith("residentkv.vllm.worker")]
    assert worker and all(e["source"].endswith("/rank=0,1") for e in worker
                          if e["event"] != "kv_load_failed")
    failed = [e for e in worker if e["event"] == "kv_load_failed"]
    assert all(e["source"] == "residentkv.vllm.worker/rank=0,1" for e in failed)
    assert [e["seq"] for e in events] == list(range(len(events)))
    # each rank digests its own share; the stream records one digest folded over both
    assert all(str(e.get("content_digest", "")).startswith("xxh3-128:") for e in events
               if e["event"] == "kv_store_finished" and e["success"]
               and e["claim_id"] != "corrupted_restore-0-unverified")
