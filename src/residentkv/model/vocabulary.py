"""The project's word lists, defined once (SPEC §2, §4, §6, §7).

Gate names, requirement ids, negative controls, row classes, obligations, outcome types,
obligation statuses, mechanisms and anchor kinds are ``StrEnum`` members: they compare equal to
their string values, so data files and JSON keep plain strings while the code imports one
definition. Gates, bundles, descriptors, suite cases, reports and the witness all read these
lists; none keeps a copy.
"""

from __future__ import annotations

from enum import StrEnum

from residentkv.model.claim import ProtectionMode

__all__ = [
    "ALL_GATE_NAMES",
    "ANCHOR_KINDS",
    "CLASSES",
    "CONTROLS",
    "DEVICE_TIER",
    "FLEET_GATE",
    "FLEET_REQUIREMENTS",
    "GATE_NAMES",
    "GRANTING_CLASSES",
    "HOST_TIER",
    "OBLIGATIONS",
    "OBLIGATION_SHORT",
    "AnchorKind",
    "Asserts",
    "Control",
    "FleetRequirement",
    "GateName",
    "Mechanism",
    "ObligationName",
    "ObligationStatus",
    "OutcomeType",
    "ProtectionMode",
    "Requirement",
    "RowClass",
    "StopCause",
]


class GateName(StrEnum):
    """The trace gates: the four scenario gates of SPEC §4, and ``conformance`` (SPEC §9.1)."""

    OBSERVATION = "observation"
    FAILURE_OUTCOME = "failure_outcome"
    LIFECYCLE = "lifecycle"
    ATTRIBUTION = "attribution"
    #: SPEC §9.1: the health verdict of a long-running stream (or several incarnations' streams
    #: in one file) with any mix of claims; claims open where the reading stops are live
    CONFORMANCE = "conformance"


class Requirement(StrEnum):
    """Every requirement id a gate can report missing (docs/trace-gates.md explains each)."""

    # common to every gate
    TRACE_WELL_FORMED = "trace_well_formed"
    CLAIM_EVENTS_PRESENT = "claim_events_present"
    CLAIM_ACCEPTED_BEFORE_LIFECYCLE = "claim_accepted_before_lifecycle"
    IDENTITY_COMPLETE = "identity_complete"
    STABLE_IDENTITY = "stable_identity"
    PREDICATE_FIXED = "predicate_fixed"
    LEGAL_TRANSITIONS = "legal_transitions"
    NO_OBSERVATION_GAP = "no_observation_gap"
    # observation
    MATERIALIZED = "materialized"
    STORE_SUCCEEDED = "store_succeeded"
    OFFLOADED = "offloaded"
    LOOKUP_HIT = "lookup_hit"
    RESTORE_REQUIRED = "restore_required"
    LOAD_SUCCEEDED = "load_succeeded"
    RESTORED_FROM_OFFLOAD = "restored_from_offload"
    REUSED_AFTER_RESTORE = "reused_after_restore"
    RESTORE_CONTENT_VERIFIED = "restore_content_verified"
    # failure_outcome
    CLAIM_LOAD_FAILED = "claim_load_failed"
    SCHEDULER_FAILURE_BRANCH = "scheduler_failure_branch"
    RESTORE_FAILED_SCOPED = "restore_failed_scoped"
    REFUSAL_ATTRIBUTED = "refusal_attributed"
    OUTCOME_BEFORE_FINISH = "outcome_before_finish"
    NO_RESTORE_AFTER_FAILURE = "no_restore_after_failure"
    NO_OPEN_FAILURE = "no_open_failure"
    NO_BLOCKING_SMEAR = "no_blocking_smear"
    # lifecycle
    SUCCESS_GENERATION = "success_generation"
    FAILURE_GENERATION = "failure_generation"
    GENERATIONS_ORDERED = "generations_ordered"
    EXPIRY_BEFORE_LOSS = "expiry_before_loss"
    DEMOTION_BEFORE_LOSS = "demotion_before_loss"
    NO_HARM = "no_harm"
    CONFLICT_ATTRIBUTED = "conflict_attributed"
    # attribution
    MULTIPLE_CLAIMS = "multiple_claims"
    TARGET_FAILURE_OUTCOME = "target_failure_outcome"
    FAILURES_NAME_ONLY_TARGET = "failures_name_only_target"
    NON_TARGETS_SERVED = "non_targets_served"
    # conformance (SPEC §9.1)
    DECIDED_ONCE = "decided_once"
    NOT_VANISHED = "not_vanished"
    LOSSES_ANNOUNCED = "losses_announced"
    NO_UNSEEN_WINDOW = "no_unseen_window"


class Control(StrEnum):
    """Negative controls every gate reports as facts of the stream (SPEC §4)."""

    GENERIC_COUNTER_ONLY = "generic_counter_only"
    WRONG_CLAIM_FAILURE = "wrong_claim_failure"
    UNCLAIMED_FAILURE = "unclaimed_failure"
    FALLBACK_RECOMPUTE = "fallback_recompute"
    ORDINARY_OFFLOAD_WITHOUT_CLAIM = "ordinary_offload_without_claim"
    POST_HOC_NAMING = "post_hoc_naming"
    RESTORE_AFTER_REUSE = "restore_after_reuse"
    BLOCKING_CLAIM_SMEAR = "blocking_claim_smear"
    AMBIGUOUS_IDENTITY = "ambiguous_identity"
    ADMISSION_REFUSAL = "admission_refusal"


