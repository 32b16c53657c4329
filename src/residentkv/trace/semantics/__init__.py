"""The executable reference semantics of the trace gates (SPEC §2, §4, §4.1).

Every requirement id of every gate and every negative control is a small predicate over the
whole event list of one stream (see :mod:`.rules` and :mod:`.chains`): non-streaming, obviously
correct, quadratic. It is the specification; :func:`residentkv.trace.gates.check_events` is its
streaming optimisation and must agree with :func:`reference_results` on every trace. Each gate's
reference judge is named by its record in :mod:`residentkv.trace.registry`.
"""

from __future__ import annotations

from collections.abc import Sequence

from residentkv.model.events import Envelope
from residentkv.model.vocabulary import ALL_GATE_NAMES, GATE_NAMES, GateName, Requirement
from residentkv.trace.results import (
    GateResult,
    StreamVerdict,
    control_values,
    illegal_step,
    stream_verdict,
    summaries,
    verdict,
)
from residentkv.trace.semantics import legal, rules
from residentkv.trace.semantics.stream import ClaimView, Stream
from residentkv.trace.semantics.why import WHY, why_missing

__all__ = ["WHY", "reference_judgement", "reference_results", "why_missing"]


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
    return reference_judgement(events, gates, claim_id, well_formed=well_formed)[0]


def reference_judgement(
    events: Sequence[Envelope],
    gates: Sequence[str] = ALL_GATE_NAMES,
    claim_id: str | None = None,
    *,
    well_formed: bool = True,
) -> tuple[list[GateResult], StreamVerdict | None]:
    """:func:`reference_results`, with gate ``conformance``'s stream verdict when it is asked
    (as :func:`residentkv.trace.gates.judge_events`)."""
    # the registry names this package's judges: imported when used, not when this loads
    from residentkv.trace.registry import gates_named

    records = gates_named(gates)
    stream = Stream(events, well_formed)
    claims = [claim_id] if claim_id is not None else stream.claim_ids
    results = []
    for cid in claims:
        c = ClaimView(stream, cid)
        controls = control_values(rules.controls(c))
        common = rules.met(rules.COMMON_RULES, c) if c.claim_events else {}
        for gate in records:
            found, wanted = gate.reference(c, common) if c.claim_events else (
                {}, gate.unconditional)
            missing, evidence = verdict(found, wanted)
            illegal = (legal.claim_violation(stream, cid, settled=gate.live)
                       if Requirement.LEGAL_TRANSITIONS in missing else None)
            results.append(GateResult(
                gate=gate.name.value, claim_id=cid, passed=not missing, missing=missing,
                controls=dict(controls), evidence=evidence, boundary=gate.boundary,
                illegal=illegal_step(illegal),
            ))
    if GateName.CONFORMANCE not in gates:
        return results, None
    live = {cid for cid in claims if rules.live(ClaimView(stream, cid))}
    return results, stream_verdict(results, live, summaries(stream.spans))
