# ruff: noqa
# A second SPEC-only corpus, kept verbatim as its author wrote it from SPEC §2–§4.2 without
# reading the gates (so not held to the project's lint style). See README.md.
import sys, json, copy

from spec_kit import *  # noqa: F403

CASES = []
def case(name, gates, rule, claim="c1", amb=False, note=""):
    def deco(fn):
        CASES.append(dict(name=name, fn=fn, gates=gates, rule=rule, claim=claim, amb=amb, note=note))
        return fn
    return deco

OFL = dict(observation="pass", failure_outcome="pass", lifecycle="pass")
ALLF = dict(observation="fail", failure_outcome="fail", lifecycle="fail")
R_DENY = "§4.2: an event of a claim ... that the automaton does not allow in the current state is a violation in every gate (not only lifecycle), however complete the required chain is elsewhere."

def full(t=None, **kw):
    t = t or T(); t.resident(**kw); t.success_cycle(); t.failure_cycle(); return t

def find(t, event, claim=None, req=None, nth=0):
    hits = [i for i, e in enumerate(t.ev) if e["event"] == event and (claim is None or e["claim_id"] == claim) and (req is None or e["request_id"] == req)]
    return hits[nth]

def move(t, src, dst):
    e = t.ev.pop(src); t.ev.insert(dst if dst < src else dst - 1, e); t.renumber(); return t

def insert_at(t, idx, e):
    t.ev.insert(idx, e); t.renumber(); return t

def mk(claim, req, event, **kw):
    e = {"schema": SCHEMA, "seq": 0, "ts_ns": 0, "source": "adversary.scheduler", "claim_id": claim, "request_id": req, "event": event}
    e.update(kw); return e

# ---------------------------------------------------------------- legal traces (PASS)
@case("p01_baseline_full", OFL, "§4 observation/failure_outcome/lifecycle: both paths for one claim in one stream (success generation, then failure generation)")
def _(): return full()

@case("p02_duplicate_identical_accept_early", OFL, "§4.2: A second claim_accepted identical in every defining field is legal and changes nothing, in every gate.")
def _():
    t = full(); i = find(t, "claim_accepted"); e = copy.deepcopy(t.ev[i]); return insert_at(t, i + 1, e)

@case("p03_duplicate_identical_accept_late", OFL, "§4.2: A second claim_accepted identical in every defining field is legal and changes nothing, in every gate.")
def _():
    t = full(); i = find(t, "claim_accepted"); e = copy.deepcopy(t.ev[i]); e["request_id"] = "r0"
    j = find(t, "request_started", req="r2"); return insert_at(t, j, e)

@case("p04_seq_gaps", OFL, "§3: seq int ≥ 0, strictly increasing within one stream; the only ordering key (gaps are not forbidden)")
def _():
    t = full()
    for i, e in enumerate(t.ev): e["seq"] = i * 1000 + 7
    return t

@case("p05_seq_max_int64", OFL, "§4.2 Numbers: every integer is signed 64-bit (seq in 0 .. 2^63−1)")
def _():
    t = full()
    n = len(t.ev)
    for i, e in enumerate(t.ev): e["seq"] = (2**63 - 1) - (n - 1 - i)
    return t

@case("p06_ts_ns_negative_nonmonotone", OFL, "§3: ts_ns monotonic clock, informative only (never used for ordering)", amb=True,
      note="ts_ns 'monotonic clock' could be read as a constraint; but it is explicitly informative only")
def _():
    t = full()
    for i, e in enumerate(t.ev): e["ts_ns"] = (-1) ** i * (10**12 - i)
    return t

@case("p07_bom_first_line", OFL, "§4.2 Numbers: A UTF-8 byte-order mark before the first line is ignored")
def _():
    t = full(); return "\ufeff" + "\n".join(t.lines()) + "\n"

@case("p08_blank_lines", OFL, "§4.2: blank lines carry nothing.")
def _():
    t = full(); L = t.lines(); out = []
    for i, l in enumerate(L):
        out.append(l)
        if i % 3 == 0: out.append("")
    return "\n\n" + "\n".join(out) + "\n\n   \n"

@case("p09_key_order_permuted", OFL, "§3: One JSON object per line (member order carries no meaning in JSON)")
def _():
    t = full(); return "\n".join(json.dumps(dict(reversed(list(e.items())))) for e in t.ev) + "\n"

@case("p10_two_success_cycles_one_copy", OFL, "§4.2 Generations: one stored copy may serve several cycles; no new offload is needed between them")
def _():
    t = T(); t.resident(); t.success_cycle(r="r1", gen=1); t.success_cycle(r="r1b", gen=2); t.failure_cycle(r="r2", gen=3); return t

@case("p11_skipped_labels", OFL, "§4.2 Generations: each new cycle's label is strictly greater than every earlier cycle's (skipping labels is allowed)")
def _():
    t = T(); t.resident(); t.success_cycle(gen=5); t.failure_cycle(gen=17); return t

@case("p12_contiguous_range_predicate", OFL, "§2 contiguous_range(s,n) holds iff every position in s..s+n-1 is present; §4.2 Predicates: footprint F, leading L, surviving F−1: every position but L is present")
def _():
    t = T(); c, r = "c1", "r0"
    t.req_start(c, r); t.submitted(c, r)
    t.accepted(c, r, pred={"id": "pred:lead2", "kind": "contiguous_range", "blocks": 2, "start": 1})
    t.materialized(c, r, surv=3, lead=0, req=2, holds=True)
    t.store(c, r, "s0"); t.offloaded(c, r, 0); t.finish(c, r)
    t.success_cycle(); t.failure_cycle(); return t

@case("p13_leading_prefix_partial_survival", OFL, "§2 leading_prefix_at_least(n) holds iff leading >= n")
def _():
    t = T(); c, r = "c1", "r0"
    t.req_start(c, r); t.submitted(c, r); t.accepted(c, r)
    t.materialized(c, r, surv=3, lead=2, req=2, holds=True)
    t.store(c, r, "s0"); t.offloaded(c, r, 0); t.finish(c, r)
    t.success_cycle(); t.failure_cycle(); return t

@case("p14_concurrent_requests", OFL, "§3: seq the only ordering key; §4.2 nothing forbids r1 starting before r0 finishes")
def _():
    t = full(); i = find(t, "request_started", req="r1"); j = find(t, "request_finished", req="r0"); return move(t, i, j)

@case("p15_interleaved_unrelated_claim", OFL, "§4: a gate focuses on one claim; §4.2: the automaton is per claim and per request")
def _():
    a = full(); b = T(provenance=False)
    b.resident(c="c2", r="q0"); b.success_cycle(c="c2", r="q1")
    for e in b.ev:
        for k in ("object_id",): 
            if k in e: e[k] = "obj:prefix-B"
    ev = [a.ev[0]]; A = a.ev[1:]; B = b.ev
    while A or B:
        if A: ev.append(A.pop(0))
        if B: ev.append(B.pop(0))
    a.ev = ev; a.renumber(); return a

@case("p16_refused_status", OFL, "§3 request_finished status served|refused|error; §4 failure_outcome requires refusal at or before request_finished")
def _():
    t = full(); t.ev[-1]["status"] = "refused"; return t

@case("p17_digest_verified", OFL, "§9 Content: when the store recorded a digest, observation requires the verification.")
def _():
    t = full(); i = find(t, "kv_store_finished"); t.ev[i]["content_digest"] = "xxh3:00112233445566778899aabbccddeeff"
    j = find(t, "claim_restored"); t.ev[j]["content_verified"] = True; return t

@case("p18_offloadable_evict_after_offload", OFL, "§4.2 Tiers: For offloadable, an eviction of a needed position is loss unless a stored, offloaded copy of the claim is held at that moment.")
def _():
    t = full(); i = find(t, "request_finished", req="r0")
    return insert_at(t, i, mk("c1", "r0", "block_evicted", block_id=3, position=0, protected=False, reason="capacity"))

@case("p19_expiring_expiry_then_loss", dict(lifecycle="pass"), "§4 lifecycle: the expiry/demotion-before-loss paths for expiring/demotable claims; §2: Loss after demotion/expiry/release is post-release loss, never harm")
def _():
    t = T(); c, r = "c1", "r0"
    t.req_start(c, r); t.submitted(c, r); t.accepted(c, r, mode="expiring", exp=30.0); t.materialized(c, r); t.finish(c, r)
    t.expired(c, None); t.evicted(c, None, 3, 0); t.add(c, None, "claim_block_lost_after_release", block_id=3, position=0, **IDN)
    return t

@case("p20_demotable_demotion_then_loss", dict(lifecycle="pass"), "§4.1 Loss ... must be preceded by the outcome the mode promises (demotion for demotable)")
def _():
    t = T(); c, r = "c1", "r0"
    t.req_start(c, r); t.submitted(c, r); t.accepted(c, r, mode="demotable"); t.materialized(c, r); t.finish(c, r)
    t.demoted(c, None); t.evicted(c, None, 3, 0); t.add(c, None, "claim_block_lost_after_release", block_id=3, position=0, **IDN)
    return t

@case("p21_long_line_under_limit", OFL, "§4.1/reader: lines up to --max-line-bytes (1 MiB default) are accepted; nothing in SPEC limits free text")
def _():
    t = full(); return insert_at(t, 1, mk(None, None, "generic_counter", name="x" * 700000, value=1))

@case("p22_generic_counter_noise", OFL, "§3 generic_counter carries no claim identity and can never satisfy an obligation (but does not break one)")
def _():
    t = full()
    for k in (3, 9, 15): insert_at(t, k, mk(None, None, "generic_counter", name="kv_hits", value=k))
    return t

