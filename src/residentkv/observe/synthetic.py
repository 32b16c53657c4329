"""A publisher that speaks vLLM's (or SGLang's) KV event wire format, for tests and the bench.

It binds (or connects) a PUB socket, numbers batches from 0 like vLLM's ``ZmqEventPublisher``,
keeps the last batches for a ROUTER replay endpoint answering vLLM's replay protocol, and can
deliberately skip sending a batch (which stays in the replay buffer, as a batch the network
dropped would). Block hashes are 64-bit integers chained over parent and tokens, as vLLM's
default ``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES`` publishes them. With ``dialect=SGLANG`` the
batch is SGLang's ``[ts, events, attn_dp_rank]`` of SGLang's structs (:func:`to_sglang`).
"""

from __future__ import annotations

import hashlib
import threading
from collections import deque
from collections.abc import Sequence

import zmq

from residentkv.observe.wire import (
    END_SEQ,
    AllBlocksCleared,
    BlockHash,
    BlockRemoved,
    BlockStored,
    Dialect,
    KVEvent,
    KVEventBatch,
    encode_frame,
)
from residentkv.observe.wire_sglang import (
    SGLangAllBlocksCleared,
    SGLangBlockRemoved,
    SGLangBlockStored,
    SGLangKVEvent,
    SGLangKVEventBatch,
)

GPU = "GPU"


def block_hash(parent: BlockHash | None, tokens: Sequence[int], seed: str = "") -> int:
    """A deterministic 64-bit hash of a block below *parent* (not vLLM's; any chain hash does);
    *seed* stands for the extra keys (salt, LoRA) a runtime mixes in."""
    h = hashlib.blake2b(digest_size=8)
    h.update(seed.encode())
    h.update(str(parent).encode())
    h.update(b",".join(str(t).encode() for t in tokens))
    return int.from_bytes(h.digest(), "big")


