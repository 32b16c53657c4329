"""v1 lines are strictly typed JSON without duplicate keys (SPEC §4.1); special files are refused.

Each lax form below was once coerced and accepted; each must now be a located problem, from
the fast reader and the pydantic reader alike. A property test ties the reader to the
published JSON Schema: the reader never accepts a line the schema rejects.
"""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from residentkv.errors import TraceReadError
from residentkv.model.events import event_json_schema
from residentkv.model.fast_events import FAST_DECODER
from residentkv.trace.duplicate_keys import duplicate_key, first_duplicate_key, repeated_keys
from residentkv.trace.reader import TraceReader
from residentkv.trace.writer import EventWriter, Provenance
from tracekit import CANONICAL, claimed_load_failure

LOAD = {"schema": "residentkv.event/v1", "seq": 1, "ts_ns": 1, "source": "t",
        "event": "kv_load_finished", "claim_id": "c-1", "request_id": "r-1", "job_id": 1,
        "success": True, "injected": True}


def read(data: bytes, fast: bool) -> TraceReader:
    reader = TraceReader("t.jsonl", stream=io.BytesIO(data), fast=fast)
    list(reader.events())
    return reader


def codes(reader: TraceReader) -> list[str]:
    return [p.code for p in reader.problems]


LAX = [
    ('"injected": "yes"', "T005"), ('"injected": 1', "T005"), ('"seq": "7"', "T005"),
    ('"seq": 9.0', "T005"), ('"seq": true', "T005"), ('"success": "false"', "T005"),
    ('"job_id": 1.5', "T005"),
]


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize(("field", "code"), LAX)
def test_no_coercion(field: str, code: str, fast: bool) -> None:
    key = field.split(":")[0].strip('"')
    line = json.dumps(LOAD).replace(f'"{key}": {json.dumps(LOAD[key])}', field)
    assert field in line
    reader = read(line.encode(), fast)
    assert set(codes(reader)) == {code} and reader.events_read == 0


COUNTER = {"schema": "residentkv.event/v1", "seq": 1, "ts_ns": 1, "source": "t",
           "event": "generic_counter", "claim_id": None, "request_id": None,
           "name": "n", "value": 1.5}


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_numbers_are_not_json(literal: str, fast: bool) -> None:
    # SPEC §4.1: strictly typed JSON; NaN and Infinity are not JSON, and 1e999 overflows
    line = json.dumps(COUNTER).replace('"value": 1.5', f'"value": {literal}')
    reader = read(line.encode(), fast)
    assert set(codes(reader)) == {"T005"} and reader.events_read == 0


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("field", ["blocks", "start"])
def test_a_predicate_integer_beyond_64_bits_is_a_typing_problem(field: str, fast: bool) -> None:
    # SPEC §4.2: every integer is signed 64-bit, nested ones included
    accepted = CANONICAL["success_path.jsonl"]().events[1]
    assert accepted["event"] == "claim_accepted"
    predicate = {"id": "p", "kind": "contiguous_range", "blocks": 2, "start": 0}
    predicate[field] = 2**70
    line = json.dumps(dict(accepted, predicate=predicate))
    reader = read(line.encode(), fast)
    assert set(codes(reader)) == {"T005"} and reader.events_read == 0
    assert "predicate." + field in reader.problems[0].message


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("dup", [
    '"outcome_claim_id": "c-OTHER", "outcome_claim_id": "c-1"',
    '"outcome_claim_id" : "c-OTHER", "outcome_claim_id": "c-1"',
    '"outcome_claim_id": "c-OTHER", "outcome_claim_\\u0069d": "c-1"',
    '"claim_id": "c-1", "outcome_claim_id": "c-1", "claim_id": "c-1"',
])
def test_duplicate_keys_are_refused_whatever_the_spelling(dup: str, fast: bool) -> None:
    refusal = {"schema": "residentkv.event/v1", "seq": 3, "ts_ns": 1, "source": "t",
               "event": "active_request_refused", "request_id": "r-1",
               "blocking_claim_ids": ["c-1"], "feasibility": "x",
               "arbiter": "scheduler_boundary"}
    line = json.dumps(refusal)[:-1] + ", " + dup + "}"
    if '"claim_id": "c-1", "outcome' not in dup:
        line = line.replace('"request_id"', '"claim_id": "c-1", "request_id"')
    reader = read(line.encode(), fast)
    assert codes(reader) == ["T020"]
    assert "twice" in reader.problems[0].message


