"""Hand-built chaos histories and sinks for the history checker's pure tests.

The real-vLLM run (tests/adapters/chaos/test_chaos_vllm.py) covers the same checker on what a
real server and real clients produce; these build the cases a short real run cannot force
(a claim accepted twice, a restore for another tenant, a torn line).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from residentkv.adapters.vllm.chaos.model import (
    Exchange,
    FaultKind,
    FaultRecord,
    History,
    Incarnation,
    OpKind,
    RunSettings,
    StopCause,
    Transport,
)

OWNER = "tenant:0/session:0"
OTHER = "tenant:1/session:0"
TOKENS = [11, 12, 13, 14]
PASS = {"status": "pass", "detail": "stand-in verdict of the pure tests"}


def ev(seq: int, event: str, request: str | None = None, claim: str | None = None,
       **fields: Any) -> dict[str, Any]:
    """A sink line (the checker reads raw JSON; the conformance gate validates)."""
    return {"schema": "residentkv.event/v1", "seq": seq, "ts_ns": seq, "source": "test",
            "event": event, "claim_id": claim, "request_id": request, **fields}


def rid(ticket: str) -> str:
    """vLLM's request id for a request whose X-Request-Id is *ticket*."""
    return f"cmpl-{ticket}-0-abcd1234"


def served(seq: int, ticket: str, claim: str | None = None,
           decisive: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """A request that starts, has *decisive* events of *claim*, and is served."""
    r = rid(ticket)
    out = [ev(seq, "request_started", r, claim_ref=claim)]
    for i, name in enumerate(decisive, start=1):
        extra = {"source": "offload_tier"} if name == "claim_restored" else {}
        out.append(ev(seq + i, name, r, claim, **extra))
    out.append(ev(seq + len(decisive) + 1, "request_finished", r, status="served"))
    return out


def stream(stream_id: str) -> dict[str, Any]:
    return ev(0, "stream_started", stream_id=stream_id)


def write_sink(path: Path, lines: list[dict[str, Any] | str]) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n"
                            for x in lines), encoding="utf-8")
    return path


def exchange(op_id: int, kind: OpKind, ticket: str | None, *, status: int | None = 200,
             outcome: str | None = None, seq: int | None = None, claim: str | None = "c-1",
             session: str | None = OWNER, tokens: list[int] | None = None,
             would_retry: bool = False, transport: Transport | None = None,
             prompt: str = OWNER, error_type: str | None = None) -> Exchange:
    """What a client saw; *outcome* goes in the body and the header, as the middleware
    sends it."""
    body = None if outcome is None else {"claim_id": claim, "outcome": outcome, "seq": seq,
                                          "reason": None}
    return Exchange(op_id=op_id, client=0, kind=kind, stream=False, session=session,
                    owner_scope=session if kind is not OpKind.UNCLAIMED else None,
                    claim_id=claim if kind is not OpKind.UNCLAIMED else None,
                    claim_form="full", prompt=prompt, sent_at=float(op_id), latency_ms=20.0,
                    incarnation=0, request_id_sent=f"chaos0-op{op_id}", ticket=ticket,
                    status=status, transport=transport, outcome=body, outcome_header=outcome,
                    claim_header=claim if outcome else None, would_retry=would_retry,
                    error_type=error_type,
                    tokens=TOKENS if tokens is None and status == 200 else tokens or [],
                    finish_reason=("length" if status == 200 and transport is None
                                   and error_type is None else None))


def history(sink: Path, exchanges: list[Exchange], *, stopped_at_end: bool = True,
            incarnations: int = 1, faults: list[FaultRecord] | None = None) -> History:
    settings = RunSettings(
        seed=0, clients=1, tenants=2, sessions_per_tenant=1, ops=len(exchanges),
        duration_s=10.0, rate_per_client=1.0, stream_share=0.0,
        faults=(FaultKind.KILL_ENGINE,), prompt_tokens=297, max_tokens=4, block_size=128,
        model="tiny-llama", managed=stopped_at_end, base_url="http://127.0.0.1:1",
        control_socket="/tmp/x.sock")
    incs = [Incarnation(index=i, started_at=float(i), ready_at=i + 0.5, stopped_at=i + 1.0,
                        stopped_by=StopCause.KILLED_ENGINE, pid=100 + i)
            for i in range(incarnations)]
    return History(settings=settings, sink=str(sink), ops=[], exchanges=exchanges,
                   faults=faults or [], incarnations=incs,
                   reference_tokens={OWNER: TOKENS, OTHER: TOKENS}, load_started_at=0.0,
                   load_ended_at=10.0, load_served_s=10.0, stopped_at_end=stopped_at_end)


def clean_run(tmp: Path) -> tuple[History, Path]:
    """A registration (offloaded), a restored reuse, an unclaimed request, and the graceful
    stop ending the claim before the stream's closing event: every figure is zero."""
    lines = [stream("s0"),
             *served(1, "rkv-a", "c-1", ("claim_accepted", "claim_offloaded")),
             *served(5, "rkv-b", "c-1", ("claim_restored", "claim_reused")),
             *served(9, "chaos0-op2"),
             ev(11, "claim_harmed", None, "c-1", cause="shutdown"),
             ev(12, "stream_closed", reason="shutdown")]
    sink = write_sink(tmp / "trace.jsonl", lines)
    exchanges = [exchange(0, OpKind.REGISTER, "rkv-a", outcome="offloaded", seq=3),
                 exchange(1, OpKind.REUSE_REF, "rkv-b", outcome="restored", seq=7),
                 exchange(2, OpKind.UNCLAIMED, "chaos0-op2", session=None, prompt="u2")]
    return history(sink, exchanges), sink
