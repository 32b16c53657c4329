"""Differential properties of the trace gates over generated traces (tests/strategies/traces.py).

(a) the streaming gates' verdicts (``passed``, ``missing``, ``controls``), every gate with
    ``conformance``, and the conformance stream verdict (failed and live claims, the streams)
    equal the reference semantics' on every generated trace, legal, defective or with raw-line
    defects, single-stream files and files of several incarnations' streams (SPEC §9.1);
(b) a trace the reference fails never passes streaming;
(c) the oracle, from SPEC §2–§4 alone: a legal trace passes the gates it should and fails the
    others; every defect that must break gate G makes G fail for the claim it names — checked
    against both implementations.

Every trace is read from its JSONL bytes, as a user's trace would be. `make test` runs these
derandomized (the suite's profile); `make fuzz-gates` runs them with the `fuzz` profile.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings

from residentkv.trace.gates import ALL_GATE_NAMES, GateResult, StreamVerdict, check_trace
from residentkv.trace.reader import TraceReader
from strategies.traces import GenTrace, Kind, families, life_families

try:
    from residentkv.trace.semantics import reference_judgement
except ImportError:  # the reference semantics is not there yet: (a) and (b) cannot run
    reference_judgement = None

needs_reference = pytest.mark.skipif(
    reference_judgement is None,
    reason="residentkv.trace.semantics (the reference semantics) is not importable",
)
NAME = "generated.jsonl"
LARGEST_BUDGET = 700
Verdict = tuple[bool, list[str], dict[str, bool]]
Verdicts = dict[tuple[str, str], Verdict]
#: the results of every gate and the conformance stream verdict
Judged = tuple[list[GateResult], StreamVerdict | None]


def budget(examples: int) -> Callable[[Any], Any]:
    """*examples* per property in `make test`; under the fuzz profile the same share of the
    profile's number (``RESIDENTKV_FUZZ_EXAMPLES`` for the largest budget here)."""
    if settings.get_current_profile_name() == "fuzz":
        scaled = settings.default.max_examples * examples // LARGEST_BUDGET
        return settings(max_examples=max(1, scaled))
    return settings(max_examples=examples)


def streaming_judgement(data: bytes) -> Judged:
    """Every gate, conformance included (SPEC §9.1), and its stream verdict."""
    check = check_trace(NAME, ALL_GATE_NAMES, stream=io.BytesIO(data))
    return check.results, check.conformance


def streaming(data: bytes) -> list[GateResult]:
    return streaming_judgement(data)[0]


def reference_judged(data: bytes) -> Judged:
    """The reference semantics on the events the reader accepts (pydantic, not the mirror)."""
    assert reference_judgement is not None
    reader = TraceReader(NAME, stream=io.BytesIO(data))
    events = list(reader.events())
    results, verdict = reference_judgement(events, ALL_GATE_NAMES,
                                           well_formed=reader.problem_count == 0)
    return list(results), verdict


def reference(data: bytes) -> list[GateResult]:
    return reference_judged(data)[0]


def verdicts(results: Sequence[GateResult]) -> Verdicts:
    return {(r.claim_id, r.gate): (r.passed, list(r.missing), dict(r.controls))
            for r in results}


def agree(t: GenTrace) -> tuple[Judged, Judged]:
    """(b), then (a); the conformance stream verdicts (live and failed claims) agree too.
    Returns both judgements."""
    data = t.data()
    (results, verdict), (ref_results, ref_verdict) = (streaming_judgement(data),
                                                      reference_judged(data))
    ours, ref = verdicts(results), verdicts(ref_results)
    false_pass = sorted(k for k, v in ours.items() if v[0] and not ref.get(k, (False,))[0])
    assert not false_pass, report(t, f"(b) streaming passes what the reference fails: "
                                     f"{false_pass}")
    diff = {k: differences(ours.get(k), ref.get(k)) for k in sorted(ours.keys() | ref.keys())
            if ours.get(k) != ref.get(k)}
    assert not diff, report(t, f"(a) streaming differs from the reference: {diff}")
    if verdict is not None and ref_verdict is not None:
        mine = (verdict.passed, verdict.failed, verdict.live,
                [(s.index, s.incarnation, s.end, s.offset) for s in verdict.streams])
        theirs = (ref_verdict.passed, ref_verdict.failed, ref_verdict.live,
                  [(s.index, s.incarnation, s.end, s.offset) for s in ref_verdict.streams])
        assert mine == theirs, report(t, f"(a) stream verdicts differ: {mine} != {theirs}")
    return (results, verdict), (ref_results, ref_verdict)


