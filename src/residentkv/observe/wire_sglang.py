"""SGLang's KV event wire format, mirrored (``sglang/srt/disaggregation/kv_events.py`` of
SGLang 0.5.23).

The framing is vLLM's (``[topic, 8-byte seq, payload]``, the same replay protocol and end
marker); the payload differs: the batch is ``[ts, events, attn_dp_rank]`` (always three
entries), ``BlockStored`` names its ``cache_salt`` directly (no ``extra_keys``), block hashes are
signed 64-bit integers, no event names a KV-cache group, and the host tier is the medium
``CPU_PINNED``. The structs mirror SGLang's field for field (tested against the released
wheel's source); SGLang itself is never imported. The hot path decodes into their twins in
:mod:`residentkv.observe.lazy`.
"""

from __future__ import annotations

import msgspec


class SGLangKVCacheEvent(msgspec.Struct, omit_defaults=True, gc=False, tag=True):
    """Base of SGLang's three event kinds (tagged by class name in field ``type``)."""


class SGLangBlockStored(SGLangKVCacheEvent, tag="BlockStored"):
    """Pages entered SGLang's radix cache below ``parent_block_hash``."""

    block_hashes: list[int]
    parent_block_hash: int | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None = None
    cache_salt: str | None = None
    session_id: str | None = None
    lora_name: str | None = None


class SGLangBlockRemoved(SGLangKVCacheEvent, tag="BlockRemoved"):
    """Pages left SGLang's cache on ``medium``."""

    block_hashes: list[int]
    medium: str | None = None


class SGLangAllBlocksCleared(SGLangKVCacheEvent, tag="AllBlocksCleared"):
    """SGLang dropped its whole radix cache."""


SGLangKVEvent = SGLangBlockStored | SGLangBlockRemoved | SGLangAllBlocksCleared


class SGLangKVEventBatch(msgspec.Struct, array_like=True, gc=False):
    """One scheduler step's events (SGLang's ``KVEventBatch``: no ``omit_defaults``)."""

    ts: float
    events: list[SGLangKVEvent]
    attn_dp_rank: int | None = None
