"""Block cache of the toy runtime."""

from __future__ import annotations

DEFAULT_PRIORITY = 35


class RetentionConfig:
    """Per-request retention priority and duration (a hint, not a claim)."""

    def __init__(self, priority: int = DEFAULT_PRIORITY, duration_s: float | None = None):
        self.priority = priority
        self.duration_s = duration_s

    def evictable(self, age_s: float) -> bool:
        return self.duration_s is None or age_s > self.duration_s


def offload_blocks(blocks: list[int], tier: str = "cpu") -> dict[int, str]:
    """Copy blocks to a slower tier; nothing here names a claim."""
    return {b: tier for b in blocks}
