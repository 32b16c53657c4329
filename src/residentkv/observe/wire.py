"""vLLM's KV event wire format, mirrored (``vllm/distributed/kv_events.py`` of vLLM 0.32).

A publisher sends one multipart message per engine step: ``[topic, seq, payload]`` — ``seq`` an
8-byte big-endian unsigned batch number counting from 0, ``payload`` a msgpack ``KVEventBatch``
(an array ``[ts, events, data_parallel_rank]``; each event a map tagged by ``type``:
``BlockStored``, ``BlockRemoved``, ``AllBlocksCleared``). The replay endpoint (a ROUTER) answers
``[b"", start_seq]`` with every buffered batch from ``start_seq`` as
``[b"", topic, seq, payload]`` and ends with ``[b"", b"", END_SEQ, b""]``.

The structs below mirror vLLM's field for field, so msgspec decodes the runtime's bytes without
importing vLLM (the observer never imports the runtime it watches) and never unpickles anything.
SGLang's structs (:mod:`residentkv.observe.wire_sglang`) share the message framing. The hot
path decodes into twins of these structs that leave token ids raw until a claim could need them
(:mod:`residentkv.observe.lazy`); :mod:`residentkv.observe.intake` turns a message of either
dialect into a :class:`Batch`.

Decoding is bounded: the subscription refuses messages above a size limit before they are read
(ZeroMQ's ``MAXMSGSIZE``), and a payload nested deeper than the decoder allows, or of any other
shape, is a :class:`WireError` — a gap, never an exception that ends the observation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import msgspec

#: the replay endpoint's end-of-replay marker: -1 as a signed 8-byte big-endian integer
END_SEQ = (-1).to_bytes(8, "big", signed=True)
#: ``END_SEQ`` read as the unsigned number it is on the wire: never a batch number
RESERVED_SEQ = 2**64 - 1
SEQ_BYTES = 8
#: extra keys nest two levels in vLLM ((mm_identifier, offset) pairs inside a block's tuple)
MAX_KEY_DEPTH = 2

#: a runtime block hash: vLLM publishes 64-bit ints by default, raw sha256 bytes otherwise
BlockHash = bytes | int


class Dialect(StrEnum):
    """Whose KV event structs a publisher speaks."""

    VLLM = "vllm"
    SGLANG = "sglang"


class KVCacheEvent(msgspec.Struct, omit_defaults=True, gc=False, tag=True):
    """Base of the three event kinds (tagged by class name in field ``type``)."""


class BlockStored(KVCacheEvent):
    """Blocks entered the runtime's cache: a chain below ``parent_block_hash``."""

    block_hashes: list[BlockHash]
    parent_block_hash: BlockHash | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None
    extra_keys: list[tuple[Any, ...] | None] | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None
    locality: str | None = None
    ownership: str | None = None
    session_id: str | None = None


class BlockRemoved(KVCacheEvent):
    """Blocks left the runtime's cache on ``medium``."""

    block_hashes: list[BlockHash]
    medium: str | None
    group_idx: int | None = None
    locality: str | None = None
    ownership: str | None = None


class AllBlocksCleared(KVCacheEvent):
    """The runtime dropped its whole prefix cache."""


KVEvent = BlockStored | BlockRemoved | AllBlocksCleared


class KVEventBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    """One engine step's events."""

    ts: float
    events: list[KVEvent]
    data_parallel_rank: int | None = None


class WireError(ValueError):
    """A message that is not a KV event batch in the publisher's format."""


@dataclass(frozen=True, slots=True)
class Batch:
    """One received batch: where it came from, its number, its bytes and its decoded events.

    ``payload`` is kept so a replayed copy can be compared byte for byte with what was applied.
    """

    topic: bytes
    seq: int
    payload: bytes
    ts: float
    rank: int | None
    events: Sequence[Any]


_ENCODE = msgspec.msgpack.Encoder().encode


#: a dialect's payload decoder: bytes -> (ts, events, rank); raises on anything else
PayloadDecoder = Callable[[bytes], tuple[float, list[Any], int | None]]


def read_seq(raw: bytes) -> int:
    """The unsigned 64-bit batch number of an 8-byte field; :class:`WireError` otherwise."""
    if len(raw) != SEQ_BYTES:
        raise WireError(f"sequence field of {len(raw)} bytes; expected {SEQ_BYTES}")
    seq = int.from_bytes(raw, "big")
    if seq == RESERVED_SEQ:
        raise WireError("sequence number 2**64-1 is the replay end marker, never a batch")
    return seq


def encode_frame(topic: bytes, seq: int, batch: Any) -> list[bytes]:
    """The message a publisher sends for *batch* (synthetic publishers and tests)."""
    return [topic, seq.to_bytes(SEQ_BYTES, "big"), _ENCODE(batch)]


def hash_hex(h: BlockHash) -> str:
    """A block hash as hex text, the form ``block_evicted.block_hash`` carries (a negative
    64-bit hash, as SGLang publishes them, in two's complement)."""
    if isinstance(h, bytes):
        return h.hex()
    return format(h if h >= 0 else h + 2**64, "x")
