"""Fixtures for the release-cache tests: tiny local wheels, a CLI runner, the pinned cache."""

from __future__ import annotations

import os
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from residentkv.sources import PINS, cache_dir, fetch, find_archive


def make_wheel(folder: Path, dist: str, version: str, files: dict[str, str]) -> Path:
    """A minimal valid wheel (pip accepts it from --find-links)."""
    folder.mkdir(parents=True, exist_ok=True)
    norm = dist.replace("-", "_")
    path = folder / f"{norm}-{version}-py3-none-any.whl"
    info = f"{norm}-{version}.dist-info"
    members = dict(files)
    members[f"{info}/METADATA"] = (f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    members[f"{info}/WHEEL"] = ("Wheel-Version: 1.0\nGenerator: residentkv-tests\n"
                                "Root-Is-Purelib: true\nTag: py3-none-any\n")
    members[f"{info}/RECORD"] = "".join(f"{n},,\n" for n in members) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as z:
        for name, text in members.items():
            z.writestr(name, text)
    return path


@pytest.fixture
def wheel_factory(tmp_path: Path) -> Callable[..., Path]:
    def make(dist: str, version: str, files: dict[str, str] | None = None,
             folder: Path | None = None) -> Path:
        return make_wheel(folder or tmp_path / "index", dist, version,
                          files or {"pkg/__init__.py": "X = 1\n"})
    return make


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
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from rkv_cli import run

    return lambda *args: run(capsys, *args)