def test_nested_keys_may_repeat_across_objects() -> None:
    # claim_harmed has before/after with the same keys; stream_started two name/version pairs
    events = [e for make in CANONICAL.values() for e in make().events]
    harm = {"before": {"surviving": 2, "leading": 2, "required": 2, "holds": True},
            "after": {"surviving": 1, "leading": 0, "required": 2, "holds": False}}
    harmed = dict(events[1], event="claim_harmed", cause="evicted", **harm)
    for k in ("registration", "protection_mode", "footprint_blocks", "predicate"):
        harmed.pop(k)
    data = "\n".join(json.dumps(dict(e, seq=i)) for i, e in enumerate([*events, harmed]))
    writer_out = io.StringIO()
    w = EventWriter(writer_out, source="t", provenance=Provenance("e", "1", "r", "2"))
    w.flush()
    for fast in (True, False):
        assert codes(read(data.encode(), fast)) == []
        reader = read(writer_out.getvalue().encode(), fast)
        assert codes(reader) == [] and reader.provenance is not None
        assert reader.provenance.runtime.version == "2"


def test_a_later_stream_must_keep_the_provenance_and_name_its_incarnation() -> None:
    # SPEC §9.1: a later stream_started opens the next stream of the file; the streams of one
    # file name distinct incarnations and one emitter, runtime and replica
    out = io.StringIO()
    w = EventWriter(out, source="t", provenance=Provenance("e", "1", "r", "2"))
    w.emit("stream_started", **Provenance("e2", "1", "r", "9").fields())
    w.flush()
    for fast in (True, False):
        reader = read(out.getvalue().encode(), fast)
        assert codes(reader) == ["T033", "T033", "T034"] and reader.provenance is not None
        assert reader.provenance.emitter.name == "e"
        assert [p.line for p in reader.problems] == [1, 2, 2]


def test_stream_started_only_first_in_a_file_without_provenance() -> None:
    out = io.StringIO()
    w = EventWriter(out, source="t")
    w.emit("request_started", request_id="r-1", claim_id=None)
    w.emit("stream_started", **Provenance("e", "1", "r", "2").fields())
    w.flush()
    for fast in (True, False):
        reader = read(out.getvalue().encode(), fast)
        assert codes(reader) == ["T022"] and reader.provenance is None


def test_string_values_that_look_like_keys_are_not_duplicates() -> None:
    line = json.dumps(dict(LOAD, source='x "injected": "job_id": \\"a\\":'))
    assert duplicate_key(line.encode(), FAST_DECODER.decode(line)) is None
    assert codes(read(line.encode(), True)) == []


@given(st.lists(st.sampled_from(sorted(LOAD)), min_size=1, max_size=4))
def test_fast_filter_agrees_with_the_exact_check(repeats: list[str]) -> None:
    body = json.dumps(LOAD)[:-1]
    for key in repeats:
        body += f", {json.dumps(key)}: {json.dumps(LOAD[key])}"
    raw = (body + "}").encode()
    assert duplicate_key(raw, FAST_DECODER.decode(raw)) == first_duplicate_key(raw) is not None


def test_special_files_are_refused_up_front(tmp_path: Path) -> None:
    with pytest.raises(TraceReadError) as info:
        list(TraceReader("/dev/zero").events())
    assert info.value.code == "T021"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(TraceReadError) as info:
        list(TraceReader(fifo).events())  # would block forever if opened
    assert info.value.code == "T021"


def test_nul_inside_an_endless_line_stops_the_read() -> None:
    class Zeros(io.RawIOBase):
        reads = 0

        def readable(self) -> bool:
            return True

        def readinto(self, b: Any) -> int:
            self.reads += 1
            b[:] = bytes(len(b))
            return len(b)

    zeros = Zeros()
    reader = TraceReader("-", stream=io.BufferedReader(zeros), fast=True)
    list(reader.events())
    assert codes(reader) == ["T008"] and zeros.reads <= 2


def test_nul_after_valid_lines_is_located() -> None:
    data = ("\n".join(json.dumps(e) for e in claimed_load_failure().events[:3])
            + "\n{\"seq\": 1\x00").encode()
    reader = read(data, True)
    assert [(p.code, p.line) for p in reader.problems] == [("T008", 4)]
    assert reader.events_read == 3


SCHEMA = event_json_schema()
_VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 10**20) | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=3),
    max_leaves=6,
)
_BASES = [e for make in CANONICAL.values() for e in make().events]


@given(st.sampled_from(_BASES), st.lists(st.tuples(st.text(max_size=24), _JSON), max_size=3),
       st.lists(st.sampled_from(sorted({k for e in _BASES for k in e})), max_size=2))
def test_reader_never_accepts_what_the_published_schema_rejects(
        base: dict[str, Any], sets: list[tuple[str, Any]], drops: list[str]) -> None:
    event = dict(base)
    for key, value in sets:
        event[key if key in event or len(key) % 2 else next(iter(event))] = value
    for key in drops:
        event.pop(key, None)
    raw = json.dumps(event).encode()
    for fast in (True, False):
        reader = read(raw, fast)
        if reader.events_read:
            assert _VALIDATOR.is_valid(event), (raw, fast)