@case("p23_two_claims_both_full", dict(observation="pass", failure_outcome="pass", lifecycle="pass"), "§4: a gate focuses on one claim (given, or each claim in turn)", claim="c2")
def _():
    t = full(); t2 = T(provenance=False)
    t2.resident(c="c2", r="q0"); t2.success_cycle(c="c2", r="q1"); t2.failure_cycle(c="c2", r="q2")
    for e in t2.ev:
        if "object_id" in e: e["object_id"] = "obj:prefix-B"
    t.ev += t2.ev; t.renumber(); return t

@case("p24_crlf", OFL, "§3 one JSON object per line; CR is JSON whitespace (SPEC silent on CRLF)", amb=True, note="SPEC does not say whether CRLF line ends are allowed")
def _():
    t = full(); return "\r\n".join(t.lines()) + "\r\n"

@case("p25_no_stream_started", OFL, "§4.1: A trace's provenance is its first event, stream_started ... Trace evidence grants only with provenance (lowering, §7)", amb=True,
      note="SPEC ties provenance to granting in the lowering checker; whether a gate may pass without stream_started is not said")
def _():
    t = T(provenance=False); t.resident(); t.success_cycle(); t.failure_cycle(); return t

# ---------------------------------------------------------------- ORDER
@case("f01_store_before_materialized", ALLF, "§4.2 Order: stores and claim_offloaded only after a claim_materialized that holds")
def _():
    t = full(); i = find(t, "claim_materialized"); return move(t, i, find(t, "claim_offloaded") + 1)

@case("f02_offload_before_materialized", ALLF, "§4.2 Order: stores and claim_offloaded only after a claim_materialized that holds")
def _():
    t = full(); i = find(t, "claim_materialized"); t.ev.pop(i); t.renumber()
    j = find(t, "request_finished", req="r0"); return insert_at(t, j, mk("c1", "r0", "claim_materialized", surviving=4, leading=4, required=2, holds=True, tier="gpu", **IDN))

@case("f03_materialization_not_holding", ALLF, "§4.2 Order: stores and claim_offloaded only after a claim_materialized that holds")
def _():
    t = full(); i = find(t, "claim_materialized"); t.ev[i].update(surviving=1, leading=1, holds=False); return t

@case("f04_holds_true_numbers_false", ALLF, "§4.1: Predicates are evaluated by the gate from the event's numbers and the accepted predicate; holds is a claim to check, never evidence.")
def _():
    t = full(); i = find(t, "claim_materialized"); t.ev[i].update(surviving=3, leading=1, holds=True); return t

@case("f05_L6_59_blocks_block0_lost", ALLF, "§1 B2: 59 scattered surviving blocks with block 0 gone satisfy nothing; §4.1 holds is never evidence")
def _():
    t = T(); c, r = "c1", "r0"
    t.req_start(c, r); t.submitted(c, r); t.accepted(c, r, fp=60, pred={"id": "pred:lead2", "kind": "leading_prefix_at_least", "blocks": 8, "start": None})
    t.materialized(c, r, surv=59, lead=0, req=8, holds=True)
    t.store(c, r, "s0"); t.offloaded(c, r, 0, n=60); t.finish(c, r); t.success_cycle(); t.failure_cycle(); return t

@case("f06_reuse_before_restore", ALLF, "§4.2 Order: claim_reused only after claim_restored(source=offload_tier) of the same generation")
def _():
    t = full(); i = find(t, "claim_reused"); j = find(t, "claim_restored"); return move(t, i, j)

@case("f07_reuse_wrong_generation", ALLF, "§4.2 Order: claim_reused only after claim_restored(source=offload_tier) of the same generation")
def _():
    t = full(); i = find(t, "claim_reused"); t.ev[i]["generation"] = 0; return t

@case("f08_lookup_before_accept", ALLF, "§4.2 Before acceptance only claim_submitted and the request_started of the request that carries the claim may name the claim.")
def _():
    t = full(); i = find(t, "claim_submitted"); return insert_at(t, i, mk("c1", "r0", "kv_lookup", hit_tokens=0, async_load=False, generation=None))

@case("f09_other_request_names_claim_before_accept", ALLF, "§4.2 Before acceptance only claim_submitted and the request_started of the request that carries the claim (the request id its claim_accepted names) may name the claim.")
def _():
    t = full(); i = find(t, "claim_submitted")
    return insert_at(t, i, mk("c1", "rX", "request_started", owner_scope=OWNER, prompt_tokens=10, claim_ref=None))

@case("f10_post_hoc_registration", ALLF, "§2 registration post_hoc never satisfies B1; §4 claim_accepted_before_lifecycle (accepted, pre-registered)")
def _():
    t = full(); t.ev[find(t, "claim_accepted")]["registration"] = "post_hoc"; return t

@case("f11_submitted_after_accept", ALLF, "§2 Lifecycle: submitted → accepted | rejected (submission after acceptance is not in the automaton)", amb=True,
      note="SPEC's lifecycle lists submitted → accepted; a claim_submitted after claim_accepted is plausibly illegal but no sentence says so directly")
def _():
    t = full(); i = find(t, "claim_submitted"); return move(t, i, find(t, "claim_materialized"))

# ---------------------------------------------------------------- TERMINAL STATES
@case("f12_restore_after_release", ALLF, "§4.2 Terminal states (released, ...) admit no materialization, store, offload, restore or reuse afterwards, on any request.")
def _():
    t = T(); t.resident(); t.success_cycle(); t.released("c1", None); t.failure_cycle(); return t

@case("f13_success_after_failed_closed", ALLF, "§4.2 Terminal states (... failed_closed) admit no ... restore or reuse afterwards, on any request.")
def _():
    t = T(); t.resident(); t.success_cycle(); t.failure_cycle(); t.success_cycle(r="r3", gen=3); return t

@case("f14_fallback_restore_after_fail", ALLF, "§4 failure_outcome: no claim_restored after the failure (fallback recompute is never satisfaction); §4.2 terminal failed_closed admits no restore")
def _():
    t = full(); i = find(t, "request_finished", req="r2"); e = mk("c1", "r2", "claim_restored", generation=2, content_verified=None, **IDN); e["source"] = "fallback_recompute"
    return insert_at(t, i, e)

@case("f15_materialize_after_expiry", dict(lifecycle="fail", observation="fail", failure_outcome="fail"), "§4.2 Terminal states (expired) admit no materialization ... afterwards, on any request.")
def _():
    t = T(); c, r = "c1", "r0"
    t.req_start(c, r); t.submitted(c, r); t.accepted(c, r, mode="expiring", exp=30.0); t.materialized(c, r); t.finish(c, r)
    t.expired(c, None); t.req_start(c, "r1"); t.materialized(c, "r1"); t.finish(c, "r1"); return t

@case("f16_store_after_harm", dict(lifecycle="fail", observation="fail", failure_outcome="fail"), "§4.2 Terminal states (harmed) admit no ... store ... afterwards")
def _():
    t = T(); c, r = "c1", "r0"
    t.req_start(c, r); t.submitted(c, r); t.accepted(c, r, mode="soft_priority"); t.materialized(c, r)
    t.harmed(c, r); t.evicted(c, r, 3, 0); t.store(c, r, "s9"); t.finish(c, r); return t

@case("f17_offload_after_release_then_cycles", ALLF, "§4.2 Terminal states (released) admit no ... offload ... afterwards")
def _():
    t = T(); c, r = "c1", "r0"
    t.req_start(c, r); t.submitted(c, r); t.accepted(c, r); t.materialized(c, r); t.released(c, r)
    t.store(c, r, "s0"); t.offloaded(c, r, 0); t.finish(c, r); t.success_cycle(); t.failure_cycle(); return t

@case("f18_restore_after_expiry_offloadable_other_req", ALLF, "§4.2 Terminal states admit no ... restore or reuse afterwards, on any request.")
def _():
    t = T(); t.resident(); t.success_cycle(); t.expired("c1", "r1x"); t.failure_cycle(); return t

# ---------------------------------------------------------------- GENERATIONS
@case("f19_failure_cycle_reuses_label", ALLF, "§4.2 Generations: each new cycle's label is strictly greater than every earlier cycle's.")
def _():
    t = T(); t.resident(); t.success_cycle(gen=1); t.failure_cycle(gen=1); return t

@case("f20_failure_cycle_lower_label", ALLF, "§4.2 Generations: each new cycle's label is strictly greater than every earlier cycle's.")
def _():
    t = T(); t.resident(); t.success_cycle(gen=3); t.failure_cycle(gen=2); return t

@case("f21_restored_label_differs_in_cycle", ALLF, "§4.2 Generations: every event of a cycle names the same label")
def _():
    t = full(); i = find(t, "claim_restored"); t.ev[i]["generation"] = 2; j = find(t, "claim_reused"); t.ev[j]["generation"] = 2; return t

@case("f22_offload_label_above_later_cycle", ALLF, "§4.2 Generations: a store's or claim_offloaded's label is ≥ every earlier cycle's and ≤ every later cycle's")
def _():
    t = full(); t.ev[find(t, "claim_offloaded")]["generation"] = 5; return t

@case("f23_reoffload_label_below_earlier_cycle", ALLF, "§4.2 Generations: Labels never decrease along the claim's history: a store's or claim_offloaded's label is ≥ every earlier cycle's")
def _():
    t = T(); t.resident(); t.success_cycle(gen=3, finish=False); t.offloaded("c1", "r1", 1); t.finish("c1", "r1"); t.failure_cycle(gen=4); return t

