"""BlockPool: free list, two LRU tiers, invariants."""

from __future__ import annotations

import pytest

from residentkv.errors import InternalError
from residentkv.microruntime.pool import BlockPool


def test_free_blocks_are_handed_out_in_order() -> None:
    pool = BlockPool(3)
    assert [pool.take_free() for _ in range(4)] == [0, 1, 2, -1]


def test_lru_evicts_oldest_unclaimed_before_soft() -> None:
    pool = BlockPool(4)
    for b in (pool.take_free() for _ in range(4)):
        pool.cache(b, soft=b == 0)
    pool.uncache(2)  # a hit takes block 2 out of the LRU
    assert [pool.pop_victim() for _ in range(4)] == [1, 3, 0, -1]


def test_counts_and_check() -> None:
    pool = BlockPool(4)
    b = pool.take_free()
    pool.refs[b] = 1
    c = pool.take_free()
    pool.cache(c, soft=False)
    assert (pool.available, pool.evictable, pool.held()) == (3, 1, 1)
    pool.check()


def test_check_detects_a_block_in_two_places() -> None:
    pool = BlockPool(2)
    pool.cache(0, soft=False)  # still on the free list too
    with pytest.raises(InternalError):
        pool.check()


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError):
        BlockPool(0)
