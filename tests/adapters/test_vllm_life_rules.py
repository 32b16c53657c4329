"""A deployment's life (SPEC §9.1) on the connector's scheduler role, driven through the hooks
vLLM calls (no engine; vLLM must be importable): restarts on the same sink, graceful stops,
other tenants, pressure and release, expiry, budgets. Every trace is judged with the gates
across its streams (``life_kit``). The same paths run on real vLLM behind the OpenAI server in
``test_vllm_life.py``.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from life_kit import assert_decided_once_and_ended, assert_legal, streams
from scheduler_kit import OWNER, Engine, claim, make_engine, ref, rejected_kinds

pytest.importorskip("vllm")


def _outcome(engine: Engine, params: dict[str, object]) -> dict[str, object]:
    req = engine.start(params)
    assert engine.lookup(req) == (0, False)  # nothing offered from the host tier
    out: dict[str, object] = engine.finish(req)["resident_claim"]
    return out


def test_a_restart_on_the_same_sink_ends_the_old_claims_and_decides_nothing_twice(
        tmp_path: Path) -> None:
    first = make_engine(tmp_path)
    first.register("c1")
    first.start({"resident_claim": claim("c2")})  # accepted; the engine dies before its store
    first.side.op.writer.close()  # killed: no graceful close
    second = make_engine(tmp_path, sink=first.sink)
    old, new = streams(first.sink)
    assert new[0]["incarnation"] != old[0]["incarnation"]
    assert [(e["event"], e["claim_id"]) for e in new[1:3]] == [
        ("claim_harmed", "c1"), ("claim_released", "c2")]
    assert new[1]["cause"] == "engine_restarted" and not new[1]["after"]["holds"]
    # the full claim again: the loss, never a second acceptance or an "offloaded"
    again = _outcome(second, {"resident_claim": claim("c1")})
    assert again["outcome"] == "rejected" and "harmed (engine_restarted)" in str(again["reason"])
    by_ref = _outcome(second, ref("c1"))
    assert str(by_ref["reason"]).startswith("not held: ") and "engine_restarted" in str(
        by_ref["reason"])
    second.register("c3")  # a new claim id is accepted as usual
    assert rejected_kinds(second) == {"decided": 1, "not_held": 1}
    second.side.op.writer.close()
    assert_legal(first.sink)
    assert_decided_once_and_ended(first.sink)


def test_a_graceful_stop_ends_every_claim_and_request_before_the_stream_closes(
        tmp_path: Path) -> None:
    engine = make_engine(tmp_path)
    engine.register("c1")
    running = engine.restoring(ref("c1"))  # a reuse still under way when the engine stops
    engine.start({"resident_claim": claim("c2")})  # accepted, never materialized
    engine.side.op.close()
    tail = [(e["event"], e["claim_id"] or e["request_id"]) for e in engine.events()][-5:]
    assert tail[0][0] == "request_finished" and tail[-1] == ("stream_closed", None)
    assert ("claim_harmed", "c1") in tail and ("claim_released", "c2") in tail
    harmed = engine.events("claim_harmed")[0]
    assert harmed["cause"] == "shutdown" and harmed["before"]["holds"]
    assert engine.side.op.outcome_for(running.request_id)["outcome"] == "engine_stopped"
    assert_legal(engine.sink)
    assert_decided_once_and_ended(engine.sink)
    # the next incarnation finds nothing open
    after = make_engine(tmp_path, sink=engine.sink)
    after.side.op.writer.close()
    assert len(streams(engine.sink)[-1]) == 1


def test_a_reference_from_another_tenant_before_registration_changes_nothing(
        tmp_path: Path) -> None:
    engine = make_engine(tmp_path)
    foreign = _outcome(engine, ref("c1", "tenant:b/session:9"))
    assert foreign["outcome"] == "rejected" and foreign["claim_id"] == "c1"
    engine.register("c1")  # the owner registers afterwards: accepted
    req = engine.restoring(ref("c1"))
    engine.restored(req)
    assert engine.finish(req)["resident_claim"]["outcome"] == "restored"
    assert [e["claim_id"] for e in engine.events("claim_rejected")] == [None]
    engine.side.op.writer.close()
    assert_legal(engine.sink)


def test_a_rejected_claim_stays_rejected_and_a_released_one_stays_released(
        tmp_path: Path) -> None:
    engine = make_engine(tmp_path, num_slots=4)  # room for two claims of two blocks
    engine.register("c1")
    engine.register("c2")
    full = _outcome(engine, {"resident_claim": claim("c3")})
    assert str(full["reason"]).startswith("host tier full")
    assert engine.side.op.release_claims(["c1"]) == 1  # room again
    again = _outcome(engine, {"resident_claim": claim("c3")})
    assert again["outcome"] == "rejected" and "rejected (host tier full" in str(again["reason"])
    back = _outcome(engine, {"resident_claim": claim("c1")})  # the released claim, in full
    assert back["outcome"] == "rejected" and "released (operator release)" in str(back["reason"])
    assert [e["claim_id"] for e in engine.events("claim_accepted")] == ["c1", "c2"]
    assert not [e for e in engine.events("claim_restore_required") if e["claim_id"] == "c1"]
    engine.side.op.writer.close()
    assert_legal(engine.sink)
    assert_decided_once_and_ended(engine.sink)


def test_a_release_under_a_running_restore_waits_for_the_request(tmp_path: Path) -> None:
    engine = make_engine(tmp_path)
    engine.register("c1")
    req = engine.restoring(ref("c1"))
    assert engine.side.op.release_claims(["c1"]) == 1
    assert not engine.events("claim_released")  # inside the restore cycle: not yet
    assert _outcome(engine, ref("c1"))["reason"] == "claim 'c1' is ending: released " \
        "(operator release)"
    engine.restored(req)
    engine.finish(req)
    (released,) = engine.events("claim_released")
    finished = engine.events("request_finished")
    assert released["seq"] > max(e["seq"] for e in finished if e["request_id"] == req.request_id)
    assert "c1" not in engine.side.claims and engine.side.slots.free_slots == 16
    engine.side.op.writer.close()
    assert_legal(engine.sink)


def test_an_expiring_claim_expires_on_the_clock_before_its_slots_are_freed(
        tmp_path: Path) -> None:
    engine = make_engine(tmp_path)
    body = claim("c1") | {"protection_mode": "expiring", "expires_after_s": 0.2}
    engine.register("c1", body)
    deadline = time.monotonic() + 30
    while not engine.events("claim_expired") and time.monotonic() < deadline:
        time.sleep(0.05)  # the operator's clock thread expires it, no hook involved
    (expired,) = engine.events("claim_expired")
    assert expired["reason"] == "expires_after_s=0.2 elapsed"
    assert engine.side.slots.free_slots == 16 and "c1" not in engine.side.claims
    late = _outcome(engine, ref("c1"))
    assert "expired (expires_after_s=0.2 elapsed)" in str(late["reason"])
    engine.side.op.close()
    assert_legal(engine.sink)
    assert_decided_once_and_ended(engine.sink)


def test_per_owner_budgets_reject_by_name_and_count_only_the_owner(tmp_path: Path) -> None:
    from residentkv.adapters.vllm.rules import Budgets

    engine = make_engine(tmp_path, per_owner_claims=1)
    engine.register("c1")
    over = _outcome(engine, {"resident_claim": claim("c2")})
    assert str(over["reason"]).startswith("budget per_owner_claims exceeded")
    engine.register("c3", claim("c3", "tenant:b/session:1"))  # another owner's own budget
    engine.side.op.configure(budgets=Budgets(bytes=1024 * 4))  # two blocks' worth more
    engine.register("c4")
    bytes_over = _outcome(engine, {"resident_claim": claim("c5")})
    assert str(bytes_over["reason"]).startswith("budget per_owner_claim_bytes exceeded")
    assert rejected_kinds(engine) == {"budget": 2}
    engine.side.op.writer.close()
    assert OWNER in str(over["reason"])
