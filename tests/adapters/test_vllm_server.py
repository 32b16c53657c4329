"""The connector in the shape people deploy: vLLM's OpenAI server, default multiprocessing (an
EngineCore and a Worker process), the official ``openai`` client, on 127.0.0.1.

One server is shared by the module (starting one takes ~25 s); each test points the engine's
stream at its own file through the control socket. The server runs in its own process group and
is stopped by its PID, whatever happens.
"""

from __future__ import annotations

import json
import signal
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vllm")
pytest.importorskip("openai")

import openai

from residentkv.adapters.vllm.config import InjectionRule
from residentkv.adapters.vllm.witness import SCENARIOS, Witness, make_claim
from residentkv.trace.gates import check_trace
from residentkv.trace.reader import TraceReader

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Witness]:
    witness = Witness(tmp_path_factory.mktemp("server"), policy="fail", shape="server")
    try:
        yield witness
    finally:
        witness.close()


def _problems(path: str | Path) -> list[Any]:
    reader = TraceReader(path)
    for _ in reader.events():
        pass
    return reader.problems


def _events(path: str | Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _client(w: Witness, **kw: Any) -> Any:
    base = w.backend.server.base_url + "/v1"
    return openai.OpenAI(base_url=base, api_key="none", **kw)


def _ask(client: Any, prompt: list[int], claim: dict[str, Any] | None, **kw: Any) -> Any:
    body: dict[str, Any] = {"ignore_eos": True, "return_token_ids": True}
    if claim is not None:
        body["kv_transfer_params"] = {"resident_claim": claim}
    return client.completions.create(model=w_model(), prompt=prompt, max_tokens=4,
                                      temperature=0.0, extra_body=body, **kw)


def w_model() -> str:
    from residentkv.adapters.vllm.engine import SERVED_MODEL_NAME

    return SERVED_MODEL_NAME


@pytest.mark.parametrize("scenario", ["success_path", "claimed_load_failure",
                                      "cross_tenant_reuse", "multi_claim_targeted_failure",
                                      "corrupted_restore"])
def test_server_scenarios_give_spec_gate_results(served: Witness, tmp_path: Path,
                                                 scenario: str) -> None:
    run = served.run(scenario, 0, tmp_path)
    assert run.error is None, run.error
    assert run.gates == SCENARIOS[scenario].expects, run.trace
    assert run.matched, (run.checks, run.trace)
    # one stream, one writer: the reader finds no problem (seq strictly increasing, typed)
    assert not _problems(run.trace)


def test_default_client_sees_the_refusal_and_does_not_retry(served: Witness,
                                                            tmp_path: Path) -> None:
    trace = tmp_path / "refusal.jsonl"
    ids = ["server-refusal-1", "server-refusal-stream-1"]
    served.op.configure(event_sink=trace)
    prompts = [served.prompt("server-refusal", n) for n in range(2)]
    claims = [make_claim(c, "tenant:a/session:1", served.model_id, f"obj-{c}") for c in ids]
    client = _client(served)  # default max_retries: 409 is retried unless told not to
    try:
        for p, c in zip(prompts, claims, strict=True):
            served.reset()
            assert _ask(client, p, c).kv_transfer_params["resident_claim"]["outcome"] \
                == "offloaded"
        served.op.configure(failure_injection=[InjectionRule(claim_id=c) for c in ids])
        served.reset()
        with pytest.raises(openai.ConflictError) as info:
            _ask(client, prompts[0], claims[0])
        # streaming: the same refusal, before any token
        served.reset()
        with pytest.raises(openai.ConflictError) as stream_info:
            for _ in client.completions.create(
                    model=w_model(), prompt=prompts[1], max_tokens=4, stream=True,
                    extra_body={"kv_transfer_params": {"resident_claim": claims[1]}}):
                pass
        # the claim failed closed: a later request quoting it is served without it, and says so
        served.reset()
        later = client.completions.with_raw_response.create(
            model=w_model(), prompt=prompts[0], max_tokens=2,
            extra_body={"kv_transfer_params": {"resident_claim": claims[0]}})
    finally:
        served.op.configure(failure_injection=[])
        served.op.release_claims(ids)
    for caught, cid in ((info.value, ids[0]), (stream_info.value, ids[1])):
        assert caught.response.status_code == 409
        assert caught.response.headers["x-should-retry"] == "false"
        outcome = caught.body["resident_claim"]
        assert outcome["claim_id"] == cid and outcome["outcome"] == "refused"
        assert outcome["reason"] == "injected load failure" and isinstance(outcome["seq"], int)
        refused = [e for e in _events(trace) if e["event"] == "active_request_refused"
                   and e["claim_id"] == cid]
        assert [e["seq"] for e in refused] == [outcome["seq"]]
        (result,) = check_trace(trace, gates=("failure_outcome",), claim_id=cid).results
        assert result.passed, result.missing
    assert later.http_response.status_code == 200
    assert later.headers["x-residentkv-claim-outcome"] == "rejected"
    assert later.parse().kv_transfer_params["resident_claim"]["outcome"] == "rejected"
    # not retried: two stores, two refused requests, one later request -- nothing else
    assert len([e for e in _events(trace) if e["event"] == "request_started"]) == 5


def test_a_corrupted_restore_reaches_the_default_client_as_a_409_never_a_completion(
        served: Witness, tmp_path: Path) -> None:
    trace = tmp_path / "corrupted.jsonl"
    cid = "server-corrupt-1"
    served.op.configure(event_sink=trace)
    prompt = served.prompt("server-corrupt", 0)
    claim = make_claim(cid, "tenant:a/session:1", served.model_id, "obj-corrupt")
    client = _client(served)  # default retries: a 409 without x-should-retry would be retried
    try:
        served.reset()
        assert _ask(client, prompt, claim).kv_transfer_params["resident_claim"]["outcome"] \
            == "offloaded"
        served.op.configure(failure_injection=[InjectionRule(claim_id=cid, mode="corrupt")])
        served.reset()
        with pytest.raises(openai.ConflictError) as info:
            _ask(client, prompt, claim)
    finally:
        served.op.configure(failure_injection=[])
        served.op.release_claims([cid])
    outcome = info.value.body["resident_claim"]
    assert outcome["outcome"] == "refused" and "digest" in outcome["reason"]
    events = _events(trace)
    (failed,) = [e for e in events if e["event"] == "kv_load_failed"]
    assert failed["reason"] == "digest_mismatch" and failed["claim_id"] == cid
    assert not [e for e in events if e["event"] == "claim_restored"]
    # not retried: the store and the refused request only
    assert len([e for e in events if e["event"] == "request_started"]) == 2
    (result,) = check_trace(trace, gates=("failure_outcome",), claim_id=cid).results
    assert result.passed, result.missing


def test_served_without_its_claim_is_unmistakable(served: Witness, tmp_path: Path) -> None:
    served.op.configure(event_sink=tmp_path / "rejected.jsonl")
    bad = make_claim("server-bad-1", "tenant:a", served.model_id, "obj")
    bad["cache_identity"]["block_size"] = 16
    raw = _client(served).completions.with_raw_response.create(
        model=w_model(), prompt=served.prompt("server-bad", 0), max_tokens=2,
        extra_body={"kv_transfer_params": {"resident_claim": bad}})
    assert raw.http_response.status_code == 200
    assert raw.headers["x-residentkv-claim-outcome"] == "rejected"
    body = raw.parse()
    assert body.kv_transfer_params["resident_claim"]["outcome"] == "rejected"


def test_a_reference_to_a_claim_this_replica_does_not_hold_says_so(served: Witness,
                                                                   tmp_path: Path) -> None:
    # Behind a router the reuse may land on a replica that never saw the claim.
    served.op.configure(event_sink=tmp_path / "not-held.jsonl")
    ref = {"claim_id": "server-never-held", "owner_scope": "tenant:a/session:1"}
    raw = _client(served).completions.with_raw_response.create(
        model=w_model(), prompt=served.prompt("server-not-held", 0), max_tokens=2,
        extra_body={"kv_transfer_params": {"resident_claim_ref": ref}})
    assert raw.http_response.status_code == 200
    assert raw.headers["x-residentkv-claim-outcome"] == "rejected"
    assert raw.headers["x-residentkv-claim-id"] == "server-never-held"
    outcome = raw.parse().kv_transfer_params["resident_claim"]
    assert outcome["outcome"] == "rejected" and outcome["reason"].startswith("not held: ")


def test_hostile_claim_parameters_combined_get_an_outcome_and_restore_nothing(
        served: Witness, tmp_path: Path) -> None:
    """Several defects in one streaming request (both parameter forms, a reference with wrong
    JSON types and an unknown key), then another tenant's reference to a claim the engine
    holds: each is rejected with an outcome the client sees, nothing is read from the host
    tier for them, and the stream stays well formed."""
    sink = tmp_path / "hostile.jsonl"
    served.op.configure(event_sink=sink)
    owner = "tenant:a/session:h"
    claim = make_claim("server-held-h", owner, served.model_id, "obj-h")
    prompt = served.prompt("server-hostile", 0)
    _ask(_client(served), prompt, claim)  # registered and offloaded on this engine
    hostile = [
        {"resident_claim": claim, "resident_claim_ref": {"claim_id": ["x"], "owner_scope": 7,
                                                         "extra": True}},
        {"resident_claim_ref": {"claim_id": "server-held-h", "owner_scope": 7}},
        {"resident_claim_ref": {"claim_id": "server-held-h", "owner_scope": "tenant:b/s:1"}},
    ]
    for params in hostile:
        stream = _client(served).completions.with_raw_response.create(
            model=w_model(), prompt=prompt, max_tokens=2, stream=True,
            extra_body={"kv_transfer_params": params})
        assert stream.http_response.status_code == 200, params
        assert stream.headers["x-residentkv-claim-outcome"] == "rejected", params
        for _ in stream.parse():
            pass
    served.op.flush()
    assert _problems(sink) == []
    events = _events(sink)
    started = [e["request_id"] for e in events if e["event"] == "request_started"]
    hostile_requests = set(started[1:])
    assert len(hostile_requests) == len(hostile)
    rejected = [e for e in events if e["event"] == "claim_rejected"]
    assert {e["request_id"] for e in rejected} == hostile_requests
    assert all(e["claim_id"] is None for e in rejected)  # never smeared onto the held claim
    assert not [e for e in events if e["request_id"] in hostile_requests and e["event"] in (
        "kv_load_started", "claim_restore_required", "claim_restored", "claim_reused")]


def test_metrics_scrape_names_claim_counters(served: Witness, tmp_path: Path) -> None:
    served.run("success_path", 7, tmp_path)
    text = ""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # stats reach the front end with the next step
        with urllib.request.urlopen(served.backend.server.base_url + "/metrics") as r:
            text = r.read().decode()
        if "vllm:residentkv_claims_restored_total" in text:
            break
        served.generate([served.prompt("metrics-tick", 0)], [None])
    values = {line.split("{")[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
              if line.startswith("vllm:residentkv_") and not line.startswith("#")}
    assert values.get("vllm:residentkv_claims_accepted_total", 0) >= 1
    assert values.get("vllm:residentkv_claims_offloaded_total", 0) >= 1
    assert values.get("vllm:residentkv_claims_restored_total", 0) >= 1
    assert values.get("vllm:residentkv_host_tier_capacity_bytes", 0) > 0
    assert "vllm:residentkv_restore_latency_seconds_bucket" in text


def test_control_socket_is_owner_only(served: Witness) -> None:
    mode = Path(served.op.path).stat().st_mode & 0o777
    assert mode == 0o600


def test_operator_cli_controls_the_serving_engine(served: Witness, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from residentkv.commands.witness import witness as witness_cmd
    from residentkv.errors import UsageError

    def ctl(*args: str, code: int = 0) -> Any:
        result = CliRunner().invoke(witness_cmd, ["control", "--socket", served.op.path, *args])
        assert result.exit_code == code, result.output
        return result.output

    served.op.configure(event_sink=tmp_path / "cli.jsonl")
    assert ctl("inject", "--claim-id", "cli-1", "--mode", "once") == (
        "failure injection set: the next load of claim cli-1 fails (once: the rule is then "
        "spent)\n")
    assert served.op.status()["rules"] == [
        {"claim_id": "cli-1", "owner_scope": None, "unclaimed": False, "mode": "once"}]
    claim = make_claim("cli-1", "tenant:a", served.model_id, "obj-cli")
    prompt = served.prompt("cli", 0)
    served.reset()
    served.generate([prompt], [claim])
    assert "cli-1" in json.loads(ctl("status"))["claims"]
    served.reset()
    (refused,), _ = served.generate([prompt], [claim])
    assert refused.status == 409
    assert json.loads(ctl("outcome", refused.request_id))["outcome"] == "refused"
    assert "no claim outcome for request no-such-id" in ctl("outcome", "no-such-id", code=1)
    assert ctl("clear-injection").startswith("failure injection cleared")
    assert served.op.status()["rules"] == []
    # failed closed: nothing live to release, and the operator is told so (exit 1)
    assert "claim cli-1 is not live on this engine" in ctl("release", "cli-1", code=1)
    bad = CliRunner().invoke(witness_cmd, ["control", "--socket", served.op.path, "inject"])
    assert isinstance(bad.exception, UsageError) and "exactly one" in str(bad.exception)


def test_torn_last_line_is_a_located_problem_not_a_crash(served: Witness,
                                                         tmp_path: Path) -> None:
    run = served.run("success_path", 8, tmp_path)
    torn = tmp_path / "torn.jsonl"
    text = Path(run.trace).read_text(encoding="utf-8")
    torn.write_text(text + text.splitlines()[-1][:40], encoding="utf-8")
    problems = _problems(torn)
    assert len(problems) == 1 and problems[0].line == len(text.splitlines()) + 1


def test_no_written_event_is_lost_when_the_server_is_stopped(served: Witness,
                                                             tmp_path: Path) -> None:
    # Last test of the module: it stops the shared server with SIGTERM under vLLM's default
    # --shutdown-timeout 0 (the EngineCore is killed, not drained).
    trace = tmp_path / "shutdown.jsonl"
    served.op.configure(event_sink=trace)
    claim = make_claim("shutdown-1", "tenant:a", w_model(), "obj")
    (out,), _ = served.generate([served.prompt("shutdown", 0)], [claim])
    assert out.claim_outcome is not None and out.claim_outcome["outcome"] == "offloaded"
    # live: the step's events are on disk while the server still runs
    live = _events(trace)
    assert [e["event"] for e in live if e["event"] in ("claim_offloaded", "request_finished")] \
        == ["claim_offloaded", "request_finished"]
    served.backend.server.stop(signal.SIGTERM)
    assert _events(trace)[: len(live)] == live
    assert not _problems(trace)
