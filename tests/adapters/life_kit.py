"""Checks of a sink that holds several streams (one per engine incarnation, SPEC §9.1).

- :func:`streams` splits a sink into its streams (each opened by ``stream_started``);
- :func:`assert_legal` judges the claims' histories across the streams with the gates: the
  streams are joined in file order (one seq, later ``stream_started`` lines dropped), so each
  claim's automaton runs on from one incarnation into the next -- a head-of-stream ending
  meets the state the claim was left in -- and every claim must be a legal run
  (``legal_transitions``) of a well-formed trace (``trace_well_formed``); each stream on its
  own must also read without a problem;
- :func:`assert_decided_once_and_ended` checks that every claim id is decided once in the
  whole sink and that every accepted claim of a stream that stopped (closed, or followed by
  another incarnation's stream) ends in that stream or at the head of the next one.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from residentkv.model.vocabulary import Requirement
from residentkv.trace.gates import check_trace
from residentkv.trace.reader import TraceReader

Event = dict[str, Any]

ENDINGS = frozenset({"claim_released", "claim_expired", "claim_demoted", "claim_harmed",
                     "claim_restore_failed"})


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


def _write(evs: list[Event], path: Path) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in evs), encoding="utf-8")
    return path


def joined(path: str | Path, out: Path) -> Path:
    """The sink's streams as one stream: seq renumbered in file order, the later
    ``stream_started`` lines left out."""
    evs = [e for i, s in enumerate(streams(path)) for e in s
           if i == 0 or e["event"] != "stream_started"]
    return _write([dict(e, seq=n) for n, e in enumerate(evs)], out)


def reader_problems(path: Path) -> list[Any]:
    reader = TraceReader(path)
    for _ in reader.events():
        pass
    return reader.problems


def assert_legal(path: str | Path, work: Path) -> None:
    """Every stream reads cleanly and every claim's history across them is a legal run."""
    for i, stream in enumerate(streams(path)):
        one = _write([dict(e) for e in stream], work / f"stream-{i}.jsonl")
        assert reader_problems(one) == [], (path, i)
        assert [e["seq"] for e in stream] == list(range(len(stream))), (path, i)
    whole = joined(path, work / "joined.jsonl")
    check = check_trace(whole, gates=("observation",))
    bad = {Requirement.LEGAL_TRANSITIONS.value, Requirement.TRACE_WELL_FORMED.value,
           Requirement.STABLE_IDENTITY.value}
    for result in check.results:
        assert not bad & set(result.missing), (result.claim_id, result.missing,
                                               result.model_dump().get("illegal"))
    assert not check.problems or all(p.code == "T012" for p in check.problems), check.problems


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
