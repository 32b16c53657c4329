"""The positive systems witness of SPEC §9: every scenario, run on real vLLM, judged by the gates.

A :class:`Witness` owns one engine (one ``kv_load_failure_policy``) in one shape: ``inproc``,
``mp`` (vLLM's default multiprocessing), ``server`` (the OpenAI server and the official
``openai`` client) or ``tp2`` (the server at tensor parallelism 2). It reaches the engine's
operator state only through the engine's control socket. Each scenario run swaps the event sink
to a fresh trace file (a new stream), resets vLLM's prefix cache so the only source of a
restored prefix is the host tier, sends real requests, and then runs the trace gates on what the
connector wrote. A scenario registers a claim with the full claim object and reuses it by
reference (``resident_claim_ref``), the form a client behind a router sends. The harness never
writes claim or substrate events itself; the only events it adds, through the engine's writer,
are ``generic_counter`` values it read from vLLM's request outputs (the ``generic_counter_only``
scenario).

vLLM keeps process-global state (the KV transfer group), so one process runs one engine; the
top-level :func:`run_witness` runs each policy's scenarios in a child process.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from residentkv.adapters.vllm.backends import Claimed, ClaimRef, Out
from residentkv.adapters.vllm.config import InjectionRule
from residentkv.adapters.vllm.engine import SHAPES
from residentkv.model.vocabulary import GateName

__all__ = [
    "SCENARIOS",
    "Scenario",
    "ScenarioRun",
    "Witness",
    "format_table",
    "run_witness",
    "scenario_policy",
]

#: the engine's sink between two scenario runs (in the engine's work folder, never a trace)
BETWEEN_RUNS = "between-runs.jsonl"


def _gates(role: str, **passed: bool) -> dict[str, bool]:
    """``{"<role>.<gate>": expected}``; gate names are checked against the vocabulary."""
    return {f"{role}.{GateName(gate)}": value for gate, value in passed.items()}


_NEITHER = _gates("target", observation=False, failure_outcome=False)

#: runs one scenario on a witness: (witness, run, index, claims to release) -> claim by role
Drive = Callable[["Witness", "ScenarioRun", int, list[str]], dict[str, str]]


@dataclass(frozen=True)
class Scenario:
    """One SPEC §9 scenario: what it drives, the gate results it expects, the extra facts it
    must show, and how it is run."""

    name: str
    #: what the scenario sends through the engine, in a line
    drives: str
    #: SPEC §9's row: {"role.gate": expected passed}, judged on each role's claim
    expects: Mapping[str, bool]
    #: facts beyond the gates, all of which must be True
    checks: tuple[str, ...]
    #: what the HTTP client must see in the server shapes (the refusal as HTTP 409 with
    #: ``x-should-retry: false`` and the claim outcome in the error body)
    server_checks: tuple[str, ...]
    #: the engine's ``kv_load_failure_policy``
    policy: str
    #: the witness method that runs it and returns the claim id of each role
    drive: Drive


SERVER_SHAPES = ("server", "tp2")

BLOCK = 128
PROMPT_TOKENS = 297  # 2 full blocks restorable + a tail vLLM always computes
MAX_TOKENS = 8


def scenario_policy(scenario: str) -> str:
    """The kv_load_failure_policy a scenario needs."""
    return SCENARIOS[scenario].policy


@dataclass
class ScenarioRun:
    """One run of one scenario: its trace, gate results, checks and timings."""

    scenario: str
    index: int
    trace: str
    gates: dict[str, bool] = field(default_factory=dict)
    checks: dict[str, bool] = field(default_factory=dict)
    timings_ms: dict[str, float] = field(default_factory=dict)
    outcomes: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    latency_ms: float | None = None  # the scenario's key request, end to end
    shape: str = "inproc"
    notes: list[str] = field(default_factory=list)  # what the report shows beside the table
    #: sha256 of the trace as the engine's writer wrote it, taken in the writing process when
    #: the run ended (the live root compares any copy with it, SPEC §7.2)
    trace_sha256: str | None = None

    @property
    def required_checks(self) -> tuple[str, ...]:
        """The checks this run must pass (the server shapes add what the client must see)."""
        spec = SCENARIOS[self.scenario]
        return spec.checks + (spec.server_checks if self.shape in SERVER_SHAPES else ())

    @property
    def matched(self) -> bool:
        """Whether every gate result equals SPEC §9 and every check holds."""
        if self.error is not None:
            return False
        exp = SCENARIOS[self.scenario].expects
        return all(self.gates.get(k) == v for k, v in exp.items()) and all(
            self.checks.get(c, False) for c in self.required_checks
        )

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["matched"] = self.matched
        return data


def make_claim(claim_id: str, owner: str, model_id: str, object_id: str) -> dict[str, Any]:
    """A valid offloadable claim on the first two blocks of a prompt."""
    return {
        "claim_id": claim_id,
        "owner_scope": owner,
        "object_id": object_id,
        "cache_identity": {
            "model_id": model_id, "tokenizer_id": "token-ids", "cache_key_domain": "vllm-prefix",
            "salt_namespace": "none", "block_size": BLOCK, "kv_format": "vllm-cpu-float32",
        },
        "request_token_map_id": f"{object_id}/tokens",
        "predicate": {"id": "leading-2", "kind": "leading_prefix_at_least", "blocks": 2},
        "footprint_blocks": 2,
        "protection_mode": "offloadable",
        "registration": "pre_registered",
    }


class Witness:
    """One engine in one shape (one policy), and the scenarios that run on it."""

    def __init__(self, work_dir: str | Path, *, policy: str = "fail", load_mode: str = "async",
                 host_tier_bytes: int = 64 << 20, extra: dict[str, Any] | None = None,
                 shape: str = "inproc", server_args: list[str] | None = None) -> None:
        from residentkv.adapters.vllm.backends import make_backend
        from residentkv.adapters.vllm.control_socket import ControlClient
        from residentkv.adapters.vllm.engine import SERVED_MODEL_NAME, write_tiny_model

        self.work_dir = Path(work_dir).resolve()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.policy = policy
        self.load_mode = load_mode
        self.shape = shape
        self.model_dir = write_tiny_model(self.work_dir / "tiny-llama")
        self.model_id = SERVED_MODEL_NAME
        self.backend, control = make_backend(
            shape, self.work_dir, self.model_dir, policy=policy, host_tier_bytes=host_tier_bytes,
            extra={"load_mode": load_mode, **(extra or {})}, server_args=server_args)
        #: the engine's configured event sink (a restart on the same work dir reuses it)
        self.sink = self.work_dir / f"engine-{policy}.jsonl"
        self.op = ControlClient(control)
        # The engine's first forward pays one-off warm-up costs; keep them out of the timings.
        self.generate([self.prompt("warmup", 0)], [None])

    def close(self) -> None:
        """Stop the engine (and, for the server shapes, its whole process group)."""
        self.backend.close()

    # ------------------------------------------------------------------ helpers

    def prompt(self, scenario: str, index: int, salt: str = "") -> list[int]:
        """A deterministic prompt, distinct per scenario, run and salt."""
        rng = random.Random(f"{scenario}/{index}/{salt}")
        return [rng.randrange(3, 1024) for _ in range(PROMPT_TOKENS)]

    def generate(self, prompts: Sequence[list[int]],
                 claims: Sequence[Claimed]) -> tuple[list[Out], float]:
        """Run one batch; returns what the caller saw and the wall time in ms."""
        start = time.perf_counter_ns()
        outs = self.backend.generate(prompts, claims)
        return outs, (time.perf_counter_ns() - start) / 1e6

    def reset(self) -> None:
        """Drop vLLM's device prefix cache so a later hit can only come from the host tier."""
        self.backend.reset()

    @staticmethod
    def tokens(out: Out) -> list[int]:
        return out.token_ids

    @staticmethod
    def finish(out: Out) -> str | None:
        return out.finish_reason

    def outcome(self, out: Out) -> dict[str, Any] | None:
        """The claim outcome the caller got: from the response when vLLM (or, for a refusal,
        the server middleware) delivered it, else from the connector's record by request id
        (offline FINISHED_ERROR, where vLLM 0.32 drops it)."""
        return out.claim_outcome or self.op.outcome_for(out.request_id)

    def read_trace(self, path: Path) -> list[dict[str, Any]]:
        with path.open(encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]

    # ------------------------------------------------------------------ running

    def run(self, scenario: str, index: int, out_dir: str | Path,
            gates: bool = True) -> ScenarioRun:
        """Run *scenario* once, writing its trace under *out_dir*, and judge it."""
        if scenario_policy(scenario) != self.policy:
            raise ValueError(f"scenario {scenario} needs policy {scenario_policy(scenario)}, "
                             f"this engine runs {self.policy}")
        trace = Path(out_dir) / scenario / f"run-{index:03d}.jsonl"
        trace.parent.mkdir(parents=True, exist_ok=True)
        trace.unlink(missing_ok=True)
        self.op.configure(event_sink=trace, failure_injection=[], offload_unclaimed=False,
                          verify_content=True)
        run = ScenarioRun(scenario=scenario, index=index, trace=str(trace), shape=self.shape)
        claims: list[str] = []
        try:
            self.reset()
            targets = SCENARIOS[scenario].drive(self, run, index, claims)
        except Exception as exc:  # a broken run is recorded, never counted as a match
            run.error = f"{type(exc).__name__}: {exc}"
            targets = {}
        finally:
            self.op.configure(failure_injection=[], offload_unclaimed=False, verify_content=True)
            self.op.release_claims(claims, reason="witness run ended")
            # the run's stream closes here (its writer hashed every byte it wrote there): the
            # engine writes to a scratch sink until the next run swaps in that run's trace
            self.op.configure(event_sink=self.work_dir / BETWEEN_RUNS)
            run.trace_sha256 = self.op.written_sha256(trace)
        if gates and run.error is None:
            try:
                run.gates = judge(trace, scenario, targets)
            except Exception as exc:  # a gate crash is a harness failure, not a verdict
                run.error = f"gates raised {type(exc).__name__}: {exc}"
        return run

    def _cid(self, scenario: str, index: int, role: str) -> str:
        return f"{scenario}-{index}-{role}"

    def _claim(self, cid: str, owner: str = "tenant:a/session:1",
               obj: str = "prefix-a") -> dict[str, Any]:
        return make_claim(cid, owner, self.model_id, obj)

    @staticmethod
    def _ref(cid: str, owner: str = "tenant:a/session:1") -> ClaimRef:
        return ClaimRef(cid, owner)

    # --- scenarios: each returns {"target": claim_id, ["control": claim_id]} ------------------

    def _s_no_claim(self, run: ScenarioRun, i: int, claims: list[str]) -> dict[str, str]:
        p = self.prompt(run.scenario, i)
        self.generate([p], [None])
        self.reset()
        _, run.timings_ms["request"] = self.generate([p], [None])
        run.latency_ms = run.timings_ms["request"]
        return {"target": self._cid(run.scenario, i, "target")}

    def _success(self, run: ScenarioRun, i: int, claims: list[str]) -> tuple[str, Any]:
        p = self.prompt(run.scenario, i)
        cid = self._cid(run.scenario, i, "target")
        claims.append(cid)
        (cold,), run.timings_ms["no_claim_request"] = self.generate([p], [None])
        self.reset()
        (resident,), run.timings_ms["resident_request"] = self.generate([p], [self._claim(cid)])
        self.reset()
        (reuse,), run.timings_ms["reuse_request"] = self.generate([p], [self._ref(cid)])
        run.latency_ms = run.timings_ms["reuse_request"]
        run.outcomes = {"resident": self.outcome(resident), "reuse": self.outcome(reuse)}
        run.checks["restored_tokens_equal_cold"] = self.tokens(reuse) == self.tokens(cold)
        run.checks["outcome_restored"] = (run.outcomes["reuse"] or {}).get("outcome") == "restored"
        return cid, reuse

    def _s_success_path(self, run: ScenarioRun, i: int, claims: list[str]) -> dict[str, str]:
        cid, _ = self._success(run, i, claims)
        return {"target": cid}

    def _s_wrong_claim_failure(self, run: ScenarioRun, i: int,
                               claims: list[str]) -> dict[str, str]:
        # The injection names a claim that never arrives: it must change nothing.
        ghost = self._cid(run.scenario, i, "never-submitted")
        self.op.configure(failure_injection=[InjectionRule(claim_id=ghost)])
        fired = self.op.injections_fired
        cid, _ = self._success(run, i, claims)
        run.checks["no_injection_fired"] = self.op.injections_fired == fired
        return {"target": cid}

    def _s_ordinary_offload_no_claim(self, run: ScenarioRun, i: int,
                                     claims: list[str]) -> dict[str, str]:
        self.op.configure(offload_unclaimed=True)
        p = self.prompt(run.scenario, i)
        (first,), _ = self.generate([p], [None])
        self.reset()
        (second,), run.timings_ms["request"] = self.generate([p], [None])
        run.latency_ms = run.timings_ms["request"]
        events = self.read_trace(Path(run.trace))
        run.checks["unclaimed_load_happened"] = any(
            e["event"] == "kv_load_finished" and e["success"] and e["claim_id"] is None
            and same_request(e["request_id"], second.request_id) for e in events)
        run.checks["restored_tokens_equal_cold"] = self.tokens(second) == self.tokens(first)
        return {"target": self._cid(run.scenario, i, "target")}

    def _s_claimed_load_failure(self, run: ScenarioRun, i: int,
                                claims: list[str]) -> dict[str, str]:
        p = self.prompt(run.scenario, i)
        cid = self._cid(run.scenario, i, "target")
        claims.append(cid)
        self.op.configure(failure_injection=[InjectionRule(claim_id=cid, mode="once")])
        self.generate([p], [self._claim(cid)])
        self.reset()
        (reuse,), run.timings_ms["refused_request"] = self.generate([p], [self._ref(cid)])
        run.latency_ms = run.timings_ms["refused_request"]
        run.outcomes = {"reuse": self.outcome(reuse)}
        run.checks["finish_reason_error"] = self.finish(reuse) == "error"
        run.checks["outcome_refused"] = (run.outcomes["reuse"] or {}).get("outcome") == "refused"
        run.checks["client_saw_refusal"] = client_saw_refusal(reuse, cid)
        return {"target": cid}

    def _s_unclaimed_load_failure(self, run: ScenarioRun, i: int,
                                  claims: list[str]) -> dict[str, str]:
        self.op.configure(offload_unclaimed=True,
                          failure_injection=[InjectionRule(unclaimed=True, mode="once")])
        p = self.prompt(run.scenario, i)
        self.generate([p], [None])
        self.reset()
        (second,), run.timings_ms["request"] = self.generate([p], [None])
        run.latency_ms = run.timings_ms["request"]
        run.checks["finish_reason_error"] = self.finish(second) == "error"
        events = self.read_trace(Path(run.trace))
        run.checks["unclaimed_failure_branch"] = any(
            e["event"] == "scheduler_load_failure" and e["claim_id"] is None
            and same_request(e["request_id"], second.request_id) for e in events)
        return {"target": self._cid(run.scenario, i, "target")}

    def _s_fallback_recompute(self, run: ScenarioRun, i: int,
                              claims: list[str]) -> dict[str, str]:
        p = self.prompt(run.scenario, i)
        cid = self._cid(run.scenario, i, "target")
        claims.append(cid)
        # Persistent: every load of this claim fails, so no retry can succeed by accident.
        self.op.configure(failure_injection=[InjectionRule(claim_id=cid, mode="persistent")])
        (cold,), _ = self.generate([p], [None])
        self.reset()
        self.generate([p], [self._claim(cid)])
        self.reset()
        (reuse,), run.timings_ms["request"] = self.generate([p], [self._ref(cid)])
        run.latency_ms = run.timings_ms["request"]
        run.outcomes = {"reuse": self.outcome(reuse)}
        run.checks["restored_tokens_equal_cold"] = self.tokens(reuse) == self.tokens(cold)
        run.checks["outcome_fallback_recompute"] = (
            (run.outcomes["reuse"] or {}).get("outcome") == "fallback_recompute")
        events = self.read_trace(Path(run.trace))
        run.checks["fallback_in_trace"] = any(
            e["event"] == "claim_restored" and e["source"] == "fallback_recompute"
            and e["claim_id"] == cid for e in events)
        return {"target": cid}

    def _s_generic_counter_only(self, run: ScenarioRun, i: int,
                                claims: list[str]) -> dict[str, str]:
        p = self.prompt(run.scenario, i)
        for _ in range(2):
            (out,), run.timings_ms["request"] = self.generate([p], [None])
            # vLLM's own counter, as vLLM reported it: it names no claim and proves nothing.
            self.op.counter("vllm.num_cached_tokens", out.num_cached_tokens, out.request_id)
        run.latency_ms = run.timings_ms["request"]
        return {"target": self._cid(run.scenario, i, "target")}

    def _s_multi_claim_targeted_failure(self, run: ScenarioRun, i: int,
                                        claims: list[str]) -> dict[str, str]:
        pt = self.prompt(run.scenario, i, "target")
        pc = self.prompt(run.scenario, i, "control")
        tid = self._cid(run.scenario, i, "target")
        kid = self._cid(run.scenario, i, "control")
        claims += [tid, kid]
        (cold_c,), _ = self.generate([pc], [None])
        self.reset()
        self.op.configure(failure_injection=[InjectionRule(claim_id=tid)])
        ct, ck = self._claim(tid, obj="prefix-t"), self._claim(kid, obj="prefix-c")
        self.generate([pt, pc], [ct, ck])
        self.reset()
        # Both reuse requests in one batch: the failure and the restore share a step.
        (out_t, out_c), run.timings_ms["batch"] = self.generate(
            [pt, pc], [self._ref(tid), self._ref(kid)])
        run.latency_ms = run.timings_ms["batch"]
        run.outcomes = {"target": self.outcome(out_t), "control": self.outcome(out_c)}
        run.checks["control_tokens_equal_cold"] = self.tokens(out_c) == self.tokens(cold_c)
        run.checks["outcome_refused"] = (run.outcomes["target"] or {}).get("outcome") == "refused"
        run.checks["client_saw_refusal"] = client_saw_refusal(out_t, tid)
        run.checks["control_outcome_restored"] = (
            (run.outcomes["control"] or {}).get("outcome") == "restored")
        return {"target": tid, "control": kid}

    def _s_cross_tenant_reuse(self, run: ScenarioRun, i: int,
                              claims: list[str]) -> dict[str, str]:
        p = self.prompt(run.scenario, i)
        aid = self._cid(run.scenario, i, "target")
        bid = self._cid(run.scenario, i, "tenant-b")
        owner_a, owner_b = "tenant:a/session:1", "tenant:b/session:9"
        claims += [aid, bid]
        (cold,), _ = self.generate([p], [None])
        self.reset()
        self.generate([p], [self._claim(aid, owner=owner_a)])
        self.reset()
        # The owner's half: its reuse restores from the host tier (caching and the tier are
        # live in this very run, so the other half's "no restore" means something).
        (owner,), run.timings_ms["owner_reuse_request"] = self.generate(
            [p], [self._ref(aid, owner=owner_a)])
        self.reset()
        # The other tenant's half: the same prefix under its own claim, then under tenant A's
        # claim id (a full claim under B's owner, and a reference with B's owner).
        (own,), run.timings_ms["request"] = self.generate([p], [self._claim(bid, owner=owner_b)])
        self.reset()
        run.latency_ms = run.timings_ms["request"]
        (forged,), _ = self.generate([p], [self._claim(aid, owner=owner_b)])
        self.reset()
        (forged_ref,), _ = self.generate([p], [self._ref(aid, owner=owner_b)])
        events = self.read_trace(Path(run.trace))
        others = (own, forged, forged_ref)

        def of(outs: Sequence[Out], e: dict[str, Any]) -> bool:
            rid = e.get("request_id")
            return rid is not None and any(same_request(rid, o.request_id) for o in outs)

        run.outcomes = {"owner_reuse": self.outcome(owner), "tenant_b_own": self.outcome(own),
                        "tenant_b_forged": self.outcome(forged),
                        "tenant_b_forged_ref": self.outcome(forged_ref)}
        run.checks["owner_reuse_restored"] = (
            (run.outcomes["owner_reuse"] or {}).get("outcome") == "restored"
            and any(e["event"] == "claim_restored" and e["source"] == "offload_tier"
                    and e["claim_id"] == aid and of([owner], e) for e in events))
        run.checks["owner_tokens_equal_cold"] = self.tokens(owner) == self.tokens(cold)
        run.checks["no_restore_for_other_tenant"] = not any(
            of(others, e) and e["event"] in {"kv_load_started", "kv_load_finished",
                                             "claim_restored", "claim_restore_required"}
            for e in events)
        # nothing of the claimed blocks reached B: no hit offered by the connector, and vLLM
        # itself reports no cached prefix tokens for B's requests
        run.checks["no_prefix_hit_for_other_tenant"] = not any(
            of(others, e) and e["event"] == "kv_lookup" and e["hit_tokens"]
            for e in events) and all(o.num_cached_tokens == 0 for o in others)
        run.checks["other_tenant_tokens_equal_cold"] = all(
            self.tokens(o) == self.tokens(cold) for o in others)
        run.checks["foreign_claim_reference_rejected"] = all(
            (run.outcomes[k] or {}).get("outcome") == "rejected"
            for k in ("tenant_b_forged", "tenant_b_forged_ref"))
        return {"target": aid}

    def _s_corrupted_restore(self, run: ScenarioRun, i: int,
                             claims: list[str]) -> dict[str, str]:
        p = self.prompt(run.scenario, i)
        tid = self._cid(run.scenario, i, "target")
        uid = self._cid(run.scenario, i, "unverified")
        claims += [tid, uid]
        (cold,), _ = self.generate([p], [None])
        self.reset()
        # The tier's bytes of each claim are flipped after its store, before its restore
        # reads them: no I/O error, only wrong content.
        self.op.configure(failure_injection=[InjectionRule(claim_id=tid, mode="corrupt"),
                                             InjectionRule(claim_id=uid, mode="corrupt")])
        self.generate([p], [self._claim(tid)])
        self.reset()
        (reuse,), run.timings_ms["refused_request"] = self.generate([p], [self._ref(tid)])
        run.latency_ms = run.timings_ms["refused_request"]
        # The comparison: the same corruption with verification off, on a claim stored then.
        self.op.configure(verify_content=False)
        self.reset()
        self.generate([p], [self._claim(uid, obj="prefix-u")])
        self.reset()
        (blind,), run.timings_ms["unverified_request"] = self.generate([p], [self._ref(uid)])
        events = self.read_trace(Path(run.trace))
        run.outcomes = {"target": self.outcome(reuse), "unverified": self.outcome(blind),
                        "cold_tokens": self.tokens(cold),
                        "unverified_tokens": self.tokens(blind)}
        run.checks["store_recorded_digest"] = any(
            e["event"] == "kv_store_finished" and e["claim_id"] == tid and e["success"]
            and str(e.get("content_digest") or "").startswith("xxh3-128:") for e in events)
        run.checks["digest_mismatch_failed_load"] = any(
            e["event"] == "kv_load_failed" and e["claim_id"] == tid
            and e.get("reason") == "digest_mismatch"
            and same_request(e["request_id"], reuse.request_id) for e in events)
        run.checks["finish_reason_error"] = self.finish(reuse) == "error"
        run.checks["outcome_refused"] = (run.outcomes["target"] or {}).get("outcome") == "refused"
        run.checks["client_saw_refusal"] = (client_saw_refusal(reuse, tid)
                                            and not self.tokens(reuse))
        run.checks["no_restore_of_corrupted_content"] = not any(
            e["event"] == "claim_restored" and e["claim_id"] == tid for e in events)
        run.checks["unverified_restore_served"] = (
            (run.outcomes["unverified"] or {}).get("outcome") == "restored"
            and any(e["event"] == "claim_restored" and e["claim_id"] == uid
                    and e.get("content_verified") is False for e in events))
        differ = sum(a != b for a, b in zip(self.tokens(blind), self.tokens(cold), strict=False))
        run.checks["unverified_output_differs_from_cold"] = (
            len(self.tokens(blind)) == len(self.tokens(cold)) and differ > 0)
        run.notes.append(
            f"verification off, same corruption: served (finish {self.finish(blind)}), "
            f"{differ} of {len(self.tokens(cold))} tokens differ from a cold run: "
            f"{self.tokens(blind)} vs cold {self.tokens(cold)}")
        return {"target": tid, "control": uid}


