"""The requirement ids each trace gate asks for (SPEC §4), grouped once.

Every gate asks the common requirements; observation, failure_outcome and attribution add a
fixed group, lifecycle the paths the claim's protection mode promises (see
:mod:`residentkv.trace.registry`). The groups hold :class:`Requirement` members, so a misspelt
id is a type error; they compare equal to (and hash like) their string values.
"""

from __future__ import annotations

from residentkv.model.vocabulary import Requirement as R

#: requirement id -> the seqs of the event(s) that met it
Seqs = dict[R, list[int]]
#: what a claim meets, and which requirement ids a gate asks of it
Met = tuple[Seqs, tuple[R, ...]]

COMMON: tuple[R, ...] = (
    R.TRACE_WELL_FORMED, R.CLAIM_EVENTS_PRESENT, R.CLAIM_ACCEPTED_BEFORE_LIFECYCLE,
    R.IDENTITY_COMPLETE, R.STABLE_IDENTITY, R.PREDICATE_FIXED, R.LEGAL_TRANSITIONS,
    R.NO_OBSERVATION_GAP, R.NO_OPEN_FAILURE,
)
OBSERVATION: tuple[R, ...] = (
    R.MATERIALIZED, R.STORE_SUCCEEDED, R.OFFLOADED, R.LOOKUP_HIT, R.RESTORE_REQUIRED,
    R.LOAD_SUCCEEDED, R.RESTORED_FROM_OFFLOAD, R.REUSED_AFTER_RESTORE,
    R.RESTORE_CONTENT_VERIFIED,
)
FAILURE: tuple[R, ...] = (
    R.STORE_SUCCEEDED, R.RESTORE_REQUIRED, R.CLAIM_LOAD_FAILED, R.SCHEDULER_FAILURE_BRANCH,
    R.RESTORE_FAILED_SCOPED, R.REFUSAL_ATTRIBUTED, R.OUTCOME_BEFORE_FINISH,
    R.NO_RESTORE_AFTER_FAILURE, R.NO_BLOCKING_SMEAR,
)
LIFECYCLE: tuple[R, ...] = (
    R.NO_BLOCKING_SMEAR, R.SUCCESS_GENERATION, R.FAILURE_GENERATION, R.GENERATIONS_ORDERED,
    R.EXPIRY_BEFORE_LOSS, R.DEMOTION_BEFORE_LOSS, R.NO_HARM, R.MATERIALIZED,
    R.CONFLICT_ATTRIBUTED,
)
ATTRIBUTION: tuple[R, ...] = (
    R.NO_BLOCKING_SMEAR, R.MULTIPLE_CLAIMS, R.TARGET_FAILURE_OUTCOME, R.FAILURES_NAME_ONLY_TARGET,
    R.NON_TARGETS_SERVED,
)

#: conformance (SPEC §9.1): what it shares with every gate (legality and open failures it
#: judges with live claims in mind), then its own
CONFORMANCE_SHARED: tuple[R, ...] = (
    R.TRACE_WELL_FORMED, R.CLAIM_EVENTS_PRESENT, R.IDENTITY_COMPLETE, R.STABLE_IDENTITY,
    R.PREDICATE_FIXED, R.NO_BLOCKING_SMEAR,
)
CONFORMANCE: tuple[R, ...] = (
    R.LEGAL_TRANSITIONS, R.NO_OPEN_FAILURE, R.DECIDED_ONCE, R.NOT_VANISHED,
    R.LOSSES_ANNOUNCED, R.NO_UNSEEN_WINDOW,
)

#: the lifecycle paths by protection mode (after the common requirements); the mode-less path
#: (offloadable and the rest) is a success cycle, then the failure cycle
HARD_PROTECTED_PATH: tuple[R, ...] = (
    R.NO_BLOCKING_SMEAR, R.MATERIALIZED, R.NO_HARM, R.CONFLICT_ATTRIBUTED)
EXPIRING_PATH: tuple[R, ...] = (
    R.NO_BLOCKING_SMEAR, R.MATERIALIZED, R.EXPIRY_BEFORE_LOSS, R.NO_HARM)
DEMOTABLE_PATH: tuple[R, ...] = (
    R.NO_BLOCKING_SMEAR, R.MATERIALIZED, R.DEMOTION_BEFORE_LOSS, R.NO_HARM)
GENERATIONS_PATH: tuple[R, ...] = (
    R.NO_BLOCKING_SMEAR, R.NO_HARM, R.SUCCESS_GENERATION, R.FAILURE_GENERATION,
    R.GENERATIONS_ORDERED)


#: what each gate with a fixed list asks (lifecycle asks COMMON and its claim's path)
OBSERVATION_GATE: tuple[R, ...] = COMMON + OBSERVATION
FAILURE_GATE: tuple[R, ...] = COMMON + FAILURE
LIFECYCLE_GATE: tuple[R, ...] = COMMON + LIFECYCLE
ATTRIBUTION_GATE: tuple[R, ...] = COMMON + ATTRIBUTION
#: conformance asks of an accepted claim every requirement; of a claim only rejected (or not
#: decided yet) none that needs an acceptance (its identity and predicate)
CONFORMANCE_GATE: tuple[R, ...] = CONFORMANCE_SHARED + CONFORMANCE
CONFORMANCE_UNACCEPTED: tuple[R, ...] = tuple(
    r for r in CONFORMANCE_GATE if r not in (R.IDENTITY_COMPLETE, R.PREDICATE_FIXED))


def ids(requirements: tuple[R, ...]) -> tuple[str, ...]:
    """Plain strings (not enum members), safe for any serializer."""
    return tuple(r.value for r in requirements)
