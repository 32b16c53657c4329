import json
import resource
from pathlib import Path

import pytest

from residentkv.errors import TraceReadError
from residentkv.trace.reader import TraceReader
from tracekit import success_path


def read(path: Path, **kw: int) -> tuple[list[int], list[tuple[str, int | None]]]:
    reader = TraceReader(path, **kw)
    lines = [line for line, _ in reader]
    return lines, [(p.code, p.line) for p in reader.problems]


def lines_of(events: list[dict[str, object]]) -> list[str]:
    return [json.dumps(e) for e in events]


def test_valid_trace_yields_typed_events_with_line_numbers(tmp_path: Path) -> None:
    path = success_path().write(tmp_path / "t.jsonl")
    reader = TraceReader(path)
    items = list(reader)
    assert [line for line, _ in items] == list(range(1, 16))
    assert items[1][1].event == "claim_accepted"  # type: ignore[attr-defined]
    assert reader.problems == []


def test_all_problems_are_reported_without_stopping(tmp_path: Path) -> None:
    good = success_path().events
    bad_type = dict(good[2], seq=100, event="claim_kept_promise")
    extra = dict(good[3], seq=101, surprise=1)
    missing = {k: v for k, v in good[4].items() if k != "ts_ns"} | {"seq": 102}
    wrong = dict(good[5], seq=103, generation="x")
    text = "\n".join(
        [*lines_of(good[:2]), "{not json", "[1, 2]", json.dumps(bad_type), json.dumps(extra),
         json.dumps(missing), json.dumps(wrong), json.dumps(good[1]), "", json.dumps(
             dict(good[2], seq=200))]
    )
    (tmp_path / "t.jsonl").write_text(text + "\n")
    lines, problems = read(tmp_path / "t.jsonl")
    assert problems == [
        ("T001", 3), ("T001", 4), ("T002", 5), ("T003", 6), ("T004", 7), ("T005", 8),
        ("T006", 9),
    ]
    assert lines == [1, 2, 11]  # blank line 10 skipped, valid line 11 kept


def test_duplicated_seq_is_non_increasing(tmp_path: Path) -> None:
    events = success_path().events
    events[5]["seq"] = events[4]["seq"]
    (tmp_path / "t.jsonl").write_text("\n".join(lines_of(events)) + "\n")
    _, problems = read(tmp_path / "t.jsonl")
    assert problems == [("T006", 6)]


def test_line_longer_than_limit_is_refused_and_reading_goes_on(tmp_path: Path) -> None:
    events = success_path().events
    huge = json.dumps(dict(events[1], seq=1, object_id="x" * 5000))
    text = "\n".join([json.dumps(events[0]), huge, json.dumps(events[2])]) + "\n"
    (tmp_path / "t.jsonl").write_text(text)
    lines, problems = read(tmp_path / "t.jsonl", max_line_bytes=1024)
    assert problems == [("T007", 2)]
    assert lines == [1, 3]


def test_huge_line_is_read_with_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "huge.jsonl"
    with path.open("wb") as fh:
        fh.write(b'{"x": "')
        for _ in range(200):
            fh.write(b"a" * (1 << 20))  # 200 MiB on one line
        fh.write(b'"}\n')
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    _, problems = read(path)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert problems == [("T007", 1)]
    assert grown_kib < 64 * 1024  # far below the line's 200 MiB


def test_binary_file_is_not_text(tmp_path: Path) -> None:
    (tmp_path / "b.jsonl").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe\n")
    lines, problems = read(tmp_path / "b.jsonl")
    assert lines == []
    assert problems[0] == ("T008", 1)
    assert problems[-1] == ("T008", 3)  # a NUL byte ends the read: the file is binary


def test_invalid_utf8_reports_column(tmp_path: Path) -> None:
    (tmp_path / "u.jsonl").write_bytes(b'{"a": "\xff"}\n')
    reader = TraceReader(tmp_path / "u.jsonl")
    list(reader)
    assert reader.problems[0].code == "T008" and reader.problems[0].col == 8


def test_nul_byte_stops_reading_a_binary_file(tmp_path: Path) -> None:
    (tmp_path / "b.bin").write_bytes(b"\x00" * 10 + b"\n" + b"garbage\n" * 1000)
    lines, problems = read(tmp_path / "b.bin")
    assert (lines, problems) == ([], [("T008", 1)])


def test_unreadable_paths_raise(tmp_path: Path) -> None:
    with pytest.raises(TraceReadError, match="cannot open"):
        list(TraceReader(tmp_path / "missing.jsonl"))
    with pytest.raises(TraceReadError, match="directory"):
        list(TraceReader(tmp_path))


def test_problem_list_is_bounded_but_counted(tmp_path: Path) -> None:
    (tmp_path / "g.jsonl").write_text("garbage\n" * 5000)
    reader = TraceReader(tmp_path / "g.jsonl")
    list(reader)
    assert reader.problem_count == 5000
    assert len(reader.problems) == 1000
