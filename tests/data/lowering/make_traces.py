"""Regenerate the small v1 traces used by tests/lowering (run: python make_traces.py).

Each trace is written through EventWriter, the one emitter of residentkv, so it is valid v1,
and opens with stream_started naming the toy runtime's emitter and release (tree/toyrt).
- witness.jsonl: claim c-1 (offloadable) — a success generation (offload, restore, reuse),
  then a failure generation whose injected load failure becomes an attributed refusal.
- observe_only.jsonl: claim c-obs — the success generation only (observation passes).
- fallback.jsonl: claim c-fb — the load fails and the request is served by recompute
  (claim_restored(source=fallback_recompute)); failure_outcome must fail.
"""

from __future__ import annotations

import io
from pathlib import Path

from residentkv.trace.writer import EventWriter, Provenance

HERE = Path(__file__).parent / "traces"
IDENT = {"object_id": "prefix-1", "cache_identity": "tiny-llama|salt-a|128|fp32",
         "request_token_map_id": "tm-1", "predicate_id": "lead-2"}


def _claim(w: EventWriter, ev: str, claim: str, req: str | None = None, **f: object) -> None:
    w.emit(ev, claim_id=claim, request_id=req, **IDENT, **f)


def accept(w: EventWriter, c: str) -> None:
    w.emit("request_started", request_id="r-0", prompt_tokens=297)
    _claim(w, "claim_submitted", c, "r-0")
    _claim(w, "claim_accepted", c, "r-0", registration="pre_registered",
           protection_mode="offloadable", footprint_blocks=2,
           predicate={"id": "lead-2", "kind": "leading_prefix_at_least", "blocks": 2})
    _claim(w, "claim_materialized", c, "r-0", surviving=2, leading=2, required=2, holds=True,
           tier="gpu")


def offload(w: EventWriter, c: str, gen: int, req: str) -> None:
    w.emit("kv_store_started", claim_id=c, request_id=req, job_id=f"s{gen}", from_tier="gpu",
           to_tier="cpu")
    w.emit("kv_store_finished", claim_id=c, request_id=req, job_id=f"s{gen}", success=True,
           from_tier="gpu", to_tier="cpu", bytes=4096)
    _claim(w, "claim_offloaded", c, req, generation=gen, from_tier="gpu", to_tier="cpu",
           block_count=2)
    w.emit("request_finished", request_id=req, status="served", finish_reason="stop")


def restore_needed(w: EventWriter, c: str, gen: int, req: str) -> None:
    w.emit("request_started", request_id=req, prompt_tokens=297)
    w.emit("kv_lookup", claim_id=c, request_id=req, hit_tokens=256, async_load=False,
           generation=gen)
    _claim(w, "claim_restore_required", c, req, generation=gen, from_tier="cpu", to_tier="gpu",
           tokens=256)
    w.emit("kv_load_started", claim_id=c, request_id=req, job_id=f"l{gen}")


def success(w: EventWriter, c: str, gen: int, req: str) -> None:
    restore_needed(w, c, gen, req)
    w.emit("kv_load_finished", claim_id=c, request_id=req, job_id=f"l{gen}", success=True)
    _claim(w, "claim_restored", c, req, generation=gen, source="offload_tier")
    _claim(w, "claim_reused", c, req, generation=gen, holds=True)
    w.emit("request_finished", request_id=req, status="served", finish_reason="stop")


def failure(w: EventWriter, c: str, gen: int, req: str, *, recompute: bool = False) -> None:
    restore_needed(w, c, gen, req)
    w.emit("kv_load_finished", claim_id=c, request_id=req, job_id=f"l{gen}", success=False,
           injected=True)
    w.emit("scheduler_load_failure", claim_id=c, request_id=req,
           policy="recompute" if recompute else "fail", invalid_block_count=2,
           failed_tokens=256, finish_status=None if recompute else "FINISHED_ERROR")
    _claim(w, "claim_restore_failed", c, req, generation=gen, reason="injected load failure",
           injected=True, outcome_type="refusal", outcome_claim_id=c)
    if recompute:
        _claim(w, "claim_restored", c, req, generation=gen, source="fallback_recompute")
        w.emit("request_finished", request_id=req, status="served", finish_reason="stop")
        return
    # the envelope names the outcome claim (SPEC §4.1: envelope claim_id = outcome_claim_id)
    w.emit("active_request_refused", claim_id=c, request_id=req, outcome_claim_id=c,
           blocking_claim_ids=[c],
           feasibility="restore_failed", arbiter="scheduler_boundary")
    w.emit("request_finished", request_id=req, status="error", finish_reason="error")


def write(name: str, build: object) -> None:
    buf = io.StringIO()
    # the toy runtime's own emitter (tree/toyrt/events.py names it), about release toyrt 0.1
    w = EventWriter(buf, source="testdata", provenance=Provenance(
        "toyrt.scheduler", "0.1", "toyrt", "0.1", stream_id=name))
    build(w)  # type: ignore[operator]
    w.flush()
    (HERE / name).write_text(buf.getvalue(), encoding="utf-8")


def witness(w: EventWriter) -> None:
    accept(w, "c-1")
    offload(w, "c-1", 1, "r-0")
    success(w, "c-1", 1, "r-1")
    w.emit("request_started", request_id="r-1b")
    offload(w, "c-1", 2, "r-1b")
    failure(w, "c-1", 2, "r-2")


def observe_only(w: EventWriter) -> None:
    accept(w, "c-obs")
    offload(w, "c-obs", 1, "r-0")
    success(w, "c-obs", 1, "r-1")


def fallback(w: EventWriter) -> None:
    accept(w, "c-fb")
    offload(w, "c-fb", 1, "r-0")
    failure(w, "c-fb", 1, "r-1", recompute=True)


if __name__ == "__main__":
    HERE.mkdir(exist_ok=True)
    write("witness.jsonl", witness)
    write("observe_only.jsonl", observe_only)
    write("fallback.jsonl", fallback)