class StopCause(StrEnum):
    """Why a claim ended because the process that held it stopped (SPEC §9.1): the ``cause``
    of its ``claim_harmed``."""

    #: written at the head of the next incarnation's stream: the previous one died
    ENGINE_RESTARTED = "engine_restarted"
    #: written before ``stream_closed`` on a graceful stop
    SHUTDOWN = "shutdown"


#: the gate of the fleet view (residentkv.fleet): several replicas' streams judged together
FLEET_GATE = "fleet_outcome"


class FleetRequirement(StrEnum):
    """The requirement ids of gate ``fleet_outcome`` (docs/fleet-view.md explains each)."""

    REPLICAS_IDENTIFIED = "replicas_identified"
    CLAIM_SINGLE_HOME = "claim_single_home"
    ONE_OUTCOME_PER_CLAIMED_REQUEST = "one_outcome_per_claimed_request"
    NO_CROSS_TENANT = "no_cross_tenant"
    #: SPEC §4.2: each replica's stream is a legal run of the automaton for every claim in it
    LEGAL_TRANSITIONS = "legal_transitions"


class RowClass(StrEnum):
    """The six classes of the lowering relation, strongest first (SPEC §7)."""

    NATIVE_CONFORMANCE = "native_conformance"
    ADAPTER_POLICY_EVIDENCE = "adapter_policy_evidence"
    ADAPTER_OBSERVATIONAL_EVIDENCE = "adapter_observational_evidence"
    APPROXIMATION_SUBSTRATE = "approximation_substrate"
    REJECTED_MAPPING = "rejected_mapping"
    UNKNOWN_EVIDENCE = "unknown_evidence"


class ObligationName(StrEnum):
    """B1-B4 (SPEC §1)."""

    CLAIM_IDENTITY = "claim_identity"
    MATERIALIZATION_PREDICATE = "materialization_predicate"
    ORDERED_LIFECYCLE = "ordered_lifecycle"
    CLAIM_SCOPED_OUTCOMES = "claim_scoped_outcomes"


#: the tier names KV events carry (``from_tier``, ``to_tier``, ``claim_materialized.tier``):
#: the runtime's device KV cache and the connector's host tier
DEVICE_TIER = "device"
HOST_TIER = "host"


class OutcomeType(StrEnum):
    """The claim-scoped outcomes (SPEC §2); fallback recompute is never one of them."""

    REFUSAL = "refusal"
    DEMOTION = "demotion"
    EXPIRY = "expiry"
    HARM = "harm"


class Arbiter(StrEnum):
    """Who decided an ``active_request_refused`` (SPEC §4.1): the runtime's scheduler at its
    boundary, its admission, or a harness outside the runtime (whose refusals never satisfy a
    requirement)."""

    SCHEDULER_BOUNDARY = "scheduler_boundary"
    ADMISSION = "admission"
    HARNESS = "harness"


class ObligationStatus(StrEnum):
    """A curator's assertion about one obligation of one row (SPEC §6)."""

    SATISFIED = "satisfied"
    PARTIAL = "partial"
    ABSENT = "absent"
    CONTRADICTED = "contradicted"
    UNKNOWN = "unknown"


class Mechanism(StrEnum):
    """How a row lowers the claim onto the runtime."""

    NATIVE = "native"
    ADAPTER = "adapter"
    PATCH = "patch"


class Asserts(StrEnum):
    """What a row claims about itself."""

    CONFORMANCE = "conformance"
    SUBSTRATE = "substrate"


class AnchorKind(StrEnum):
    """The kinds of evidence a descriptor may cite (SPEC §6)."""

    SOURCE = "source"
    DOC = "doc"
    TRACE = "trace"
    SIM = "sim"


def _values(words: type[StrEnum]) -> tuple[str, ...]:
    """Plain strings (not enum members), safe for any serializer."""
    return tuple(w.value for w in words)


#: the four scenario gates of SPEC §4: what ``trace check`` runs by default
GATE_NAMES: tuple[str, ...] = tuple(g.value for g in GateName if g is not GateName.CONFORMANCE)
#: every trace gate, ``conformance`` (SPEC §9.1) included: what ``trace check --gate`` accepts
ALL_GATE_NAMES: tuple[str, ...] = _values(GateName)
CONTROLS: tuple[str, ...] = _values(Control)
FLEET_REQUIREMENTS: tuple[str, ...] = _values(FleetRequirement)
CLASSES: tuple[str, ...] = _values(RowClass)
OBLIGATIONS: tuple[str, ...] = _values(ObligationName)
ANCHOR_KINDS: tuple[str, ...] = _values(AnchorKind)
#: classes 1-3: a verdict that grants something needs verified evidence (SPEC §7)
GRANTING_CLASSES: frozenset[str] = frozenset(CLASSES[:3])
#: the short names B1-B4 used in tables
OBLIGATION_SHORT: dict[str, str] = dict(zip(OBLIGATIONS, ("B1", "B2", "B3", "B4"), strict=True))