@case("f24_load_label_foreign", ALLF, "§4.2 Generations: Load events belong to the requesting request's open cycle of the claim; a label on one, if present, is that cycle's.")
def _():
    t = full(); i = find(t, "kv_load_started"); t.ev[i]["generation"] = 7; t.ev[i + 1]["generation"] = 7; return t

@case("f25_loadfailed_label_foreign", ALLF, "§4.2 Generations: ... a label on one [load event], if present, is that cycle's.")
def _():
    t = full(); t.ev[find(t, "kv_load_failed")]["generation"] = 1; return t

@case("f26_store_label_above_later_cycle", ALLF, "§4.2 Generations: a store's ... label is ≥ every earlier cycle's and ≤ every later cycle's")
def _():
    t = full(); i = find(t, "kv_store_started"); t.ev[i]["generation"] = 9; t.ev[i + 1]["generation"] = 9; return t

# ---------------------------------------------------------------- LOADS OUTSIDE CYCLES
@case("f27_load_outside_cycle_resident_req", ALLF, "§4.2 Generations: Load events belong to the requesting request's open cycle of the claim")
def _():
    t = full(); i = find(t, "request_finished", req="r0")
    insert_at(t, i, mk("c1", "r0", "kv_load_started", job_id="lx", bytes=1, generation=None, from_tier="cpu", to_tier="gpu"))
    return insert_at(t, i + 1, mk("c1", "r0", "kv_load_finished", job_id="lx", bytes=1, generation=None, success=True, injected=False))

@case("f28_load_before_restore_required", ALLF, "§4.2 Generations: Load events belong to the requesting request's open cycle of the claim")
def _():
    t = full(); i = find(t, "kv_load_started"); j = find(t, "claim_restore_required"); move(t, i, j); return move(t, i + 1, j + 1)

@case("f29_load_by_other_request", ALLF, "§4.2 Generations: Load events belong to the requesting request's open cycle of the claim (rZ has no open cycle)")
def _():
    t = full(); i = find(t, "kv_load_finished")
    insert_at(t, i + 1, mk("c1", "rZ", "kv_load_started", job_id="lz", bytes=1, generation=1, from_tier="cpu", to_tier="gpu"))
    return insert_at(t, i + 2, mk("c1", "rZ", "kv_load_finished", job_id="lz", bytes=1, generation=1, success=True, injected=False))

# ---------------------------------------------------------------- FAILURES / SILENT / OPEN
@case("f30_open_failure_then_proper", dict(failure_outcome="fail", lifecycle="fail"), "§4.2 Failures: A failure not followed by its claim-scoped outcome on that request is an open failure: failure_outcome, lifecycle and attribution fail, and a later proper failure never makes up for it.")
def _():
    t = T(); t.resident(); t.success_cycle()
    c, r = "c1", "r2"; t.req_start(c, r); t.lookup(c, r); t.restore_required(c, r, 2); t.load(c, r, "lj2", 2, ok=False, injected=True); t.load_failed(c, r, "lj2", 2)
    t.finish(c, r, status="error", reason="error")
    t.failure_cycle(r="r3", gen=3); return t

@case("f31_silent_failure_retry_in_success_cycle", dict(failure_outcome="fail", lifecycle="fail"), "§4.2 Failures: A failure not followed by its claim-scoped outcome on that request is an open failure ... a later proper failure never makes up for it.")
def _():
    t = T(); t.resident(); c, r = "c1", "r1"; t.req_start(c, r); t.lookup(c, r); t.restore_required(c, r, 1)
    t.load(c, r, "la", 1, ok=False, injected=False); t.load_failed(c, r, "la", 1, injected=False)
    t.load(c, r, "lb", 1); t.restored(c, r, 1); t.reused(c, r, 1); t.finish(c, r); t.failure_cycle(); return t

@case("f32_loadfailed_no_jobid_voids_success", dict(observation="fail", failure_outcome="fail", lifecycle="fail"), "§4.2 Failures: kv_load_failed ... without job_id it voids every successful load of that request for the claim; open failure fails failure_outcome and lifecycle")
def _():
    t = full(); i = find(t, "kv_load_finished")
    return insert_at(t, i + 1, mk("c1", "r1", "kv_load_failed", invalid_block_ids=[10], job_id=None, injected=False, generation=1, reason="io"))

@case("f33_loadfailed_jobid_voids_success", dict(observation="fail", failure_outcome="fail", lifecycle="fail"), "§4.2 Failures: kv_load_failed voids the load job its job_id names")
def _():
    t = full(); i = find(t, "kv_load_finished")
    return insert_at(t, i + 1, mk("c1", "r1", "kv_load_failed", invalid_block_ids=[10], job_id="l-c1-r1", injected=False, generation=1, reason="io"))

@case("f34_loadfailed_after_restored_voids", dict(observation="fail", failure_outcome="fail", lifecycle="fail"), "§4.2 Failures: kv_load_failed voids the load job its job_id names (a late report still voids it); open failure", amb=True,
      note="vLLM reports invalid blocks after the fact (§9); a void reported after claim_restored/reused — SPEC does not say whether the earlier restore still counts for observation")
def _():
    t = full(); i = find(t, "claim_reused")
    return insert_at(t, i + 1, mk("c1", "r1", "kv_load_failed", invalid_block_ids=[10], job_id="l-c1-r1", injected=False, generation=1, reason="late"))

@case("f35_failure_no_request", dict(failure_outcome="fail", lifecycle="fail"), "§4.2 Failures: A substrate failure that names a claim must name its request.")
def _():
    t = full(); i = find(t, "request_started", req="r2")
    return insert_at(t, i, mk("c1", None, "kv_load_failed", invalid_block_ids=[10], job_id=None, injected=True, generation=None, reason="x"))

@case("f36_chain_on_other_request", dict(failure_outcome="fail", lifecycle="fail"), "§4.1: The affected request of a failure is the request whose restore of this claim failed. The attributed refusal refuses that request")
def _():
    t = full()
    for ev in ("scheduler_load_failure", "active_request_refused"):
        t.ev[find(t, ev)]["request_id"] = "r1"
    return t

@case("f37_refusal_after_finish", dict(failure_outcome="fail", lifecycle="fail"), "§4.1: The attributed refusal refuses that request, at or before its first request_finished")
def _():
    t = full(); i = find(t, "active_request_refused"); return move(t, i, len(t.ev))

@case("f38_served_after_refusal", dict(failure_outcome="fail", lifecycle="fail"), "§4.1: a request that finishes served after its policy=fail branch and refusal contradicts the refusal.")
def _():
    t = full(); t.ev[-1]["status"] = "served"; t.ev[-1]["finish_reason"] = "stop"; return t

@case("f39_double_finish", ALLF, "§4.1: a second request_finished of one request is a well-formedness problem; §4.2 violation in every gate")
def _():
    t = full(); e = copy.deepcopy(t.ev[-1]); t.ev.append(e); t.renumber(); return t

@case("f40_double_finish_success_req", ALLF, "§4.1: a second request_finished of one request is a well-formedness problem")
def _():
    t = full(); i = find(t, "request_finished", req="r1"); e = copy.deepcopy(t.ev[i]); return insert_at(t, i + 1, e)

@case("f41_never_finishes", dict(failure_outcome="fail", lifecycle="fail"), "§4.2: The whole failure chain ... precedes the affected request's first request_finished, which must be in the stream.")
def _():
    t = full(); t.ev.pop(); return t

@case("f42_arbiter_harness", dict(failure_outcome="fail", lifecycle="fail"), "§4.2 Arbiters: arbiter=harness never satisfies a requirement of any gate.")
def _():
    t = full(); t.ev[find(t, "active_request_refused")]["arbiter"] = "harness"; return t

@case("f43_arbiter_admission", dict(failure_outcome="fail", lifecycle="fail"), "§4 failure_outcome: arbiter == scheduler_boundary ...; an admission refusal is not a restore-failure outcome.")
def _():
    t = full(); t.ev[find(t, "active_request_refused")]["arbiter"] = "admission"; return t

@case("f44_blocking_smear", dict(failure_outcome="fail", lifecycle="fail"), "§4 failure_outcome: blocking_claim_ids == [claim]")
def _():
    t = full(); t.ev[find(t, "active_request_refused")]["blocking_claim_ids"] = ["c1", "c9"]; return t

@case("f45_blocking_duplicate", dict(failure_outcome="fail", lifecycle="fail"), "§4 failure_outcome: blocking_claim_ids == [claim] (a list of two entries is not [claim])", amb=True,
      note="[c1, c1] names only the claim; equality to [claim] says fail, but someone might treat it as a set")
def _():
    t = full(); t.ev[find(t, "active_request_refused")]["blocking_claim_ids"] = ["c1", "c1"]; return t

@case("f46_refusal_env_claim_null", dict(failure_outcome="fail", lifecycle="fail"), "§4.1 Attribution: an outcome event's envelope claim_id equals its outcome_claim_id.", amb=True,
      note="the envelope rule sits under the attribution bullet; failure_outcome's own text names only outcome_claim_id/blocking ids")
def _():
    t = full(); t.ev[find(t, "active_request_refused")]["claim_id"] = None; return t

@case("f47_restore_failed_names_other", dict(failure_outcome="fail", lifecycle="fail"), "§4 failure_outcome: claim_restore_failed(outcome_claim_id == claim)")
def _():
    t = full(); t.ev[find(t, "claim_restore_failed")]["outcome_claim_id"] = "c9"; return t

@case("f48_not_injected", dict(failure_outcome="fail"), "§4 failure_outcome: the load of this claim failed (injected)")
def _():
    t = full()
    for ev in ("kv_load_finished", "kv_load_failed"):
        t.ev[find(t, ev, req="r2")]["injected"] = False
    t.ev[find(t, "claim_restore_failed")]["injected"] = False; return t

