"""`residentkv chaos run` on real vLLM: the short derandomized run of ``make test``.

One run (seed 3, fixed) of the documented server with the connector and the middleware,
three clients of two tenants, and a nemesis that corrupts a stored copy, kills the EngineCore
(then restarts the server on the same sink), fills the host tier, injects a restore failure
and releases a claim. The tests hold the harness to what it must be whatever the adapter does:
the plan is the seed's, every request and fault is recorded, every answered request joins the
engine's sink by its ticket, restored outputs equal the recompute, no claim crosses tenants,
and the exit code and verdict follow the figures. And the adapter's side (SPEC §9.1): every
figure that must be zero is zero -- no disagreement, no claim undecided or decided twice, no
claimed response without its outcome or one the official client would retry -- and gate
conformance passes on the sink's streams, one per incarnation.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vllm")
pytest.importorskip("openai")

from residentkv.adapters.vllm.chaos.generator import Workload, plan_ops, session_names
from residentkv.adapters.vllm.chaos.history import MUST_BE_ZERO, check_history
from residentkv.adapters.vllm.chaos.model import FaultKind, History, StopCause
from residentkv.adapters.vllm.chaos.nemesis import plan_faults
from residentkv.adapters.vllm.chaos.sink import read_sink

pytestmark = pytest.mark.vllm

SEED = 3
FAULTS = ("corrupt_copy", "kill_engine", "host_tier_pressure", "inject_failure",
          "operator_release")
ARGS = ["--seed", str(SEED), "--clients", "3", "--tenants", "2", "--sessions", "2",
        "--requests", "240", "--rate", "3", "--duration", "50", "--pressure-burst", "14",
        *(x for f in FAULTS for x in ("--fault", f))]


@pytest.fixture(scope="module")
def chaos_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("chaos")
    proc = subprocess.run([sys.executable, "-m", "residentkv", "chaos", "run", "--out",
                           str(out), *ARGS, "--format", "json"], capture_output=True,
                          text=True, timeout=900, check=False)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    history = History.model_validate_json((out / "history.json").read_bytes())
    return {"out": out, "code": proc.returncode, "doc": json.loads(proc.stdout),
            "history": history}


def test_the_run_is_the_seeds_plan_and_every_request_is_recorded(
        chaos_run: dict[str, Any]) -> None:
    h: History = chaos_run["history"]
    w = Workload(seed=SEED, clients=3, tenants=2, sessions_per_tenant=2, ops=240,
                 rate_per_client=3.0, stream_share=0.3)
    assert h.ops == [op for plan in plan_ops(w) for op in plan]
    load = [x for x in h.exchanges if x.kind != "reference"]
    assert len(load) >= 40
    assert all(x.status is not None or x.transport is not None for x in h.exchanges)
    assert len(h.reference_tokens) == 4  # the recompute of every session prompt
    planned = plan_faults(SEED, tuple(FaultKind(f) for f in FAULTS), 50.0,
                          session_names(2, 2))
    assert [(f.kind, f.due_after_s) for f in h.faults] == [(p.kind, p.at) for p in planned]


def test_the_engine_is_killed_and_restarted_on_the_same_sink(chaos_run: dict[str, Any]) -> None:
    h: History = chaos_run["history"]
    kill = next(f for f in h.faults if f.kind is FaultKind.KILL_ENGINE)
    assert kill.applied, kill.detail
    assert [i.stopped_by for i in h.incarnations] == [StopCause.KILLED_ENGINE,
                                                      StopCause.FINAL_STOP]
    assert chaos_run["doc"]["figures"]["streams"] == 2
    assert any(x.incarnation == 1 and x.status == 200 for x in h.exchanges)


def test_every_answered_request_joins_the_sink_by_its_ticket(chaos_run: dict[str, Any]) -> None:
    h: History = chaos_run["history"]
    sink = read_sink(h.sink)
    answered = [x for x in h.exchanges if x.status is not None and
                (200 <= x.status < 300 or x.status == 409)]
    assert answered and all(x.ticket for x in answered)
    missing = [x.op_id for x in answered if sink.find_request(str(x.ticket)) is None]
    assert missing == []
    assert any(sink.find_request(str(x.ticket)).stream == 1 for x in answered)  # type: ignore[union-attr]


def test_restores_equal_the_recompute_and_no_claim_crosses_tenants(
        chaos_run: dict[str, Any]) -> None:
    figures = chaos_run["doc"]["figures"]
    assert figures["restored_outputs_compared"] > 0
    assert figures["restored_output_differs"] == 0
    assert figures["cross_tenant_restores"] == 0
    assert figures["recomputed_outputs_compared"] > 0


def test_the_verdict_and_exit_code_follow_the_figures(chaos_run: dict[str, Any]) -> None:
    doc, code = chaos_run["doc"], chaos_run["code"]
    nonzero = [f.value for f in MUST_BE_ZERO if doc["figures"][f.value]]
    assert doc["failing"] == nonzero
    assert doc["passed"] == (not nonzero and doc["conformance"]["status"] == "pass")
    assert code == (0 if doc["passed"] else 1)
    again = check_history(chaos_run["history"], chaos_run["history"].sink,
                          str(Path(chaos_run["out"]) / "history.json"))
    assert again["figures"] == doc["figures"] and again["findings"] == doc["findings"]


def test_the_deployment_keeps_every_claim_through_its_life(chaos_run: dict[str, Any]) -> None:
    doc = chaos_run["doc"]
    errors = [f["message"] for f in doc["findings"] if f["severity"] == "error"]
    assert doc["failing"] == [] and doc["conformance"]["status"] == "pass", errors[:10]
    assert [s["end"] for s in doc["conformance"]["streams"]] == ["restarted", "closed"]
    assert doc["passed"] and chaos_run["code"] == 0
