import io
import json
import threading
from pathlib import Path

import pytest

from residentkv.trace.reader import TraceReader
from residentkv.trace.writer import EventWriter


def test_concurrent_emitters_share_one_strictly_increasing_seq(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    writer = EventWriter(path, source="test", buffer_lines=7)
    other = EventWriter(path, source="other", buffer_lines=3)

    def work(w: EventWriter, n: int) -> None:
        for i in range(n):
            w.emit("generic_counter", name=f"n{i}", value=i)

    threads = [threading.Thread(target=work, args=(w, 500)) for w in (writer, writer, other)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    writer.close()
    other.close()
    seqs = [json.loads(line)["seq"] for line in path.read_text().splitlines()]
    assert len(seqs) == 1500
    assert sorted(seqs) == sorted(set(seqs))  # one counter: no duplicates across writers


def test_single_writer_file_order_is_seq_order(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with EventWriter(path, source="test", buffer_lines=5) as w:
        threads = [
            threading.Thread(target=lambda: [w.emit("generic_counter", name="x", value=1)
                                             for _ in range(300)])
            for _ in range(4)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    reader = TraceReader(path)
    assert len(list(reader)) == 1200
    assert reader.problems == []


def test_emit_validates_against_the_schema() -> None:
    w = EventWriter(io.StringIO(), source="test")
    with pytest.raises(ValueError, match="unknown event type"):
        w.emit("claim_kept_promise")
    with pytest.raises(ValueError):
        w.emit("claim_restored", claim_id="c", generation=0, source="maybe")


def test_emit_returns_the_record_and_buffers_until_flush() -> None:
    sink = io.StringIO()
    w = EventWriter(sink, source="unit", buffer_lines=10)
    record = w.emit("claim_rejected", claim_id="c", reason="budget")
    assert sink.getvalue() == ""
    w.flush()
    assert json.loads(sink.getvalue()) == record
    assert record["source"] == "unit" and record["request_id"] is None
