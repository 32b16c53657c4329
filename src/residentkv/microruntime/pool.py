"""The device block pool: a fixed set of blocks, a free list and O(1) LRU eviction.

Every block is in exactly one place at a time:

* ``free``      — holds nothing;
* ``lru``       — cached, unreferenced, evictable (oldest first);
* ``lru_soft``  — cached, unreferenced, belongs to a ``soft_priority`` claim: evicted only when
  ``lru`` is empty (prefer to keep, never promise to keep);
* held          — referenced by a running request and/or pinned by a protecting claim.

The two LRUs are ``OrderedDict``s, so taking a victim, touching a block and caching a block are
all O(1); nothing ever scans the pool per allocation.
"""

from __future__ import annotations

from collections import OrderedDict

from residentkv.errors import InternalError


class BlockPool:
    """A pool of ``capacity`` device blocks with reference counts, pins and two LRU tiers."""

    __slots__ = ("capacity", "free", "lru", "lru_soft", "pinned", "refs")

    def __init__(self, capacity: int) -> None:
        if capacity <= 0:
            raise ValueError("capacity must be > 0")
        self.capacity = capacity
        # Reversed so that pop() hands out block 0 first: traces read naturally.
        self.free: list[int] = list(range(capacity - 1, -1, -1))
        self.lru: OrderedDict[int, None] = OrderedDict()
        self.lru_soft: OrderedDict[int, None] = OrderedDict()
        self.refs: list[int] = [0] * capacity
        self.pinned: bytearray = bytearray(capacity)

    # -- counts -----------------------------------------------------------------------------

    @property
    def evictable(self) -> int:
        """Cached blocks that may be evicted right now."""
        return len(self.lru) + len(self.lru_soft)

    @property
    def available(self) -> int:
        """Blocks an allocation could obtain now (free or evictable)."""
        return len(self.free) + len(self.lru) + len(self.lru_soft)

    def is_evictable(self, block: int) -> bool:
        """Whether *block* sits in one of the LRUs."""
        return block in self.lru or block in self.lru_soft

    # -- transitions --------------------------------------------------------------------------

    def take_free(self) -> int:
        """A free block, or -1 if there is none."""
        return self.free.pop() if self.free else -1

    def pop_victim(self) -> int:
        """Remove and return the least recently used evictable block (-1 if none).

        Unclaimed blocks go first; soft-priority blocks only when no unclaimed block is left.
        """
        if self.lru:
            return self.lru.popitem(last=False)[0]
        if self.lru_soft:
            return self.lru_soft.popitem(last=False)[0]
        return -1

    def uncache(self, block: int) -> None:
        """Take *block* out of the LRUs (it is being referenced or pinned)."""
        if block in self.lru:
            del self.lru[block]
        elif block in self.lru_soft:
            del self.lru_soft[block]

    def cache(self, block: int, *, soft: bool) -> None:
        """Make an unreferenced, unpinned block evictable, as the most recently used."""
        (self.lru_soft if soft else self.lru)[block] = None

    def put_free(self, block: int) -> None:
        """Return a block that no longer holds anything to the free list."""
        self.refs[block] = 0
        self.pinned[block] = 0
        self.free.append(block)

    # -- invariants ---------------------------------------------------------------------------

    def held(self) -> int:
        """Blocks that are neither free nor evictable."""
        return self.capacity - self.available

    def check(self) -> None:
        """Raise :class:`InternalError` if any block is in two places or lost (tests call this)."""
        seen: dict[int, str] = {}
        for where, blocks in (("free", self.free), ("lru", self.lru), ("lru_soft", self.lru_soft)):
            for b in blocks:
                if not 0 <= b < self.capacity:
                    raise InternalError(f"block {b} outside the pool")
                if b in seen:
                    raise InternalError(f"block {b} in both {seen[b]} and {where}")
                seen[b] = where
                if self.refs[b] or self.pinned[b]:
                    raise InternalError(f"block {b} in {where} but referenced or pinned")
        for b in range(self.capacity):
            if b not in seen and not (self.refs[b] or self.pinned[b]):
                raise InternalError(f"block {b} is held by nothing yet not free")
            if self.refs[b] < 0:
                raise InternalError(f"block {b} has a negative reference count")
