"""What each field of a ``residentkv.event/v1`` event means: the descriptions of the published
event schema (``residentkv schema event``), so editors and readers see them beside the types.

Descriptions only: the models in :mod:`residentkv.model.events` define types and constraints.
A field name means the same on every event, except where :data:`PER_EVENT` says otherwise.
"""

from __future__ import annotations

from typing import Any

FIELDS: dict[str, str] = {
    # envelope
    "schema": "Schema id of the event; always residentkv.event/v1.",
    "seq": "Position of the event in its stream; strictly increasing, the only ordering key.",
    "ts_ns": "Wall-clock or monotonic time in nanoseconds; informative only, never used to "
             "order events.",
    "source": "Name of the component that emitted the event (e.g. residentkv.vllm.scheduler).",
    "event": "The event type; selects which other fields the event has.",
    "claim_id": "Id of the ResidentClaim the event is about; null when it concerns no claim.",
    "request_id": "Id of the serving request the event belongs to; null when none.",
    # claim identity, repeated on every claim event
    "object_id": "The claimed object (e.g. a shared prefix) the claim is bound to.",
    "cache_identity": "Everything that makes KV reusable for the object: model, tokenizer, "
                      "cache layout, dtype, adapter.",
    "request_token_map_id": "Id of the map from request tokens to the claimed positions.",
    "predicate_id": "Id of the materialization predicate fixed at acceptance.",
    # claim acceptance
    "registration": "How the claim arrived: pre_registered before its KV existed, or named "
                    "afterwards.",
    "protection_mode": "The protection mode the runtime accepted the claim under.",
    "footprint_blocks": "KV blocks the claim covers.",
    "predicate": "The materialization predicate: which claimed positions must be present for "
                 "the claim to hold.",
    "owner_scope": "Tenant/session scope of the claim's owner, when the runtime records one.",
    "expires_after_s": "For an expiring claim: seconds after acceptance at which it may expire.",
    # materialization and movement
    "surviving": "Claimed blocks present when the predicate was evaluated.",
    "leading": "Length of the unbroken run of present blocks from the claim's first position.",
    "required": "Blocks the predicate requires.",
    "holds": "Whether the materialization predicate held at this point.",
    "tier": "Storage tier holding the KV (e.g. device, host, disk); a runtime-defined name.",
    "generation": "Offload/restore generation of the claim: 0 for the first store, +1 per "
                  "restore cycle.",
    "from_tier": "Tier the KV moves from.",
    "to_tier": "Tier the KV moves to.",
    "block_count": "Blocks moved.",
    "tokens": "Tokens that must be restored before reuse.",
    "hit_tokens": "Prompt tokens the lookup found in some tier.",
    "async_load": "Whether the hit will be loaded asynchronously before the forward pass.",
    "job_id": "Id of the transfer job, pairing its start, finish and failure events.",
    "bytes": "Bytes transferred.",
    "success": "Whether the transfer completed.",
    "injected": "True when the failure was injected on purpose by a test harness.",
    "invalid_block_ids": "Block ids whose load failed.",
    # outcomes
    "reason": "Why, in the emitter's words (free text, informative).",
    "outcome_type": "The claim-scoped outcome the failure became: refusal, demotion, expiry "
                    "or harm.",
    "outcome_claim_id": "The claim the outcome is charged to; null when the runtime did not "
                        "name one.",
    "blocking_claim_ids": "Claims whose protection caused this outcome; exactly the blocking "
                          "claim for an attributed refusal.",
    "feasibility": "Whether the refused work could have fit at all (e.g. infeasible, "
                   "insufficient_capacity); a runtime-defined word.",
    "arbiter": "Which part decided: the scheduler boundary, admission control, or a test "
               "harness.",
    "shortfall": "Blocks missing for the refused work to fit.",
    "blocks": "Blocks the admitted work uses.",
    "cause": "What harmed the claim (free text, informative).",
    "before": "The predicate's evaluation before the harm.",
    "after": "The predicate's evaluation after the harm.",
    "block_id": "Id of the block concerned.",
    "position": "Position of the block in the claim, when known.",
    "protected": "Whether the runtime considered the block protected when it evicted it.",
    "medium": "Storage medium the runtime reported the block on (e.g. GPU, CPU), as the "
              "runtime names it.",
    "block_hash": "The runtime's own hash of the block (hex), when the emitter observed the "
                  "runtime's block events rather than its block ids.",
    "content_digest": "Digest of the stored bytes, algorithm-prefixed (e.g. xxh3-128:<hex>), "
                      "recorded when the store completed; a later restore must verify it.",
    "content_verified": "Whether the restored bytes were checked against the digest recorded "
                        "at store; null when the emitter does not say.",
    "missed_from": "First sequence number of the runtime's own stream that was not seen, "
                   "when known.",
    "missed_to": "Last sequence number of the runtime's own stream that was not seen, when "
                 "known.",
    "detail": "The unseen window in words: the publisher stream (topic, data-parallel rank), the "
              "exact batch numbers (also when they do not fit a signed 64-bit field) and why "
              "nothing filled it.",
    # requests and scheduler
    "prompt_tokens": "Prompt length in tokens.",
    "claim_ref": "The claim_id the request's parameters name (a registration or a reuse "
                 "reference), recorded at intake before any decision; not the envelope "
                 "claim_id, which stays null on request_started.",
    "status": "Client-visible result: served, refused or error; null only in imported traces "
              "whose emitter did not record it.",
    "finish_reason": "The runtime's own finish reason (e.g. length, stop, error); a "
                     "runtime-defined word.",
    "policy": "The scheduler's configured reaction to a load failure: fail the request, or "
              "recompute.",
    "invalid_block_count": "Blocks whose load failed.",
    "failed_tokens": "Tokens covered by the failed blocks.",
    "finish_status": "How the scheduler finished the affected request, when it did.",
    # stream provenance (stream_started)
    "emitter": "Name and version of the software that wrote the stream.",
    "runtime": "Name and version of the serving runtime the stream observed.",
    "stream_id": "Id of this stream (a UUID or a stable name).",
    "replica": "Replica of the runtime the stream comes from, when there are several.",
    "rank": "Worker rank the stream comes from, when the runtime is distributed.",
    "incarnation": "The engine incarnation writing this stream; a restart on the same sink "
                   "opens a new stream with a new incarnation.",
    # generic counters
    "name": "Counter name.",
    "value": "Counter value.",
}