@case("f49_policy_recompute", dict(failure_outcome="fail", lifecycle="fail"), "§4 failure_outcome: the runtime's failure branch fired (scheduler_load_failure, policy fail)")
def _():
    t = full(); i = find(t, "scheduler_load_failure"); t.ev[i]["policy"] = "recompute"; t.ev[i]["finish_status"] = None; return t

@case("f50_sched_fail_before_load_fail", dict(failure_outcome="fail"), "§4 failure_outcome: the load of this claim failed; the runtime's failure branch fired (order: failure branch after the failed load)", amb=True,
      note="SPEC lists the chain in order but does not state explicitly that scheduler_load_failure must follow the failed load")
def _():
    t = full(); i = find(t, "scheduler_load_failure"); j = find(t, "kv_load_started", req="r2"); return move(t, i, j)

@case("f51_restore_failed_wrong_generation", ALLF, "§4.2 Generations: every event of a cycle names the same label")
def _():
    t = full(); t.ev[find(t, "claim_restore_failed")]["generation"] = 1; return t

@case("f52_failure_without_store", dict(failure_outcome="fail", lifecycle="fail", observation="fail"), "§4 failure_outcome: store succeeded; observation: store to the host tier succeeded")
def _():
    t = full(); i = find(t, "kv_store_started"); t.ev.pop(i); t.ev.pop(i); t.renumber(); return t

@case("f53_store_failed_only", dict(failure_outcome="fail", observation="fail", lifecycle="fail"), "§4 observation/failure_outcome: store succeeded (a success=false store is not a successful store)")
def _():
    t = full(); t.ev[find(t, "kv_store_finished")]["success"] = False; return t

# ---------------------------------------------------------------- OWNER SCOPE / REQUESTS
@case("f54_restore_other_tenant", ALLF, "§4.2 Requests: Every restore ... and every reuse is by a request whose owner scope equals the claim's")
def _():
    t = full(); t.ev[find(t, "request_started", req="r1")]["owner_scope"] = "tenant:b/session:1"; t.ev[find(t, "request_started", req="r2")]["owner_scope"] = "tenant:b/session:1"; return t

@case("f55_restore_request_no_owner", ALLF, "§4.2 Requests: a request without one never restores or reuses a claim that has one.")
def _():
    t = full(); t.ev[find(t, "request_started", req="r1")]["owner_scope"] = None; return t

@case("f56_restore_request_never_started", ALLF, "§4.2 Requests: a request without one [owner scope] never restores or reuses a claim that has one.")
def _():
    t = full(); t.ev.pop(find(t, "request_started", req="r1")); t.renumber(); return t

@case("f57_submitted_accepted_owner_differ", ALLF, "§4.2 Requests: A claim's owner scope is the one on its claim_accepted (else on its claim_submitted; the two differing is ambiguous_identity).")
def _():
    t = full(); t.ev[find(t, "claim_submitted")]["owner_scope"] = "tenant:a/session:2"; return t

@case("f58_request_started_twice", ALLF, "§4.2 Requests: a request_id starts at most once per stream.")
def _():
    t = full(); i = find(t, "request_started", req="r1"); e = copy.deepcopy(t.ev[i]); return insert_at(t, i + 1, e)

@case("f59_request_id_reused_across_tenants", ALLF, "§4.2 Requests: a request_id starts at most once per stream.")
def _():
    t = full(); i = find(t, "request_started", req="r2")
    insert_at(t, i, mk(None, "r0", "request_started", owner_scope="tenant:b/session:9", prompt_tokens=5, claim_ref=None))
    return insert_at(t, i + 1, mk(None, "r0", "request_finished", status="served", finish_reason="stop"))

@case("f60_owner_fixed_at_first_declaration", ALLF, "§4.2 Requests: A request's owner_scope is fixed at its first declaration. ... Every restore ... is by a request whose owner scope equals the claim's")
def _():
    t = full(); i = find(t, "request_started", req="r1"); t.ev[i]["owner_scope"] = "tenant:b/session:1"
    # a later declaration on r1 (claim_submitted of another claim c7 naming tenant a) must not re-scope r1
    return insert_at(t, i + 1, mk("c7", "r1", "claim_submitted", owner_scope=OWNER, object_id="obj:z", cache_identity="cache:tiny-llama:v1", request_token_map_id="tokmap:z", predicate_id="pred:z"))

@case("f61_request_id_reused_no_owner_second", ALLF, "§4.2 Requests: a request_id starts at most once per stream (a restart of the restoring request id)")
def _():
    t = full(); i = find(t, "request_finished", req="r1")
    return insert_at(t, i + 1, mk(None, "r1", "request_started", owner_scope=None, prompt_tokens=5, claim_ref=None))

# ---------------------------------------------------------------- MODES
@case("f62_best_effort", ALLF, "§4.2 Modes: best_effort (not a claim) on claim_accepted is a problem of that line, and the claim fails every gate.")
def _():
    t = full(); t.ev[find(t, "claim_accepted")]["protection_mode"] = "best_effort"; return t

@case("f63_expiring_loss_before_expiry", dict(lifecycle="fail"), "§4.1 Loss ... must be preceded by the outcome the mode promises (expiry for expiring)")
def _():
    t = T(); c, r = "c1", "r0"
    t.req_start(c, r); t.submitted(c, r); t.accepted(c, r, mode="expiring", exp=30.0); t.materialized(c, r); t.finish(c, r)
    t.evicted(c, None, 3, 0); t.expired(c, None); return t

@case("f64_expiring_vacuous", dict(lifecycle="fail"), "§4.2 No vacuous path: an expiring or demotable path starts with a materialization that holds.")
def _():
    t = T(); c, r = "c1", "r0"
    t.req_start(c, r); t.submitted(c, r); t.accepted(c, r, mode="expiring", exp=30.0); t.finish(c, r); t.expired(c, None); return t

@case("f65_demotable_loss_before_demotion", dict(lifecycle="fail"), "§4.1 Loss ... must be preceded by ... demotion for demotable")
def _():
    t = T(); c, r = "c1", "r0"
    t.req_start(c, r); t.submitted(c, r); t.accepted(c, r, mode="demotable"); t.materialized(c, r); t.finish(c, r)
    t.evicted(c, None, 3, 1); t.demoted(c, None); return t

@case("f66_demotable_loss_by_evaluation", dict(lifecycle="fail"), "§4.1 Loss is observable: ... an evaluation that no longer holds, is loss; it must be preceded by ... demotion for demotable")
def _():
    t = T(); c, r = "c1", "r0"
    t.req_start(c, r); t.submitted(c, r); t.accepted(c, r, mode="demotable"); t.materialized(c, r)
    t.materialized(c, r, surv=3, lead=1, holds=True); t.finish(c, r); t.demoted(c, None); return t

@case("f67_soft_priority_silent_loss", dict(lifecycle="fail"), "§4.1 Loss ... must be preceded by the outcome the mode promises (harm reported for soft_priority)")
def _():
    t = T(); c, r = "c1", "r0"
    t.req_start(c, r); t.submitted(c, r); t.accepted(c, r, mode="soft_priority"); t.materialized(c, r); t.finish(c, r)
    t.evicted(c, None, 3, 0); return t

@case("f68_soft_priority_harm_after_loss", dict(lifecycle="fail"), "§4.1 Loss ... must be preceded by the outcome the mode promises (harm reported for soft_priority)")
def _():
    t = T(); c, r = "c1", "r0"
    t.req_start(c, r); t.submitted(c, r); t.accepted(c, r, mode="soft_priority"); t.materialized(c, r); t.finish(c, r)
    t.evicted(c, None, 3, 0); t.harmed(c, None); return t

@case("f69_hard_protected_harm", dict(lifecycle="fail"), "§4.1 Loss ... must be preceded by the outcome the mode promises (... never for hard_protected)")
def _():
    t = T(); c, r = "c1", "r0"
    t.req_start(c, r); t.submitted(c, r); t.accepted(c, r, mode="hard_protected"); t.materialized(c, r); t.finish(c, r)
    t.harmed(c, None); t.evicted(c, None, 3, 0); return t

@case("f70_offloadable_evict_before_offload", dict(lifecycle="fail"), "§4.2 Tiers: For offloadable, an eviction of a needed position is loss unless a stored, offloaded copy of the claim is held at that moment. §2: Loss of an accepted, materialized, unreleased claim is harm.")
def _():
    t = full(); i = find(t, "kv_store_started"); return insert_at(t, i, mk("c1", "r0", "block_evicted", block_id=3, position=0, protected=False, reason="capacity"))

@case("f71_expiring_restore_after_expiry", dict(lifecycle="fail", observation="fail"), "§4.2 Terminal states (expired) admit no ... restore or reuse afterwards")
def _():
    t = T(); c, r = "c1", "r0"
    t.req_start(c, r); t.submitted(c, r); t.accepted(c, r, mode="expiring", exp=30.0); t.materialized(c, r); t.store(c, r, "s0"); t.offloaded(c, r, 0); t.finish(c, r)
    t.expired(c, None); t.success_cycle(); return t

@case("f72_expiring_soft_demotion_instead", dict(lifecycle="fail"), "§4.1 Loss must be preceded by the outcome the mode promises (expiry for expiring) — a demotion is not an expiry", amb=True,
      note="a demotion event on an expiring claim: SPEC doesn't say whether demotion counts as release before loss for expiring")
