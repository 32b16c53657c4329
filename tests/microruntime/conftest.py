"""Helpers shared by the MicroRuntime tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from residentkv.microruntime.facts import Trace, read_trace
from residentkv.microruntime.runtime import MicroRuntime
from residentkv.trace.writer import EventWriter


@pytest.fixture
def run_traced(tmp_path: Path) -> Iterator[Callable[..., Trace]]:
    """Run ``body(runtime)`` against a fresh traced runtime and return the trace read back."""
    counter = iter(range(10_000))

    def run(
        usable: int, policy: str, body: Callable[[MicroRuntime], None], **kwargs: object
    ) -> Trace:
        path = tmp_path / f"run-{next(counter)}.jsonl"
        with EventWriter(path, source="microruntime") as w:
            rt = MicroRuntime(usable, policy, writer=w, **kwargs)  # type: ignore[arg-type]
            body(rt)
            rt.close()
            rt.pool.check()
        return read_trace(path)

    yield run
