"""Meta-tests of the suite: it covers every finding code, every bundle requirement (broken
and satisfied), every SPEC §8 item, and has enough cases."""

from __future__ import annotations

import pytest

from residentkv.codes import CODES
from residentkv.lowering.bundles import load_bundles
from residentkv.suite.run import SuiteResult, run_suite
from residentkv.suite.runner import shipped_suite

#: codes no case can produce, and why (each is covered by unit tests instead)
EXEMPT = {
    "A005": "needs a symlink or archive member leaving the source root; package data ships "
            "neither (tests/lowering covers both)",
    "T007": "needs a line over 1 MiB in package data (tests/trace/test_reader.py covers it)",
    "T010": "an unreadable trace makes a case unevaluable, which the runner reports as a "
            "suite failure by design",
    "T021": "needs a device, FIFO or socket in package data (tests/trace/test_strict_reading.py "
            "covers them)",
    "T012": "cases always name the claim they judge (tests/trace/test_gates.py covers it)",
    "A050": "produced by `anchors verify` only, which cases do not run "
            "(tests/lowering/test_lowering_anchors.py covers it)",
    "A053": "needs a recorded run of the package that differs from its manifest entry; the "
            "package ships none (tests/lowering/test_lowering_identity.py covers it)",
    "A035": "no case ships a bad attestation (tests/lowering/test_lowering_attest.py covers it)",
    "A013": "retired by SPEC §7.2: a native emitter is decided by the runtime's RECORD (A051), "
            "never by its name; the code is kept, never reused",
    "A009": "needs a root that names the emitter's distribution: a statement signed with "
            "emitter.distribution (the suite's key was discarded after signing) or a recorded "
            "run of the package, which no case can cite (tests/lowering/test_lowering_binding.py "
            "covers it)",
    "A054": "needs a statement naming a distribution its key may not speak for, signed by the "
            "suite's key (discarded after signing) (tests/lowering/test_lowering_binding.py "
            "covers it)",
    "A055": "needs a statement naming another runtime artifact, signed by the suite's key "
            "(discarded after signing) (tests/lowering/test_lowering_trust.py covers it)",
    "A056": "produced by `attest verify` only, which cases do not run "
            "(tests/lowering/test_lowering_verdicts.py covers it)",
    "T050": "produced by `residentkv observe` before it observes anything, which cases do not "
            "run (tests/observe/test_command.py covers it)",
    "T051": "produced by `residentkv observe --server` against a live server, which cases do not "
            "run (tests/observe/test_discovery.py covers it)",
    "T052": "produced by `residentkv observe` stopped before it subscribes, which cases do not "
            "run (tests/observe/test_stopping.py covers it)",
}

SPEC_8 = [
    "priority-only as hard_protected",
    "TTL/duration as expiring without expiry-before-loss events",
    "host offload as offloadable without restore-before-reuse",
    "block events as claim telemetry",
    "active no-evict scheduling as resident protection",
    "KV-aware routing as acceptance",
    "write no-admit as protection",
    "generic counters only",
    "ordinary offload without a claim",
    "wrong-claim failure",
    "unclaimed failure",
    "fallback recompute",
    "restore after reuse",
    "post-hoc naming",
    "ambiguous identity",
    "missing token map",
    "blocking-claim smear",
    "outcome after request termination",
    "admission refusal counted as restore outcome",
    "drifted source anchor",
    "doc-only evidence",
    "adapter evidence claimed as native",
    "expect that disagrees",
    "empty trace",
    "empty evidence list",
]


@pytest.fixture(scope="module")
def suite() -> SuiteResult:
    return run_suite(shipped_suite(), mutants=0)


def test_at_least_35_cases_all_passing(suite: SuiteResult) -> None:
    assert len(suite.cases) >= 35
    assert all(c.passed for c in suite.cases)


def test_every_spec_8_item_has_a_case(suite: SuiteResult) -> None:
    covered = {c.case.covers for c in suite.cases if c.case is not None}
    assert [item for item in SPEC_8 if item not in covered] == []


def test_every_finding_code_is_produced_by_a_case(suite: SuiteResult) -> None:
    produced = set().union(*(c.codes for c in suite.cases))
    data_codes = {c for c in CODES if c[0] in "DAOT"}
    assert sorted(data_codes - produced - set(EXEMPT)) == []
    assert not set(EXEMPT) & produced, "an exempt code is produced: drop the exemption"


def test_every_bundle_requirement_is_broken_and_satisfied(suite: SuiteResult) -> None:
    broken: set[str] = set()
    satisfied: set[str] = set()
    for case in suite.cases:
        for result in case.gate_results:
            broken |= set(result.missing)
            satisfied |= set(result.evidence)
    required = {req for bundle in load_bundles().values()
                for ob in bundle.obligations.values() for req in ob.requirements}
    assert sorted(required - broken) == []
    assert sorted(required - satisfied) == []


def test_positive_and_negative_cases_exist_for_every_obligation(suite: SuiteResult) -> None:
    for kind in ("positive", "negative"):
        seen = {ob for c in suite.cases if c.case and c.case.kind == kind
                for ob in c.case.obligations}
        assert seen == {"claim_identity", "materialization_predicate", "ordered_lifecycle",
                        "claim_scoped_outcomes"}, kind
