"""Trace mutants: every operator applies, every mutant of a passing trace is killed, and a
weakened gate lets mutants survive (so the mutants can see a broken checker)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from residentkv.suite import trace_mutants
from residentkv.suite.trace_mutants import OPERATORS, judge, mutants_of
from residentkv.trace import tracker

TRACES = Path(__file__).resolve().parents[2] / "src" / "residentkv" / "data" / "traces"


def run_all() -> tuple[Counter[str], list[str]]:
    killed: Counter[str] = Counter()
    survivors: list[str] = []
    for path in sorted(TRACES.glob("*.jsonl")):
        events = [json.loads(line) for line in path.read_text().splitlines()]
        for mutant, passed in mutants_of(path.name, events):
            verdict = judge(mutant, passed)
            if verdict.killed:
                killed[mutant.operator] += 1
            else:
                survivors.append(f"{mutant.parent} {mutant.gate}: {mutant.description}: "
                                 f"{verdict.why}")
    return killed, survivors


def test_every_mutant_of_the_shipped_traces_is_killed() -> None:
    killed, survivors = run_all()
    assert survivors == []
    assert set(killed) == set(OPERATORS)  # every operator found something to mutate


def test_a_gate_that_ignores_ordering_lets_mutants_survive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = tracker.FailureChain.requirements

    def sloppy(self, before):  # type: ignore[no-untyped-def]
        ok = original(self, before)
        if self.refusal is not None:  # "a refusal exists" instead of "before the finish"
            ok["outcome_before_finish"] = [self.refusal]
        return ok

    monkeypatch.setattr(tracker.FailureChain, "requirements", sloppy)
    _, survivors = run_all()
    assert any("move the refusal after request_finished" in s for s in survivors)


def test_mutants_never_pass_a_gate_their_parent_failed() -> None:
    path = TRACES / "claimed_load_failure.jsonl"
    events = [json.loads(line) for line in path.read_text().splitlines()]
    mutants = list(mutants_of(path.name, events))
    assert mutants
    for mutant, passed in mutants:
        assert passed == {"failure_outcome"}
        assert "still passes" not in judge(mutant, passed).why


def test_duplicate_seq_mutants_keep_the_duplicated_seq() -> None:
    path = TRACES / "success_path.jsonl"
    events = [json.loads(line) for line in path.read_text().splitlines()]
    dup = [m for m, _ in mutants_of(path.name, events) if m.operator == "duplicate_seq"]
    seqs = [json.loads(line)["seq"] for line in dup[0].events]
    assert len(seqs) != len(set(seqs))
    assert trace_mutants.OTHER_CLAIM.startswith("mutant:")