def _():
    t = T(); c, r = "c1", "r0"
    t.req_start(c, r); t.submitted(c, r); t.accepted(c, r, mode="expiring", exp=30.0); t.materialized(c, r); t.finish(c, r)
    t.demoted(c, None); t.evicted(c, None, 3, 0); return t

# ---------------------------------------------------------------- TIERS
@case("f73_store_same_tier", ALLF, "§4.2 Tiers: a store's to_tier differs from its from_tier.")
def _():
    t = full(); i = find(t, "kv_store_started"); t.ev[i]["to_tier"] = "gpu"; t.ev[i + 1]["to_tier"] = "gpu"; return t

@case("f74_restore_from_wrong_tier", ALLF, "§4.2 Tiers: a restore's from_tier is the tier the claim's stored copy was written to.")
def _():
    t = full(); t.ev[find(t, "claim_restore_required")]["from_tier"] = "disk"; return t

# ---------------------------------------------------------------- IDENTITY
@case("f75_identity_change_on_restored", ALLF, "§4 stable_identity: each identity field takes exactly one value across the claim's events; two values ⇒ ambiguous_identity, fails every gate")
def _():
    t = full(); t.ev[find(t, "claim_restored")]["object_id"] = "obj:prefix-Z"; return t

@case("f76_second_accept_changes_footprint", ALLF, "§4.1: A second claim_accepted of a claim that changes any identity or predicate field is ambiguous_identity.", amb=True,
      note="footprint_blocks is not listed as an identity or predicate field; §4.2 says 'identical in every defining field' — whether footprint is defining is unclear")
def _():
    t = full(); i = find(t, "claim_accepted"); e = copy.deepcopy(t.ev[i]); e["footprint_blocks"] = 5; return insert_at(t, i + 1, e)

@case("f77_second_accept_changes_predicate", ALLF, "§4.1: A second claim_accepted of a claim that changes any identity or predicate field is ambiguous_identity.")
def _():
    t = full(); i = find(t, "claim_accepted"); e = copy.deepcopy(t.ev[i]); e["predicate"] = dict(e["predicate"], blocks=3); return insert_at(t, i + 1, e)

@case("f78_second_accept_changes_mode", ALLF, "§4.2: A second claim_accepted identical in every defining field is legal (one that differs is not)", amb=True,
      note="protection_mode is not an identity/predicate field by §4.1; §4.2 'defining field' undefined")
def _():
    t = full(); i = find(t, "claim_accepted"); e = copy.deepcopy(t.ev[i]); e["protection_mode"] = "soft_priority"; return insert_at(t, i + 1, e)

@case("f79_second_accept_changes_owner", ALLF, "§4.2 Requests: A claim's owner scope is the one on its claim_accepted; §4.2 second claim_accepted identical in every defining field is legal", amb=True,
      note="owner_scope as a 'defining field' of the claim is implied by §2 but not stated")
def _():
    t = full(); i = find(t, "claim_accepted"); e = copy.deepcopy(t.ev[i]); e["owner_scope"] = "tenant:b/session:1"; return insert_at(t, i + 1, e)

@case("f80_missing_token_map", ALLF, "§1 B1: bound to ... one deterministic request-token map; §8 suite: missing token map", amb=True,
      note="SPEC lists 'missing token map' as a bad lowering but never says which gate requirement a null request_token_map_id breaks")
def _():
    t = full()
    for e in t.ev:
        if "request_token_map_id" in e: e["request_token_map_id"] = None
    return t

@case("f81_predicate_id_mismatch_accept", ALLF, "§4 stable_identity / predicate_fixed: predicate_id on events must equal the accepted predicate's id", amb=True,
      note="predicate_id on the envelope vs predicate.id inside claim_accepted differing is not literally 'two values across events'")
def _():
    t = full(); t.ev[find(t, "claim_accepted")]["predicate"]["id"] = "pred:other"; return t

# ---------------------------------------------------------------- NUMBERS & ENCODING
def raw_mut(fn):
    def w():
        t = full(); L = t.lines(); return fn(t, L)
    return w

def reg(name, gates, rule, f, amb=False, note=""):
    CASES.append(dict(name=name, fn=raw_mut(f), gates=gates, rule=rule, claim="c1", amb=amb, note=note))

R_TYPE = "§4.1: v1 lines are strictly typed JSON (no coercion: a string is never a bool, a float or bool never an int) with no duplicate keys."
def sub(L, idx, old, new):
    assert old in L[idx], (old, L[idx]); L[idx] = L[idx].replace(old, new, 1); return L
def J(L): return "\n".join(L) + "\n"
def idx_of(t, ev, **kw): return find(t, ev, **kw)

reg("n01_seq_duplicate", ALLF, "§3 seq strictly increasing within one stream", lambda t, L: J(sub(L, 5, '"seq":5', '"seq":4')))
reg("n02_seq_decreasing_at_end", ALLF, "§3 seq strictly increasing within one stream", lambda t, L: J(sub(L, len(L) - 1, f'"seq":{len(L)-1}', '"seq":3')))
reg("n03_seq_negative_first", ALLF, "§3 seq int ≥ 0", lambda t, L: J(sub(L, 0, '"seq":0', '"seq":-1')))
reg("n04_seq_2pow63", ALLF, "§4.2 Numbers: seq in 0 .. 2^63−1; out of range is a typing problem.", lambda t, L: J(sub(L, len(L) - 1, f'"seq":{len(L)-1}', f'"seq":{2**63}')))
reg("n05_seq_float", ALLF, R_TYPE, lambda t, L: J(sub(L, 5, '"seq":5', '"seq":5.0')))
reg("n06_seq_string", ALLF, R_TYPE, lambda t, L: J(sub(L, 5, '"seq":5', '"seq":"5"')))
reg("n07_footprint_bool", ALLF, R_TYPE, lambda t, L: J(sub(L, idx_of(t, "claim_accepted"), '"footprint_blocks":4', '"footprint_blocks":true')))
reg("n08_injected_string", ALLF, R_TYPE, lambda t, L: J(sub(L, idx_of(t, "kv_load_failed"), '"injected":true', '"injected":"true"')))
reg("n09_generation_float", ALLF, R_TYPE, lambda t, L: J(sub(L, idx_of(t, "claim_restored"), '"generation":1', '"generation":1.0')))
reg("n10_ts_float", ALLF, R_TYPE, lambda t, L: J(sub(L, 3, '"ts_ns":1003', '"ts_ns":1003.5')))
reg("n11_hit_tokens_2pow64", ALLF, "§4.2 Numbers: every integer is signed 64-bit; out of range is a typing problem.", lambda t, L: J(sub(L, idx_of(t, "kv_lookup", req="r1"), '"hit_tokens":256', f'"hit_tokens":{2**64}')))
reg("n12_footprint_zero", ALLF, "§2 footprint_blocks (> 0)", lambda t, L: J(sub(L, idx_of(t, "claim_accepted"), '"footprint_blocks":4', '"footprint_blocks":0')))
reg("n13_duplicate_key_diff", ALLF, R_TYPE, lambda t, L: J(sub(L, idx_of(t, "active_request_refused"), '"claim_id":"c1"', '"claim_id":"c9","claim_id":"c1"')))
reg("n14_duplicate_key_same", ALLF, R_TYPE, lambda t, L: J(sub(L, idx_of(t, "claim_reused"), '"holds":true', '"holds":true,"holds":true')))
reg("n15_trailing_junk", ALLF, "§3 One JSON object per line", lambda t, L: J(sub(L, idx_of(t, "claim_restored"), '"pred:lead2"}', '"pred:lead2"} x')))
reg("n16_two_objects_one_line", ALLF, "§3 One JSON object per line", lambda t, L: J(L[:-2] + [L[-2] + L[-1]]))
reg("n17_bom_mid_stream", ALLF, "§4.2: A UTF-8 byte-order mark before the first line is ignored (only there)", lambda t, L: J(L[:5] + ["\ufeff" + L[5]] + L[6:]))
reg("n18_line_over_1MiB", ALLF, "README/--help: Longest accepted trace line default 1048576; §3 unknown/invalid lines are reported, never accepted as evidence", lambda t, L: J(L[:1] + [json.dumps(mk(None, None, "generic_counter", name="y" * 1100000, value=1) | {"seq": 0})] + L[1:]), amb=True, note="line limit is a CLI/README rule; SPEC §4 only says streaming, bounded memory")
reg("n19_nul_byte", ALLF, "README: stops at the first NUL byte (T008); §3 strictly typed JSON", lambda t, L: J(L[:-3]) + "\x00" + J(L[-3:]))
reg("n20_unknown_field", ALLF, "§3: Unknown event types and unknown fields are reported, never silently accepted as evidence.", lambda t, L: J(sub(L, idx_of(t, "claim_restored"), '"generation":1', '"generation":1,"verified_by":"me"')))
reg("n21_unknown_event_type", ALLF, "§3: Unknown event types ... are reported, never silently accepted as evidence.", lambda t, L: J(L[:3] + [json.dumps(mk("c1", "r0", "claim_pinned") | {"seq": 2, "note": 1})] + [l for l in L[3:]]) )
reg("n22_stream_started_not_first", ALLF, "§4.1: A trace's provenance is its first event, stream_started", lambda t, L: J([L[1].replace('"seq":1', '"seq":0'), L[0].replace('"seq":0', '"seq":1')] + L[2:]))
reg("n23_truncated_last_line", ALLF, "§3 One JSON object per line (a truncated line is invalid JSON)", lambda t, L: J(L[:-1]) + L[-1][:40])
reg("n24_nested_huge_int_in_predicate", ALLF, "§4.2 Numbers: every integer is signed 64-bit", lambda t, L: J(sub(L, idx_of(t, "claim_accepted"), '"blocks":2', f'"blocks":{2**70}')))
reg("n25_nan_value", ALLF, "§4.1 strictly typed JSON (NaN is not JSON)", lambda t, L: J(L[:1] + [json.dumps(mk(None, None, "generic_counter", name="n", value=1) | {"seq": 0}).replace('"value": 1', '"value": NaN')] + L[1:]))
reg("n26_invalid_utf8", ALLF, "README T008: bytes that are not UTF-8", lambda t, L: J(L[:4]) + "\udcff" + J(L[4:]))

