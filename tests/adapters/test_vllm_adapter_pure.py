"""Pure logic of the vLLM adapter: configuration, injection rules, host-tier placement, claim
intake, the server middleware.

No engine here. The claim-intake tests drive the scheduler role through vLLM's hooks and need
vLLM importable (they skip without it); everything else runs everywhere.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scheduler_kit import OWNER, Engine, claim, make_engine, ref, rejected_kinds

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


def test_the_replica_name_opens_every_stream_of_the_engine(tmp_path: Path) -> None:
    pytest.importorskip("vllm")
    from residentkv.adapters.vllm.control import Operator

    op = Operator(parse_connector_config({"host_tier_bytes": 1, "replica": "A",
                                          "event_sink": str(tmp_path / "a.jsonl")}))
    op.configure(event_sink=tmp_path / "b.jsonl")  # a new stream keeps the replica's name
    op.writer.close()
    for name in ("a.jsonl", "b.jsonl"):
        head = json.loads((tmp_path / name).read_text().splitlines()[0])
        assert (head["event"], head["replica"]) == ("stream_started", "A")


@pytest.mark.parametrize("replica", ["", "  ", 3])
def test_a_blank_replica_name_is_a_config_error(replica: object) -> None:
    with pytest.raises(ConnectorConfigError, match="replica"):
        parse_connector_config({"host_tier_bytes": 1, "event_sink": "x", "replica": replica})


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
    from residentkv.adapters.vllm.witness import SCENARIOS, ScenarioRun, format_table, summarize

    good = ScenarioRun("success_path", 0, "t", gates=dict(SCENARIOS["success_path"].expects),
                       checks={"restored_tokens_equal_cold": True, "outcome_restored": True},
                       latency_ms=5.0)
    unchecked = ScenarioRun("success_path", 1, "t", gates=dict(SCENARIOS["success_path"].expects),
                            checks={"restored_tokens_equal_cold": False,
                                    "outcome_restored": True})
    crashed = ScenarioRun("success_path", 2, "t", gates=dict(SCENARIOS["success_path"].expects),
                          error="boom")
    flipped = ScenarioRun("success_path", 3, "t", gates={"target.observation": False,
                                                         "target.failure_outcome": False})
    assert good.matched
    assert not any(r.matched for r in (unchecked, crashed, flipped))
    (row,) = summarize([good, unchecked, crashed, flipped])
    assert row["matched"] == 1 and row["gates"]["target.observation"]["passes"] == 3
    table = format_table([row])
    assert "3/4 (pass)" in table and "restored_tokens_equal_cold" in table


@pytest.mark.parametrize("half", ["owner_reuse_restored", "no_restore_for_other_tenant"])
def test_the_isolation_pair_fails_when_either_half_fails(half: str) -> None:
    # With caching off the other tenant's half holds trivially; with isolation broken the
    # owner's half does: the scenario matches only with both.
    from residentkv.adapters.vllm.witness import SCENARIOS, ScenarioRun

    spec = SCENARIOS["cross_tenant_reuse"]
    checks = dict.fromkeys(spec.checks, True)
    both = ScenarioRun("cross_tenant_reuse", 0, "t", gates=dict(spec.expects),
                       checks=checks)
    one = ScenarioRun("cross_tenant_reuse", 1, "t", gates=dict(spec.expects),
                      checks={**checks, half: False})
    assert both.matched and not one.matched


def test_the_corrupted_restore_report_shows_the_unverified_difference() -> None:
    from residentkv.adapters.vllm.witness import (
        SCENARIOS,
        ScenarioRun,
        format_table,
        summarize,
    )

    spec = SCENARIOS["corrupted_restore"]
    run = ScenarioRun("corrupted_restore", 0, "t", gates=dict(spec.expects),
                      checks=dict.fromkeys(spec.checks, True), shape="server",
                      notes=["verification off, same corruption: served, 5 of 8 tokens differ"])
    assert not run.matched  # the server shape also needs the client to have seen the 409
    run.checks["client_saw_refusal"] = True
    assert run.matched
    table = format_table(summarize([run]))
    assert "corrupted_restore: verification off, same corruption" in table


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
    # vLLM's abort ends the stream whatever came before it (it carries no token)
    aborted = b'data: {"choices": [{"text": "", "finish_reason": "abort"}]}\n\n'
    assert _sse_verdict(b'data: {"choices": [{"text": "hi"}]}\n\n' + aborted) == "abort"


# ---------------------------------------------------------------------- claim intake by reference
#
# The scheduler role, driven through the hooks vLLM calls (no engine): a claim is registered with
# the full claim object, offloaded, and reused by ``resident_claim_ref``. It imports vLLM (its
# request status and logger), so these tests skip where vLLM is not installed.

@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    built = make_engine(tmp_path)
    try:
        yield built
    finally:
        built.side.op.writer.close()


def test_a_reference_to_a_claim_this_engine_never_held_is_not_held(engine: Engine) -> None:
    req = engine.start(ref("c1"))
    assert engine.lookup(req) == (0, False)  # plain recompute: nothing is offered to restore
    outcome = engine.finish(req)["resident_claim"]
    assert outcome["outcome"] == "rejected" and outcome["claim_id"] == "c1"
    assert outcome["reason"] == "not held: claim 'c1' is not held by this engine"
    (rejected,) = engine.events("claim_rejected")
    # about the request, never the claim: the engine cannot tell whether this request's owner
    # owns the id, so naming it could decide another tenant's claim (SPEC §9.1)
    assert rejected["claim_id"] is None and rejected["reason"] == outcome["reason"]
    assert rejected["seq"] == outcome["seq"]
    assert not engine.events("claim_accepted") and engine.side.claims == {}  # never registered
    assert rejected_kinds(engine) == {"not_held": 1}
    (started,) = engine.events("request_started")
    assert started["claim_ref"] == "c1" and started["owner_scope"] == OWNER
    assert engine.side.op.outcome_for("r1") == outcome


def test_a_second_rejection_of_one_claim_names_no_claim(engine: Engine) -> None:
    # SPEC §4.2: a stream decides a claim once; a second claim_rejected naming it is illegal
    bad = claim("c1")
    bad["cache_identity"]["block_size"] = 16
    for _ in range(2):
        req = engine.start({"resident_claim": bad})
        engine.lookup(req)
        outcome = engine.finish(req)["resident_claim"]
        assert outcome["outcome"] == "rejected" and outcome["claim_id"] == "c1"
    first, second = engine.events("claim_rejected")
    assert first["claim_id"] == "c1" and second["claim_id"] is None
    assert second["reason"].startswith("claim 'c1' was decided before: rejected (")
    assert first["reason"] in second["reason"]


def test_a_reference_to_a_held_claim_restores_it_like_the_full_claim(engine: Engine) -> None:
    engine.register("c1")
    req = engine.start(ref("c1"))
    assert engine.lookup(req) == (256, True)
    (load,) = engine.alloc(req, 256)
    assert load.claim_id == "c1" and load.slots and not load.inject
    (required,) = engine.events("claim_restore_required")
    assert required["claim_id"] == "c1" and required["request_id"] == req.request_id
    assert not engine.events("claim_rejected")
    assert [e["claim_ref"] for e in engine.events("request_started")] == ["c1", "c1"]


def test_a_failed_restore_of_a_referenced_claim_is_refused_then_failed_closed(
        engine: Engine) -> None:
    from residentkv.adapters.vllm.rules import WorkerFact

    engine.register("c1")
    req = engine.start(ref("c1"))
    engine.lookup(req)
    (load,) = engine.alloc(req, 256)
    engine.finish(req, "FINISHED_ERROR")  # vLLM's policy fail finishes it before the facts
    engine.facts(WorkerFact("load", load.job_id, 0, False, 1, 2, injected=True,
                            invalid_block_ids=list(load.block_ids)),
                 invalid=tuple(load.block_ids))
    (refused,) = engine.events("active_request_refused")
    assert refused["outcome_claim_id"] == "c1" and refused["blocking_claim_ids"] == ["c1"]
    assert engine.side.op.outcome_for(req.request_id)["outcome"] == "refused"
    later = engine.start(ref("c1"))
    assert engine.lookup(later) == (0, False)
    outcome = engine.finish(later)["resident_claim"]
    assert outcome["outcome"] == "rejected" and outcome["reason"] == "claim 'c1' has failed closed"
    (rejected,) = engine.events("claim_rejected")
    assert rejected["claim_id"] is None  # the claim's lifecycle ended with its own failure
    assert rejected_kinds(engine) == {"failed_closed": 1}


def test_a_reference_from_another_owner_is_rejected_without_naming_the_claim(
        engine: Engine) -> None:
    engine.register("c1")
    req = engine.start(ref("c1", "tenant:b/session:9"))
    assert engine.lookup(req) == (0, False)  # another tenant never receives the KV
    outcome = engine.finish(req)["resident_claim"]
    assert outcome["outcome"] == "rejected" and outcome["claim_id"] == "c1"
    (rejected,) = engine.events("claim_rejected")
    assert rejected["claim_id"] is None and "'c1'" in rejected["reason"]
    assert OWNER not in rejected["reason"]  # the holder's scope is not disclosed
    assert not engine.events("claim_restore_required")
    assert rejected_kinds(engine) == {"conflict": 1}
    assert engine.events("request_started")[-1]["claim_ref"] == "c1"


def test_a_reference_to_a_released_claim_is_not_held_and_leaves_its_lifecycle_alone(
        engine: Engine) -> None:
    engine.register("c1")
    engine.side.op.release_claims(["c1"])
    req = engine.start(ref("c1"))
    outcome = engine.finish(req)["resident_claim"]
    assert outcome["outcome"] == "rejected" and outcome["reason"].startswith("not held:")
    (rejected,) = engine.events("claim_rejected")
    assert rejected["claim_id"] is None
    assert rejected_kinds(engine) == {"not_held": 1}


@pytest.mark.parametrize(("value", "named", "problem"), [
    ("c1", None, "must be an object"),
    ({"owner_scope": OWNER}, None, "claim_id"),
    ({"claim_id": "", "owner_scope": OWNER}, None, "claim_id"),
    ({"claim_id": 5, "owner_scope": OWNER}, None, "claim_id"),
    ({"claim_id": "c1"}, "c1", "owner_scope"),
    ({"claim_id": "c1", "owner_scope": 7}, "c1", "owner_scope"),
    ({"claim_id": "c1", "owner_scope": OWNER, "inject": True}, "c1", "unknown field(s) inject"),
])
def test_a_malformed_reference_is_rejected_as_invalid(engine: Engine, value: Any,
                                                      named: str | None, problem: str) -> None:
    engine.register("c1")
    req = engine.start({"resident_claim_ref": value})
    assert engine.lookup(req) == (0, False)
    outcome = engine.finish(req)["resident_claim"]
    assert outcome["outcome"] == "rejected"
    assert outcome["reason"].startswith("invalid claim reference: ") and problem in outcome[
        "reason"]
    (rejected,) = engine.events("claim_rejected")
    assert rejected["claim_id"] is None  # a malformed request never marks the held claim
    assert rejected_kinds(engine) == {"invalid": 1}
    assert engine.events("request_started")[-1].get("claim_ref") == named  # None: left out


def test_a_request_with_both_a_claim_and_a_reference_is_rejected(engine: Engine) -> None:
    engine.register("c1")
    req = engine.start({"resident_claim": claim("c1"), **ref("c1")})
    assert engine.lookup(req) == (0, False)
    outcome = engine.finish(req)["resident_claim"]
    assert outcome["outcome"] == "rejected" and "not both" in outcome["reason"]
    assert rejected_kinds(engine) == {"invalid": 1}
    assert engine.events("claim_rejected")[0]["claim_id"] is None


def test_request_started_names_the_claim_a_request_carries(engine: Engine) -> None:
    engine.start({"resident_claim": claim("c9")})
    engine.start({"resident_claim": {"claim_id": 3}})
    engine.start(None)
    started = engine.events("request_started")
    assert [e.get("claim_ref") for e in started] == ["c9", None, None]
    assert "claim_ref" not in started[2]  # a request without a claim asks for none


def test_the_middleware_watches_reference_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from residentkv.adapters.vllm.server import ClaimOutcomeMiddleware

    monkeypatch.delenv("RESIDENTKV_CONTROL_SOCKET", raising=False)
    outcome = {"claim_id": "c1", "outcome": "rejected", "reason": "not held: ...", "seq": 3}
    seen: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen["headers"] = dict(scope["headers"])
        await receive()
        body = json.dumps({"kv_transfer_params": {"resident_claim": outcome}}).encode()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body, "more_body": False})

    async def call(params: dict[str, Any]) -> list[dict[str, Any]]:
        body = json.dumps({"prompt": [1, 2], "kv_transfer_params": params}).encode()
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: Any) -> None:
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": "/v1/completions",
                 "headers": [(b"x-request-id", b"mine")]}
        await ClaimOutcomeMiddleware(app)(scope, receive, send)
        return sent

    start = asyncio.run(call(ref("c1")))[0]
    headers = dict(start["headers"])
    assert headers[b"x-residentkv-claim-outcome"] == b"rejected"
    assert headers[b"x-residentkv-claim-id"] == b"c1"
    assert seen["headers"][b"x-request-id"].startswith(b"rkv-")  # a fresh ticket
    plain = asyncio.run(call({}))[0]
    assert b"x-residentkv-claim-outcome" not in dict(plain["headers"])
    assert seen["headers"][b"x-request-id"] == b"mine"


# ---------------------------------------------------------------- content digests


def _pool(layout: str = "block-first") -> tuple[Any, dict[str, Any]]:
    torch = pytest.importorskip("torch")
    pytest.importorskip("xxhash")
    from residentkv.adapters.vllm.host_tier import HostPool

    gen = torch.Generator().manual_seed(0)
    kv = {f"layer{n}": torch.randn(6, 2, 4, 8, generator=gen) for n in range(2)}
    if layout == "strided":
        # the same shape over memory laid out otherwise: the pool verifies the host slots
        kv = {k: torch.randn(8, 4, 2, 6, generator=gen).permute(3, 2, 1, 0) for k in kv}
    return HostPool(kv, num_slots=4), kv


@pytest.mark.parametrize("layout", ["block-first", "strided"])
def test_stored_blocks_verify_and_corrupted_ones_do_not(layout: str) -> None:
    pool, kv = _pool(layout)
    pool.store(kv, [1, 2], [0, 1])
    whole = pool.seal([0, 1])
    assert len(whole) == 16 and all(pool.digests[s] is not None for s in (0, 1))
    pool.load(kv, [0, 1], [4, 5])
    assert pool.verify([0, 1], [4, 5]) == []
    assert all(bool((kv[k][4] == kv[k][1]).all()) for k in kv)
    pool.corrupt([1])  # the second slot's bytes change; its digest stays as stored
    pool.load(kv, [0, 1], [4, 5])
    assert pool.verify([0, 1], [4, 5]) == [5]
    assert all(bool((kv[k][5] == -kv[k][2]).all()) for k in kv)  # sign flipped, finite
    # a store voids the old digests until it is sealed: an unsealed slot never verifies
    pool.store(kv, [3], [2])
    pool.load(kv, [2], [4])
    assert pool.verify([2], [4]) == [4]


def test_a_block_digest_covers_every_layer() -> None:
    pool, kv = _pool()
    pool.store(kv, [1], [0])
    pool.seal([0])
    pool.pool["layer1"][0, 1, 2, 3] += 1.0  # one value of the last layer
    pool.load(kv, [0], [4])
    assert pool.verify([0], [4]) == [4]


def test_corrupt_rules_are_single_use_and_corrupt() -> None:
    rule = InjectionRule(claim_id="c1", mode="corrupt")
    assert rule.single_use and rule.corrupts
    assert InjectionRule(claim_id="c1", mode="once").single_use
    persistent = InjectionRule(claim_id="c1")
    assert not persistent.single_use and not persistent.corrupts
    cfg = parse_connector_config({"host_tier_bytes": 1, "event_sink": "t.jsonl",
                                  "failure_injection": [{"claim_id": "c1", "mode": "corrupt"}]})
    assert cfg.verify_content and cfg.failure_injection[0].corrupts
    with pytest.raises(ConnectorConfigError, match="verify_content"):
        parse_connector_config({"host_tier_bytes": 1, "event_sink": "t.jsonl",
                                "verify_content": "no"})


def _store_with_digest(engine: Engine, cid: str, shares: list[bytes]) -> Any:
    from residentkv.adapters.vllm.rules import WorkerFact

    req = engine.start({"resident_claim": claim(cid)})
    engine.side.update_state_after_alloc(req, None, 0)
    (store,) = engine.step(req).stores
    assert store.digest  # verification is on: the worker digests what it stores
    engine.facts(*[WorkerFact("store", store.job_id, rank, True, 1, 2, nbytes=1, digest=d)
                   for rank, d in enumerate(shares)])
    engine.finish(req)
    return store


def test_the_store_records_its_digest_and_the_restore_says_it_was_verified(
        engine: Engine) -> None:
    from residentkv.adapters.vllm.rules import WorkerFact

    _store_with_digest(engine, "c1", [b"\x01" * 16])
    (stored,) = engine.events("kv_store_finished")
    assert stored["content_digest"] == "xxh3-128:" + "01" * 16
    req = engine.start(ref("c1"))
    engine.lookup(req)
    (load,) = engine.alloc(req, 256)
    assert load.verify and not load.corrupt
    engine.facts(WorkerFact("load", load.job_id, 0, True, 1, 2, nbytes=1, verified=True))
    (restored,) = engine.events("claim_restored")
    assert restored["content_verified"] is True


def test_a_digest_mismatch_is_a_failed_load_and_a_claim_scoped_refusal(
        engine: Engine) -> None:
    from residentkv.adapters.vllm.rules import LoadFailure, WorkerFact

    _store_with_digest(engine, "c1", [b"\x01" * 16])
    engine.side.op.configure(failure_injection=[InjectionRule(claim_id="c1", mode="corrupt")])
    req = engine.start(ref("c1"))
    engine.lookup(req)
    (load,) = engine.alloc(req, 256)
    assert load.corrupt and load.verify and not load.inject
    engine.finish(req, "FINISHED_ERROR")
    engine.facts(WorkerFact("load", load.job_id, 0, False, 1, 2, nbytes=1, injected=True,
                            invalid_block_ids=list(load.block_ids),
                            reason=LoadFailure.DIGEST_MISMATCH),
                 invalid=tuple(load.block_ids))
    (failed,) = engine.events("kv_load_failed")
    assert failed["reason"] == "digest_mismatch" and failed["injected"] is True
    (restore_failed,) = engine.events("claim_restore_failed")
    assert "digest" in restore_failed["reason"]
    assert engine.events("active_request_refused")
    assert not engine.events("claim_restored")
    assert engine.side.op.outcome_for(req.request_id)["outcome"] == "refused"
    # the rule was spent by that load
    assert engine.side.op.status()["rules"] and engine.side.op.take_injection("c1", OWNER) is None


def test_tensor_parallel_shares_fold_into_one_digest_in_rank_order(engine: Engine) -> None:
    pytest.importorskip("xxhash")
    from residentkv.adapters.vllm.host_tier import combine_digests

    shares = [b"\x01" * 16, b"\x02" * 16]
    _store_with_digest(engine, "c1", shares)
    (stored,) = engine.events("kv_store_finished")
    assert stored["content_digest"] == "xxh3-128:" + combine_digests(shares).hex()


def test_with_verification_off_nothing_is_digested_and_the_restore_says_unverified(
        engine: Engine) -> None:
    from residentkv.adapters.vllm.rules import WorkerFact

    engine.side.op.configure(verify_content=False)
    req = engine.start({"resident_claim": claim("c1")})
    engine.side.update_state_after_alloc(req, None, 0)
    (store,) = engine.step(req).stores
    assert not store.digest
    engine.facts(WorkerFact("store", store.job_id, 0, True, 1, 2, nbytes=1))
    engine.finish(req)
    assert engine.events("kv_store_finished")[0].get("content_digest") is None
    req = engine.start(ref("c1"))
    engine.lookup(req)
    (load,) = engine.alloc(req, 256)
    assert not load.verify
    engine.facts(WorkerFact("load", load.job_id, 0, True, 1, 2, nbytes=1))
    assert engine.events("claim_restored")[0]["content_verified"] is False
