"""The reference judges of the trace gates: each gate's answer from the whole event list.

One function per gate (named by its :class:`~residentkv.trace.registry.Gate` record), given
the claim's view of the stream and the common requirements it meets (:data:`rules.COMMON_RULES`).
The streaming judges (:mod:`residentkv.trace.judges`) are their optimisation.
"""

from __future__ import annotations

from residentkv.model.vocabulary import Requirement as R
from residentkv.trace.requirements import (
    ATTRIBUTION_GATE,
    COMMON,
    FAILURE_GATE,
    OBSERVATION_GATE,
    Met,
    Seqs,
)
from residentkv.trace.semantics import rules
from residentkv.trace.semantics.stream import ClaimView


def observation(c: ClaimView, common: Seqs) -> Met:
    return {**common, **rules.observation(c)}, OBSERVATION_GATE


def failure_outcome(c: ClaimView, common: Seqs) -> Met:
    return {**common, **rules.failure(c)}, FAILURE_GATE


def lifecycle(c: ClaimView, common: Seqs) -> Met:
    life, applicable = rules.lifecycle(c)
    return {**common, **life}, (*COMMON, *applicable)


def conformance(c: ClaimView, common: Seqs) -> Met:
    """SPEC §9.1 conformance (see :func:`rules.conformance`)."""
    return rules.conformance(c, common)


def attribution(c: ClaimView, common: Seqs) -> Met:
    found: Seqs = {}
    failure = {**common, **rules.failure(c)}
    if all(r in failure for r in FAILURE_GATE):
        found[R.TARGET_FAILURE_OUTCOME] = rules.target_failure_outcome(c, failure)
    for key, rule in ((R.MULTIPLE_CLAIMS, rules.multiple_claims),
                      (R.FAILURES_NAME_ONLY_TARGET, rules.failures_name_only_target),
                      (R.NON_TARGETS_SERVED, rules.non_targets_served)):
        seqs = rule(c)
        if seqs is not None:
            found[key] = seqs
    return {**common, **found}, ATTRIBUTION_GATE
