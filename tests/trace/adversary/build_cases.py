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
    crange,
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
    refused,
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
     note="the resident reuse carries label 0, which is ≤ every later cycle's label",
     ambiguous="SPEC does not say which label a reuse outside any restore cycle carries; 0 never "
               "decreases the history.",
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
