"""Structure-aware generators of hostile inputs: traces, artifact traces, descriptors, suite
cases and archives. Each starts from the shape a real input has and breaks it one way or many:
wrong types, hostile strings (markup, control characters, surrogates), deep nesting, huge
integers, NaN, duplicate keys (also in two YAML spellings, ``1`` and ``"1"``), line separators
other than ``\n`` (form feeds, U+2028 ...), truncation, binary bytes, and archives that expand
far past their size (tar bombs in gzip, bzip2 and xz, members declaring 32 GiB)."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import tarfile
import zipfile
from typing import Any

from hypothesis import strategies as st

from residentkv.model.events import EVENT_MODELS, SCHEMA_ID

NASTY_TEXT = st.sampled_from([
    "", " ", "[/x]", "[bold]c-9[/bold]", ":warning:", "\x00", "\x07", "\ud800", "\u202e",
    "c-1", "c-2", "../../etc/passwd", "/", "a" * 300, "ResidentKV.vllm", " residentkv_vllm",
    "MicroRuntime", "toyrt.scheduler", "toyrt", "0.1", "%s%n", "\\", '"', "\n",
])
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False), NASTY_TEXT, st.text(max_size=12),
)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8)
EVENT_NAMES = st.sampled_from([*sorted(EVENT_MODELS), "stream_started", "claim_kept", ""])
FIELDS = st.sampled_from([
    "claim_id", "request_id", "protection_mode", "registration", "predicate", "holds",
    "success", "injected", "outcome_claim_id", "blocking_claim_ids", "generation", "source",
    "emitter", "runtime", "footprint_blocks", "surviving", "leading", "required", "status",
    "policy", "arbiter", "seq", "ts_ns", "schema", "tier",
])


def _text_tricks(line: str) -> st.SearchStrategy[bytes]:
    raw = line.encode("utf-8", "surrogatepass")
    return st.sampled_from([
        raw, raw[: max(1, len(raw) // 2)], raw + b"\x00", raw.replace(b"1", b"NaN", 1),
        raw.replace(b'"seq":', b'"seq":1,"seq":', 1), b"[" * 5000 + b"]" * 5000,
        raw.replace(b"0", b"9" * 5000, 1), b"\xff\xfe" + raw, raw + b"\r",
        raw.replace(b'"resident_claim_id":', b'"resident_claim_id":"c-OTHER",'
                                             b'"resident_claim_id":', 1),
        raw.replace(b'"event_sequence":', b'"event_sequence":0,"event_sequence":', 1),
        raw.replace(b"{", b'{"k":{"a":1,"a":2},', 1),
    ])


@st.composite
def v1_event(draw: st.DrawFn, seq: int) -> dict[str, Any]:
    """An event with the v1 envelope and some of its fields replaced by hostile values."""
    event: dict[str, Any] = {"schema": SCHEMA_ID, "seq": seq, "ts_ns": seq * 10,
                             "source": draw(NASTY_TEXT), "event": draw(EVENT_NAMES),
                             "claim_id": draw(st.sampled_from(["c-1", "c-2", None])),
                             "request_id": draw(st.sampled_from(["r-1", "r-2", None]))}
    for key in draw(st.lists(FIELDS, max_size=4)):
        event[key] = draw(VALUES)
    return event


@st.composite
def v1_trace(draw: st.DrawFn, base: list[str] | None = None) -> bytes:
    """A JSONL trace: a real one with lines mutated, or generated events, then text tricks."""
    if base and draw(st.booleans()):
        lines = list(base)
        for _ in range(draw(st.integers(0, 4))):
            i = draw(st.integers(0, len(lines) - 1))
            event = json.loads(lines[i])
            if draw(st.booleans()):
                event[draw(FIELDS)] = draw(VALUES)
            else:
                event.pop(draw(st.sampled_from(sorted(event))), None)
            lines[i] = json.dumps(event, ensure_ascii=False)
    else:
        lines = [json.dumps(draw(v1_event(i)), ensure_ascii=False)
                 for i in range(draw(st.integers(0, 8)))]
    out = [draw(_text_tricks(line)) if draw(st.integers(0, 5)) == 0 else
           line.encode("utf-8", "surrogatepass") for line in lines]
    return b"\n".join(out) + draw(st.sampled_from([b"\n", b"", b"\n\n"]))


ARTIFACT_EVENTS = st.sampled_from([
    "request_initialized", "offload_lookup_result", "offload_store_job_created",
    "offload_load_job_created", "offload_worker_transfer_finished", "resident_claim_offloaded",
    "resident_claim_restore_required", "offload_worker_load_failed",
    "resident_claim_restoration_failed", "resident_claim_restored", "active_request_refused",
    "scheduler_active_request_refused", "scheduler_resident_claim_restoration_failed",
    "offload_request_finished_no_pending_jobs", "generic_request_error_counter", "mystery",
])
ARTIFACT_FIELDS = st.sampled_from([
    "resident_claim", "resident_claim_id", "claim_id", "success", "blocking_claim_ids",
    "block_count_footprint", "outcome_type", "transfer_type", "materialization_predicate",
    "restoration_generation", "restoration_source", "job_id", "monotonic_ns", "request_id",
    "invalid_block_ids", "failure_injection_flag", "event_sequence", "num_hit_tokens",
])


@st.composite
def artifact_trace(draw: st.DrawFn) -> bytes:
    """A trace in the research artifact's dialect with hostile field values."""
    lines = []
    for n in range(draw(st.integers(0, 8))):
        record: dict[str, Any] = {"event": draw(ARTIFACT_EVENTS), "event_sequence": n,
                                  "resident_claim": True, "resident_claim_id": "c-1",
                                  "materialization_predicate": "leading_prefix_at_least(1)",
                                  "transfer_type": ["GPU", "CPU"], "success": True}
        for key in draw(st.lists(ARTIFACT_FIELDS, max_size=3)):
            record[key] = draw(VALUES)
        line = json.dumps(record, ensure_ascii=False)
        lines.append(draw(_text_tricks(line)) if draw(st.integers(0, 5)) == 0
                     else line.encode("utf-8", "surrogatepass"))
    return b"\n".join(lines) + b"\n"


