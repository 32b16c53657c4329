"""Source roots from the release cache, and the curated runtime descriptors shipped with them."""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from residentkv.lowering.sources import SourceRoot, open_root
from residentkv.sources.cache import find_archive
from residentkv.sources.pins import PINS, Pin

__all__ = [
    "RUNTIME_FILES",
    "cached_roots",
    "default_roots",
    "runtime_descriptor_paths",
    "runtimes_dir",
]

#: the curated descriptor files, one per runtime release, in report order
RUNTIME_FILES: tuple[str, ...] = (
    "vllm.yaml", "vllm_0_33.yaml", "sglang.yaml", "tensorrt_llm.yaml", "dynamo.yaml",
    "lmcache.yaml", "residentkv_vllm_adapter.yaml", "dynamo_residentkv_adapter.yaml",
)


def runtimes_dir() -> Path:
    """The folder of the curated runtime descriptors inside the installed package."""
    return Path(str(resources.files("residentkv").joinpath("data", "descriptors", "runtimes")))


def runtime_descriptor_paths() -> list[Path]:
    """The curated descriptor files (those present in this build), in report order."""
    folder = runtimes_dir()
    return [folder / f for f in RUNTIME_FILES if (folder / f).is_file()]


def cached_roots(cache: Path, pins: Sequence[Pin] = PINS) -> tuple[dict[str, SourceRoot],
                                                                    list[Pin]]:
    """Open the cached archive of every pin: (roots, pins not in the cache).

    Each root is keyed ``package==version``; the first pin of a package (its primary release)
    is also keyed by the bare package name. A root knows its release, so an anchor naming
    another version of the package is never verified against it.
    """
    roots: dict[str, SourceRoot] = {}
    absent: list[Pin] = []
    for pin in pins:
        path = find_archive(cache, pin)
        if path is None:
            absent.append(pin)
            continue
        root = open_root(pin.package, path)
        root.version = pin.version
        roots[pin.key] = root
        roots.setdefault(pin.package, root)
    return roots, absent


def default_roots(cache: str | Path | None = None) -> dict[str, SourceRoot]:
    """Roots for every pinned release present in the cache (for ``--source`` defaults)."""
    from residentkv.sources.cache import cache_dir

    return cached_roots(cache_dir(cache))[0]
