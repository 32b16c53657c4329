"""The one deterministic JSON form residentkv writes: sorted keys, fixed indentation, UTF-8
text as it is (no ``\\u`` escapes), one trailing newline. Every report, record and provenance
file goes through :func:`json_text`, so the same value always gives the same bytes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["json_text", "write_json"]


def json_text(obj: Any, *, indent: int = 2) -> str:
    """*obj* as deterministic JSON text ending in a newline."""
    return json.dumps(obj, indent=indent, sort_keys=True, ensure_ascii=False) + "\n"


def write_json(path: Path, obj: Any, *, indent: int = 2) -> None:
    """Write :func:`json_text` of *obj* to *path* (UTF-8)."""
    path.write_text(json_text(obj, indent=indent), encoding="utf-8")
