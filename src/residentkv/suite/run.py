"""The whole suite: every case, then mutants of every passing piece of evidence in it."""

from __future__ import annotations

import random
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from residentkv.model.events import event_to_dict
from residentkv.suite import descriptor_mutants, trace_mutants
from residentkv.suite.runner import CaseResult, case_folders, run_case
from residentkv.trace.reader import TraceReader


@dataclass
class OperatorTally:
    generated: int = 0
    killed: int = 0
    survivors: list[str] = field(default_factory=list)


@dataclass
class SuiteResult:
    """Cases and mutants of one suite run."""

    cases: list[CaseResult]
    operators: dict[str, OperatorTally]

    @property
    def passed(self) -> bool:
        return bool(self.cases) and all(c.passed for c in self.cases) and not any(
            t.survivors for t in self.operators.values())

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "cases": [{"id": c.id, "kind": c.case.kind if c.case else None,
                       "covers": c.case.covers if c.case else None, "passed": c.passed,
                       "classes": dict(sorted(c.classes.items())), "codes": sorted(c.codes),
                       "mismatches": list(c.mismatches)} for c in self.cases],
            "mutants": {name: {"generated": t.generated, "killed": t.killed,
                               "survived": len(t.survivors), "survivors": t.survivors}
                        for name, t in sorted(self.operators.items())},
        }


def _trace_parents(cases: list[CaseResult]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Every distinct trace file of a passing case (mutants start from evidence that held)."""
    seen: set[Path] = set()
    for c in cases:
        if not c.passed or c.case is None:
            continue
        for exp in c.case.traces:
            path = (Path(c.path) / exp.path).resolve()
            if path in seen or not path.is_file():
                continue
            seen.add(path)
            reader = TraceReader(path)
            events = [event_to_dict(e) for _, e in reader]
            # a parent must be well-formed evidence: mutating a broken trace tests nothing
            if events and not reader.problem_count:
                yield f"{c.id}/{exp.path}", events


def _all_trace_mutants(cases: list[CaseResult]) -> list[tuple[trace_mutants.TraceMutant,
                                                               set[str]]]:
    return [pair for name, events in _trace_parents(cases)
            for pair in trace_mutants.mutants_of(name, events)]


def run_suite(root: Path, mutants: int | None = None, seed: int = 0) -> SuiteResult:
    """Run every case under *root*, then up to *mutants* mutants (all when None)."""
    cases = [run_case(folder) for folder in case_folders(root)]
    operators = {name: OperatorTally() for name in (*trace_mutants.OPERATORS,
                                                    *descriptor_mutants.OPERATORS)}
    passing = [(Path(c.path), c.case) for c in cases if c.passed and c.case is not None]
    with tempfile.TemporaryDirectory(prefix="residentkv-mutants-") as scratch:
        pool: list[Callable[[], tuple[str, bool, str]]] = [
            partial(_judge_trace, m, passed) for m, passed in _all_trace_mutants(cases)]
        pool += [partial(_judge_descriptor, parent, m) for parent, m in
                 descriptor_mutants.descriptor_mutants(passing, Path(scratch))]
        if mutants is not None and mutants < len(pool):
            pool = random.Random(seed).sample(pool, mutants)
        for job in pool:
            operator, killed, survivor = job()
            tally = operators[operator]
            tally.generated += 1
            if killed:
                tally.killed += 1
            else:
                tally.survivors.append(survivor)
    return SuiteResult(cases, operators)


def _judge_trace(m: trace_mutants.TraceMutant, parent_passed: set[str]) -> tuple[str, bool, str]:
    v = trace_mutants.judge(m, parent_passed)
    return m.operator, v.killed, f"{m.parent} [{m.gate} {m.claim}] {m.description}: {v.why}"


def _judge_descriptor(parent: descriptor_mutants.DescriptorParent,
                      m: descriptor_mutants.DescriptorMutant) -> tuple[str, bool, str]:
    v = parent.judge(m)
    return m.operator, v.killed, f"{m.parent} [{m.row_id}] {m.description}: {v.why}"


def summary_lines(result: SuiteResult) -> list[str]:
    """One line per category: case kinds, then one per mutation operator."""
    kinds = Counter(c.case.kind if c.case else "invalid" for c in result.cases)
    passed = Counter(c.case.kind if c.case else "invalid" for c in result.cases if c.passed)
    lines = [f"suite cases ({kind}): {passed[kind]}/{n} passed" for kind, n in sorted(
        kinds.items())]
    for name, t in sorted(result.operators.items()):
        lines.append(f"suite mutants {name}: generated {t.generated}, killed {t.killed}, "
                     f"survived {len(t.survivors)}")
    return lines
