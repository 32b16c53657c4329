"""The contract: claims, predicates, lifecycle and the v1 event schema (pure data, no I/O)."""

from residentkv.model.claim import (
    CacheIdentity,
    PredicateKind,
    PredicateSpec,
    ProtectionMode,
    Registration,
    ResidentClaim,
)
from residentkv.model.lifecycle import (
    TERMINAL_STATES,
    TRANSITIONS,
    ClaimLifecycle,
    ClaimState,
    LossKind,
    classify_loss,
)
from residentkv.model.predicate import PredicateResult, evaluate_predicate

__all__ = [
    "TERMINAL_STATES",
    "TRANSITIONS",
    "CacheIdentity",
    "ClaimLifecycle",
    "ClaimState",
    "LossKind",
    "PredicateKind",
    "PredicateResult",
    "PredicateSpec",
    "ProtectionMode",
    "Registration",
    "ResidentClaim",
    "classify_loss",
    "evaluate_predicate",
]