# ---------------------------------------------------------------- ATTRIBUTION (multi-claim)
ATT_OK = dict(attribution="pass", failure_outcome="pass")
def multi(t=None, c2_success=True):
    t = t or T(); t.resident(); 
    t2 = T(provenance=False); t2.resident(c="c2", r="q0")
    if c2_success: t2.success_cycle(c="c2", r="q1")
    for e in t2.ev:
        if "object_id" in e: e["object_id"] = "obj:prefix-B"
    t.ev += t2.ev; t.renumber(); t.seq = len(t.ev)
    t.failure_cycle(r="r1", gen=1); return t

@case("a01_multi_baseline", ATT_OK, "§4 attribution: several claims in one stream: the target passes failure_outcome; every failure/refusal event names only the target; non-targets are restored/served or untouched.")
def _(): return multi()

@case("a02_nontarget_untouched", ATT_OK, "§4 attribution: non-targets are restored/served or untouched.")
def _(): return multi(c2_success=False)

@case("a03_nontarget_observation", dict(observation="pass"), "§4 observation for the non-target in the multi-claim stream", claim="c2")
def _(): return multi()

@case("a04_nontarget_silent_failure", dict(attribution="fail", failure_outcome="pass"), "§4.1 Attribution: any failure or outcome event (store/load failure, ...) that names a non-target ... fails failures_name_only_target")
def _():
    t = multi(); i = find(t, "kv_load_finished", claim="c2")
    return insert_at(t, i + 1, mk("c2", "q1", "kv_load_failed", invalid_block_ids=[1], job_id=None, injected=False, generation=None, reason="io"))

@case("a05_unclaimed_failure_in_stream", dict(attribution="fail"), "§4.1 Attribution: any failure ... that names a non-target, or names no claim, fails failures_name_only_target")
def _():
    t = multi(); i = find(t, "request_started", req="r1")
    return insert_at(t, i, mk(None, "q9", "kv_load_failed", invalid_block_ids=[1], job_id=None, injected=False, generation=None, reason="io"))

@case("a06_smear_refusal", dict(attribution="fail", failure_outcome="fail"), "§4 failure_outcome blocking_claim_ids == [claim]; attribution: every failure/refusal event names only the target")
def _():
    t = multi(); t.ev[find(t, "active_request_refused")]["blocking_claim_ids"] = ["c1", "c2"]; return t

@case("a07_nontarget_error_unexplained", dict(attribution="fail"), "§4.2 Attribution: a request that carries a non-target and finishes other than served without an outcome that names that claim fails non_targets_served")
def _():
    t = multi(); t.ev[find(t, "request_finished", req="q1")].update(status="error", finish_reason="error"); return t

@case("a08_nontarget_illegal_history", dict(attribution="fail"), "§4.2 Attribution: a non-target passes only if its own history is legal by every rule above")
def _():
    t = multi(); i = find(t, "claim_materialized", claim="c2"); return move(t, i, find(t, "claim_offloaded", claim="c2") + 1)

@case("a09_nontarget_fallback_recompute", dict(attribution="fail"), "§4 attribution: non-targets are restored/served or untouched (fallback_recompute is never satisfaction)")
def _():
    t = multi(); t.ev[find(t, "claim_restored", claim="c2")]["source"] = "fallback_recompute"; return t

@case("a10_nontarget_expiry_outcome", dict(attribution="fail"), "§4.1 Attribution: any failure or outcome event (..., demotion, expiry, harm) that names a non-target ... fails failures_name_only_target", amb=True,
      note="literal reading fails a legal expiry of an unrelated claim; intent may be only failure-caused outcomes")
def _():
    t = multi(); i = find(t, "request_started", req="r1"); return insert_at(t, i, mk("c2", None, "claim_released", reason="done", **dict(IDN, object_id="obj:prefix-B"))) if False else insert_at(t, i, mk("c2", None, "claim_expired", reason="ttl", **dict(IDN, object_id="obj:prefix-B")))

@case("a11_nontarget_admission_refusal", dict(attribution="fail"), "§4.1 Attribution: any ... refusal ... that names a non-target ... fails failures_name_only_target")
def _():
    t = multi(); i = find(t, "request_finished", req="q1")
    insert_at(t, i + 1, mk("c2", "q5", "request_started", owner_scope=OWNER, prompt_tokens=5, claim_ref=None))
    insert_at(t, i + 2, mk("c2", "q5", "active_request_refused", outcome_claim_id="c2", blocking_claim_ids=["c2"], feasibility="infeasible", arbiter="admission", shortfall=3))
    return insert_at(t, i + 3, mk("c2", "q5", "request_finished", status="refused", finish_reason="refused"))

@case("a12_single_claim", dict(attribution="fail"), "§4 attribution: several claims in one stream")
def _(): return full()

@case("a13_target_restore_failed_names_other", dict(attribution="fail", failure_outcome="fail"), "§4.1: an outcome event's envelope claim_id equals its outcome_claim_id")
def _():
    t = multi(); t.ev[find(t, "claim_restore_failed")]["outcome_claim_id"] = "c2"; return t

@case("a14_nontarget_request_never_finishes", dict(attribution="fail"), "§4.2 Attribution: non-target passes only if its own history is legal ... unexplained spill-over is not untouched", amb=True,
      note="a non-target's restoring request that never finishes: not 'served'; SPEC requires request_finished only for the affected failure request")
def _():
    t = multi(); t.ev.pop(find(t, "request_finished", req="q1")); t.renumber(); return t

@case("a15_nontarget_other_tenant_restore", dict(attribution="fail"), "§4.2 Attribution: a non-target passes only if its own history is legal by every rule above (owner scope rule)")
def _():
    t = multi(); t.ev[find(t, "request_started", req="q1")]["owner_scope"] = "tenant:z/session:0"; return t

@case("a16_target_open_failure_earlier", dict(attribution="fail", failure_outcome="fail"), "§4.2 Failures: open failure: failure_outcome, lifecycle and attribution fail, and a later proper failure never makes up for it.")
def _():
    t = multi(); i = find(t, "request_started", req="r1")
    for k, e in enumerate([mk("c1", "rq", "request_started", owner_scope=OWNER, prompt_tokens=5, claim_ref=None),
                           mk("c1", "rq", "kv_lookup", hit_tokens=256, async_load=True, generation=None),
                           mk("c1", "rq", "claim_restore_required", generation=0, from_tier="cpu", to_tier="gpu", tokens=256, **IDN),
                           mk("c1", "rq", "kv_load_failed", invalid_block_ids=[1], job_id=None, injected=True, generation=0, reason="x"),
                           mk("c1", "rq", "request_finished", status="error", finish_reason="error")]):
        insert_at(t, i + k, e)
    return t

# ---------------------------------------------------------------- second batch
reg("n25b_nan_value", ALLF, "§4.1 strictly typed JSON (NaN is not JSON)",
    lambda t, L: J([l.replace('"value":1}', '"value":NaN}') for l in insert_at(full(), 1, mk(None, None, "generic_counter", name="n", value=1)).lines()]))

@case("a17_nontarget_refused_status_no_outcome", dict(attribution="fail"), "§4.2 Attribution: a request that carries a non-target and finishes other than served without an outcome that names that claim fails non_targets_served")
def _():
    t = multi(); t.ev[find(t, "request_finished", req="q1")].update(status="refused", finish_reason="abort"); return t

@case("a18_nontarget_resident_req_error", dict(attribution="fail"), "§4.2 Attribution: a request that carries a non-target and finishes other than served without an outcome that names that claim fails non_targets_served")
def _():
    t = multi(); t.ev[find(t, "request_finished", req="q0")].update(status="error", finish_reason="error"); return t

@case("a19_nontarget_ambiguous_identity", dict(attribution="fail"), "§4.2 Attribution: a non-target passes only if its own history is legal by every rule above (stable_identity)")
def _():
    t = multi(); t.ev[find(t, "claim_restored", claim="c2")]["object_id"] = "obj:prefix-ZZ"; return t

@case("a20_nontarget_harness_refusal", dict(attribution="fail"), "§4.1 Attribution: any ... refusal ... that names a non-target fails failures_name_only_target")
def _():
    t = multi(); i = find(t, "request_finished", req="q1")
    return insert_at(t, i, mk("c2", "q1", "active_request_refused", outcome_claim_id="c2", blocking_claim_ids=["c2"], feasibility="x", arbiter="harness", shortfall=None))

@case("a21_nontarget_served_after_error_deferral", dict(attribution="pass"), "§4 attribution: non-targets are restored/served; a deferral is not a failure/outcome event", amb=True,
      note="active_request_deferred naming the non-target: SPEC's outcome list (refusal/demotion/expiry/harm) does not include deferral")
def _():
    t = multi(); i = find(t, "request_finished", req="q1")
    return insert_at(t, i, mk("c2", "q1", "active_request_deferred", blocking_claim_ids=[], reason="busy"))

@case("d02_digest_unverified", dict(observation="fail"), "§9 Content: when the store recorded a digest, observation requires the verification.")
def _():
    t = full(); t.ev[find(t, "kv_store_finished")]["content_digest"] = "xxh3:00"; return t