def test_a_seq_of_thousands_of_digits_is_a_problem_never_a_crash(tmp_path: Path) -> None:
    """int() refuses strings past 4,300 digits; no path may hand it one from a trace line."""
    from click.testing import CliRunner

    from residentkv.cli import cli

    path = claimed_load_failure().write(tmp_path / "t.jsonl")
    lines = path.read_text().splitlines()
    lines[0] = re.sub(r'"seq":\s*0,', '"seq": ' + "9" * 5000 + ",", lines[0], count=1)
    assert "9" * 5000 in lines[0]
    path.write_text("\n".join(lines) + "\n")
    for fmt in ("text", "json"):
        result = CliRunner().invoke(cli, ["trace", "check", str(path), "--format", fmt])
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            result.exception)
        assert result.exit_code == 1, result.output


def test_a_line_nested_past_the_decoders_recursion_is_located_never_a_crash(
        tmp_path: Path) -> None:
    from click.testing import CliRunner

    from residentkv.cli import cli

    path = claimed_load_failure().write(tmp_path / "t.jsonl")
    deep = '{"a":' * 100_000 + "1" + "}" * 100_000
    path.write_text(path.read_text() + deep + "\n")
    reader = TraceReader(path, fast=True)
    assert len(list(reader.events())) == len(claimed_load_failure().events)
    deep_line = len(claimed_load_failure().events) + 1
    assert [(p.code, p.line) for p in reader.problems] == [("T001", deep_line)]
    for args in (["trace", "check", str(path)], ["fleet", "check", str(path)]):
        result = CliRunner().invoke(cli, args)
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            args, result.exception)


def _pairs_text(pairs: list[tuple[str, str]], spaced: bool) -> str:
    sep = '" :' if spaced else '":'
    return "{" + ",".join(f'"{k}{sep}{v}' for k, v in pairs) + "}"


@st.composite
def hostile_chunk(draw: st.DrawFn) -> list[bytes]:
    """Valid events, some with repeated keys (top level or nested), keys written with their
    default value, escaped colons, escaped key names or whitespace before a colon: alone and
    combined, so one line's extra colon may stand beside another line's missing one."""
    events = [e for make in CANONICAL.values() for e in make().events]
    lines = []
    for _ in range(draw(st.integers(1, 8))):
        event = dict(draw(st.sampled_from(events)))
        if isinstance(event["request_id"], str):
            event["request_id"] = draw(st.sampled_from(["", "a:b", "x:y:"])) + event["request_id"]
        pairs = [(k, json.dumps(v, separators=(",", ":"))) for k, v in event.items()]
        tricks = draw(st.sets(st.sampled_from(
            ["dup", "dup_nested", "default", "escape_colon", "escape_key", "spaced"]),
            max_size=3))
        if "dup" in tricks:
            pairs.insert(draw(st.integers(0, len(pairs))), draw(st.sampled_from(pairs)))
        if "dup_nested" in tricks and "predicate" in event:
            pred = event["predicate"]
            pairs.append(("predicate", _pairs_text(
                [(k, json.dumps(v)) for k, v in [*pred.items(), ("id", pred["id"])]], False)))
        if "default" in tricks:
            absent = {"claim_accepted": "owner_scope", "request_started": "owner_scope",
                      "kv_load_finished": "injected", "kv_lookup": "generation"}
            key = absent.get(event["event"])
            if key is not None and key not in event:
                pairs.append((key, "false" if key == "injected" else "null"))
        text = _pairs_text(pairs, "spaced" in tricks)
        if not tricks and draw(st.booleans()):
            # as residentkv's writer writes it: the event's own encoding
            text = msgspec.json.encode(FAST_DECODER.decode(text)).decode()
        if "escape_colon" in tricks:
            text = text.replace("a:b", "a\\u003ab")
        if "escape_key" in tricks:
            text = text.replace('"schema"', '"\\u0073chema"', 1)
        lines.append(text.encode())
    return lines


@settings(max_examples=300, deadline=None)
@given(hostile_chunk())
def test_chunk_duplicate_check_agrees_with_the_exact_check(lines: list[bytes]) -> None:
    events = [FAST_DECODER.decode(raw) for raw in lines]
    exact = {i: k for i, raw in enumerate(lines) if (k := first_duplicate_key(raw)) is not None}
    assert repeated_keys(lines, events) == exact
    reader = read(b"\n".join(lines), True)
    assert [(p.code, p.line) for p in reader.problems if p.code == "T020"] == [
        ("T020", i + 1) for i in sorted(exact)]


def test_a_repeated_key_cannot_hide_behind_another_lines_escaped_colon() -> None:
    # chunk-wide, the duplicate's extra colon and the escaped colon's missing one cancel out
    dup = json.dumps(dict(LOAD, seq=1))[:-1] + ', "job_id": 1}'
    escaped = json.dumps(dict(LOAD, seq=2, source="a:b")).replace("a:b", "a\\u003ab")
    reader = read(f"{dup}\n{escaped}".encode(), True)
    assert [(p.code, p.line) for p in reader.problems] == [("T020", 1)]