def differences(ours: Verdict | None, ref: Verdict | None) -> dict[str, Any]:
    """What differs, as (streaming, reference) pairs."""
    if ours is None or ref is None:
        return {"result": (ours is not None, ref is not None)}
    out: dict[str, Any] = {}
    if ours[0] != ref[0]:
        out["passed"] = (ours[0], ref[0])
    if ours[1] != ref[1]:
        out["missing"] = (ours[1], ref[1])
    controls = {c: (ours[2].get(c), ref[2].get(c)) for c in sorted(ours[2].keys() | ref[2].keys())
                if ours[2].get(c) != ref[2].get(c)}
    if controls:
        out["controls"] = controls
    return out


def oracle(t: GenTrace, judged: Judged) -> None:
    """(c): every (claim, gate) the oracle decides has that verdict (no result is a fail); a
    legal file lists exactly the claims open where its reading stops as live."""
    results, verdict = judged
    if t.live is not None and verdict is not None:
        assert set(verdict.live) == t.live, report(
            t, f"(c) live claims {verdict.live}, expected {sorted(t.live)}")
    got = {(r.claim_id, r.gate): r for r in results}
    wrong = {}
    for key, must_pass in sorted(t.expect.items()):
        r = got.get(key)
        if (r is not None and r.passed) != must_pass:
            wrong[key] = ("must pass" if must_pass else "must fail",
                          "no result" if r is None else r.missing)
    assert not wrong, report(t, f"(c) verdicts against the SPEC oracle: {wrong}")


def report(t: GenTrace, what: str) -> str:
    return f"{what}\n{t.describe()}\n{t.compact()}"


# Each example is a family of traces sharing one legal build: the legal trace, four defective
# ones and one with raw-line defects (six traces per example).
@needs_reference
@budget(LARGEST_BUDGET)
@given(families())
def test_streaming_equals_reference(family: list[GenTrace]) -> None:
    for t in family:
        agree(t)


# Wide streams: more claims named by failures and outcomes (failed restores, hard_protected
# refusals) than the streaming gates keep by name, and more than their roster keeps.
@needs_reference
@budget(4)
@given(families(max_claims=70, min_claims=66, defective=1,
                kinds_from=(Kind.FAILURE, Kind.HARD)))
def test_wide_streams_streaming_equals_reference(family: list[GenTrace]) -> None:
    for t in family:
        agree(t)


@budget(900)
@given(families())
def test_oracle_streaming(family: list[GenTrace]) -> None:
    for t in family:
        oracle(t, streaming_judgement(t.data()))


@needs_reference
@budget(300)
@given(families())
def test_oracle_reference(family: list[GenTrace]) -> None:
    for t in family:
        oracle(t, reference_judged(t.data()))


# Files of several streams, one per engine incarnation (SPEC §9.1): claims ended by their
# process's stop (at a graceful close, or at the head of the next stream after a crash), a
# failure chain cut off by a crash, the last stream left open (its claims live); defects that
# make a claim vanish, decide it twice, restore it after its end, hide it in a gap, and the
# single-stream grammar kept inside one stream. (a), (b) and (c) on each trace.
@needs_reference
@budget(300)
@given(life_families())
def test_incarnations_streaming_equals_reference_and_the_oracle(family: list[GenTrace]) -> None:
    for t in family:
        ours, ref = agree(t)
        oracle(t, ours)
        oracle(t, ref)


def test_fuzz_profile_is_registered() -> None:
    """`make fuzz-gates` selects the profile by name; the examples come from the environment."""
    fuzz = settings.get_profile("fuzz")
    assert fuzz.max_examples == int(os.environ.get("RESIDENTKV_FUZZ_EXAMPLES", "50000"))
    assert not fuzz.derandomize