@case("d03_digest_verify_false", dict(observation="fail"), "§9 Content: a mismatch is a failed load of those blocks; observation requires the verification.")
def _():
    t = full(); t.ev[find(t, "kv_store_finished")]["content_digest"] = "xxh3:00"; t.ev[find(t, "claim_restored")]["content_verified"] = False; return t

@case("d04_no_digest_verified_false", dict(observation="fail"), "§9 Content: claim_restored says whether its content was verified ... a mismatch is a failed load of those blocks", amb=True,
      note="content_verified=false without a digest on the store: SPEC only says verification is required when a digest was recorded")
def _():
    t = full(); t.ev[find(t, "claim_restored")]["content_verified"] = False; return t

@case("p26_reuse_while_resident", OFL, "§4.2 Order: claim_reused ... or while the claim is resident since a materialization with no offload since.", amb=True,
      note="a resident reuse has no restore cycle; which generation label it must carry is not said (0 used)")
def _():
    t = full(); i = find(t, "kv_store_started"); return insert_at(t, i, mk("c1", "r0", "claim_reused", generation=0, holds=True, **IDN))

@case("p27_rematerialize_then_resident_reuse", dict(failure_outcome="pass"), "§2 Lifecycle materialized ⇄ offloaded; §4.2 Order: claim_reused ... while the claim is resident since a materialization with no offload since.", amb=True,
      note="offloaded → materialized again → reuse without restore; SPEC's ⇄ suggests legal")
def _():
    t = T(); t.resident(); t.req_start("c1", "rm"); t.materialized("c1", "rm"); t.reused("c1", "rm", 0); t.finish("c1", "rm"); t.failure_cycle(r="r2", gen=1); return t

@case("p28_failure_by_void_of_successful_load", dict(failure_outcome="pass"), "§4.2 Failures: kv_load_failed voids the load job its job_id names (vLLM reports invalid blocks after a load, §9)")
def _():
    t = full(); i = find(t, "kv_load_finished", req="r2"); t.ev[i]["success"] = True; return t

@case("p29_refusal_before_restore_failed", dict(failure_outcome="pass", lifecycle="pass"), "§4.2: The whole failure chain (failed load, scheduler_load_failure, claim_restore_failed, refusal) precedes the affected request's first request_finished", amb=True,
      note="SPEC lists the chain but does not say refusal must follow claim_restore_failed")
def _():
    t = full(); i = find(t, "active_request_refused"); return move(t, i, find(t, "claim_restore_failed"))

@case("p30_evict_unneeded_position_before_offload", OFL, "§4.1 Loss is observable: an eviction of a position the predicate needs ... is loss (position 3 is not needed by leading_prefix_at_least(2))")
def _():
    t = full(); i = find(t, "kv_store_started"); return insert_at(t, i, mk("c1", "r0", "block_evicted", block_id=9, position=3, protected=False, reason="capacity"))

@case("p31_observation_request_unfinished", dict(observation="pass"), "§4 observation lists no request_finished requirement", amb=True,
      note="SPEC requires request_finished only for the failure chain")
def _():
    t = T(); t.resident(); t.success_cycle(finish=False); return t

@case("p32_hard_protected_conflict_refused", dict(lifecycle="pass"), "README lifecycle hard_protected: resident, unharmed, conflicting request refused naming exactly this claim; §2 hard_protected: active work that does not fit is refused/deferred with attribution", amb=True,
      note="SPEC §4 defines lifecycle only for offloadable/expiring/demotable; hard_protected lifecycle is from README/L3")
def _():
    t = T(); c, r = "c1", "r0"
    t.req_start(c, r); t.submitted(c, r); t.accepted(c, r, mode="hard_protected"); t.materialized(c, r); t.finish(c, r)
    t.add(None, "rA", "request_started", owner_scope="tenant:b/session:2", prompt_tokens=9000, claim_ref=None)
    t.add("c1", "rA", "active_request_refused", outcome_claim_id="c1", blocking_claim_ids=["c1"], feasibility="infeasible_preserve_resident_and_active", arbiter="scheduler_boundary", shortfall=50)
    t.add(None, "rA", "request_finished", status="refused", finish_reason="refused"); return t

@case("f69b_hard_protected_conflict_but_harm", dict(lifecycle="fail"), "§4.1 Loss must be preceded by the outcome the mode promises (... never for hard_protected)")
def _():
    t = T(); c, r = "c1", "r0"
    t.req_start(c, r); t.submitted(c, r); t.accepted(c, r, mode="hard_protected"); t.materialized(c, r); t.finish(c, r)
    t.add(None, "rA", "request_started", owner_scope="tenant:b/session:2", prompt_tokens=9000, claim_ref=None)
    t.add("c1", "rA", "active_request_refused", outcome_claim_id="c1", blocking_claim_ids=["c1"], feasibility="infeasible_preserve_resident_and_active", arbiter="scheduler_boundary", shortfall=50)
    t.add(None, "rA", "request_finished", status="refused", finish_reason="refused")
    t.harmed(c, None); t.evicted(c, None, 3, 0); return t

@case("f69c_hard_protected_conflict_harness", dict(lifecycle="fail"), "§4.2 Arbiters: arbiter=harness never satisfies a requirement of any gate.")
def _():
    t = T(); c, r = "c1", "r0"
    t.req_start(c, r); t.submitted(c, r); t.accepted(c, r, mode="hard_protected"); t.materialized(c, r); t.finish(c, r)
    t.add(None, "rA", "request_started", owner_scope="tenant:b/session:2", prompt_tokens=9000, claim_ref=None)
    t.add("c1", "rA", "active_request_refused", outcome_claim_id="c1", blocking_claim_ids=["c1"], feasibility="infeasible_preserve_resident_and_active", arbiter="harness", shortfall=50)
    t.add(None, "rA", "request_finished", status="refused", finish_reason="refused"); return t

@case("f69d_hard_protected_conflict_after_finish", dict(lifecycle="fail"), "README/§1 B4: an outcome ... is ordered at or before the affected request terminates")
def _():
    t = T(); c, r = "c1", "r0"
    t.req_start(c, r); t.submitted(c, r); t.accepted(c, r, mode="hard_protected"); t.materialized(c, r); t.finish(c, r)
    t.add(None, "rA", "request_started", owner_scope="tenant:b/session:2", prompt_tokens=9000, claim_ref=None)
    t.add(None, "rA", "request_finished", status="refused", finish_reason="refused")
    t.add("c1", "rA", "active_request_refused", outcome_claim_id="c1", blocking_claim_ids=["c1"], feasibility="infeasible_preserve_resident_and_active", arbiter="scheduler_boundary", shortfall=50); return t

@case("f69e_hard_protected_evicted_protected_block", dict(lifecycle="fail"), "§4.1 Loss is observable: an eviction of a position the predicate needs ... is loss; ... never for hard_protected")
def _():
    t = T(); c, r = "c1", "r0"
    t.req_start(c, r); t.submitted(c, r); t.accepted(c, r, mode="hard_protected"); t.materialized(c, r); t.finish(c, r)
    t.add(None, "rA", "request_started", owner_scope="tenant:b/session:2", prompt_tokens=9000, claim_ref=None)
    t.add("c1", "rA", "active_request_refused", outcome_claim_id="c1", blocking_claim_ids=["c1"], feasibility="infeasible_preserve_resident_and_active", arbiter="scheduler_boundary", shortfall=50)
    t.add(None, "rA", "request_finished", status="refused", finish_reason="refused")
    t.evicted(c, None, 5, 1, protected=True); return t

@case("p33_soft_priority_harm_then_loss", dict(lifecycle="pass"), "§4.1 Loss ... must be preceded by the outcome the mode promises (harm reported for soft_priority)", amb=True,
      note="SPEC §4 defines no lifecycle path for soft_priority; README says 'soft_priority — resident' and lists no_harm")
def _():
    t = T(); c, r = "c1", "r0"
    t.req_start(c, r); t.submitted(c, r); t.accepted(c, r, mode="soft_priority"); t.materialized(c, r); t.finish(c, r)
    t.harmed(c, None); t.evicted(c, None, 3, 0); return t

@case("f82_rejected_then_accepted", ALLF, "§2 Lifecycle: submitted → accepted | rejected; §9: an invalid claim is rejected with claim_rejected, never half-accepted", amb=True,
      note="claim_rejected is not in §4.2's terminal list, but §2 makes accepted/rejected exclusive")
def _():
    t = full(); i = find(t, "claim_accepted"); return insert_at(t, i, mk("c1", "r0", "claim_rejected", reason="invalid", **IDN))

@case("f83_restored_on_other_request", dict(observation="fail"), "§4.1: Each requirement is met by one and the same event chain of the affected request; §4.2 load/restore events belong to the requesting request's open cycle")
def _():
    t = T(); t.resident(); t.success_cycle(finish=False)
    t.ev[find(t, "claim_restored")]["request_id"] = "r9"; t.ev[find(t, "claim_reused")]["request_id"] = "r9"
    t.req_start(None, "r9"); t.finish("c1", "r1"); t.renumber()
    i = find(t, "request_started", req="r9"); return move(t, i, find(t, "claim_restored"))

@case("f84_deferred_instead_of_refused", dict(failure_outcome="fail"), "§4 failure_outcome: active_request_refused(outcome_claim_id == claim, blocking_claim_ids == [claim], arbiter == scheduler_boundary)")
def _():
    t = full(); i = find(t, "active_request_refused"); t.ev[i] = mk("c1", "r2", "active_request_deferred", blocking_claim_ids=["c1"], reason="restore failed"); t.renumber(); return t

