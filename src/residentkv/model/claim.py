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
    LEADING_PREFIX_AT_LEAST = "leading_prefix_at_least"
    CONTIGUOUS_RANGE = "contiguous_range"


class CacheIdentity(Frozen):
    """Everything that must match for cached KV to be the same KV."""

    model_id: str = Field(min_length=1)
    tokenizer_id: str = Field(min_length=1)
    cache_key_domain: str = Field(min_length=1)
    salt_namespace: str = Field(min_length=1)
    block_size: Bounded64 = Field(gt=0)
    kv_format: str = Field(min_length=1)
    adapter_id: str | None = None


class PredicateSpec(Frozen):
    """A fixed materialization predicate over block positions."""

    id: str = Field(min_length=1)
    kind: PredicateKind
    blocks: Bounded64 = Field(gt=0)
    start: Bounded64 | None = Field(default=None, ge=0)

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

    claim_id: str = Field(min_length=1)
    owner_scope: str = Field(min_length=1)
    object_id: str = Field(min_length=1)
    cache_identity: CacheIdentity
    request_token_map_id: str = Field(min_length=1)
    predicate: PredicateSpec
    footprint_blocks: Bounded64 = Field(gt=0)
    protection_mode: ProtectionMode
    registration: Registration
    expires_after_s: float | None = Field(default=None, gt=0)

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
