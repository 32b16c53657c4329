"""Small helpers to write adversarial v1 traces by hand, one event per call.

Each helper returns the JSON object of one event (or a short list of them) with the claim's
identity tuple filled in; ``Trace`` numbers them (``seq``, ``ts_ns``) in the order given.
Only the envelope boilerplate is automated: every event of every case is chosen by hand.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

SCHEMA = "residentkv.event/v1"
CACHE_IDENTITY = "tiny-llama|tok|vllm-prefix|tenant:a|128|bf16|-"
LEAD2: dict[str, Any] = {"id": "p-lead2", "kind": "leading_prefix_at_least", "blocks": 2}
SAME = object()  # "the focused claim itself" for outcome/blocking fields

Ev = dict[str, Any]


def lead(n: int, pid: str | None = None) -> dict[str, Any]:
    """A ``leading_prefix_at_least(n)`` predicate."""
    return {"id": pid or f"p-lead{n}", "kind": "leading_prefix_at_least", "blocks": n}


def crange(start: int, n: int, pid: str | None = None) -> dict[str, Any]:
    """A ``contiguous_range(start, n)`` predicate."""
    return {"id": pid or f"p-range{start}-{n}", "kind": "contiguous_range", "blocks": n,
            "start": start}


AUTO_PID = "\u0000auto"  # filled in by render() with the id of the claim's accepted predicate


def ident(c: str, **over: Any) -> Ev:
    """The identity tuple every claim event repeats (``predicate_id`` filled in by render)."""
    base: Ev = {"object_id": f"prefix:{c}", "cache_identity": CACHE_IDENTITY,
                "request_token_map_id": f"tokmap:{c}", "predicate_id": AUTO_PID}
    base.update(over)
    return base


def _env(event: str, c: str | None, r: str | None, **fields: Any) -> Ev:
    e: Ev = {"schema": SCHEMA, "seq": None, "ts_ns": None, "source": "test", "event": event,
             "claim_id": c, "request_id": r}
    e.update(fields)
    return e


def _claim(event: str, c: str, r: str | None, idover: dict[str, Any] | None = None,
           **fields: Any) -> Ev:
    return _env(event, c, r, **ident(c, **(idover or {})), **fields)


# --- request events ---------------------------------------------------------------------------
def start(r: str, scope: str | None = None, claim: str | None = None,
          claim_ref: str | None = None) -> Ev:
    e = _env("request_started", claim, r, prompt_tokens=300)
    if scope is not None:
        e["owner_scope"] = scope
    if claim_ref is not None:
        e["claim_ref"] = claim_ref
    return e


_REASON = {"served": "length", "error": "error", "refused": "infeasible"}


def finish(r: str, status: str = "served") -> Ev:
    return _env("request_finished", None, r, status=status, finish_reason=_REASON[status])


# --- claim events -----------------------------------------------------------------------------
def submit(c: str, r: str | None, scope: str | None = None) -> Ev:
    e = _claim("claim_submitted", c, r)
    if scope is not None:
        e["owner_scope"] = scope
    return e


def accept(c: str, r: str | None, mode: str = "offloadable", fp: int = 2,
           pred: dict[str, Any] | None = None, reg: str = "pre_registered",
           scope: str | None = None, idover: dict[str, Any] | None = None,
           **extra: Any) -> Ev:
    pred = pred or LEAD2
    e = _claim("claim_accepted", c, r, idover, registration=reg, protection_mode=mode,
               footprint_blocks=fp, predicate=pred)
    if scope is not None:
        e["owner_scope"] = scope
    e.update(extra)
    return e


def mat(c: str, r: str | None, surv: int = 2, lead_: int = 2, req: int = 2,
        holds: bool = True, tier: str = "device") -> Ev:
    return _claim("claim_materialized", c, r, surviving=surv, leading=lead_, required=req,
                  holds=holds, tier=tier)


def store(c: str | None, r: str | None, job: int, frm: str = "device", to: str = "host",
          ok: bool = True) -> list[Ev]:
    return [_env("kv_store_started", c, r, job_id=job, bytes=4096, from_tier=frm, to_tier=to),
            _env("kv_store_finished", c, r, job_id=job, bytes=4096, success=ok, from_tier=frm,
                 to_tier=to)]


def off(c: str, r: str | None, gen: int = 0, frm: str = "device", to: str = "host",
        n: int = 2) -> Ev:
    return _claim("claim_offloaded", c, r, generation=gen, from_tier=frm, to_tier=to,
                  block_count=n)


def lookup(c: str, r: str, hit: int = 256) -> Ev:
    return _env("kv_lookup", c, r, hit_tokens=hit, async_load=True)


def rr(c: str, r: str | None, gen: int, frm: str = "host", to: str = "device",
       idover: dict[str, Any] | None = None) -> Ev:
    return _claim("claim_restore_required", c, r, idover, generation=gen, from_tier=frm,
                  to_tier=to, tokens=256)


def load(c: str | None, r: str | None, job: int, ok: bool = True, injected: bool = False,
         gen: int | None = None) -> list[Ev]:
    a = _env("kv_load_started", c, r, job_id=job, bytes=4096)
    b = _env("kv_load_finished", c, r, job_id=job, bytes=4096, success=ok)
    if not ok:
        b["injected"] = injected
    if gen is not None:
        a["generation"] = gen
        b["generation"] = gen
    return [a, b]


def loadfailed(c: str | None, r: str | None, job: int | None, injected: bool = True,
               gen: int | None = None) -> Ev:
    e = _env("kv_load_failed", c, r, invalid_block_ids=[0, 1])
    if job is not None:
        e["job_id"] = job
    e["injected"] = injected
    if gen is not None:
        e["generation"] = gen
    return e


def slf(c: str | None, r: str | None, policy: str = "fail") -> Ev:
    return _env("scheduler_load_failure", c, r, policy=policy, invalid_block_count=2,
                failed_tokens=256,
                finish_status="FINISHED_ERROR" if policy == "fail" else None)


def restored(c: str, r: str | None, gen: int, src: str = "offload_tier",
             idover: dict[str, Any] | None = None) -> Ev:
    e = _claim("claim_restored", c, r, idover, generation=gen)
    e["source"] = src  # SPEC §3: the restore's origin takes the envelope's `source` slot
    return e


def reused(c: str, r: str | None, gen: int, holds: bool = True,
           idover: dict[str, Any] | None = None) -> Ev:
    return _claim("claim_reused", c, r, idover, generation=gen, holds=holds)


def rfailed(c: str, r: str | None, gen: int, outcome: Any = SAME, injected: bool = True,
            otype: str = "refusal") -> Ev:
    return _claim("claim_restore_failed", c, r, generation=gen, reason="injected load failure",
                  injected=injected, outcome_type=otype,
                  outcome_claim_id=c if outcome is SAME else outcome)


def refused(c: str | None, r: str | None, outcome: Any = SAME, blocking: Any = SAME,
            arbiter: str = "scheduler_boundary", feas: str = "restore_failed") -> Ev:
    return _env("active_request_refused", c, r, outcome_claim_id=c if outcome is SAME else outcome,
                blocking_claim_ids=[c] if blocking is SAME else blocking, feasibility=feas,
                arbiter=arbiter)


def evict(c: str | None, r: str | None, block: int, pos: int, protected: bool = False) -> Ev:
    return _env("block_evicted", c, r, block_id=block, protected=protected, reason="lru",
                position=pos)


def expired(c: str, r: str | None = None) -> Ev:
    return _claim("claim_expired", c, r, reason="ttl 30 s elapsed")


def demoted(c: str, r: str | None = None) -> Ev:
    return _claim("claim_demoted", c, r, reason="pressure")


def released(c: str, r: str | None = None) -> Ev:
    return _claim("claim_released", c, r, reason="owner released")


def harmed(c: str, r: str | None = None) -> Ev:
    return _claim("claim_harmed", c, r, cause="evicted",
                  before={"surviving": 2, "leading": 2, "required": 2, "holds": True},
                  after={"surviving": 1, "leading": 0, "required": 2, "holds": False})


def lost(c: str, block: int, pos: int) -> Ev:
    return _claim("claim_block_lost_after_release", c, None, block_id=block, position=pos)


def counter(c: str | None, r: str | None, name: str, value: int = 1) -> Ev:
    return _env("generic_counter", c, r, name=name, value=value)


# --- chains of a legal offloadable run ------------------------------------------------------
def setup(c: str, r: str = "r-1", job: int = 0, scope: str | None = None,
          rscope: str | None = None, **acc: Any) -> list[Ev]:
    """Carrying request: accept, materialize (holds), store to host, offload gen 0, served."""
    return [start(r, scope=rscope), accept(c, r, scope=scope, **acc), mat(c, r),
            *store(c, r, job), off(c, r, 0), finish(r)]


def success(c: str, r: str, gen: int, job: int, scope: str | None = None) -> list[Ev]:
    """A restore cycle that succeeds: lookup, restore required, load, restored, reused."""
    return [start(r, scope=scope), lookup(c, r), rr(c, r, gen), *load(c, r, job),
            restored(c, r, gen), reused(c, r, gen), finish(r)]


def failure(c: str, r: str, gen: int, job: int, scope: str | None = None) -> list[Ev]:
    """A controlled restore failure with its whole claim-scoped outcome before the finish."""
    return [start(r, scope=scope), lookup(c, r), rr(c, r, gen),
            *load(c, r, job, ok=False, injected=True), loadfailed(c, r, job), slf(c, r),
            rfailed(c, r, gen), refused(c, r), finish(r, "error")]


def flatten(items: Iterable[Ev | list[Ev]]) -> list[Ev]:
    out: list[Ev] = []
    for it in items:
        if isinstance(it, list):
            out.extend(it)
        else:
            out.append(it)
    return out


def render(events: Iterable[Ev | list[Ev]], first_seq: int = 0, seq_step: int = 1,
           ts_reverse: bool = False) -> str:
    """Number the events in order and write them as JSONL.

    A claim event's ``predicate_id`` repeats the id of the claim's first accepted predicate
    unless the case set it explicitly.
    """
    flat = flatten(events)
    pids: dict[str, str] = {}
    for e in flat:
        if e["event"] == "claim_accepted" and e["claim_id"] not in pids:
            pids[e["claim_id"]] = e["predicate"]["id"]
    lines = []
    n = len(flat)
    for i, e in enumerate(flat):
        e = dict(e)
        if e.get("predicate_id") == AUTO_PID:
            e["predicate_id"] = pids.get(e["claim_id"], LEAD2["id"])
        if e.get("seq") is None:
            e["seq"] = first_seq + i * seq_step
        if e.get("ts_ns") is None:
            e["ts_ns"] = 1000 * ((n - i) if ts_reverse else (i + 1))
        lines.append(json.dumps(e))
    return "\n".join(lines) + "\n"


def rejected(c: str, r: str | None) -> Ev:
    return _claim("claim_rejected", c, r, reason="over budget")


def patched(e: Ev, **fields: Any) -> Ev:
    """A copy of one event with some fields replaced or added (typing attacks)."""
    out = dict(e)
    out.update(fields)
    return out


def deferred(c: str | None, r: str, blocking: list[str]) -> Ev:
    return _env("active_request_deferred", c, r, reason="resident claim kept",
                blocking_claim_ids=blocking)
