"""Fixtures for the audit tests: the CLI runner and the pinned release cache."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from residentkv.sources import PINS, cache_dir, fetch, find_archive

SOURCES_TESTS = Path(__file__).parent.parent / "sources"


@pytest.fixture(scope="session")
def pinned_cache() -> Path:
    """The release cache holding every pinned archive, or a skip saying how to get one.

    CI runs `residentkv sources fetch` first (the Makefile does); with RESIDENTKV_FETCH=1 the
    fixture fetches what is missing itself.
    """
    cache = cache_dir()
    missing = [p for p in PINS if find_archive(cache, p) is None]
    if missing and os.environ.get("RESIDENTKV_FETCH") == "1":
        fetch(missing, cache)
        missing = [p for p in PINS if find_archive(cache, p) is None]
    if missing:
        pytest.skip(f"pinned releases not in the cache {cache}: "
                    f"{', '.join(p.requirement for p in missing)}; run `residentkv sources "
                    "fetch` (or set RESIDENTKV_FETCH=1)")
    return cache


@pytest.fixture
def cli_run(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    sys.path.insert(0, str(SOURCES_TESTS))
    from rkv_cli import run

    return lambda *args: run(capsys, *args)
