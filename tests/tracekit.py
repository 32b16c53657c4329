"""Builders of v1 traces for tests: readable event lists that tests mutate one fact at a time."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from residentkv.trace.gates import GateResult, StreamVerdict, check_trace
from residentkv.trace.reader import TraceReader
from residentkv.trace.semantics import reference_judgement

SCHEMA = "residentkv.event/v1"
PRED = {"id": "p-lead2", "kind": "leading_prefix_at_least", "blocks": 2}


def ident(claim: str) -> dict[str, Any]:
    return {
        "object_id": f"prefix:{claim}",
        "cache_identity": "tiny-llama|tok|vllm-prefix|tenant:a|128|bf16|-",
        "request_token_map_id": f"tokmap:{claim}",
        "predicate_id": PRED["id"],
    }


class Trace:
    """Append events with consecutive seqs; claim events get the claim's identity tuple."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def add(self, event: str, claim: str | None = None, request: str | None = None,
            **fields: Any) -> Trace:
        record: dict[str, Any] = {
            "schema": SCHEMA, "seq": len(self.events), "ts_ns": 1000 * (len(self.events) + 1),
            "source": "test", "event": event, "claim_id": claim, "request_id": request,
        }
        if event.startswith("claim_") and claim is not None:
            record.update(ident(claim))
        record.update(fields)
        self.events.append(record)
        return self

    # --- building blocks ------------------------------------------------------------------
    def accept(self, claim: str, request: str, mode: str = "offloadable",
               registration: str = "pre_registered", **extra: Any) -> Trace:
        return self.add("claim_accepted", claim, request, registration=registration,
                        protection_mode=mode, footprint_blocks=2, predicate=PRED, **extra)

    def resident(self, claim: str, request: str, generation: int = 0, job: int = 0) -> Trace:
        self.add("claim_materialized", claim, request, surviving=2, leading=2, required=2,
                 holds=True, tier="device")
        self.add("kv_store_started", claim, request, job_id=job, bytes=4096,
                 from_tier="device", to_tier="host")
        self.add("kv_store_finished", claim, request, job_id=job, bytes=4096, success=True,
                 from_tier="device", to_tier="host")
        return self.add("claim_offloaded", claim, request, generation=generation,
                        from_tier="device", to_tier="host", block_count=2)

    def restore_required(self, claim: str, request: str, generation: int = 0) -> Trace:
        self.add("kv_lookup", claim, request, hit_tokens=256, async_load=True)
        return self.add("claim_restore_required", claim, request, generation=generation,
                        from_tier="host", to_tier="device", tokens=256)

    def restore_ok(self, claim: str, request: str, generation: int = 0, job: int = 1) -> Trace:
        self.restore_required(claim, request, generation)
        self.add("kv_load_started", claim, request, job_id=job, bytes=4096)
        self.add("kv_load_finished", claim, request, job_id=job, bytes=4096, success=True)
        self.add("claim_restored", claim, request, generation=generation, source="offload_tier")
        return self.add("claim_reused", claim, request, generation=generation, holds=True)

    def restore_fails(self, claim: str, request: str, generation: int = 0, job: int = 1) -> Trace:
        self.restore_required(claim, request, generation)
        self.add("kv_load_started", claim, request, job_id=job, bytes=4096)
        self.add("kv_load_finished", claim, request, job_id=job, bytes=4096, success=False,
                 injected=True)
        self.add("kv_load_failed", claim, request, invalid_block_ids=[0, 1], job_id=job,
                 injected=True)
        self.add("scheduler_load_failure", claim, request, policy="fail",
                 invalid_block_count=2, failed_tokens=256, finish_status="FINISHED_ERROR")
        self.add("claim_restore_failed", claim, request, generation=generation,
                 reason="injected load failure", injected=True, outcome_type="refusal",
                 outcome_claim_id=claim)
        return self.add("active_request_refused", claim, request, outcome_claim_id=claim,
                        blocking_claim_ids=[claim], feasibility="restore_failed",
                        arbiter="scheduler_boundary")

    def started(self, request: str) -> Trace:
        return self.add("request_started", None, request, prompt_tokens=300)

    def finished(self, request: str, status: str = "served", reason: str = "length") -> Trace:
        return self.add("request_finished", None, request, status=status, finish_reason=reason)

    def write(self, path: Path) -> Path:
        path.write_text("".join(json.dumps(e) + "\n" for e in self.events))
        return path


