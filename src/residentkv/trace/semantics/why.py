"""One line per requirement id: why a gate reports it missing (printed by the CLI)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

_WHY: dict[str, str] = {
    "trace_well_formed": "the trace has a problem: an invalid line, or a request that finished "
                         "twice",
    "claim_events_present": "the trace has no claim event of this claim",
    "claim_accepted_before_lifecycle": "the claim was not accepted pre-registered before every "
                                       "other event of it (store and load events included)",
    "identity_complete": "a claim event lacks one of object_id, cache_identity, "
                         "request_token_map_id, predicate_id",
    "stable_identity": "an identity field takes two values, or a second claim_accepted "
                       "changes the claim",
    "predicate_fixed": "the claim's predicate_id is not the accepted predicate, or a "
                       "materialization is judged against another size",
    "materialized": "no claim_materialized whose leading/surviving numbers satisfy the "
                    "accepted predicate (before the restore)",
    "store_succeeded": "no successful kv_store_finished of the claim before its offload and "
                       "restore",
    "offloaded": "no claim_offloaded of the claim before its restore was required",
    "lookup_hit": "no kv_lookup hit of the claim between its offload (or previous restore) "
                  "and this restore",
    "restore_required": "no claim_restore_required of the live claim",
    "load_succeeded": "no successful load in the restore cycle that its job did not then "
                      "report invalid",
    "restored_from_offload": "no claim_restored(source=offload_tier) of this generation after "
                             "the load, while the claim was live",
    "reused_after_restore": "no holding claim_reused after the offload-tier restore (a reuse "
                            "came first, after the claim ended, or by another owner_scope)",
    "claim_load_failed": "the affected request's load of this claim did not fail injected",
    "scheduler_failure_branch": "no scheduler_load_failure with policy fail for the affected "
                                "request after the failed load",
    "restore_failed_scoped": "no claim_restore_failed of this generation and request naming "
                             "this claim as outcome_claim_id, ending the claim",
    "refusal_attributed": "no refusal of the affected request naming exactly this claim "
                          "(claim_id, outcome_claim_id, blocking_claim_ids) at the "
                          "scheduler boundary",
    "outcome_before_finish": "the attributed refusal did not precede the affected request's "
                             "first request_finished, or the request was then served",
    "no_restore_after_failure": "the claim was restored after its load failed (fallback "
                                "recompute is no satisfaction), or no load failed",
    "legal_transitions": "a claim event is an illegal lifecycle transition (e.g. reuse after "
                         "the claim ended, or a loss not reported as harm)",
    "success_generation": "no restore cycle meets the whole observation chain",
    "failure_generation": "the claim's failure cycle does not meet the whole failure chain",
    "generations_ordered": "no complete success cycle with its own generation label precedes "
                           "the failure cycle",
    "expiry_before_loss": "no claim_expired before the first loss of a needed block",
    "demotion_before_loss": "no claim_demoted before the first loss of a needed block",
    "no_harm": "the claim was harmed: reported, or a needed block lost before any release",
    "conflict_attributed": "no conflicting request refused or deferred naming exactly this "
                           "live, resident claim before that request's first finish",
    "multiple_claims": "fewer than two accepted claims in the stream",
    "target_failure_outcome": "the target does not pass failure_outcome",
    "failures_name_only_target": "a failure or outcome event names another claim or no claim "
                                 "(or its claim_id differs from its outcome_claim_id)",
    "non_targets_served": "a non-target was harmed, failed, silently lost, or restored other "
                          "than from the offload tier",
}

#: requirement id -> the one-line reason a gate reports it missing
WHY: Mapping[str, str] = MappingProxyType(_WHY)


def why_missing(requirement: str) -> str:
    """The one-line reason *requirement* is missing; raises KeyError for an unknown id."""
    return WHY[requirement]
