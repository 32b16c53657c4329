"""Gate results of trace files: one pass per trace, however many anchors cite it.

Trace anchors name one gate and one claim each; judging each anchor with its own read would
cost (anchors × trace size). Here a trace is read once into its stream facts, kept for the rest
of the run under the trace's identity (its resolved path, size, modification time and sha256),
and every (gate, claim) an anchor names is judged from those facts -- a claim the trace never
mentions included, so the answer is the one ``trace check --claim`` gives. A trace that changes
while it is read is refused, never judged on a mixture of two contents.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path

from residentkv.errors import UserInputError
from residentkv.trace.gates import GateResult, judge
from residentkv.trace.reader import TraceReader
from residentkv.trace.tracker import StreamFacts, collect


@dataclass(frozen=True)
class TraceKey:
    """What identifies one trace's content within a run."""

    path: Path
    size: int
    mtime_ns: int
    sha256: str


def trace_key(target: Path, sha256: str) -> TraceKey:
    """The key of *target* as it is now, whose content hashed to *sha256*."""
    st = target.stat()
    return TraceKey(target.resolve(), st.st_size, st.st_mtime_ns, sha256)


class TraceChanged(UserInputError):
    """The trace file changed between its hash and its gates."""

    code = "A004"


@dataclass
class TraceRun:
    """One read of one trace: its facts, its problems, and the judgements asked of it."""

    facts: StreamFacts
    #: problem messages: the reader's (the first ones kept), no valid event, a second finish
    problems: list[str]
    problem_count: int
    _results: dict[tuple[str, str], GateResult] = field(default_factory=dict)

    def result(self, gate: str, claim: str) -> GateResult:
        """*gate* judged for *claim* (computed once)."""
        key = (gate, claim)
        if key not in self._results:
            self._results[key] = judge(self.facts, gate, claim,
                                       well_formed=self.problem_count == 0)
        return self._results[key]


class TraceRuns:
    """The :class:`TraceRun` of each trace of a run, read once per :class:`TraceKey`."""

    def __init__(self) -> None:
        self._runs: dict[TraceKey, TraceRun] = {}
        #: how many times a trace was read (one per distinct trace content)
        self.passes = 0

    def run(self, key: TraceKey) -> TraceRun:
        """The trace *key* names, read once.

        Raises :class:`~residentkv.errors.UserInputError` when the trace cannot be read, and
        :class:`TraceChanged` when it is no longer the file that was hashed.
        """
        found = self._runs.get(key)
        if found is None:
            found = _read(key.path)
            self.passes += 1
            try:
                now = trace_key(key.path, key.sha256)
            except OSError as e:
                raise TraceChanged(f"the trace vanished while it was read: {e}",
                                   path=str(key.path)) from None
            if now != key:
                raise TraceChanged("the trace changed while it was read (size or "
                                   "modification time); its gates are not judged",
                                   path=str(key.path))
            self._runs[key] = found
        return found


def _read(path: Path) -> TraceRun:
    """Read a trace as ``trace check`` does (the same reader, the same facts)."""
    reader = TraceReader(path, fast=True)
    facts = collect(chain.from_iterable(reader.event_chunks()))
    problems = [p.message for p in reader.problems]
    extra = 0
    if reader.events_read == 0:
        problems.append("no valid event in the trace")
        extra += 1
    if facts.duplicate_finish is not None:
        seq, request = facts.duplicate_finish
        problems.append(f"request {request!r} finished twice (second request_finished at "
                        f"seq {seq})")
        extra += 1
    return TraceRun(facts, problems, reader.problem_count + extra)