def _scenario(name: str, drives: str, expects: Mapping[str, bool], drive: Drive,
              checks: tuple[str, ...] = (), server_checks: tuple[str, ...] = (),
              policy: str = "fail") -> Scenario:
    return Scenario(name, drives, expects, checks, server_checks, policy, drive)


_W = Witness
#: every SPEC §9 scenario, in the order the witness runs and reports them
SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    _scenario("no_claim", "the same prompt twice, no claim", _NEITHER, _W._s_no_claim),
    _scenario("success_path", "a claim registered, offloaded and reused by reference",
              _gates("target", observation=True, failure_outcome=False), _W._s_success_path,
              ("restored_tokens_equal_cold", "outcome_restored")),
    _scenario("ordinary_offload_no_claim", "an unclaimed prefix offloaded and loaded back",
              _NEITHER, _W._s_ordinary_offload_no_claim,
              ("unclaimed_load_happened", "restored_tokens_equal_cold")),
    _scenario("claimed_load_failure", "the claimed restore's load fails (injected)",
              _gates("target", observation=False, failure_outcome=True),
              _W._s_claimed_load_failure, ("finish_reason_error", "outcome_refused"),
              ("client_saw_refusal",)),
    _scenario("wrong_claim_failure", "an injection naming a claim that never arrives",
              _gates("target", observation=True, failure_outcome=False),
              _W._s_wrong_claim_failure,
              ("restored_tokens_equal_cold", "outcome_restored", "no_injection_fired")),
    _scenario("unclaimed_load_failure", "an unclaimed prefix's load fails (injected)",
              _NEITHER, _W._s_unclaimed_load_failure,
              ("finish_reason_error", "unclaimed_failure_branch")),
    _scenario("fallback_recompute", "the claimed restore fails under policy recompute",
              _NEITHER, _W._s_fallback_recompute,
              ("restored_tokens_equal_cold", "outcome_fallback_recompute", "fallback_in_trace"),
              policy="recompute"),
    _scenario("generic_counter_only", "no claim; vLLM's cached-token counter recorded "
              "as generic_counter", _NEITHER,
              _W._s_generic_counter_only),
    _scenario("multi_claim_targeted_failure", "two claims, the target's load fails",
              {**_gates("target", observation=False, failure_outcome=True, attribution=True),
               **_gates("control", observation=True, failure_outcome=False)},
              _W._s_multi_claim_targeted_failure,
              ("control_tokens_equal_cold", "outcome_refused", "control_outcome_restored"),
              ("client_saw_refusal",)),
    # the owner's reuse restores (target); the other tenant's half is in the checks -- a
    # pair: either half alone also holds with caching off, or with isolation broken
    _scenario("cross_tenant_reuse", "the owner reuses its claim; another tenant sends the "
              "same prefix and names the claim",
              _gates("target", observation=True, failure_outcome=False),
              _W._s_cross_tenant_reuse,
              ("owner_reuse_restored", "owner_tokens_equal_cold",
               "no_restore_for_other_tenant", "no_prefix_hit_for_other_tenant",
               "other_tenant_tokens_equal_cold", "foreign_claim_reference_rejected")),
    # target: corrupted in the host tier, caught by its digest, refused; control: the same
    # corruption with verification off -- observation passes on wrong KV (a store without a
    # digest asks for no verification), which is why verification is on by default
    _scenario("corrupted_restore", "the host tier's bytes corrupted before a restore, with "
              "and without verification",
              {**_gates("target", observation=False, failure_outcome=True),
               **_gates("control", observation=True, failure_outcome=False)},
              _W._s_corrupted_restore,
              ("store_recorded_digest", "digest_mismatch_failed_load", "finish_reason_error",
               "outcome_refused", "no_restore_of_corrupted_content",
               "unverified_restore_served", "unverified_output_differs_from_cold"),
              ("client_saw_refusal",)),
)}


