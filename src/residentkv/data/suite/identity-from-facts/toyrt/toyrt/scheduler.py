"""Scheduler of the toy runtime (suite test data)."""


class NoEvictScheduler:
    """Never preempts a running request's blocks; waiting requests wait."""

    def admit(self, free_blocks: int, needed: int) -> bool:
        return needed <= free_blocks


class KVAwareRouter:
    """Routes a request to the worker with the longest cached prefix; accepts nothing."""

    def route(self, overlaps: dict[str, int]) -> str:
        return max(overlaps, key=lambda w: overlaps[w])


def write_no_admit(request_id: str) -> dict[str, bool]:
    """Do not insert this request's blocks into the prefix cache."""
    return {"request_id": bool(request_id), "admit": False}
