"""Chain reconstruction: which runtime block hashes hold which claimed positions.

vLLM never publishes a claim, only chains: each ``BlockStored`` names its parent block hash and
the token ids of its blocks. A claimed prefix's block *i* is the block whose tokens are the
claim's *i*-th block of tokens and whose parent is the claim's block *i - 1* (no parent for
block 0). The index learns those hashes as the chains arrive and, from then on, tracks each
claimed position's presence on every medium from ``BlockStored``/``BlockRemoved`` alone.

Memory: one entry per live stored block (its media, as a bit mask) plus one per learned claimed
block; token ids are compared as they pass and never kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from residentkv.observe.claims import ObservedClaim, block_key
from residentkv.observe.wire import BlockHash, BlockRemoved, BlockStored


@dataclass(eq=False)
class Tracked:
    """One claim's positions: the hashes learned for each and how many are live per medium."""

    claim: ObservedClaim
    #: position -> runtime hashes learned for it (several under different salts or adapters)
    hashes: list[list[BlockHash]] = field(default_factory=list)
    #: position -> number of its hashes live on the device medium
    live: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        n = len(self.claim.blocks)
        self.hashes = [[] for _ in range(n)]
        self.live = [0] * n

    @property
    def present(self) -> list[int]:
        """The positions stored on the device medium now."""
        return [p for p, n in enumerate(self.live) if n > 0]


@dataclass(frozen=True, slots=True)
class Change:
    """A claimed position appeared on or vanished from the device medium."""

    tracked: Tracked
    position: int
    block_hash: BlockHash
    present: bool


class ChainIndex:
    """Live stored blocks per medium, and the claimed positions among them (device medium)."""

    def __init__(self, claims: list[ObservedClaim], device_medium: str | None) -> None:
        self.tracked = [Tracked(c) for c in claims]
        self.device_medium = device_medium
        self._roots: dict[bytes, list[Tracked]] = {}
        for t in self.tracked:
            self._roots.setdefault(t.claim.blocks[0], []).append(t)
        self._known: dict[BlockHash, list[tuple[Tracked, int]]] = {}
        self._live: dict[BlockHash, int] = {}
        self._bits: dict[str | None, int] = {}
        self.unmatched_removals = 0
        #: block sizes the runtime published (a claim of another block size can never match)
        self.block_sizes: set[int] = set()

    def _bit(self, medium: str | None) -> int:
        bit = self._bits.get(medium)
        if bit is None:
            bit = self._bits[medium] = 1 << len(self._bits)
        return bit

    @property
    def live_blocks(self) -> int:
        """Blocks stored on at least one medium now."""
        return len(self._live)

    def stored(self, ev: BlockStored) -> Iterator[Change]:
        """Apply one ``BlockStored``; yield the claimed positions it made present."""
        bit = self._bit(ev.medium)
        device = ev.medium == self.device_medium
        parent = ev.parent_block_hash
        size = ev.block_size
        self.block_sizes.add(size)
        tokens = ev.token_ids
        for j, h in enumerate(ev.block_hashes):
            before = self._live.get(h, 0)
            self._live[h] = before | bit
            owners = self._known.get(h)
            if owners is None:
                owners = self._learn(h, parent, tokens[j * size:(j + 1) * size])
            if device and not before & bit:
                for t, pos in owners:
                    t.live[pos] += 1
                    if t.live[pos] == 1:
                        yield Change(t, pos, h, True)
            parent = h

    def _learn(self, h: BlockHash, parent: BlockHash | None,
               chunk: list[int]) -> list[tuple[Tracked, int]]:
        """Claimed positions *h* holds: a root matching a claim's first block, or a child of a
        learned claimed block matching the claim's next block."""
        if parent is None:
            owners = [(t, 0) for t in self._roots.get(block_key(chunk), ())]
        else:
            above = self._known.get(parent)
            if not above:
                return []
            key = block_key(chunk)
            owners = [(t, pos + 1) for t, pos in above
                      if pos + 1 < len(t.claim.blocks) and t.claim.blocks[pos + 1] == key]
        if owners:
            self._known[h] = owners
            for t, pos in owners:
                t.hashes[pos].append(h)
        return owners

    def removed(self, ev: BlockRemoved) -> Iterator[Change]:
        """Apply one ``BlockRemoved``; yield the claimed positions it made absent."""
        bit = self._bit(ev.medium)
        device = ev.medium == self.device_medium
        for h in ev.block_hashes:
            before = self._live.get(h)
            if before is None or not before & bit:
                self.unmatched_removals += 1  # removal of a block never seen stored
                continue
            after = before & ~bit
            if after:
                self._live[h] = after
            else:
                del self._live[h]
            if device:
                for t, pos in self._known.get(h, ()):
                    t.live[pos] -= 1
                    if t.live[pos] == 0:
                        yield Change(t, pos, h, False)

    def cleared(self) -> Iterator[Change]:
        """Apply ``AllBlocksCleared``: every live block is gone; yield the claimed positions."""
        bit = self._bit(self.device_medium)
        for t in self.tracked:
            for pos, n in enumerate(t.live):
                if n:
                    t.live[pos] = 0
                    gone = next(h for h in t.hashes[pos] if self._live.get(h, 0) & bit)
                    yield Change(t, pos, gone, False)
        self._live.clear()

    def forget_live(self) -> None:
        """Drop what is live without reporting it (the runtime restarted: its state is unknown,
        not observed as lost)."""
        self._live.clear()
        for t in self.tracked:
            t.live = [0] * len(t.live)
