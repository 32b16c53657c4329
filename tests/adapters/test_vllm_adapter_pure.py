"""Pure logic of the vLLM adapter: configuration, injection rules, host-tier placement.

No vLLM here; these run everywhere.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from residentkv.adapters.vllm.config import (
    ConnectorConfigError,
    InjectionRule,
    parse_connector_config,
)
from residentkv.adapters.vllm.host_tier import SlotAllocator


def test_valid_config_parses() -> None:
    cfg = parse_connector_config({
        "host_tier_bytes": 1 << 20, "event_sink": "/tmp/x.jsonl",
        "failure_injection": [{"claim_id": "c1", "mode": "once"}],
        "per_owner_claim_blocks": 8,
    })
    assert cfg.failure_injection[0].claim_id == "c1"
    assert cfg.offload_unclaimed is False


def test_bad_config_names_every_problem() -> None:
    with pytest.raises(ConnectorConfigError) as info:
        parse_connector_config({"host_tier_bytes": 0, "event_sinc": "x"})
    text = str(info.value)
    assert "host_tier_bytes" in text
    assert "event_sink" in text  # missing
    assert "event_sinc" in text  # unknown key, a typo is not silently ignored
    assert info.value.code == "L101"


def test_config_must_be_a_mapping() -> None:
    with pytest.raises(ConnectorConfigError, match="mapping"):
        parse_connector_config(["host_tier_bytes"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "rule",
    [{}, {"claim_id": "a", "owner_scope": "t"}, {"claim_id": "a", "unclaimed": True}],
)
def test_injection_rule_needs_exactly_one_selector(rule: dict[str, object]) -> None:
    with pytest.raises(ConnectorConfigError, match="exactly one"):
        parse_connector_config({"host_tier_bytes": 1, "event_sink": "x",
                                "failure_injection": [rule]})


def test_injection_rule_matching() -> None:
    by_claim = InjectionRule(claim_id="c1")
    by_owner = InjectionRule(owner_scope="tenant:a")
    unclaimed = InjectionRule(unclaimed=True)
    assert by_claim.matches("c1", "tenant:a") and not by_claim.matches("c2", "tenant:a")
    assert by_owner.matches("c9", "tenant:a") and not by_owner.matches("c9", "tenant:b")
    assert not by_owner.matches(None, "tenant:a")
    assert unclaimed.matches(None, None) and not unclaimed.matches("c1", None)


def test_claims_reserve_slots_and_are_never_evicted() -> None:
    tier = SlotAllocator(4)
    assert tier.reserve_claim("a", 2) == [0, 1]
    assert tier.reserve_claim("b", 2) == [2, 3]
    # Full of claims: a new claim is refused (rejected at acceptance), nothing is evicted.
    assert tier.reserve_claim("c", 1) is None
    assert tier.place_unclaimed("k", 1) is None
    assert tier.claimed_slots("a") == [0, 1]
    tier.release_claim("a")
    assert tier.reserve_claim("c", 2) == [0, 1]


def test_unclaimed_entries_are_evicted_lru_first_and_never_while_pinned() -> None:
    tier = SlotAllocator(4)
    assert tier.place_unclaimed("old", 2) is not None
    assert tier.place_unclaimed("new", 2) is not None
    tier.commit_unclaimed("old")
    tier.commit_unclaimed("new")
    assert tier.find_unclaimed("old") is not None  # touch: "new" is now least recent
    entry = tier.find_unclaimed("old")
    assert entry is not None
    entry.pinned = 1  # a load from it is planned this step
    assert tier.reserve_claim("c", 2) is not None
    assert tier.find_unclaimed("new") is None and tier.find_unclaimed("old") is not None
    assert tier.reserve_claim("d", 2) is None  # only a pinned entry is left


def test_uncommitted_entries_are_not_hits() -> None:
    tier = SlotAllocator(2)
    tier.place_unclaimed("k", 1)
    assert tier.find_unclaimed("k") is None
    tier.commit_unclaimed("k")
    assert tier.find_unclaimed("k") is not None
    tier.drop_unclaimed("k")
    assert tier.free_slots == 2


def test_core_and_cli_import_without_torch_or_vllm() -> None:
    code = (
        "import sys, residentkv.cli, residentkv.commands.witness, residentkv.adapters.vllm, "
        "residentkv.adapters.vllm.config, residentkv.adapters.vllm.witness\n"
        "heavy = [m for m in ('torch', 'vllm') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_witness_command_rejects_unknown_scenario_without_starting_vllm() -> None:
    from click.testing import CliRunner

    from residentkv.commands.witness import witness
    from residentkv.errors import UsageError

    result = CliRunner().invoke(witness, ["run", "--scenario", "nope"])
    assert isinstance(result.exception, UsageError)
    assert "unknown scenario" in str(result.exception)


def test_a_run_matches_only_with_spec_gates_and_all_checks() -> None:
    from residentkv.adapters.vllm.witness import EXPECTED, ScenarioRun, format_table, summarize

    good = ScenarioRun("success_path", 0, "t", gates=dict(EXPECTED["success_path"]),
                       checks={"restored_tokens_equal_cold": True, "outcome_restored": True},
                       latency_ms=5.0)
    unchecked = ScenarioRun("success_path", 1, "t", gates=dict(EXPECTED["success_path"]),
                            checks={"restored_tokens_equal_cold": False,
                                    "outcome_restored": True})
    crashed = ScenarioRun("success_path", 2, "t", gates=dict(EXPECTED["success_path"]),
                          error="boom")
    flipped = ScenarioRun("success_path", 3, "t", gates={"target.observation": False,
                                                         "target.failure_outcome": False})
    assert good.matched
    assert not any(r.matched for r in (unchecked, crashed, flipped))
    (row,) = summarize([good, unchecked, crashed, flipped])
    assert row["matched"] == 1 and row["gates"]["target.observation"]["passes"] == 3
    table = format_table([row])
    assert "3/4 (pass)" in table and "restored_tokens_equal_cold" in table


def test_control_socket_round_trip_and_owner_only_mode(tmp_path: Path) -> None:
    import os

    from residentkv.adapters.vllm.control import Operator
    from residentkv.adapters.vllm.control_socket import ControlClient, ControlError, ControlServer

    op = Operator(parse_connector_config({"host_tier_bytes": 1, "event_sink":
                                          str(tmp_path / "a.jsonl")}))
    path = tmp_path / "c.sock"
    server = ControlServer(path, op)
    try:
        assert os.stat(path).st_mode & 0o777 == 0o600
        client = ControlClient(path)
        status = client.configure(event_sink=tmp_path / "b.jsonl",
                                  failure_injection=[InjectionRule(claim_id="c1", mode="once")])
        assert status["sink"] == str(tmp_path / "b.jsonl")
        assert op.take_injection("c1", None) is not None and op.take_injection("c1", None) is None
        assert client.injections_fired == 1
        seq = client.counter("vllm.num_cached_tokens", 256, "r-1")
        lines = (tmp_path / "b.jsonl").read_text().splitlines()
        assert [json.loads(x)["event"] for x in lines] == ["stream_started", "generic_counter"]
        assert json.loads(lines[1])["seq"] == seq == 1  # on disk when the call returns
        with pytest.raises(ControlError, match="exactly one"):
            client.configure(failure_injection=[{"mode": "once"}])
        with pytest.raises(ControlError, match="unknown op"):
            client.call("shutdown")
        assert client.outcome_for("nope") is None
    finally:
        server.close()
        op.writer.close()
    assert not path.exists()


def test_middleware_finds_the_control_socket_and_reads_sse_verdicts() -> None:
    from residentkv.adapters.vllm.server import _sse_verdict, control_socket_path

    cfg = json.dumps({"kv_connector_extra_config": {"control_socket": "/run/x.sock"}})
    assert control_socket_path(["api", "--kv-transfer-config", cfg]) == "/run/x.sock"
    assert control_socket_path(["api", f"--kv-transfer-config={cfg}"]) == "/run/x.sock"
    assert control_socket_path(["api"]) is None
    assert _sse_verdict(b'data: {"error": {"message": "x"}}\n\ndata: [DONE]\n\n') == "error"
    assert _sse_verdict(b'data: {"choices": [{"text": "hi"}]}\n\n') == "tokens"
    assert _sse_verdict(b'data: {"choices": [{"delta": {"role": "assistant"}}]}\n\n') is None
