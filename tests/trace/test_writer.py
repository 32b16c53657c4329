import io
import json
import threading
from pathlib import Path

import pytest

from residentkv.trace.reader import TraceReader
from residentkv.trace.writer import EventWriter


def test_each_writer_numbers_its_own_stream(tmp_path: Path) -> None:
    # the counter belongs to the writer: a second stream in the same process starts at 0 (or
    # where it is told to), whatever the first one has written, with threads on both
    writer = EventWriter(tmp_path / "a.jsonl", source="test", buffer_lines=7)
    other = EventWriter(tmp_path / "b.jsonl", source="other", buffer_lines=3, first_seq=10)

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
    for name, first, n in (("a.jsonl", 0, 1000), ("b.jsonl", 10, 500)):
        seqs = [json.loads(line)["seq"] for line in (tmp_path / name).read_text().splitlines()]
        assert seqs == list(range(first, first + n))  # file order is seq order, no gaps


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
