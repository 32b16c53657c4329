"""The hot path's twins: the mirrors' fields, the same values, token ids read only when needed."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from residentkv.observe import lazy, wire, wire_sglang
from residentkv.observe.synthetic import stored
from residentkv.observe.wire import WireError

from .obskit import BS, OTHER, PREFIX, TOPIC, Run, claim_dict, gaps, observed

PAIRS = [(wire.BlockStored, lazy.LazyBlockStored), (wire.BlockRemoved, lazy.LazyBlockRemoved),
         (wire.AllBlocksCleared, lazy.LazyAllBlocksCleared), (wire.KVEventBatch, lazy.LazyBatch),
         (wire_sglang.SGLangBlockStored, lazy.LazySGLangBlockStored),
         (wire_sglang.SGLangBlockRemoved, lazy.LazySGLangBlockRemoved),
         (wire_sglang.SGLangKVEventBatch, lazy.LazySGLangBatch)]


def test_twins_have_the_mirrors_fields_tags_and_encoding() -> None:
    for mirror, twin in PAIRS:
        assert twin.__struct_fields__ == mirror.__struct_fields__, twin
        for key in ("tag", "array_like", "omit_defaults"):
            assert getattr(twin.__struct_config__, key) == getattr(
                mirror.__struct_config__, key), (twin, key)


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**64 - 1), max_size=40))
def test_first_int_reads_the_first_element(values: list[int]) -> None:
    raw = msgspec.msgpack.encode(values)
    assert lazy.first_int(raw) == (values[0] if values else None)
    assert lazy.first_token(msgspec.Raw(raw)) == (values[0] if values else None)
    if all(0 <= v < 2**63 for v in values):
        assert lazy.decode_tokens(msgspec.Raw(raw)) == values
    else:                                  # outside the claims file's range: never a crash
        with pytest.raises(WireError):
            lazy.decode_tokens(msgspec.Raw(raw))


def test_first_int_of_long_arrays_and_non_arrays() -> None:
    for n in (15, 16, 70_000):
        for start in (7, 300, 70_000):
            raw = msgspec.msgpack.encode(list(range(start, start + n)))
            assert lazy.first_int(raw) == start == lazy.first_token(msgspec.Raw(raw))
    for empty in (b"\x90", b"\xdc\x00\x00"):
        assert lazy.first_int(empty) is None
    # not an array of integers (SGLang's EAGLE pages publish [t, t+1] pairs): WireError, a gap
    for raw in (b"", b"\xc0", b"\x91\xca\x00\x00\x00\x00", b"\x91", b"\x91\x92\x01\x02"):
        with pytest.raises(WireError):
            lazy.first_int(raw)


def test_a_claimed_chain_whose_tokens_do_not_decode_is_a_gap(tmp_path: Path) -> None:
    """Token ids are read only for blocks a claim could need: garbage there is a gap and the
    rest of the batch is unseen; garbage in a chain no claim needs is never read."""
    def payload(tokens: list[int], garbage: object) -> bytes:
        ev = msgspec.structs.asdict(stored(tokens, BS))
        ev["token_ids"] = [tokens[0], garbage, *tokens[2:]]   # the first token reads fine
        return msgspec.msgpack.encode([0.0, [{"type": "BlockStored", **ev}], 0])

    bad, unread = payload(PREFIX, "x"), payload(OTHER, "x")
    from residentkv.observe.intake import decode_payload
    from residentkv.observe.wire import Dialect

    run = Run(tmp_path, observed(tmp_path, claim_dict("c-1")))
    run.feed(decode_payload(Dialect.VLLM, TOPIC, 0, unread),
             decode_payload(Dialect.VLLM, TOPIC, 1, bad))
    out = run.close(end=False)
    assert gaps(out) == [("undecodable_batch", 1, 1)]
    assert run.status("c-1") == "unknown"
    assert run.obs.index.learned == 0


def test_deeply_nested_extra_keys_are_a_gap_never_a_crash(tmp_path: Path) -> None:
    """The adversary's RecursionError: extra keys nested 20,000 deep on the claimed chain."""
    from residentkv.observe.intake import read_message
    from residentkv.observe.sequence import Received, Unreadable
    from residentkv.observe.wire import Dialect

    ev = msgspec.structs.asdict(stored(PREFIX, BS))
    ev["extra_keys"] = None
    head = msgspec.msgpack.encode([0.0, [{"type": "BlockStored", **ev}], 0])
    nested = b"\x91" * 20_000 + b"\xc0"                 # [[[...[nil]...]]]
    payload = head.replace(b"\xaaextra_keys\xc0", b"\xaaextra_keys\x91" + nested)
    assert payload != head
    got = read_message([TOPIC, (0).to_bytes(8, "big"), payload], TOPIC, Dialect.VLLM)
    run = Run(tmp_path, observed(tmp_path, claim_dict("c-1")))
    if isinstance(got, Received):                        # left raw: read when the claim needs it
        run.feed(got.batch)
        assert gaps(run.close(end=False)) == [("undecodable_batch", 0, 0)]
    else:
        assert isinstance(got, Unreadable) and got.seq == 0
