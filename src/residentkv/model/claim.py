"""ResidentClaim: an accepted future-KV reuse obligation (SPEC §2)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, model_validator

from residentkv.model.integers import Bounded64


class Frozen(BaseModel):
    """Base for contract values: immutable, unknown fields rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class ProtectionMode(StrEnum):
    """What the runtime promises about the claimed KV."""

    BEST_EFFORT = "best_effort"
    SOFT_PRIORITY = "soft_priority"
    HARD_PROTECTED = "hard_protected"
    DEMOTABLE = "demotable"
    EXPIRING = "expiring"
    OFFLOADABLE = "offloadable"


#: modes whose promise no loss may break unannounced: any harm, or a loss before the refusal,
#: expiry, demotion or release the mode names, is a loss the mode did not announce (SPEC §4.1)
OUTCOME_BEFORE_LOSS: frozenset[ProtectionMode] = frozenset(
    {ProtectionMode.HARD_PROTECTED, ProtectionMode.EXPIRING, ProtectionMode.DEMOTABLE})


class Registration(StrEnum):
    """When the claim was named: before use (binds B1) or after the fact (never binds B1)."""

    PRE_REGISTERED = "pre_registered"
    POST_HOC = "post_hoc"


class PredicateKind(StrEnum):
    """How a predicate reads block positions."""

    LEADING_PREFIX_AT_LEAST = "leading_prefix_at_least"
    CONTIGUOUS_RANGE = "contiguous_range"


class CacheIdentity(Frozen):
    """Everything that must match for cached KV to be the same KV."""

    model_id: str = Field(min_length=1, description=(
        "The model whose KV this is: for the vLLM adapter the model path or a "
        "--served-model-name of the engine"))
    tokenizer_id: str = Field(min_length=1, description=(
        "The tokenizer that turned the object into token ids (e.g. the tokenizer's name, or "
        "'token-ids' when prompts are token ids)"))
    cache_key_domain: str = Field(min_length=1, description=(
        "The runtime's cache-key scheme the KV is keyed under (e.g. 'vllm-prefix': vLLM's "
        "prefix block hashes)"))
    salt_namespace: str = Field(min_length=1, description=(
        "The cache-salt namespace the KV was computed under ('none' without a salt)"))
    block_size: Bounded64 = Field(gt=0, description=(
        "Tokens per KV block on the runtime (vLLM's CPU backend: 128); predicates and "
        "footprints count these blocks"))
    kv_format: str = Field(min_length=1, description=(
        "The KV layout and dtype (e.g. 'vllm-cpu-float32'): KV of another format is not "
        "this KV"))
    adapter_id: str | None = Field(default=None, description=(
        "The LoRA adapter the KV was computed with, if any"))


class PredicateSpec(Frozen):
    """A fixed materialization predicate over block positions."""

    id: str = Field(min_length=1, description=(
        "A name for this predicate, repeated on every claim event as predicate_id"))
    kind: PredicateKind = Field(description=(
        "leading_prefix_at_least: block positions 0 .. blocks-1 all present; "
        "contiguous_range: positions start .. start+blocks-1 all present"))
    blocks: Bounded64 = Field(gt=0, description="How many block positions must be present")
    start: Bounded64 | None = Field(default=None, ge=0, description=(
        "First required position (contiguous_range only)"))

    @model_validator(mode="after")
    def _start_only_for_ranges(self) -> PredicateSpec:
        if self.kind is PredicateKind.CONTIGUOUS_RANGE and self.start is None:
            raise ValueError("contiguous_range needs 'start'")
        if self.kind is PredicateKind.LEADING_PREFIX_AT_LEAST and self.start is not None:
            raise ValueError("leading_prefix_at_least takes no 'start'")
        return self

    @property
    def end(self) -> int:
        """One past the last position the predicate requires."""
        return (self.start or 0) + self.blocks


class ResidentClaim(Frozen):
    """A claim on future reuse of one object's KV under one cache identity."""

    claim_id: str = Field(min_length=1, description=(
        "The claim's id: every event of the claim, and every outcome of it, names it"))
    owner_scope: str = Field(min_length=1, description=(
        "Who may reuse the claim (e.g. 'tenant:a/session:7'): only requests of this scope "
        "restore or reuse it"))
    object_id: str = Field(min_length=1, description=(
        "The reusable object whose KV is claimed (e.g. a system prompt's id)"))
    cache_identity: CacheIdentity = Field(description=(
        "Everything that must match for cached KV to be this object's KV"))
    request_token_map_id: str = Field(min_length=1, description=(
        "The deterministic map from the object to the request's token ids (a name for it)"))
    predicate: PredicateSpec = Field(description=(
        "Which block positions must be present for the claim to count as materialized"))
    footprint_blocks: Bounded64 = Field(gt=0, description=(
        "How many leading blocks of the object the claim covers (the predicate lies "
        "within them)"))
    protection_mode: ProtectionMode = Field(description=(
        "What the runtime promises: soft_priority, hard_protected, demotable, expiring "
        "(needs expires_after_s) or offloadable (the vLLM adapter's mode); best_effort is "
        "not a claim"))
    registration: Registration = Field(description=(
        "pre_registered: named before any of its KV is used (binds claim identity); post_hoc "
        "never does"))
    expires_after_s: float | None = Field(default=None, gt=0, description=(
        "Seconds after acceptance when an expiring claim ends (expiring only)"))

    @model_validator(mode="after")
    def _predicate_fits_footprint(self) -> ResidentClaim:
        if self.predicate.end > self.footprint_blocks:
            raise ValueError(
                f"predicate needs positions up to {self.predicate.end - 1}, "
                f"beyond footprint_blocks={self.footprint_blocks}"
            )
        if self.protection_mode is ProtectionMode.EXPIRING and self.expires_after_s is None:
            raise ValueError("protection_mode 'expiring' needs 'expires_after_s'")
        return self

    @property
    def identity(self) -> tuple[str, str, str, str]:
        """The identity tuple repeated on every claim event."""
        return (
            self.object_id,
            self.cache_identity_key,
            self.request_token_map_id,
            self.predicate.id,
        )

    @property
    def cache_identity_key(self) -> str:
        """A stable one-string form of the cache identity, used on events."""
        c = self.cache_identity
        parts = [c.model_id, c.tokenizer_id, c.cache_key_domain, c.salt_namespace,
                 str(c.block_size), c.kv_format, c.adapter_id or "-"]
        return "|".join(parts)
