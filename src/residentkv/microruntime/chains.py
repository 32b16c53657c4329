"""Prefix chains over the block pool: which device block backs which position of which object.

A :class:`Chain` is one reusable object (a prefix): an ordered map position -> block.
:class:`Chains` owns the :class:`~residentkv.microruntime.pool.BlockPool` and keeps, for every
non-free block, the one chain position it backs. It knows nothing of claims or requests: the
claim ledger and the scheduler tell it which blocks to reference, place, release or forget.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Generic, TypeVar

from residentkv.errors import InternalError
from residentkv.microruntime.pool import BlockPool

L = TypeVar("L")


class Chain(Generic[L]):
    """A reusable object (a prefix): an ordered chain of device blocks by position.

    ``label`` belongs to the chains' user (the claim ledger labels an object with its claim).
    """

    __slots__ = ("blocks", "id", "label")

    def __init__(self, object_id: str) -> None:
        self.id = object_id
        self.blocks: dict[int, int] = {}
        self.label: L | None = None


class Chains(Generic[L]):
    """The device block pool and the prefix chains its blocks back (labelled with ``L``).

    :param usable_blocks: device blocks in the pool.

    ``ops`` counts block operations (hits, allocations, evictions, releases) for the bench.
    """

    __slots__ = ("_chains", "_owner", "_pos", "ops", "pool")

    def __init__(self, usable_blocks: int) -> None:
        self.pool = BlockPool(usable_blocks)
        self._owner: list[Chain[L] | None] = [None] * usable_blocks
        self._pos: list[int] = [0] * usable_blocks
        self._chains: dict[str, Chain[L]] = {}
        self.ops = 0

    # -------------------------------------------------------------------------- lookup

    def chain(self, object_id: str) -> Chain[L]:
        """The object's chain, created empty on first use."""
        chain = self._chains.get(object_id)
        if chain is None:
            chain = self._chains[object_id] = Chain(object_id)
        return chain

    def find(self, object_id: str) -> Chain[L] | None:
        """The object's chain, if the object was ever named."""
        return self._chains.get(object_id)

    def owner(self, block: int) -> Chain[L] | None:
        """The chain *block* backs, if any."""
        return self._owner[block]

    def position(self, block: int) -> int:
        """The chain position *block* backs (meaningful only while it backs one)."""
        return self._pos[block]

    def census(self, chain: Chain[L], n: int) -> tuple[int, int, int]:
        """For positions ``0..n-1``: (missing, hits on pinned blocks, hits on evictable ones)."""
        blocks = chain.blocks
        pinned = self.pool.pinned
        refs = self.pool.refs
        missing = hit_pinned = hit_evictable = 0
        for p in range(n):
            b = blocks.get(p)
            if b is None:
                missing += 1
            elif pinned[b]:
                hit_pinned += 1
            elif refs[b] == 0:
                hit_evictable += 1
        return missing, hit_pinned, hit_evictable

    # ---------------------------------------------------------------------- transitions

    def hold(
        self,
        chain: Chain[L],
        n: int,
        who: str,
        evict: Callable[[int, Chain[L], int, str], None],
        claimed: Callable[[int, int], None] | None = None,
        claimed_below: int = 0,
    ) -> tuple[list[int], list[int]]:
        """Reference positions ``0..n-1`` of *chain*: (the block per position, the blocks
        newly written). Counts the *n* block operations.

        Hits are referenced first, so an allocation can never evict a block the same request
        is about to reuse. Missing positions take a free block, else the least recently used
        one: its content is forgotten and ``evict(block, chain, position, who)`` is told what
        was lost before the block is reused (*who*: the request taking it).
        ``claimed(block, position)`` is told of every written position below *claimed_below*.
        """
        pool = self.pool
        refs = pool.refs
        pinned = pool.pinned
        owner = self._owner
        pos = self._pos
        blocks = chain.blocks
        held = [-1] * n
        for p in range(n):
            b = blocks.get(p, -1)
            if b >= 0:
                if refs[b] == 0 and not pinned[b]:
                    pool.uncache(b)
                refs[b] += 1
                held[p] = b
        written: list[int] = []
        for p in range(n):
            if held[p] >= 0:
                continue
            b = pool.take_free()
            if b < 0:
                b = pool.pop_victim()
                lost = owner[b]
                if lost is not None:  # forget the victim's content before reusing the block
                    del lost.blocks[pos[b]]
                    owner[b] = None
                    self.ops += 1
                    evict(b, lost, pos[b], who)
            owner[b] = chain
            pos[b] = p
            blocks[p] = b
            refs[b] = 1
            held[p] = b
            written.append(b)
            if p < claimed_below and claimed is not None:
                claimed(b, p)
        self.ops += n
        return held, written

    def release(
        self,
        chain: Chain[L],
        held: Sequence[int],
        drop: set[int] | None,
        soft: bool,
        footprint: int,
    ) -> None:
        """Drop one reference to each of *held* (a finished request's blocks, tail first).

        A block nobody references or pins becomes cached — in the soft tier if *soft* and its
        position is below *footprint* — unless it is in *drop*: then it is forgotten and freed.
        """
        pool = self.pool
        refs = pool.refs
        pinned = pool.pinned
        pos = self._pos
        blocks = chain.blocks
        # Tail first: the tail of a chain becomes the least recently used, so LRU eviction
        # takes tails before heads (as vLLM frees blocks) and prefixes keep their leading run.
        for b in reversed(held):
            refs[b] -= 1
            if refs[b] or pinned[b]:
                continue
            if drop is not None and b in drop:
                del blocks[pos[b]]
                self.free(b)
            else:
                pool.cache(b, soft=soft and pos[b] < footprint)
        self.ops += len(held)

    def abandon(self, chain: Chain[L], held: Sequence[int], written: Iterable[int]) -> None:
        """Undo an admission whose new blocks are invalid: drop every reference, forget and
        free the *written* blocks, and cache the remaining hits again (tail first)."""
        pool = self.pool
        refs = pool.refs
        for b in held:
            refs[b] -= 1
        for b in written:
            del chain.blocks[self._pos[b]]
            self.free(b)
        for b in reversed(held):
            if self._owner[b] is not None and refs[b] == 0 and not pool.pinned[b]:
                pool.cache(b, soft=False)

    def free(self, block: int) -> None:
        """Return *block* (already out of its chain) to the free list."""
        self._owner[block] = None
        self.pool.put_free(block)

    def unlink(self, block: int) -> tuple[Chain[L], int] | None:
        """Forget *block*'s content: take it out of its chain and count one block operation.

        Returns the (chain, position) it backed, or ``None`` if it backed nothing. The block
        itself stays where the pool has it; the caller frees or reuses it.
        """
        chain = self._owner[block]
        if chain is None:
            return None
        p = self._pos[block]
        del chain.blocks[p]
        self._owner[block] = None
        self.ops += 1
        return chain, p

    # ---------------------------------------------------------------------- invariants

    def check(self) -> None:
        """Raise :class:`InternalError` unless every block is in exactly one place and every
        non-free block backs exactly one chain position (the pool never over-allocates)."""
        pool = self.pool
        pool.check()
        backed = sum(len(c.blocks) for c in self._chains.values())
        in_use = pool.capacity - len(pool.free)
        if backed != in_use:
            raise InternalError(f"{backed} chain positions but {in_use} blocks in use")
        for c in self._chains.values():
            for p, b in c.blocks.items():
                if self._owner[b] is not c or self._pos[b] != p:
                    raise InternalError(f"block {b} backs {c.id}[{p}] but is owned elsewhere")
