"""vLLM's KV event wire format, mirrored (``vllm/distributed/kv_events.py`` of vLLM 0.32).

A publisher sends one multipart message per engine step: ``[topic, seq, payload]`` — ``seq`` an
8-byte big-endian batch number counting from 0, ``payload`` a msgpack ``KVEventBatch``
(an array ``[ts, events, data_parallel_rank]``; each event a map tagged by ``type``:
``BlockStored``, ``BlockRemoved``, ``AllBlocksCleared``). The replay endpoint (a ROUTER) answers
``[b"", start_seq]`` with every buffered batch from ``start_seq`` as
``[b"", topic, seq, payload]`` and ends with ``[b"", b"", END_SEQ, b""]``.

The structs below mirror vLLM's field for field, so msgspec decodes the runtime's bytes without
importing vLLM (the observer never imports the runtime it watches) and never unpickles anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

#: the replay endpoint's end-of-replay marker: -1 as a signed 8-byte big-endian integer
END_SEQ = (-1).to_bytes(8, "big", signed=True)

#: a runtime block hash: vLLM publishes 64-bit ints by default, raw sha256 bytes otherwise
BlockHash = bytes | int


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


_DECODE = msgspec.msgpack.Decoder(KVEventBatch).decode
_ENCODE = msgspec.msgpack.Encoder().encode


class WireError(ValueError):
    """A message that is not a KV event batch in vLLM's format."""


@dataclass(frozen=True, slots=True)
class Frame:
    """One received batch: its publisher sequence number and its decoded events."""

    seq: int
    batch: KVEventBatch


def decode_frame(parts: list[bytes]) -> Frame:
    """Decode ``[topic, seq, payload]``; anything else raises :class:`WireError`."""
    if len(parts) != 3 or len(parts[1]) != 8:
        raise WireError(f"expected [topic, 8-byte seq, payload], got {len(parts)} parts")
    try:
        batch = _DECODE(parts[2])
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise WireError(f"payload is not a KVEventBatch: {e}") from None
    return Frame(int.from_bytes(parts[1], "big"), batch)


def encode_frame(topic: bytes, seq: int, batch: KVEventBatch) -> list[bytes]:
    """The message a vLLM publisher sends for *batch* (synthetic publishers and tests)."""
    return [topic, seq.to_bytes(8, "big"), _ENCODE(batch)]


def hash_hex(h: BlockHash) -> str:
    """A block hash as hex text, the form ``block_evicted.block_hash`` carries."""
    return h.hex() if isinstance(h, bytes) else format(h, "x")
