"""The engine's sink read back as its journal (SPEC §9.1), without vLLM or torch.

A new incarnation opening a stream on a sink ends, at the head of its stream, every claim an
earlier incarnation left open, and keeps every decided claim id decided. The writer ends a torn
last line before its own stream starts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from residentkv.adapters.vllm.config import parse_connector_config
from residentkv.adapters.vllm.control import Operator
from residentkv.adapters.vllm.journal import read_journal
from residentkv.trace.gates import check_trace
from residentkv.trace.writer import EventWriter, sink_events

STARTED = {"emitter": {"name": "t", "version": "0"}, "runtime": {"name": "vllm", "version": "0"}}
IDENT = {"object_id": "o", "cache_identity": "ci", "request_token_map_id": "m",
         "predicate_id": "leading-2"}


def _write_crashed_stream(sink: Path) -> None:
    """One incarnation's stream, cut off (no stream_closed): c1 offloaded, c2 accepted and
    never materialized, c3 rejected, c4 released, c5 inside a restore cycle."""
    with EventWriter(sink, source="t") as w:
        w.emit("stream_started", incarnation="first", **STARTED)
        for cid in ("c1", "c2", "c4", "c5"):
            w.emit("claim_accepted", claim_id=cid, request_id="r", registration="pre_registered",
                   protection_mode="offloadable", footprint_blocks=2,
                   predicate={"id": "leading-2", "kind": "leading_prefix_at_least", "blocks": 2},
                   **IDENT)
        for cid in ("c1", "c4", "c5"):
            w.emit("claim_materialized", claim_id=cid, request_id="r", surviving=2, leading=2,
                   required=2, holds=True, tier="device", **IDENT)
        w.emit("claim_rejected", claim_id="c3", request_id="r", reason="host tier full")
        w.emit("claim_released", claim_id="c4", reason="operator release", **IDENT)
        w.emit("claim_restore_required", claim_id="c5", request_id="r2", generation=1,
               from_tier="host", to_tier="device", tokens=256, **IDENT)
    with sink.open("a", encoding="utf-8") as fh:
        fh.write('{"schema": "residentkv.event/v1", "seq": 9, "ev')  # killed mid-write


def _lines(sink: Path) -> list[str]:
    return sink.read_text(encoding="utf-8").splitlines()


def test_the_journal_knows_every_decision_and_every_claim_left_open(tmp_path: Path) -> None:
    sink = tmp_path / "sink.jsonl"
    _write_crashed_stream(sink)
    journal = read_journal(sink)
    assert (journal.streams, journal.closed, journal.incarnation) == (1, False, "first")
    assert list(journal.open) == ["c1", "c2", "c5"]
    assert journal.decisions.get("c3").describe() == "rejected (host tier full)"  # type: ignore[union-attr]
    assert journal.decisions.get("c4").describe() == "released (operator release)"  # type: ignore[union-attr]
    endings = dict((f["claim_id"], (e, f)) for e, f in journal.close_open("engine_restarted"))
    event, harm = endings["c1"]
    assert event == "claim_harmed" and harm["cause"] == "engine_restarted"
    assert harm["before"]["holds"] and not harm["after"]["holds"]
    assert harm["after"]["surviving"] == 0 and harm["object_id"] == "o"
    assert endings["c2"][0] == "claim_released"  # never materialized: nothing to lose
    assert endings["c5"][0] == "claim_harmed"  # inside a restore cycle
    assert journal.open == {}
    assert journal.decisions.get("c1").describe() == "harmed (engine_restarted)"  # type: ignore[union-attr]


def test_a_new_incarnation_ends_what_the_last_one_left_open_at_the_head_of_its_stream(
        tmp_path: Path) -> None:
    sink = tmp_path / "sink.jsonl"
    _write_crashed_stream(sink)
    before = _lines(sink)
    op = Operator(parse_connector_config({"host_tier_bytes": 1, "event_sink": str(sink)}))
    op.writer.close()
    after = _lines(sink)
    assert after[: len(before)] == before  # the old stream is left as it was
    new = [json.loads(x) for x in after[len(before):]]
    head = new[0]
    assert head["event"] == "stream_started" and head["seq"] == 0
    assert head["incarnation"] == op.incarnation != "first"
    assert [(e["event"], e["claim_id"]) for e in new[1:]] == [
        ("claim_harmed", "c1"), ("claim_released", "c2"), ("claim_harmed", "c5")]
    assert [e["seq"] for e in new] == [0, 1, 2, 3]
    assert op.decisions.get("c3") is not None and op.decisions.get("c9") is None
    # a third incarnation finds nothing open any more
    again = Operator(parse_connector_config({"host_tier_bytes": 1, "event_sink": str(sink)}))
    again.writer.close()
    assert json.loads(_lines(sink)[-1])["event"] == "stream_started"


def test_a_graceful_close_ends_the_stream_and_nothing_is_left_open(tmp_path: Path) -> None:
    sink = tmp_path / "sink.jsonl"
    op = Operator(parse_connector_config({"host_tier_bytes": 1, "event_sink": str(sink)}))
    seen: list[str] = []
    op.on_close.append(seen.append)
    op.close()
    op.close()  # idempotent
    events = [json.loads(x) for x in _lines(sink)]
    assert [e["event"] for e in events] == ["stream_started", "stream_closed"]
    assert events[-1]["reason"] == "shutdown" and seen == ["shutdown"]
    assert read_journal(sink).closed
    assert op.emit("request_started", request_id="late")["seq"] is None  # after the close
    assert len(_lines(sink)) == 2


def test_a_torn_last_line_stays_a_line_of_its_own(tmp_path: Path) -> None:
    sink = tmp_path / "torn.jsonl"
    sink.write_text('{"seq": 0}\n{"seq": 1, "ev', encoding="utf-8")
    with EventWriter(sink, source="t") as w:
        w.emit("stream_started", **STARTED)
    lines = _lines(sink)
    assert lines[1] == '{"seq": 1, "ev' and json.loads(lines[2])["event"] == "stream_started"


def test_sink_events_decodes_only_the_kinds_asked_for(tmp_path: Path) -> None:
    sink = tmp_path / "s.jsonl"
    _write_crashed_stream(sink)
    kinds = [e["event"] for e in sink_events(sink, {"claim_rejected", "claim_released"})]
    assert kinds == ["claim_rejected", "claim_released"]
    assert list(sink_events(tmp_path / "missing.jsonl", {"claim_rejected"})) == []


def _events(sink: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in _lines(sink)]


def test_a_sink_swap_closes_the_old_stream_and_opens_a_new_one(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    op = Operator(parse_connector_config({"host_tier_bytes": 1, "event_sink": str(a)}))
    op.configure(event_sink=b)
    op.configure(event_sink=a)  # and back: the same engine, a stream with a name of its own
    op.writer.close()
    assert [(e["event"], e.get("reason"), e.get("incarnation")) for e in _events(a)] == [
        ("stream_started", None, op.incarnation), ("stream_closed", "sink_swapped", None),
        ("stream_started", None, f"{op.incarnation}.1")]
    head, closed = _events(b)
    assert head["incarnation"] == op.incarnation and closed["event"] == "stream_closed"
    problems = check_trace(a, gates=("conformance",)).problems
    assert [p.code for p in problems] == ["T012"]  # names no claim; no repeated incarnation
