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

import struct
from typing import Annotated, Any

import msgspec

from residentkv.observe.wire import MAX_KEY_DEPTH, BlockHash, WireError

#: a token id as a claim names it (the claims file's range)
TokenId = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]
#: a block size, KV-cache group index or data-parallel rank: small non-negative numbers
Small = Annotated[int, msgspec.Meta(ge=0, lt=2**31)]
BlockSize = Annotated[int, msgspec.Meta(ge=1, lt=2**31)]
#: one block's extra hash keys (vLLM's untagged tuple), or None
Keys = tuple[Any, ...] | None

_TOKENS = msgspec.msgpack.Decoder(list[TokenId]).decode
_KEYS = msgspec.msgpack.Decoder(list[tuple[Any, ...] | None] | None).decode
_NIL = msgspec.Raw(b"\xc0")
_ARRAY16, _ARRAY32 = 0xDC, 0xDD
_UINT16, _UINT32 = 0xCD, 0xCE
#: an array16 head and its first element as a uint16 / uint32 (marker, count, marker, value):
#: one C call instead of a memoryview and an index per byte, on every store's first token
_HEAD16 = struct.Struct(">BHBH")
_HEAD32 = struct.Struct(">BHBI")
#: msgpack integer markers -> (payload bytes, signed)
_INTS = {0xCC: (1, False), 0xCD: (2, False), 0xCE: (4, False), 0xCF: (8, False),
         0xD0: (1, True), 0xD1: (2, True), 0xD2: (4, True), 0xD3: (8, True)}


def first_int(raw: bytes | memoryview) -> int | None:
    """The first element of a msgpack array of integers, read without decoding the rest (None
    for an empty array); :class:`WireError` when *raw* is not an array whose first element is an
    integer (e.g. SGLang's EAGLE bigram pages, whose token ids are pairs)."""
    head = raw[0] if raw else None
    if head == 0x90:
        return None
    if head is not None and 0x91 <= head <= 0x9F:
        i = 1
    elif head in (_ARRAY16, _ARRAY32):
        i = 3 if head == _ARRAY16 else 5
        if len(raw) >= i and not int.from_bytes(raw[1:i], "big"):
            return None
    else:
        raise WireError("token_ids: expected an array of token ids")
    b = raw[i] if len(raw) > i else None
    if b is not None and b <= 0x7F:
        return b
    if b is not None and b >= 0xE0:
        return b - 0x100
    size_signed = None if b is None else _INTS.get(b)
    if size_signed is None or len(raw) < i + 1 + size_signed[0]:
        raise WireError("token_ids: expected an array of token ids; its first element is not "
                        "an integer")
    size, signed = size_signed
    return int.from_bytes(raw[i + 1:i + 1 + size], "big", signed=signed)


def first_token(raw: msgspec.Raw) -> int | None:
    """The first token id of a raw ``token_ids``; the common shape (an array of 16 to 65535
    small ids) is read inline, anything else by :func:`first_int`."""
    if len(raw) > 7:
        head: int
        b: int
        u16: int
        head, _, b, u16 = _HEAD16.unpack_from(raw)
        if head == _ARRAY16:
            if b <= 0x7F:
                return b
            if b == _UINT16:
                return u16
            if b == _UINT32:
                return int(_HEAD32.unpack_from(raw)[3])
    return first_int(memoryview(raw))


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