YAML_TRICKS = st.sampled_from([
    lambda t: t, lambda t: t.replace("id: ", "id: \"\x07\" #", 1),
    lambda t: t.replace("rows:", "rows: " + "[" * 3000, 1),
    lambda t: t.replace("evidence: [", "evidence: [[", 1),
    lambda t: t.replace("quote: ", "quote: \"   \" #", 1),
    lambda t: t.replace("id: ", "id: \"[/x]\" #", 1),
    lambda t: t.replace("sha256: ", "sha256: 0", 1),
    lambda t: t.replace("kind: trace", "kind: source", 1),
    lambda t: t.replace("mechanism: adapter", "mechanism: native", 1),
    lambda t: t.replace("path: traces/", "path: ../", 1),
    lambda t: t.replace("path: traces/", "path: /dev/", 1),
    lambda t: t[: len(t) // 2],
    lambda t: t + "\x00",
    lambda t: t.replace("schema:", "schema: &a [*a]\nx:", 1),
    # anchor ids as YAML integers, and one id in two spellings
    lambda t: t.replace("s_emit", "1"),
    lambda t: t.replace("      t_obs: ", "      1: ", 1).replace("[t_obs", "[\"1\"", 1),
    lambda t: t.replace("      t_obs: ", "      \"1\": {kind: doc, url: x, quote: \"a b c d e f\"}"
                                          "\n      1: ", 1),
    lambda t: t.replace("claim_identity:", "true:", 1),
    # line separators str.splitlines() knows and YAML and Python do not treat alike
    lambda t: t.replace("mode: \"", "mode: \"\x0c\u2028\x85", 1),
    lambda t: t.replace("boundary: \"", "boundary: \"\x1c\x1d\x1e\x0b", 1),
])


@st.composite
def descriptor_text(draw: st.DrawFn, base: str) -> str:
    """A real descriptor's text with a few structural edits."""
    text = base
    for _ in range(draw(st.integers(0, 3))):
        text = draw(YAML_TRICKS)(text)
    if draw(st.booleans()):
        lines = text.split("\n")
        i = draw(st.integers(0, max(0, len(lines) - 1)))
        key = draw(st.sampled_from(["id", "lowers", "asserts", "status", "gate", "claim",
                                    "package", "lines", "symbol", "expect", "version"]))
        value = json.dumps(draw(VALUES), ensure_ascii=False)
        lines.insert(i, " " * draw(st.integers(0, 8)) + f"{key}: {value}")
        text = "\n".join(lines)
    return text


#: Python text holding every separator str.splitlines() knows besides \n (in comments, where
#: Python allows them), so line windows are counted on them
SEPARATED = ("# \x0b \x0c \x1c \x1d \x1e \x85 \u2028 \u2029\nX = 1\nX = 1\r\n# \x0c\n"
             .encode())
#: a member header that declares 32 GiB (GNU base-256 size), followed by no data
HUGE_DECLARED = 32 << 30


@st.composite
def archive(draw: st.DrawFn) -> tuple[str, bytes]:
    """A wheel or an sdist with hostile member names, sizes and bytes; sdists compressed with
    gzip, bzip2 or xz whatever their name says, some of them expanding thousands of times."""
    names = draw(st.lists(st.sampled_from([
        "p/x.py", "p/../../evil.py", "/abs.py", "p/x.py", "p-1/p/x.py", "p/big.py",
        "p-1.dist-info/METADATA", "PKG-INFO", "p/\x00.py", "p/[/x].py",
    ]), min_size=0, max_size=5))
    payloads = st.one_of(st.binary(max_size=200), st.just(b"X = 1\n" * 50),
                         st.just(b"0" * 300_000), st.just(SEPARATED),
                         st.just(b"\0" * (4 << 20)))
    kind = draw(st.sampled_from(["whl", "tar.gz"]))
    buf = io.BytesIO()
    if kind == "whl":
        with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for name in names:
                zf.writestr(name.replace("\x00", "_"), draw(payloads))
        raw = bytearray(buf.getvalue())
        for _ in range(draw(st.integers(0, 3))):  # flip flag, method or data bytes
            if raw:
                at = draw(st.integers(0, len(raw) - 1))
                raw[at] = draw(st.integers(0, 255))
        return "p.whl", bytes(raw)
    if draw(st.integers(0, 3)) == 0:  # first, a member declaring far more than follows it
        info = tarfile.TarInfo("p-1/p/huge.py")
        info.size = HUGE_DECLARED
        buf.write(info.tobuf(tarfile.GNU_FORMAT))
        buf.write(b"\0" * draw(st.sampled_from([0, 512, 1 << 20])))
    with tarfile.open(fileobj=buf, mode="w:", format=tarfile.GNU_FORMAT) as tf:
        for name in names:
            data = draw(payloads)
            info = tarfile.TarInfo(name.replace("\x00", "_"))
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    compress = draw(st.sampled_from([gzip.compress, bz2.compress, lzma.compress]))
    raw = compress(buf.getvalue())
    cut = draw(st.sampled_from([len(raw), len(raw) // 2, 10]))
    return "p-1.tar.gz", raw[:cut]
