"""The executable reference semantics of the trace gates (SPEC §2, §4, §4.1).

Every requirement id of every gate and every negative control is a small predicate over the
whole event list of one stream (see :mod:`.rules` and :mod:`.chains`): non-streaming, obviously
correct, quadratic. It is the specification; :func:`residentkv.trace.gates.check_events` is its
streaming optimisation and must agree with :func:`reference_results` on every trace.
"""

from __future__ import annotations

from collections.abc import Sequence

from residentkv.model.events import Envelope
from residentkv.trace.gates import (
    BOUNDARIES,
    COMMON,
    CONTROLS,
    FAILURE,
    GATE_NAMES,
    REQUIREMENTS,
    GateResult,
    illegal_step,
)
from residentkv.trace.semantics import legal, rules
from residentkv.trace.semantics.chains import Seqs
from residentkv.trace.semantics.stream import ClaimView, Stream
from residentkv.trace.semantics.why import WHY, why_missing

__all__ = ["WHY", "reference_results", "why_missing"]


def reference_results(
    events: Sequence[Envelope],
    gates: Sequence[str] = GATE_NAMES,
    claim_id: str | None = None,
    *,
    well_formed: bool = True,
) -> list[GateResult]:
    """Judge *gates* for one claim, or every claim in order of first appearance.

    Same result type, order and claim enumeration as
    :func:`residentkv.trace.gates.check_events`.
    """
    unknown = [g for g in gates if g not in REQUIREMENTS]
    if unknown:
        raise ValueError(f"unknown gate(s): {', '.join(unknown)}")
    stream = Stream(events, well_formed)
    claims = [claim_id] if claim_id is not None else stream.claim_ids
    results = []
    for cid in claims:
        view = ClaimView(stream, cid)
        checked = rules.controls(view)
        results += [_judge(view, gate, checked) for gate in gates]
    return results


def _judge(c: ClaimView, gate: str, checked: dict[str, bool]) -> GateResult:
    found, wanted = _gate(c, gate)
    missing = sorted(r for r in wanted if r not in found)
    illegal = legal.claim_violation(c.stream, c.id) if "legal_transitions" in missing else None
    return GateResult(
        gate=gate, claim_id=c.id, passed=not missing, missing=missing,
        controls={k: checked[k] for k in CONTROLS},
        evidence={str(k): v for k, v in sorted(found.items()) if k in wanted},
        boundary=BOUNDARIES[gate],
        illegal=illegal_step(illegal),
    )


def _gate(c: ClaimView, gate: str) -> tuple[Seqs, tuple[str, ...]]:
    """What the claim meets, and which requirements the gate asks of it."""
    if not c.claim_events:
        return {}, COMMON if gate == "lifecycle" else REQUIREMENTS[gate]
    found = rules.met(rules.COMMON_RULES, c)
    if gate == "observation":
        return {**found, **rules.observation(c)}, REQUIREMENTS[gate]
    if gate == "failure_outcome":
        return {**found, **rules.failure(c)}, REQUIREMENTS[gate]
    if gate == "lifecycle":
        life, applicable = rules.lifecycle(c)
        merged = {**found, **life}
        if rules.soft_loss_unreported(c):
            merged.pop("legal_transitions", None)  # an unreported loss is an illegal step
        return merged, (*COMMON, *applicable)
    return {**found, **_attribution(c, found)}, REQUIREMENTS[gate]


def _attribution(c: ClaimView, common: Seqs) -> Seqs:
    found: Seqs = {}
    failure = {**common, **rules.failure(c)}
    if all(r in failure for r in COMMON + FAILURE):
        found["target_failure_outcome"] = rules.target_failure_outcome(c, failure)
    for key, rule in (("multiple_claims", rules.multiple_claims),
                      ("failures_name_only_target", rules.failures_name_only_target),
                      ("non_targets_served", rules.non_targets_served)):
        seqs = rule(c)
        if seqs is not None:
            found[key] = seqs
    return found
