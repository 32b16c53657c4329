"""The generator, the fault schedule and the clients' knowledge of their claims (pure)."""

from __future__ import annotations

from chaoskit import OWNER, exchange
from residentkv.adapters.vllm.chaos.generator import (
    Workload,
    claim_id,
    plan_ops,
    session_names,
)
from residentkv.adapters.vllm.chaos.model import FaultKind, Op, OpKind, Transport
from residentkv.adapters.vllm.chaos.nemesis import CLAIM_FAULTS, plan_faults
from residentkv.adapters.vllm.chaos.sessions import Sessions
from residentkv.adapters.vllm.config import CLAIM_PARAM, CLAIM_REF_PARAM

W = Workload(seed=5, clients=3, tenants=2, sessions_per_tenant=2, ops=200, rate_per_client=2.0,
             stream_share=0.3)


def test_the_plan_is_a_function_of_the_seed() -> None:
    assert plan_ops(W) == plan_ops(W)
    other = plan_ops(Workload(**{**W.__dict__, "seed": 6}))
    assert other != plan_ops(W)
    ops = [op for plan in plan_ops(W) for op in plan]
    assert len(ops) == 200 and sorted(op.op_id for op in ops) == list(range(200))


def test_sessions_register_first_and_stay_with_one_client() -> None:
    owner: dict[str, int] = {}
    for plan in plan_ops(W):
        seen: set[str] = set()
        for op in plan:
            if op.session is None or op.kind is OpKind.UNCLAIMED:
                continue
            assert owner.setdefault(op.session, op.client) == op.client
            if op.kind in (OpKind.FOREIGN_REF, OpKind.FOREIGN_FULL):
                continue
            if op.session not in seen:
                assert op.kind is OpKind.REGISTER
                seen.add(op.session)


def test_the_mix_has_every_kind_and_foreign_requests_use_the_owners_prompt() -> None:
    ops = [op for plan in plan_ops(W) for op in plan]
    kinds = {op.kind for op in ops}
    assert kinds == {OpKind.REGISTER, OpKind.REUSE_REF, OpKind.REUSE_FULL, OpKind.UNCLAIMED,
                     OpKind.FOREIGN_REF, OpKind.FOREIGN_FULL}
    assert any(op.stream for op in ops) and not all(op.stream for op in ops)
    for op in ops:
        if op.kind in (OpKind.FOREIGN_REF, OpKind.FOREIGN_FULL):
            assert op.target_session is not None and op.prompt == op.target_session
            assert op.target_session.split("/")[0] != (op.session or "").split("/")[0]
    unclaimed = [op.prompt for op in ops if op.kind is OpKind.UNCLAIMED]
    assert len(set(unclaimed)) == len(unclaimed)


def test_the_fault_schedule_is_seeded_spread_and_aimed() -> None:
    sessions = session_names(2, 2)
    plan = plan_faults(5, tuple(FaultKind), 100.0, sessions, per_kind=2)
    assert plan == plan_faults(5, tuple(FaultKind), 100.0, sessions, per_kind=2)
    assert plan != plan_faults(6, tuple(FaultKind), 100.0, sessions, per_kind=2)
    assert sorted(f.kind for f in plan) == sorted(list(FaultKind) * 2)
    times = [f.at for f in plan]
    assert times == sorted(times) and times[0] >= 10.0 and times[-1] <= 80.0
    for f in plan:
        assert (f.target_session in sessions) == (f.kind in CLAIM_FAULTS)
        assert (f.burst > 0) == (f.kind is FaultKind.HOST_TIER_PRESSURE)
    assert plan_faults(5, (), 100.0, sessions) == []


def _sessions() -> Sessions:
    return Sessions(5, session_names(2, 1), model="m", block_size=128, prompt_len=300)


def _op(kind: OpKind, session: str | None = OWNER, target: str | None = None) -> Op:
    return Op(op_id=1, client=0, kind=kind, session=session, target_session=target,
              prompt=target or session or "u1")


def test_a_reuse_of_a_claim_not_held_registers_a_fresh_id() -> None:
    s = _sessions()
    first = s.request(_op(OpKind.REUSE_REF))
    assert first.op.kind is OpKind.REGISTER and first.claim_id == claim_id(5, OWNER, 1)
    assert first.kv_transfer_params is not None
    assert first.kv_transfer_params[CLAIM_PARAM]["owner_scope"] == OWNER
    s.learn(exchange(1, OpKind.REGISTER, "t", outcome="offloaded", claim=first.claim_id))
    reuse = s.request(_op(OpKind.REUSE_REF))
    assert reuse.op.kind is OpKind.REUSE_REF and reuse.claim_id == first.claim_id
    assert reuse.kv_transfer_params == {CLAIM_REF_PARAM: {"claim_id": first.claim_id,
                                                          "owner_scope": OWNER}}
    s.learn(exchange(2, OpKind.REUSE_REF, "t2", status=409, outcome="refused",
                     claim=first.claim_id))
    again = s.request(_op(OpKind.REUSE_FULL))
    assert again.op.kind is OpKind.REGISTER and again.claim_id == claim_id(5, OWNER, 2)


def test_a_request_that_never_reached_the_server_teaches_nothing() -> None:
    s = _sessions()
    reg = s.request(_op(OpKind.REGISTER))
    s.learn(exchange(1, OpKind.REGISTER, "t", outcome="offloaded", claim=reg.claim_id))
    s.learn(exchange(2, OpKind.REUSE_REF, None, status=None, transport=Transport.REFUSED,
                     claim=reg.claim_id))
    assert s.request(_op(OpKind.REUSE_REF)).claim_id == reg.claim_id
    s.learn(exchange(3, OpKind.REUSE_REF, None, status=None, transport=Transport.LOST,
                     claim=reg.claim_id))
    assert s.request(_op(OpKind.REUSE_REF)).op.kind is OpKind.REGISTER


def test_foreign_requests_name_the_owners_claim_under_the_senders_scope() -> None:
    s = _sessions()
    other = session_names(2, 1)[1]
    early = s.request(_op(OpKind.FOREIGN_FULL, target=other))
    assert early.op.kind is OpKind.FOREIGN_REF  # nothing to quote yet: never a registration
    assert early.kv_transfer_params == {CLAIM_REF_PARAM: {"claim_id": claim_id(5, other, 1),
                                                          "owner_scope": OWNER}}
    reg = s.request(_op(OpKind.REGISTER, session=other))
    ref = s.request(_op(OpKind.FOREIGN_REF, target=other))
    assert ref.kv_transfer_params == {CLAIM_REF_PARAM: {"claim_id": reg.claim_id,
                                                        "owner_scope": OWNER}}
    full = s.request(_op(OpKind.FOREIGN_FULL, target=other))
    assert full.kv_transfer_params is not None
    body = full.kv_transfer_params[CLAIM_PARAM]
    assert body["claim_id"] == reg.claim_id and body["owner_scope"] == OWNER
    assert s.current_claim(OWNER) is None  # foreign requests register nothing of the sender
