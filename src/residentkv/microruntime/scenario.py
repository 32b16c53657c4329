"""The reference scenario of SPEC §10: a resident claim materialized first, then an active
prefill in the same pool. Shared by the litmus suite, the sweep and the tests."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from residentkv.microruntime.emitter import provenance
from residentkv.microruntime.policies import CLAIM_MODE, Policy, make_policy
from residentkv.microruntime.runtime import MicroRuntime
from residentkv.model.claim import (
    CacheIdentity,
    PredicateKind,
    PredicateSpec,
    ProtectionMode,
    Registration,
    ResidentClaim,
)
from residentkv.trace.writer import EventWriter

BLOCK_SIZE = 16
CLAIM_ID = "claim-resident"
RESIDENT_OBJECT = "prefix-resident"
RESIDENT_REQUEST = "req-resident"
ACTIVE_OBJECT = "prefill-active"
ACTIVE_REQUEST = "req-active"
#: Seconds an ``expiring`` claim lives in the reference scenario (after the active request
#: arrives, so a conflict must wait for the expiry).
EXPIRES_AFTER_S = 30.0


def cache_identity(block_size: int = BLOCK_SIZE) -> CacheIdentity:
    """The cache identity every simulated claim uses."""
    return CacheIdentity(
        model_id="microruntime/tiny",
        tokenizer_id="microruntime/tokens",
        cache_key_domain="prefix-hash-chain",
        salt_namespace="tenant:a",
        block_size=block_size,
        kv_format="sim-fp16",
    )


def make_claim(
    claim_id: str = CLAIM_ID,
    *,
    object_id: str = RESIDENT_OBJECT,
    footprint: int = 60,
    mode: ProtectionMode = ProtectionMode.HARD_PROTECTED,
    predicate_blocks: int | None = None,
    expires_after_s: float | None = None,
    registration: Registration = Registration.PRE_REGISTERED,
) -> ResidentClaim:
    """A claim on the leading ``predicate_blocks`` (default: all) blocks of *object_id*."""
    blocks = footprint if predicate_blocks is None else predicate_blocks
    if mode is ProtectionMode.EXPIRING and expires_after_s is None:
        expires_after_s = EXPIRES_AFTER_S
    return ResidentClaim(
        claim_id=claim_id,
        owner_scope="tenant:a/session:1",
        object_id=object_id,
        cache_identity=cache_identity(),
        request_token_map_id=f"tokmap:{object_id}",
        predicate=PredicateSpec(
            id=f"leading-{blocks}", kind=PredicateKind.LEADING_PREFIX_AT_LEAST, blocks=blocks
        ),
        footprint_blocks=footprint,
        protection_mode=mode,
        registration=registration,
        expires_after_s=expires_after_s,
    )


@dataclass(frozen=True)
class Reference:
    """Parameters of one reference run."""

    usable: int
    policy: str
    resident: int = 60
    active: int = 70


def run_reference(
    ref: Reference, trace: Path, *, policy: Policy | None = None
) -> Path:
    """Run the reference scenario and write its trace to *trace* (overwritten).

    ``policy`` replaces the named policy's behaviour (tests pass deliberately broken ones);
    the claim's protection mode still follows ``ref.policy``.
    """
    trace.parent.mkdir(parents=True, exist_ok=True)
    trace.write_text("", encoding="utf-8")
    with EventWriter(trace, source="microruntime", provenance=provenance()) as writer:
        rt = MicroRuntime(
            ref.usable,
            policy if policy is not None else make_policy(ref.policy),
            writer=writer,
            block_size=BLOCK_SIZE,
        )
        rt.submit_claim(make_claim(footprint=ref.resident, mode=CLAIM_MODE[ref.policy]))
        rt.request(RESIDENT_REQUEST, RESIDENT_OBJECT, ref.resident)
        rt.advance(1.0)
        rt.request(ACTIVE_REQUEST, ACTIVE_OBJECT, ref.active)
        rt.close()
    return trace
