"""The fast reading path must read exactly what the pydantic models read, and nothing more."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from residentkv.model.events import EVENT_ADAPTER, EVENT_MODELS, event_to_dict
from residentkv.model.fast_events import FAST_DECODER, FAST_STRUCTS, DecodeError
from residentkv.trace import reader as reader_module
from residentkv.trace.reader import TraceReader
from tracekit import CANONICAL

TRACES = Path(__file__).resolve().parents[2] / "src" / "residentkv" / "data" / "traces"


def sample_events() -> list[dict[str, Any]]:
    return [e for build in CANONICAL.values() for e in build().events]


def test_every_event_type_is_mirrored() -> None:
    assert set(FAST_STRUCTS) == set(EVENT_MODELS)


def every_field(value: Any) -> Any:
    """A decoded Struct as builtins with every field, defaults included (its encoding omits
    them)."""
    if not isinstance(value, msgspec.Struct):
        return msgspec.to_builtins(value)
    fields = {f: every_field(getattr(value, f)) for f in value.__struct_fields__}
    tag = value.__struct_config__.tag
    return fields if tag is None else {"event": tag, **fields}


@pytest.mark.parametrize("event", sample_events(), ids=lambda e: f"{e['seq']}-{e['event']}")
def test_fast_and_pydantic_decode_the_same_values(event: dict[str, Any]) -> None:
    raw = json.dumps(event).encode()
    model = EVENT_ADAPTER.validate_json(raw)
    fast = FAST_DECODER.decode(raw)
    assert fast.event == model.event
    assert every_field(fast) == event_to_dict(model)


MUTATIONS = st.sampled_from([
    ("seq", -1), ("seq", "5"), ("seq", 1.5), ("ts_ns", None), ("source", ""), ("claim_id", 3),
    ("surprise", 1), ("generation", -2), ("hit_tokens", -1), ("success", "yes"),
    ("success", 1), ("blocking_claim_ids", "c-1"), ("arbiter", "judge"), ("status", "done"),
    ("bytes", -5), ("policy", "retry"), ("schema", "residentkv.event/v2"), ("event", "bogus"),
    ("holds", None), ("invalid_block_ids", ["x"]), ("value", "3"), ("job_id", None),
    ("registration", "later"), ("protection_mode", "pinned"), ("footprint_blocks", 0),
    ("predicate", {"id": "p", "kind": "contiguous_range", "blocks": 2}),
    ("predicate", {"id": "p", "kind": "leading_prefix_at_least", "blocks": 2, "start": 1}),
    ("predicate", {"id": "", "kind": "leading_prefix_at_least", "blocks": 2}),
    ("before", {"surviving": 1, "leading": 0, "required": 2}),
    ("after", {"surviving": 1, "leading": 0, "required": 2, "holds": False, "x": 1}),
])


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(sample_events()), MUTATIONS, st.booleans())
def test_fast_decoder_never_accepts_what_pydantic_refuses(
    event: dict[str, Any], mutation: tuple[str, Any], drop: bool
) -> None:
    key, value = mutation
    mutated = dict(event)
    if drop and key in mutated:
        del mutated[key]
    else:
        mutated[key] = value
    raw = json.dumps(mutated).encode()
    try:
        FAST_DECODER.decode(raw)
    except DecodeError:
        return  # refused: the pydantic path judges it
    EVENT_ADAPTER.validate_json(raw)  # must not raise


def test_fast_reader_reports_the_same_problems(tmp_path: Path) -> None:
    events = sample_events()[:12]
    lines = [json.dumps(e) for e in events]
    lines[3] = lines[3].replace('"seq"', '"sek"')
    lines[5] = "{not json"
    lines[7] = json.dumps(dict(events[7], surprise=1))
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    slow, fast = TraceReader(path), TraceReader(path, fast=True)
    assert [n for n, _ in slow] == [n for n, _ in fast]
    assert [(p.code, p.line, p.message) for p in slow.problems] == [
        (p.code, p.line, p.message) for p in fast.problems]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=30),
       st.integers(1, 50), st.integers(1, 60), st.booleans())
def test_chunked_lines_match_a_plain_split(
    lines: list[bytes], chunk: int, limit: int, trailing_newline: bool
) -> None:
    data = b"\n".join(lines) + (b"\n" if trailing_newline and lines else b"")
    reader = TraceReader("mem", max_line_bytes=limit)
    old = reader_module._CHUNK
    reader_module._CHUNK = chunk
    try:
        got = [(first + i, line) for first, batch in reader._batches(io.BytesIO(data))
               for i, line in enumerate(batch)]
    finally:
        reader_module._CHUNK = old
    # a UTF-8 byte-order mark before the first line is not part of it (SPEC §4.2)
    plain = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    nul = plain.find(b"\x00")
    expected_lines = plain[:nul if nul >= 0 else None].split(b"\n")
    if nul < 0 and expected_lines and expected_lines[-1] == b"":
        expected_lines.pop()
    expected = [(i + 1, line if len(line) <= limit else None)
                for i, line in enumerate(expected_lines)]
    if nul >= 0:
        # reading stops at the first NUL: its line stands for the binary rest of the file
        expected[-1] = (len(expected), b"\x00")
    assert got == expected


def test_reading_a_shipped_trace_fast_gives_the_same_events() -> None:
    path = TRACES / "two_claim_attribution.jsonl"
    slow = [event_to_dict(e) for _, e in TraceReader(path)]
    fast = [(n, e) for n, e in TraceReader(path, fast=True)]
    assert len(slow) == len(fast)
    for s_event, (_, f_event) in zip(slow, fast, strict=True):
        assert s_event["seq"] == f_event.seq and s_event["event"] == f_event.event


def test_lax_lines_the_fast_decoder_refuses_are_refused_by_pydantic_too(
        tmp_path: Path) -> None:
    event = dict(sample_events()[0], seq="7")  # a numeric string: lax JSON would accept it
    raw = json.dumps(event).encode()
    with pytest.raises(DecodeError):
        FAST_DECODER.decode(raw)
    path = tmp_path / "t.jsonl"
    path.write_bytes(raw + b"\n")
    for fast in (True, False):
        reader = TraceReader(path, fast=fast)
        assert [e.seq for _, e in reader] == []
        assert [(p.code, p.line) for p in reader.problems] == [("T005", 1)]