@case("f85_failure_chain_in_success_gen_request_reused", ALLF, "§4.2 Terminal states (failed_closed) admit no ... reuse afterwards, on any request.")
def _():
    t = full(); i = find(t, "request_finished", req="r2"); return insert_at(t, i, mk("c1", "r2", "claim_reused", generation=2, holds=True, **IDN))

@case("f86_restore_required_after_failed_closed_no_restore", ALLF, "§4.2 Terminal states admit no materialization, store, offload, restore or reuse afterwards (claim_restore_required begins a restore)", amb=True,
      note="whether claim_restore_required alone counts as a 'restore' is not spelled out")
def _():
    t = full(); t.req_start("c1", "r7"); t.restore_required("c1", "r7", 9); t.finish("c1", "r7"); return t

@case("f87_cycle_reuse_label_of_old_cycle", ALLF, "§4.2 Generations: every event of a cycle names the same label; claim_reused only after claim_restored of the same generation")
def _():
    t = T(); t.resident(); t.success_cycle(gen=1); t.success_cycle(r="r1b", gen=2, finish=False)
    t.ev[find(t, "claim_reused", req="r1b")]["generation"] = 1; t.finish("c1", "r1b"); t.failure_cycle(r="r2", gen=3); return t

@case("f88_claim_owner_none_request_owner", OFL, "§4.2 Requests: Every restore ... is by a request whose owner scope equals the claim's", amb=True,
      note="claim with no owner_scope restored by a request that has one: 'equals' says fail; the 'request without one' sentence only covers the converse. Expected PASS is a guess")
def _():
    t = full()
    for ev in ("claim_submitted", "claim_accepted"): t.ev[find(t, ev)]["owner_scope"] = None
    t.ev[find(t, "request_started", req="r0")]["owner_scope"] = None
    return t

# ---------------------------------------------------------------- third batch
def exp_variant(v):
    def f():
        t = T(); c, r = "c1", "r0"
        t.req_start(c, r); t.submitted(c, r); t.accepted(c, r, mode="expiring", exp=30.0); t.materialized(c, r); t.finish(c, r)
        t.expired(c, None); t.evicted(c, None, 3, 0)
        return J([l.replace('"expires_after_s":30.0', f'"expires_after_s":{v}') for l in t.lines()])
    return f
CASES.append(dict(name="n27_expires_nan", fn=exp_variant("NaN"), gates=dict(lifecycle="fail"), rule=R_TYPE + " (NaN is not JSON: RFC 8259)", claim="c1", amb=False, note=""))
CASES.append(dict(name="n28_expires_infinity_literal", fn=exp_variant("Infinity"), gates=dict(lifecycle="fail"), rule=R_TYPE + " (Infinity is not JSON)", claim="c1", amb=False, note=""))
CASES.append(dict(name="n29_expires_1e999", fn=exp_variant("1e999"), gates=dict(lifecycle="fail"), rule=R_TYPE, claim="c1", amb=True, note="1e999 is JSON-grammatical but not representable as a finite float; SPEC silent"))
CASES.append(dict(name="n30_expires_negative", fn=exp_variant("-5"), gates=dict(lifecycle="pass"), rule="§2 optional expires_after_s (no range given)", claim="c1", amb=True, note="negative TTL is nonsense but SPEC sets no range"))
reg("n31_seq_leading_zero", ALLF, "§3 One JSON object per line (05 is not a JSON number)", lambda t, L: J(sub(L, 5, '"seq":5', '"seq":05')))
reg("n32_dup_key_nested", ALLF, R_TYPE, lambda t, L: J(sub(L, idx_of(t, "claim_accepted"), '"blocks":2', '"blocks":2,"blocks":1')))
reg("n33_dup_key_via_escape", ALLF, R_TYPE + " (\"claim\\u005fid\" decodes to claim_id)", lambda t, L: J(sub(L, idx_of(t, "active_request_refused"), '"request_id":"r2"', '"request_id":"r2","claim\\u005fid":"c9"')))
reg("n34_nested_int_over_int64", ALLF, "§4.2 Numbers: every integer is signed 64-bit ... out of range is a typing problem.", lambda t, L: J(sub(L, idx_of(t, "claim_restore_failed"), '"generation":2', f'"generation":{2**64 + 2}')))
reg("n35_block_ids_over_int64", dict(failure_outcome="fail"), "§4.2 Numbers: every integer is signed 64-bit", lambda t, L: J(sub(L, idx_of(t, "kv_load_failed"), '[10,11]', f'[10,{2**64}]')))

@case("f89_restore_failed_after_finish", dict(failure_outcome="fail", lifecycle="fail"), "§4.2: The whole failure chain (failed load, scheduler_load_failure, claim_restore_failed, refusal) precedes the affected request's first request_finished")
def _():
    t = full(); i = find(t, "claim_restore_failed"); return move(t, i, len(t.ev))

@case("f90_sched_failure_after_finish", dict(failure_outcome="fail", lifecycle="fail"), "§4.2: The whole failure chain (..., scheduler_load_failure, ...) precedes the affected request's first request_finished")
def _():
    t = full(); i = find(t, "scheduler_load_failure"); return move(t, i, len(t.ev))

@case("f91_refusal_between_two_finishes", ALLF, "§4.1: at or before its first request_finished; a second request_finished is a well-formedness problem")
def _():
    t = full(); i = find(t, "active_request_refused"); move(t, i, len(t.ev)); e = copy.deepcopy(t.ev[-2]); t.ev.append(e); t.renumber(); return t

@case("f92_store_failure_open", dict(failure_outcome="fail", lifecycle="fail"), "§4.1 Attribution lists store/load failure as failure events; §4.2 Failures: a failure not followed by its claim-scoped outcome on that request is an open failure", amb=True,
      note="§4.2's open-failure rule speaks of 'a failure'; whether a failed store (kv_store_finished success=false) is one is not explicit")
def _():
    t = full(); i = find(t, "kv_store_started")
    insert_at(t, i, mk("c1", "r0", "kv_store_started", job_id="sx", bytes=1, generation=None, from_tier="gpu", to_tier="cpu"))
    return insert_at(t, i + 1, mk("c1", "r0", "kv_store_finished", job_id="sx", bytes=1, generation=None, success=False, from_tier="gpu", to_tier="cpu", content_digest=None))

@case("f93_reuse_after_request_finished", dict(observation="fail"), "§4.2 default deny: every request's events must be a legal run of the automaton (no reuse by a finished request)", amb=True,
      note="SPEC does not list request-level states explicitly")
def _():
    t = T(); t.resident(); t.success_cycle(); i = find(t, "claim_reused"); return move(t, i, len(t.ev))

@case("p34_resident_request_never_started", OFL, "§4.2: Before acceptance only claim_submitted and the request_started ... may name the claim (request_started is not required)", amb=True,
      note="whether a request that finishes without request_started is legal in the request automaton is not said")
def _():
    t = full(); t.ev.pop(find(t, "request_started", req="r0")); t.renumber(); return t

@case("a22_both_claims_fail_properly", dict(attribution="fail", failure_outcome="pass"), "§4.1 Attribution: any failure or outcome event ... that names a non-target fails failures_name_only_target")
def _():
    t = multi(c2_success=False); t2 = T(provenance=False); t2.failure_cycle(c="c2", r="q2", gen=1)
    for e in t2.ev:
        if "object_id" in e: e["object_id"] = "obj:prefix-B"
    t.ev += t2.ev; t.renumber(); return t

@case("a23_claim_absent", dict(observation="fail", failure_outcome="fail", lifecycle="fail", attribution="fail"), "§4: A trace with zero events of the claim fails every gate (no vacuous pass).")
def _(): return full()
CASES[-1]["claim"] = "c-absent"

@case("a24_interleaved_two_targets_roundrobin", dict(attribution="fail"), "§4 attribution: every failure/refusal event names only the target (c2 fails too)", claim="c2")
def _():
    a = full(); b = T(provenance=False); b.resident(c="c2", r="q0"); b.success_cycle(c="c2", r="q1"); b.failure_cycle(c="c2", r="q2")
    for e in b.ev:
        if "object_id" in e: e["object_id"] = "obj:prefix-B"
    ev = [a.ev[0]]; A = a.ev[1:]; B = b.ev
    while A or B:
        if A: ev.append(A.pop(0))
        if B: ev.append(B.pop(0))
    a.ev = ev; a.renumber(); return a

@case("a25_nontarget_status_null", dict(attribution="fail"), "§4.2 Attribution: a request that carries a non-target and finishes other than served without an outcome that names that claim fails non_targets_served", amb=True,
      note="status null is reserved for imported traces (docs); 'other than served' literally includes null")
def _():
    t = multi(); t.ev[find(t, "request_finished", req="q1")].update(status=None, finish_reason=None); return t

@case("a26_nontarget_silent_loss", dict(attribution="fail"), "§4 attribution: non-targets are restored/served or untouched; §4.2 Tiers: for offloadable an eviction of a needed position is loss unless an offloaded copy is held; §2 loss of an accepted, materialized, unreleased claim is harm")
def _():
    t = multi(c2_success=False)
    i = find(t, "kv_store_started", claim="c2")
    return insert_at(t, i, mk("c2", "q0", "block_evicted", block_id=77, position=0, protected=False, reason="capacity"))

@case("a27_nontarget_q1_error_with_c2_outcome_event_free", dict(attribution="fail"), "§4.2 Attribution: ... finishes other than served without an outcome that names that claim fails non_targets_served (error after a reuse)")
def _():
    t = multi(); t.ev[find(t, "request_finished", req="q1")].update(status="error", finish_reason="abort"); 
    return t