def decode_keys(raw: msgspec.Raw, blocks: int) -> list[Keys] | None:
    """vLLM's per-block extra keys, strictly as the mirror types them, at most
    :data:`MAX_KEY_DEPTH` levels deep, one entry per block of the store (vLLM builds one per
    hash it publishes) or none at all."""
    try:
        keys = _KEYS(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as e:
        raise WireError(f"extra_keys: {e}") from None
    if keys is None:
        return None
    if len(keys) != blocks:
        raise WireError(f"extra_keys holds {len(keys)} entries for {blocks} blocks; vLLM "
                        "publishes one per block")
    if not all(k is None or _depth_ok(k, MAX_KEY_DEPTH) for k in keys):
        raise WireError(f"extra_keys nested deeper than {MAX_KEY_DEPTH} levels")
    return keys


def block_tokens(tokens: list[int], blocks: int, size: int) -> list[int]:
    """*tokens* when they are exactly *blocks* full blocks of *size*; :class:`WireError`
    otherwise (the runtime's blocks cannot then be told apart: vLLM's sliding-window groups
    publish the tokens of blocks they skip)."""
    if len(tokens) != blocks * size:
        raise WireError(f"BlockStored carries {len(tokens)} token ids for {blocks} block "
                        f"hash(es) of {size} tokens: which tokens are which block's is unknown")
    return tokens


class LazyEvent(msgspec.Struct, omit_defaults=True, gc=False, tag=True):
    """Base of the twins (tagged by the mirrored class name in field ``type``)."""


class LazyBlockStored(LazyEvent, tag="BlockStored"):
    """vLLM's ``BlockStored`` with its token ids and extra keys left raw."""

    block_hashes: list[BlockHash]
    parent_block_hash: BlockHash | None
    token_ids: msgspec.Raw
    block_size: BlockSize
    lora_id: int | None
    medium: str | None
    lora_name: str | None
    extra_keys: msgspec.Raw = _NIL
    group_idx: Small | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None
    locality: str | None = None
    ownership: str | None = None
    session_id: str | None = None

    def first_token(self) -> int | None:
        return first_token(self.token_ids)

    def tokens(self) -> list[int]:
        """The token ids, as whole blocks of the store's hashes."""
        return block_tokens(decode_tokens(self.token_ids), len(self.block_hashes),
                            self.block_size)

    def extra(self) -> list[Keys] | None:
        """Each block's extra hash keys (None: the store published none)."""
        return decode_keys(self.extra_keys, len(self.block_hashes))

    def stored_under(self, keys: list[Keys] | None, j: int, first: bool, salt: str | None,
                     lora: str | None) -> bool:
        """Whether block *j* (its extra keys *keys*, from :meth:`extra`) was stored under
        exactly *salt* and *lora* and nothing else.

        vLLM publishes each block's extra hash keys untagged, in order: the LoRA name (when a
        LoRA is set), ``(mm_identifier, offset)`` pairs, the cache salt (on a chain's first
        block only) and prompt-embedding digests. A claim names token ids only, so any
        multimodal or embedding key makes the block someone else's.
        """
        if self.lora_name != lora:
            return False
        got = keys[j] if keys is not None else None
        want: tuple[str, ...] = ((lora,) if lora is not None else ()) + (
            (salt,) if first and salt is not None else ())
        return (got or ()) == want


class LazyBlockRemoved(LazyEvent, tag="BlockRemoved"):
    """vLLM's ``BlockRemoved`` (nothing to leave raw)."""

    block_hashes: list[BlockHash]
    medium: str | None
    group_idx: Small | None = None
    locality: str | None = None
    ownership: str | None = None


class LazyAllBlocksCleared(LazyEvent, tag="AllBlocksCleared"):
    """vLLM's ``AllBlocksCleared``."""


class LazyBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    """vLLM's ``KVEventBatch`` of twins."""

    ts: float
    events: list[LazyBlockStored | LazyBlockRemoved | LazyAllBlocksCleared]
    data_parallel_rank: Small | None = None


class LazySGLangBlockStored(LazyEvent, tag="BlockStored"):
    """SGLang's ``BlockStored`` with its token ids left raw."""

    block_hashes: list[int]
    parent_block_hash: int | None
    token_ids: msgspec.Raw
    block_size: BlockSize
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
        """The token ids, as whole pages of the store's hashes."""
        return block_tokens(decode_tokens(self.token_ids), len(self.block_hashes),
                            self.block_size)

    def extra(self) -> list[Keys] | None:
        """SGLang publishes no per-block keys."""
        return None

    def stored_under(self, keys: list[Keys] | None, j: int, first: bool, salt: str | None,
                     lora: str | None) -> bool:
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
    attn_dp_rank: Small | None = None


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