def success_path(claim: str = "c-1") -> Trace:
    t = Trace().started("r-1").accept(claim, "r-1").resident(claim, "r-1").finished("r-1")
    return t.started("r-2").restore_ok(claim, "r-2").finished("r-2")


def claimed_load_failure(claim: str = "c-1") -> Trace:
    t = Trace().started("r-1").accept(claim, "r-1").resident(claim, "r-1").finished("r-1")
    return t.started("r-2").restore_fails(claim, "r-2").finished("r-2", "error", "error")


def two_claim_attribution(target: str = "c-a", control: str = "c-b") -> Trace:
    t = Trace().started("r-1").accept(target, "r-1").resident(target, "r-1", job=0)
    t.finished("r-1").started("r-2").accept(control, "r-2").resident(control, "r-2", job=1)
    t.finished("r-2").started("r-3").restore_ok(control, "r-3", job=2).finished("r-3")
    return t.started("r-4").restore_fails(target, "r-4", job=3).finished("r-4", "error", "error")


def two_generations(claim: str = "c-1") -> Trace:
    t = Trace().started("r-1").accept(claim, "r-1").resident(claim, "r-1").finished("r-1")
    t.started("r-2").restore_ok(claim, "r-2", generation=0).finished("r-2")
    return t.started("r-3").restore_fails(claim, "r-3", generation=1, job=2).finished(
        "r-3", "error", "error")


def expiring_release_before_loss(claim: str = "c-e") -> Trace:
    t = Trace().started("r-1").accept(claim, "r-1", mode="expiring", expires_after_s=30.0)
    t.add("claim_materialized", claim, "r-1", surviving=2, leading=2, required=2, holds=True,
          tier="device").finished("r-1")
    t.add("claim_expired", claim, None, reason="ttl 30 s elapsed")
    t.add("block_evicted", claim, None, block_id=7, protected=False, reason="lru", position=0)
    return t.add("claim_block_lost_after_release", claim, None, block_id=7, position=0)


def hard_protected_conflict(claim: str = "c-h") -> Trace:
    t = Trace().started("r-1").accept(claim, "r-1", mode="hard_protected")
    t.add("claim_materialized", claim, "r-1", surviving=2, leading=2, required=2, holds=True,
          tier="device").finished("r-1")
    t.started("r-2").add("active_request_refused", claim, "r-2", outcome_claim_id=claim,
                         blocking_claim_ids=[claim], arbiter="admission", shortfall=50,
                         feasibility="infeasible_preserve_resident_and_active")
    return t.finished("r-2", "refused", "infeasible")


CANONICAL = {
    "success_path.jsonl": success_path,
    "claimed_load_failure.jsonl": claimed_load_failure,
    "two_claim_attribution.jsonl": two_claim_attribution,
    "lifecycle_two_generations.jsonl": two_generations,
    "expiring_release_before_loss.jsonl": expiring_release_before_loss,
    "hard_protected_conflict.jsonl": hard_protected_conflict,
}


def judged_by_both(data: bytes, gates: tuple[str, ...]
                   ) -> tuple[list[GateResult], StreamVerdict, int]:
    """The streaming gates' results, stream verdict and problem count on *data*, after
    asserting that the reference semantics agrees (results and the stream verdict)."""
    check = check_trace("t.jsonl", gates, stream=io.BytesIO(data))
    reader = TraceReader("t.jsonl", stream=io.BytesIO(data))
    ref, ref_verdict = reference_judgement(list(reader.events()), gates,
                                           well_formed=reader.problem_count == 0)
    assert [(r.claim_id, r.gate, r.passed, r.missing, r.controls) for r in check.results] == [
        (r.claim_id, r.gate, r.passed, r.missing, r.controls) for r in ref]
    assert check.conformance is not None and ref_verdict is not None
    assert (check.conformance.live, check.conformance.failed) == (ref_verdict.live,
                                                                  ref_verdict.failed)
    return check.results, check.conformance, check.problem_count