def chain(tokens: Sequence[int], block_size: int, parent: BlockHash | None = None,
          seed: str = "") -> list[int]:
    """The hashes of the full blocks of *tokens* below *parent*."""
    out: list[int] = []
    for i in range(len(tokens) // block_size):
        parent = block_hash(parent, tokens[i * block_size:(i + 1) * block_size], seed)
        out.append(parent)
    return out


def stored(tokens: Sequence[int], block_size: int, *, parent: BlockHash | None = None,
           medium: str | None = GPU, group: int | None = 0, salt: str | None = None,
           lora: str | None = None, session: str | None = None) -> BlockStored:
    """The ``BlockStored`` vLLM publishes when the full blocks of *tokens* enter its cache
    (under *salt* and *lora*: their extra keys as vLLM publishes them, and a hash chain of its
    own so that another salt or adapter gives other hashes, as in vLLM)."""
    full = len(tokens) // block_size * block_size
    n = full // block_size
    keyed = salt is not None or lora is not None
    extra: list[tuple[str, ...] | None] | None = None
    if keyed:
        extra = [((lora,) if lora else ()) + ((salt,) if salt and parent is None and j == 0
                                              else ()) or None for j in range(n)]
    hashes = chain(tokens, block_size, parent, f"{salt}|{lora}" if keyed else "")
    return BlockStored(block_hashes=list(hashes), parent_block_hash=parent,
                       token_ids=list(tokens[:full]), block_size=block_size, lora_id=None,
                       medium=medium, lora_name=lora, extra_keys=extra, group_idx=group,
                       session_id=session)


def removed(hashes: Sequence[BlockHash], medium: str | None = GPU,
            group: int | None = 0) -> BlockRemoved:
    """The ``BlockRemoved`` vLLM publishes when blocks leave its cache."""
    return BlockRemoved(block_hashes=list(hashes), medium=medium, group_idx=group)


def to_sglang(ev: KVEvent, salt: str | None = None) -> SGLangKVEvent:
    """The same event in SGLang's structs (signed 64-bit hashes; the salt on the event)."""
    def signed(h: BlockHash) -> int:
        assert isinstance(h, int)
        return h - 2**64 if h >= 2**63 else h

    if isinstance(ev, BlockStored):
        parent = ev.parent_block_hash
        return SGLangBlockStored(
            block_hashes=[signed(h) for h in ev.block_hashes],
            parent_block_hash=None if parent is None else signed(parent),
            token_ids=ev.token_ids, block_size=ev.block_size, lora_id=None, medium=ev.medium,
            cache_salt=salt, session_id=ev.session_id, lora_name=ev.lora_name)
    if isinstance(ev, BlockRemoved):
        return SGLangBlockRemoved(block_hashes=[signed(h) for h in ev.block_hashes],
                                  medium=ev.medium)
    assert isinstance(ev, AllBlocksCleared)
    return SGLangAllBlocksCleared()


class SyntheticPublisher:
    """PUB socket plus optional replay ROUTER, numbering batches like vLLM."""

    def __init__(self, endpoint: str, *, bind: bool = True, topic: bytes = b"kv",
                 replay_endpoint: str | None = None, buffer_steps: int = 10_000,
                 hwm: int = 1_000_000, dialect: Dialect = Dialect.VLLM, rank: int = 0) -> None:
        self.ctx = zmq.Context()
        self.pub = self.ctx.socket(zmq.PUB)
        self.pub.set_hwm(hwm)
        if bind:
            self.pub.bind(endpoint)
        else:
            self.pub.connect(endpoint)
        self.topic = topic
        self.dialect = dialect
        self.rank = rank
        self.seq = 0
        self._buffer: deque[tuple[int, list[bytes]]] = deque(maxlen=buffer_steps)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if replay_endpoint is not None:
            self._thread = threading.Thread(target=self._serve_replay, args=(replay_endpoint,),
                                            daemon=True, name="synthetic-replay")
            self._thread.start()

    def publish(self, events: Sequence[KVEvent | SGLangKVEvent], *, drop: bool = False,
                ts: float = 0.0) -> int:
        """Send one batch (or, with *drop*, only number and buffer it); return its seq."""
        batch: KVEventBatch | SGLangKVEventBatch
        if self.dialect is Dialect.SGLANG:
            batch = SGLangKVEventBatch(ts=ts, events=list(events),  # type: ignore[arg-type]
                                       attn_dp_rank=self.rank)
        else:
            batch = KVEventBatch(ts=ts, events=list(events),  # type: ignore[arg-type]
                                 data_parallel_rank=self.rank)
        return self.publish_payload(encode_frame(self.topic, 0, batch)[2], drop=drop)

    def publish_payload(self, payload: bytes, *, drop: bool = False) -> int:
        """Send *payload* (a batch's msgpack bytes, as given: a recorded runtime's, or crafted)
        under the next number, kept for replay like any batch; return its seq."""
        seq = self.seq
        self.seq += 1
        parts = [self.topic, seq.to_bytes(8, "big"), payload]
        with self._lock:
            self._buffer.append((seq, parts))
        if not drop:
            self.pub.send_multipart(parts)
        return seq

    def _serve_replay(self, endpoint: str) -> None:
        router = self.ctx.socket(zmq.ROUTER)
        router.bind(endpoint)
        try:
            while not self._stop.is_set():
                if not router.poll(50):
                    continue
                frames = router.recv_multipart()
                if len(frames) != 3:
                    continue
                client, _, start = frames
                first = int.from_bytes(start, "big")
                with self._lock:
                    batches = [parts for seq, parts in self._buffer if seq >= first]
                for parts in batches:
                    router.send_multipart([client, b"", *parts])
                router.send_multipart([client, b"", b"", END_SEQ, b""])
        finally:
            router.close(linger=0)

    def close(self) -> None:
        """Stop the replay thread and close the sockets."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        self.pub.close(linger=0)
        self.ctx.term()
