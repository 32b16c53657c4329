"""A publisher that speaks vLLM's KV event wire format, for tests and the benchmark.

It binds (or connects) a PUB socket, numbers batches from 0 like vLLM's ``ZmqEventPublisher``,
keeps the last batches for a ROUTER replay endpoint answering vLLM's replay protocol, and can
deliberately skip sending a batch (which stays in the replay buffer, as a batch the network
dropped would). Block hashes are 64-bit integers chained over parent and tokens, as vLLM's
default ``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES`` publishes them.
"""

from __future__ import annotations

import hashlib
import threading
from collections import deque
from collections.abc import Sequence

import zmq

from residentkv.observe.wire import (
    END_SEQ,
    BlockHash,
    BlockRemoved,
    BlockStored,
    KVEvent,
    KVEventBatch,
    encode_frame,
)

GPU = "GPU"


def block_hash(parent: BlockHash | None, tokens: Sequence[int]) -> int:
    """A deterministic 64-bit hash of a block below *parent* (not vLLM's; any chain hash does)."""
    h = hashlib.blake2b(digest_size=8)
    h.update(str(parent).encode())
    h.update(b",".join(str(t).encode() for t in tokens))
    return int.from_bytes(h.digest(), "big")


def chain(tokens: Sequence[int], block_size: int,
          parent: BlockHash | None = None) -> list[int]:
    """The hashes of the full blocks of *tokens* below *parent*."""
    out: list[int] = []
    for i in range(len(tokens) // block_size):
        parent = block_hash(parent, tokens[i * block_size:(i + 1) * block_size])
        out.append(parent)
    return out


def stored(tokens: Sequence[int], block_size: int, *, parent: BlockHash | None = None,
           medium: str | None = GPU) -> BlockStored:
    """The ``BlockStored`` vLLM publishes when the full blocks of *tokens* enter its cache."""
    full = len(tokens) // block_size * block_size
    return BlockStored(block_hashes=list(chain(tokens, block_size, parent)),
                       parent_block_hash=parent, token_ids=list(tokens[:full]),
                       block_size=block_size, lora_id=None, medium=medium, lora_name=None,
                       extra_keys=None, group_idx=0)


def removed(hashes: Sequence[BlockHash], medium: str | None = GPU) -> BlockRemoved:
    """The ``BlockRemoved`` vLLM publishes when blocks leave its cache."""
    return BlockRemoved(block_hashes=list(hashes), medium=medium, group_idx=0)


class SyntheticPublisher:
    """PUB socket plus optional replay ROUTER, numbering batches like vLLM."""

    def __init__(self, endpoint: str, *, bind: bool = True, topic: bytes = b"kv",
                 replay_endpoint: str | None = None, buffer_steps: int = 10_000,
                 hwm: int = 1_000_000) -> None:
        self.ctx = zmq.Context()
        self.pub = self.ctx.socket(zmq.PUB)
        self.pub.set_hwm(hwm)
        if bind:
            self.pub.bind(endpoint)
        else:
            self.pub.connect(endpoint)
        self.topic = topic
        self.seq = 0
        self._buffer: deque[tuple[int, list[bytes]]] = deque(maxlen=buffer_steps)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if replay_endpoint is not None:
            self._thread = threading.Thread(target=self._serve_replay, args=(replay_endpoint,),
                                            daemon=True, name="synthetic-replay")
            self._thread.start()

    def publish(self, events: list[KVEvent], *, drop: bool = False, ts: float = 0.0) -> int:
        """Send one batch (or, with *drop*, only number and buffer it); return its seq."""
        seq = self.seq
        self.seq += 1
        parts = encode_frame(self.topic, seq, KVEventBatch(ts=ts, events=events,
                                                           data_parallel_rank=0))
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
