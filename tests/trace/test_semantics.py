"""The reference semantics: every requirement id and control, and agreement with the gates.

The requirement-by-requirement breaks of ``test_gates`` are judged here by the reference; the
shipped traces (canonical, suite, witness) are judged by both and must agree exactly.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from test_gates import ALSO_ILLEGAL, CASES, COUPLED, EXPECTED, Events, control_trace

from residentkv.model.events import EVENT_ADAPTER, Envelope
from residentkv.trace.gates import CONTROLS, GATE_NAMES, REQUIREMENTS, GateResult, check_events
from residentkv.trace.reader import TraceReader
from residentkv.trace.semantics import WHY, reference_results, why_missing
from tracekit import Trace, success_path, two_claim_attribution

DATA = Path(__file__).parent.parent.parent / "src" / "residentkv" / "data"
SHIPPED = sorted(DATA.glob("traces/*.jsonl")) + sorted(DATA.glob("suite/*/traces/*.jsonl")) + \
    sorted(DATA.glob("descriptors/runtimes/traces/witness/*.jsonl"))


def events_of(records: Events) -> list[Envelope]:
    return [EVENT_ADAPTER.validate_python(dict(e, seq=i)) for i, e in enumerate(records)]


def ref(records: Events, gate: str, claim: str) -> GateResult:
    (result,) = reference_results(events_of(records), [gate], claim)
    return result


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_canonical_traces_pass_exactly_their_gates(name: str) -> None:
    reader = TraceReader(DATA / "traces" / name)
    passed: dict[str, set[str]] = {}
    for r in reference_results(list(reader.events())):
        passed.setdefault(r.claim_id, set())
        if r.passed:
            passed[r.claim_id].add(r.gate)
    assert passed == EXPECTED[name]


@pytest.mark.parametrize(("gate", "build", "claim", "requirement", "mutate"), CASES,
                         ids=[f"{c[0]}-{c[3]}" for c in CASES])
def test_breaking_one_requirement_fails_with_exactly_that_id(
    gate: str, build: Callable[[], Trace], claim: str, requirement: str,
    mutate: Callable[[Events], Events],
) -> None:
    assert ref(build().events, gate, claim).passed
    result = ref(mutate(build().events), gate, claim)
    assert result.missing == sorted({requirement, *ALSO_ILLEGAL.get((gate, requirement), ())})


@pytest.mark.parametrize(("gate", "build", "claim", "requirement", "mutate"), COUPLED,
                         ids=[f"{c[0]}-{c[3]}" for c in COUPLED])
def test_coupled_requirements_are_reported(
    gate: str, build: Callable[[], Trace], claim: str, requirement: str,
    mutate: Callable[[Events], Events],
) -> None:
    result = ref(mutate(build().events), gate, claim)
    assert not result.passed and requirement in result.missing


@pytest.mark.parametrize("name", CONTROLS)
def test_every_negative_control_fires_and_its_gate_fails(name: str) -> None:
    trace, claim, gate = control_trace(name)
    result = ref(trace.events, gate, claim)
    assert result.controls[name] is True
    assert not result.passed


@pytest.mark.parametrize("gate", GATE_NAMES)
def test_zero_events_of_the_claim_fails_every_gate(gate: str) -> None:
    result = ref(success_path().events, gate, "c-404")
    assert not result.passed and "claim_events_present" in result.missing


def test_a_malformed_trace_fails_every_gate() -> None:
    results = reference_results(events_of(success_path().events), well_formed=False)
    assert results and all("trace_well_formed" in r.missing for r in results)


def test_claims_are_judged_in_order_of_first_appearance() -> None:
    events = events_of(two_claim_attribution().events)
    assert [(r.claim_id, r.gate) for r in reference_results(events)] == [
        (r.claim_id, r.gate) for r in check_events(events)]
    assert [r.claim_id for r in reference_results(events, ["lifecycle"])] == ["c-a", "c-b"]


def test_an_unknown_gate_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown gate"):
        reference_results([], ["nope"])


def test_every_requirement_has_a_one_line_why() -> None:
    ids = {r for reqs in REQUIREMENTS.values() for r in reqs}
    assert set(WHY) == ids
    for r in ids:
        assert why_missing(r) and "\n" not in why_missing(r)


@pytest.mark.parametrize("path", SHIPPED, ids=[str(p.relative_to(DATA)) for p in SHIPPED])
def test_shipped_traces_agree_with_the_streaming_gates(path: Path) -> None:
    reader = TraceReader(path, fast=True)
    events = list(reader.events())
    well_formed = reader.problem_count == 0
    streaming = check_events(events, well_formed=well_formed)
    reference = reference_results(events, well_formed=well_formed)
    assert [(r.claim_id, r.gate, r.passed, r.missing, r.controls) for r in streaming] == [
        (r.claim_id, r.gate, r.passed, r.missing, r.controls) for r in reference]


def test_evidence_names_the_deciding_events() -> None:
    records = two_claim_attribution().events
    (r,) = reference_results(events_of(records), ["failure_outcome"], "c-a")
    kinds = {i: e["event"] for i, e in enumerate(records)}
    assert kinds[r.evidence["refusal_attributed"][0]] == "active_request_refused"
    refusal, finish = r.evidence["outcome_before_finish"]
    assert refusal == r.evidence["refusal_attributed"][0]
    assert kinds[finish] == "request_finished"
    assert json.dumps(r.evidence)  # plain seqs, printable
