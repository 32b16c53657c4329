"""The hot path's decoding twins of the mirrored structs: token ids read only when needed.

A batch's cost is its token ids (a vLLM step stores thousands); a block no claim could need is
decided on its hashes alone. The twins below have the mirrors' fields, order, defaults and
tags (tested), but keep ``token_ids`` (and vLLM's ``extra_keys``) as raw msgpack, decoded —
strictly, to the mirror's types — only for a block that could be a claim's: the first token of
a root, or the blocks below a learned claimed block. Raw fields of blocks no claim needs are
never read (nor is the block size of a chain no claim needs checked); a needed field that does
not decode raises :class:`WireError` where it is read, and the observer makes the rest of that
batch a gap.
"""

from __future__ import annotations

from typing import Any

import msgspec

from residentkv.observe.wire import MAX_KEY_DEPTH, BlockHash, WireError

_TOKENS = msgspec.msgpack.Decoder(list[int]).decode
_KEYS = msgspec.msgpack.Decoder(list[tuple[Any, ...] | None] | None).decode
_NIL = msgspec.Raw(b"\xc0")
_ARRAY16, _ARRAY32 = 0xDC, 0xDD
#: msgpack integer markers -> (payload bytes, signed)
_INTS = {0xCC: (1, False), 0xCD: (2, False), 0xCE: (4, False), 0xCF: (8, False),
         0xD0: (1, True), 0xD1: (2, True), 0xD2: (4, True), 0xD3: (8, True)}


def first_int(raw: bytes | memoryview) -> int | None:
    """The first element of a msgpack array of integers, read without decoding the rest
    (None for an empty array or anything else)."""
    if not raw:
        return None
    head = raw[0]
    if 0x91 <= head <= 0x9F:
        i = 1
    elif head in (_ARRAY16, _ARRAY32):
        i = 3 if head == _ARRAY16 else 5
        if len(raw) <= i or not int.from_bytes(raw[1:i], "big"):
            return None
    else:
        return None
    if len(raw) <= i:
        return None
    b = raw[i]
    if b <= 0x7F:
        return b
    if b >= 0xE0:
        return b - 0x100
    size_signed = _INTS.get(b)
    if size_signed is None or len(raw) < i + 1 + size_signed[0]:
        return None
    size, signed = size_signed
    return int.from_bytes(raw[i + 1:i + 1 + size], "big", signed=signed)


def first_token(raw: msgspec.Raw) -> int | None:
    """The first token id of a raw ``token_ids``; the common shape (an array of 16 to 65535
    small ids) is read inline, anything else by :func:`first_int`."""
    mv = memoryview(raw)
    if len(mv) > 7 and mv[0] == _ARRAY16:
        b = mv[3]
        if b <= 0x7F:
            return b
        if b == 0xCD:
            return (mv[4] << 8) | mv[5]
        if b == 0xCE:
            return (mv[4] << 24) | (mv[5] << 16) | (mv[6] << 8) | mv[7]
    return first_int(mv)