def client_saw_refusal(out: Out, claim_id: str) -> bool:
    """Whether an HTTP client got the claim-scoped refusal, in a form it does not retry."""
    seen = out.claim_outcome or {}
    return (out.status == 409 and out.headers.get("x-should-retry") == "false"
            and seen.get("claim_id") == claim_id and seen.get("outcome") == "refused")


def same_request(internal: str, external: str) -> bool:
    """Whether vLLM's internal request id (``<external>-<8 hex>``) is the caller's request."""
    return internal == external or internal.startswith(external + "-")


def judge(trace: Path, scenario: str, targets: dict[str, str]) -> dict[str, bool]:
    """Run the gates SPEC §9 names for *scenario* on each role's claim."""
    from residentkv.trace.gates import check_trace

    wanted: dict[str, list[str]] = {}
    for key in SCENARIOS[scenario].expects:
        role, gate = key.split(".")
        wanted.setdefault(role, []).append(gate)
    results: dict[str, bool] = {}
    for role, gates in wanted.items():
        cid = targets.get(role)
        if cid is None:
            results.update({f"{role}.{g}": False for g in gates})
            continue
        check = check_trace(trace, gates=tuple(gates), claim_id=cid)
        for r in check.results:
            results[f"{role}.{r.gate}"] = bool(r.passed) and not check.problems
    return results


