"""Checks of a sink that holds several streams (one per engine incarnation, SPEC §9.1).

- :func:`assert_legal` judges the whole sink with gate ``conformance`` (the reader follows the
  claims across the streams): no reader problem, every claim a legal run
  (``legal_transitions``) of a well-formed trace (``trace_well_formed``) with one identity, and
  the conformance verdict passed -- decided once, every failure answered, every loss announced,
  nothing vanished (claims open where the reading stops are live);
- :func:`assert_decided_once_and_ended` checks the same promises directly on the lines, the way
  the adapter writes them: every claim id decided once in the sink, and every claim accepted in
  a stream that stopped (closed, or followed by another incarnation's stream) ended in that
  stream or among the head endings of the next one;
- :func:`streams` splits a sink into its streams (each opened by ``stream_started``).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from residentkv.model.automaton import ENDING_STATE
from residentkv.model.vocabulary import Requirement
from residentkv.trace.gates import check_trace

Event = dict[str, Any]

#: the events that end a claim: the automaton's one source
ENDINGS = frozenset(ENDING_STATE)


def events(path: str | Path) -> list[Event]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def streams(path: str | Path) -> list[list[Event]]:
    """The sink's streams, in file order."""
    out: list[list[Event]] = []
    for e in events(path):
        if e["event"] == "stream_started" or not out:
            out.append([])
        out[-1].append(e)
    return out


def assert_legal(path: str | Path) -> None:
    """The sink reads cleanly, every claim's history across its streams is a legal run, and
    gate ``conformance`` passes."""
    check = check_trace(path, gates=("conformance",))
    assert check.problems == [], check.problems
    bad = {Requirement.LEGAL_TRANSITIONS.value, Requirement.TRACE_WELL_FORMED.value,
           Requirement.STABLE_IDENTITY.value}
    for result in check.results:
        assert not bad & set(result.missing), (result.claim_id, result.missing, result.illegal)
    verdict = check.conformance
    assert verdict is not None and verdict.passed, (
        verdict, [(r.claim_id, r.missing) for r in check.results if not r.passed])
    assert len(verdict.streams) == len(streams(path))


def assert_decided_once_and_ended(path: str | Path) -> None:
    """Each claim id is decided (accepted or rejected, naming it) once in the sink, and every
    claim accepted in a stream that stopped ends before the next stream's first request."""
    all_events = events(path)
    decided = Counter(e["claim_id"] for e in all_events
                      if e["event"] in ("claim_accepted", "claim_rejected") and e["claim_id"])
    assert all(n == 1 for n in decided.values()), {c: n for c, n in decided.items() if n > 1}
    parts = streams(path)
    for i, stream in enumerate(parts):
        closed = stream[-1]["event"] == "stream_closed"
        if not closed and i == len(parts) - 1:
            continue  # the live stream: its open claims are live
        open_claims = {e["claim_id"] for e in stream if e["event"] == "claim_accepted"}
        open_claims -= {e["claim_id"] for e in stream if e["event"] in ENDINGS}
        if closed:
            assert not open_claims, (i, sorted(open_claims))
            continue
        head = []
        for e in parts[i + 1][1:]:
            if e["event"] not in ENDINGS:
                break
            head.append(e["claim_id"])
        assert open_claims <= set(head), (i, sorted(open_claims - set(head)))
