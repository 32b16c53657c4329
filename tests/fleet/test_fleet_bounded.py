"""The streaming gate's bounded state never drops an open obligation.

At every event of generated fleets, the set of claim-carrying requests the streaming gate keeps
as open (started, and unfinished or undecided) equals the one computed from the whole prefix of
the stream; a request that finished is out of the working set, and every claim-carrying request
ends as a row of the judgement.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from fleetgen import GenFleet, defective_fleets, free_fleets
from hypothesis import given, settings
from hypothesis import strategies as st

from residentkv.fleet import FleetGate, reference_fleet
from residentkv.fleet.view import DECISION_OF, OpenedStream


def open_in_prefix(path: str, prefix: list[Any]) -> set[tuple[str, str]]:
    """From the whole prefix: claim-carrying requests unfinished, or with no decision naming
    their claim yet, of the stream being read (SPEC §9.1: a file that opens with
    stream_started holds one stream per incarnation; a stream's requests are settled when the
    next begins)."""
    found = set()
    openers = [k for k, o in enumerate(prefix) if k and o.event == "stream_started"]
    begin = openers[-1] if prefix and prefix[0].event == "stream_started" and openers else 0
    for pos, e in enumerate(prefix):
        if pos < begin:
            continue
        if e.event != "request_started" or e.request_id is None or e.claim_ref is None:
            continue
        if any(o.event == "request_started" and o.request_id == e.request_id
               for o in prefix[begin:pos]):
            continue
        later = [(k, o) for k, o in enumerate(prefix) if k > pos
                 and o.request_id == e.request_id]
        finished = any(o.event == "request_finished" for _, o in later)
        decided = any(o.event in DECISION_OF and (o.claim_id == e.claim_ref or (
            o.event == "claim_rejected" and o.claim_id is None
            and decided_before(prefix[:k], e.claim_ref))) for k, o in later)
        if not (finished and decided):
            found.add((path, e.request_id))
    return found


def decided_before(events: list[Any], claim: str) -> bool:
    """The claim was accepted or rejected, naming it, among *events* (an unnamed rejection of
    it is then its decision)."""
    return any(o.event in ("claim_accepted", "claim_rejected") and o.claim_id == claim
               for o in events)


def check(f: GenFleet) -> None:
    with tempfile.TemporaryDirectory() as folder:
        paths = [str(p) for p in f.files(Path(folder))]
        gate = FleetGate(paths)
        for path in paths:
            opened = OpenedStream(path, fast=True)
            current = gate.begin(path)
            prefix: list[Any] = []
            for line, event in opened:
                current.feed(line, event)
                prefix.append(event)
                assert gate.open_requests() == open_in_prefix(path, prefix)
                # the working set holds unfinished requests only; finished ones are settled
                assert all(req.finish_line is None for req in current.open.values())
            gate.end(opened)
            assert gate.open_requests() == set()
        judgement = gate.result()
        assert judgement == reference_fleet(paths)


@settings(max_examples=120)
@given(st.one_of(free_fleets(), defective_fleets()))
def test_open_obligations_are_never_dropped(f: GenFleet) -> None:
    check(f)