# ---------------------------------------------------------------------- orchestration


def run_policy_group(policy: str, scenarios: Sequence[str], repeat: int,
                     out_dir: str | Path, load_mode: str = "async",
                     shape: str = "inproc") -> list[ScenarioRun]:
    """Run *scenarios* (all of one policy) *repeat* times on one engine in *shape*."""
    witness = Witness(Path(out_dir) / f"_engine-{shape}", policy=policy, load_mode=load_mode,
                      shape=shape)
    try:
        runs = []
        for scenario in scenarios:
            for i in range(repeat):
                runs.append(witness.run(scenario, i, out_dir))
        return runs
    finally:
        witness.close()


def run_witness(scenarios: Sequence[str], repeat: int, out_dir: str | Path,
                *, load_mode: str = "async", python: str | None = None,
                shape: str = "inproc", timeout: float = 1800.0) -> list[ScenarioRun]:
    """Run every scenario in *shape*, one child process per policy (bounded by *timeout*);
    returns all runs in scenario order."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    groups: dict[str, list[str]] = {}
    for s in scenarios:
        groups.setdefault(scenario_policy(s), []).append(s)
    runs: list[ScenarioRun] = []
    for policy, group in groups.items():
        log = out / f"engine-{policy}.log"
        # the runs come back through a pipe, never a file: a file in the output folder could be
        # edited by another process, and each run carries the digest of the trace it wrote
        read_end, write_end = os.pipe()
        cmd = [python or sys.executable, "-m", "residentkv.adapters.vllm.witness",
               "--policy", policy, "--repeat", str(repeat), "--out", str(out),
               "--load-mode", load_mode, "--shape", shape,
               "--result-fd", str(write_end), *group]
        received: list[bytes] = []
        reader = threading.Thread(target=_read_all, args=(read_end, received), daemon=True)
        with log.open("w", encoding="utf-8") as fh:
            try:
                proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT,
                                        start_new_session=True, pass_fds=(write_end,))
            finally:
                os.close(write_end)
            reader.start()
            try:
                code = proc.wait(timeout)
            except subprocess.TimeoutExpired:
                code = -9
            finally:
                # end the child's whole group: no EngineCore or worker outlives the run
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
        reader.join(60)
        if code != 0 or not b"".join(received):
            tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-15:]
            raise RuntimeError(
                f"the {policy}-policy engine ({shape}) exited with {code}; log {log}:\n"
                + "\n".join(tail))
        for item in json.loads(b"".join(received)):
            item.pop("matched", None)
            runs.append(ScenarioRun(**item))
    order = {s: n for n, s in enumerate(scenarios)}
    runs.sort(key=lambda r: (order[r.scenario], r.index))
    return runs


def _read_all(fd: int, into: list[bytes]) -> None:
    """Read *fd* to its end into *into* (the child's runs), then close it."""
    with os.fdopen(fd, "rb") as fh:
        into.append(fh.read())


def _percentile(values: list[float], q: float) -> float | None:
    data = sorted(values)
    if not data:
        return None
    k = (len(data) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (k - lo)


def summarize(runs: Sequence[ScenarioRun]) -> list[dict[str, Any]]:
    """One row per scenario: per gate passes/runs and expectation, matched runs, latency."""
    rows = []
    for scenario in dict.fromkeys(r.scenario for r in runs):
        mine = [r for r in runs if r.scenario == scenario]
        cells = {}
        for key, exp in SCENARIOS[scenario].expects.items():
            passes = sum(1 for r in mine if r.gates.get(key))
            cells[key] = {"passes": passes, "runs": len(mine), "expected": exp}
        lat = [r.latency_ms for r in mine if r.latency_ms is not None]
        rows.append({
            "scenario": scenario, "runs": len(mine),
            "matched": sum(1 for r in mine if r.matched), "gates": cells,
            "p50_ms": _percentile(lat, 0.5), "p95_ms": _percentile(lat, 0.95),
            "errors": [r.error for r in mine if r.error],
            "failed_checks": sorted({c for r in mine for c in r.required_checks
                                     if not r.checks.get(c, False)}),
            "notes": mine[0].notes if mine else [],
        })
    return rows


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """The scenario x gate table as plain text (passes/runs, expected in brackets)."""
    gate_cols = list(SCENARIOS["multi_claim_targeted_failure"].expects)
    heads = ["scenario", "observation", "failure_outcome", "attribution", "ctl.observation",
             "ctl.failure", "matched", "p50 ms", "p95 ms"]
    table = [heads]
    for row in rows:
        line = [row["scenario"]]
        for col in gate_cols:
            cell = row["gates"].get(col)
            if cell is None:
                line.append("-")
            else:
                want = "pass" if cell["expected"] else "fail"
                line.append(f"{cell['passes']}/{cell['runs']} ({want})")
        line += [f"{row['matched']}/{row['runs']}"] + [
            "-" if row[k] is None else f"{row[k]:.1f}" for k in ("p50_ms", "p95_ms")]
        table.append(line)
    widths = [max(len(r[c]) for r in table) for c in range(len(heads))]
    out = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in table]
    out.insert(1, "  ".join("-" * w for w in widths))
    notes = []
    for row in rows:
        for err in row["errors"][:1]:
            notes.append(f"{row['scenario']}: error: {err}")
        if row["failed_checks"]:
            notes.append(f"{row['scenario']}: failed checks: {', '.join(row['failed_checks'])}")
        notes += [f"{row['scenario']}: {n}" for n in row.get("notes", ())]
    return "\n".join(out + notes)


def _main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m residentkv.adapters.vllm.witness",
                                     description="run witness scenarios on one engine")
    parser.add_argument("scenarios", nargs="+", choices=list(SCENARIOS))
    parser.add_argument("--policy", choices=("fail", "recompute"), required=True)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--load-mode", choices=("async", "sync"), default="async")
    parser.add_argument("--shape", choices=SHAPES, default="inproc")
    parser.add_argument("--out", required=True)
    parser.add_argument("--result-fd", type=int, required=True,
                        help="the pipe the runs are written to (JSON), then closed")
    args = parser.parse_args(argv)
    os.set_inheritable(args.result_fd, False)  # the engine's own processes never hold it
    runs = run_policy_group(args.policy, args.scenarios, args.repeat, args.out, args.load_mode,
                            args.shape)
    with os.fdopen(args.result_fd, "wb") as fh:
        fh.write(json.dumps([r.to_json() for r in runs]).encode())
    return 0


if __name__ == "__main__":
    sys.exit(_main())
