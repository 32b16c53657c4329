"""One line per requirement id: why a gate reports it missing (printed by the CLI)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from residentkv.model.vocabulary import Requirement as R

_WHY: dict[str, str] = {
    R.TRACE_WELL_FORMED: "the trace has a problem: an invalid line, or a request that finished "
                         "twice",
    R.CLAIM_EVENTS_PRESENT: "the trace has no claim event of this claim",
    R.CLAIM_ACCEPTED_BEFORE_LIFECYCLE: "the claim was not accepted pre-registered before every "
                                       "other event of it (store and load events included)",
    R.IDENTITY_COMPLETE: "a claim event lacks one of object_id, cache_identity, "
                         "request_token_map_id, predicate_id",
    R.STABLE_IDENTITY: "an identity field takes two values, or a second claim_accepted "
                       "changes the claim",
    R.PREDICATE_FIXED: "the claim's predicate_id is not the accepted predicate, or a "
                       "materialization is judged against another size",
    R.NO_OBSERVATION_GAP: "the stream has an observation_gap: what its emitter did not see "
                          "is unknown, so no obligation of any claim is shown",
    R.RESTORE_CONTENT_VERIFIED: "the store of the restored copy recorded a content_digest but "
                                "the restore does not carry content_verified: true",
    R.NO_OPEN_FAILURE: "a failed store or load of the claim, or a scheduler_load_failure "
                       "naming it, has no outcome answering it before its request's first "
                       "finish (a refusal of that request naming the claim, or the mode's "
                       "demotion, expiry or harm), or no record closing it after (a "
                       "claim_restore_failed of that request naming the claim, or that ending): "
                       "an open failure; a later proper one never makes up for it",
    R.NO_BLOCKING_SMEAR: "a refusal or deferral naming the claim blocks other claims too (or "
                         "not it): the control blocking_claim_smear fired",
    R.MATERIALIZED: "no claim_materialized whose leading/surviving numbers satisfy the "
                    "accepted predicate (before the restore)",
    R.STORE_SUCCEEDED: "no successful kv_store_finished of the claim before its offload and "
                       "restore",
    R.OFFLOADED: "no claim_offloaded of the claim before its restore was required",
    R.LOOKUP_HIT: "no kv_lookup hit of the claim between its offload (or previous restore) "
                  "and this restore",
    R.RESTORE_REQUIRED: "no claim_restore_required of the live claim",
    R.LOAD_SUCCEEDED: "no successful load in the restore cycle that its job did not then "
                      "report invalid",
    R.RESTORED_FROM_OFFLOAD: "no claim_restored(source=offload_tier) of this generation after "
                             "the load, while the claim was live",
    R.REUSED_AFTER_RESTORE: "no holding claim_reused after the offload-tier restore (a reuse "
                            "came first, after the claim ended, or by another owner_scope)",
    R.CLAIM_LOAD_FAILED: "the affected request's load of this claim did not fail injected",
    R.SCHEDULER_FAILURE_BRANCH: "no scheduler_load_failure with policy fail for the affected "
                                "request after the failed load",
    R.RESTORE_FAILED_SCOPED: "no claim_restore_failed of this generation and request naming "
                             "this claim as outcome_claim_id, ending the claim",
    R.REFUSAL_ATTRIBUTED: "no refusal of the affected request naming exactly this claim "
                          "(claim_id, outcome_claim_id, blocking_claim_ids) at the "
                          "scheduler boundary",
    R.OUTCOME_BEFORE_FINISH: "the attributed refusal did not precede the affected request's "
                             "first request_finished, or the request was then served",
    R.NO_RESTORE_AFTER_FAILURE: "the claim was restored after its load failed (fallback "
                                "recompute is no satisfaction), or no load failed",
    R.LEGAL_TRANSITIONS: "an event of the claim, or of a request naming it, is a step the "
                         "automaton does not allow (the result names the seq, the "
                         "state and the violation), or a loss was not preceded by the outcome "
                         "its mode promises",
    R.SUCCESS_GENERATION: "no restore cycle meets the whole observation chain",
    R.FAILURE_GENERATION: "the claim's failure cycle does not meet the whole failure chain",
    R.GENERATIONS_ORDERED: "no complete success cycle with its own generation label precedes "
                           "the failure cycle",
    R.EXPIRY_BEFORE_LOSS: "no claim_expired before the first loss of a needed block",
    R.DEMOTION_BEFORE_LOSS: "no claim_demoted before the first loss of a needed block",
    R.NO_HARM: "the claim was harmed: reported, or a needed block lost before any release",
    R.CONFLICT_ATTRIBUTED: "no conflicting request refused or deferred naming exactly this "
                           "live, resident claim before that request's first finish",
    R.MULTIPLE_CLAIMS: "fewer than two accepted claims in the stream",
    R.TARGET_FAILURE_OUTCOME: "the target does not pass failure_outcome",
    R.FAILURES_NAME_ONLY_TARGET: "a failure or outcome event names another claim or no claim "
                                 "(or its claim_id differs from its outcome_claim_id)",
    R.NON_TARGETS_SERVED: "a non-target was harmed, failed, silently lost, or restored other "
                          "than from the offload tier",
    R.DECIDED_ONCE: "the claim was decided a second time: rejected after its acceptance, "
                    "accepted after a rejection, after it ended, or again in a later "
                    "incarnation's stream (a claim id is decided once)",
    R.NOT_VANISHED: "the claim was open at its stream's graceful stream_closed, or open when "
                    "its incarnation died and not ended among the next stream's first events "
                    "(nothing vanishes)",
    R.LOSSES_ANNOUNCED: "a needed block of the claim was lost before any outcome naming the "
                        "claim (a release, expiry, demotion or reported harm) announced it",
    R.NO_UNSEEN_WINDOW: "an observation_gap fell while the claim was open (accepted and not "
                        "ended, or named and not decided): what happened to it is unknown",
}

#: requirement id -> the one-line reason a gate reports it missing
WHY: Mapping[str, str] = MappingProxyType(_WHY)


def why_missing(requirement: str) -> str:
    """The one-line reason *requirement* is missing; raises KeyError for an unknown id."""
    return WHY[requirement]
