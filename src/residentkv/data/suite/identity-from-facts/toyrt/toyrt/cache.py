"""Block cache of the toy runtime (suite test data, modelled on public runtimes)."""


class EvictionPriority:
    """Per-block retention priority: higher priorities are evicted later, never pinned."""

    def __init__(self, priority: int = 35, duration_s: float | None = None) -> None:
        self.priority = max(0, min(100, priority))
        self.duration_s = duration_s

    def order_key(self, last_used: float) -> tuple[int, float]:
        return (self.priority, last_used)


class TTLConfig:
    """Blocks older than ttl_s become ordinary eviction candidates; no event is emitted."""

    def __init__(self, ttl_s: float) -> None:
        self.ttl_s = ttl_s

    def expired(self, age_s: float) -> bool:
        return age_s >= self.ttl_s


def offload_blocks(blocks: list[int], tier: str = "host") -> list[tuple[int, str]]:
    """Copy blocks to a slower tier; any request may later hit them again."""
    return [(b, tier) for b in blocks]


class BlockStored:
    """Event emitted when a block is stored: block hashes and a medium, no claim id."""

    def __init__(self, block_hashes: list[int], medium: str) -> None:
        self.block_hashes = block_hashes
        self.medium = medium