def decode_tokens(raw: msgspec.Raw) -> list[int]:
    """A block's token ids, strictly as the mirror types them."""
    try:
        return _TOKENS(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as e:
        raise WireError(f"token_ids: {e}") from None


def _depth_ok(value: Any, depth: int) -> bool:
    if isinstance(value, tuple | list):
        return depth > 0 and all(_depth_ok(v, depth - 1) for v in value)
    return not isinstance(value, dict)


def decode_keys(raw: msgspec.Raw) -> list[tuple[Any, ...] | None] | None:
    """vLLM's per-block extra keys, strictly as the mirror types them, at most
    :data:`MAX_KEY_DEPTH` levels deep."""
    try:
        keys = _KEYS(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as e:
        raise WireError(f"extra_keys: {e}") from None
    if keys is not None and not all(k is None or _depth_ok(k, MAX_KEY_DEPTH) for k in keys):
        raise WireError(f"extra_keys nested deeper than {MAX_KEY_DEPTH} levels")
    return keys


class LazyEvent(msgspec.Struct, omit_defaults=True, gc=False, tag=True):
    """Base of the twins (tagged by the mirrored class name in field ``type``)."""


class LazyBlockStored(LazyEvent, tag="BlockStored"):
    """vLLM's ``BlockStored`` with its token ids and extra keys left raw."""

    block_hashes: list[BlockHash]
    parent_block_hash: BlockHash | None
    token_ids: msgspec.Raw
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None
    extra_keys: msgspec.Raw = _NIL
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None
    locality: str | None = None
    ownership: str | None = None
    session_id: str | None = None

    def first_token(self) -> int | None:
        return first_token(self.token_ids)

    def tokens(self) -> list[int]:
        return decode_tokens(self.token_ids)

    def stored_under(self, j: int, first: bool, salt: str | None, lora: str | None) -> bool:
        """Whether block *j* was stored under exactly *salt* and *lora* and nothing else.

        vLLM publishes each block's extra hash keys untagged, in order: the LoRA name (when a
        LoRA is set), ``(mm_identifier, offset)`` pairs, the cache salt (on a chain's first
        block only) and prompt-embedding digests. A claim names token ids only, so any
        multimodal or embedding key makes the block someone else's.
        """
        if self.lora_name != lora:
            return False
        keys = decode_keys(self.extra_keys)
        got = keys[j] if keys is not None and j < len(keys) else None
        want: tuple[str, ...] = ((lora,) if lora is not None else ()) + (
            (salt,) if first and salt is not None else ())
        return (got or ()) == want


class LazyBlockRemoved(LazyEvent, tag="BlockRemoved"):
    """vLLM's ``BlockRemoved`` (nothing to leave raw)."""

    block_hashes: list[BlockHash]
    medium: str | None
    group_idx: int | None = None
    locality: str | None = None
    ownership: str | None = None


class LazyAllBlocksCleared(LazyEvent, tag="AllBlocksCleared"):
    """vLLM's ``AllBlocksCleared``."""


class LazyBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    """vLLM's ``KVEventBatch`` of twins."""

    ts: float
    events: list[LazyBlockStored | LazyBlockRemoved | LazyAllBlocksCleared]
    data_parallel_rank: int | None = None


class LazySGLangBlockStored(LazyEvent, tag="BlockStored"):
    """SGLang's ``BlockStored`` with its token ids left raw."""

    block_hashes: list[int]
    parent_block_hash: int | None
    token_ids: msgspec.Raw
    block_size: int
    lora_id: int | None
    medium: str | None = None
    cache_salt: str | None = None
    session_id: str | None = None
    lora_name: str | None = None

    @property
    def group_idx(self) -> int | None:
        """SGLang names no KV-cache group: one group."""
        return None

    def first_token(self) -> int | None:
        return first_token(self.token_ids)

    def tokens(self) -> list[int]:
        return decode_tokens(self.token_ids)

    def stored_under(self, j: int, first: bool, salt: str | None, lora: str | None) -> bool:
        """SGLang publishes the salt and the adapter on the event itself."""
        return self.cache_salt == salt and self.lora_name == lora


class LazySGLangBlockRemoved(LazyEvent, tag="BlockRemoved"):
    """SGLang's ``BlockRemoved``."""

    block_hashes: list[int]
    medium: str | None = None

    @property
    def group_idx(self) -> int | None:
        return None


class LazySGLangBatch(msgspec.Struct, array_like=True, gc=False):
    """SGLang's ``KVEventBatch`` of twins."""

    ts: float
    events: list[LazySGLangBlockStored | LazySGLangBlockRemoved | LazyAllBlocksCleared]
    attn_dp_rank: int | None = None


STORED = (LazyBlockStored, LazySGLangBlockStored)
REMOVED = (LazyBlockRemoved, LazySGLangBlockRemoved)
CLEARED = (LazyAllBlocksCleared,)
_VLLM = msgspec.msgpack.Decoder(LazyBatch).decode
_SGLANG = msgspec.msgpack.Decoder(LazySGLangBatch).decode


def decode_vllm_lazy(payload: bytes) -> tuple[float, list[Any], int | None]:
    """A vLLM payload as ``(ts, events, data_parallel_rank)`` of twins."""
    batch = _VLLM(payload)
    return batch.ts, batch.events, batch.data_parallel_rank


def decode_sglang_lazy(payload: bytes) -> tuple[float, list[Any], int | None]:
    """An SGLang payload as ``(ts, events, attn_dp_rank)`` of twins."""
    batch = _SGLANG(payload)
    return batch.ts, batch.events, batch.attn_dp_rank
