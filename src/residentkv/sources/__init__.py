"""Pinned runtime releases: the release cache, fetching it, and drift checks against it.

Anchor verification itself lives in :mod:`residentkv.lowering.anchors`; this package only says
*which* releases the curated descriptors are anchored in, downloads them on explicit request
(:func:`fetch`) and compares the anchors across releases (:mod:`residentkv.sources.drift`).
"""

from __future__ import annotations

from residentkv.sources.cache import ENV_CACHE, cache_dir, find_archive
from residentkv.sources.fetch import FetchResult, fetch
from residentkv.sources.pins import PINS, Pin, parse_requirement, pin_for
from residentkv.sources.roots import cached_roots, runtime_descriptor_paths

__all__ = [
    "ENV_CACHE",
    "PINS",
    "FetchResult",
    "Pin",
    "cache_dir",
    "cached_roots",
    "fetch",
    "find_archive",
    "parse_requirement",
    "pin_for",
    "runtime_descriptor_paths",
]