#: (event type, field) -> description where the field means something else on that event
PER_EVENT: dict[tuple[str, str], str] = {
    ("kv_load_failed", "reason"): "Why the load failed, as a fixed word where one applies: "
                                  "digest_mismatch when the bytes read back differ from the "
                                  "digest recorded at store.",
    ("observation_gap", "reason"): "Why part of the runtime's history was not seen: "
                                   "late_start, sequence_jump, subscription_dropped, "
                                   "publisher_restarted, undecodable_batch, malformed_message, "
                                   "unconfirmed_tail or presence_ambiguous.",
    ("stream_closed", "reason"): "Why the stream closed: shutdown for a graceful stop (every "
                                 "claim still open must have ended before this event).",
    ("claim_restored", "source"): "Where the restored KV came from: offload_tier (a real "
                                  "restore) or fallback_recompute (recomputed; never claim "
                                  "evidence).",
}


#: fields of the models nested in events (predicate, predicate result); a description the
#: model already carries (e.g. Party's) is kept
NESTED: dict[str, dict[str, str]] = {
    "PredicateSpec": {
        "id": "Id of the predicate, repeated as predicate_id on later claim events.",
        "kind": "leading_prefix_at_least (the first N positions present) or contiguous_range "
                "(N positions from start).",
        "blocks": "N: how many claimed block positions must be present.",
        "start": "First position of a contiguous_range; absent for leading_prefix_at_least.",
    },
    "PredicateResult": {
        "surviving": "Claimed blocks present at evaluation.",
        "leading": "Length of the unbroken run of present blocks from the first position.",
        "required": "Blocks the predicate requires.",
        "holds": "Whether the predicate held.",
    },
}


def describe(schema: dict[str, Any]) -> list[str]:
    """Set every property description of the event schema's definitions; returns the
    (event, field) pairs that have no description (empty when every field is described)."""
    undescribed = []
    for def_name, definition in schema.get("$defs", {}).items():
        props = definition.get("properties", {})
        event = props.get("event", {}).get("const")
        if event is None:
            for name, prop in props.items():
                text = NESTED.get(def_name, {}).get(name) or prop.get("description")
                if text is None:
                    undescribed.append(f"{def_name}.{name}")
                else:
                    prop["description"] = text
            continue
        for name, prop in props.items():
            text = PER_EVENT.get((event, name)) or FIELDS.get(name)
            if text is None:
                undescribed.append(f"{event}.{name}")
            else:
                prop["description"] = text
    return undescribed
