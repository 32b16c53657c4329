"""Pin the sha256 of every trace a descriptor cites, in place (comments and layout kept).

A trace anchor without its file's sha256 is only cited (A010): anyone could have typed the
file. The producer of a trace -- the witness run that wrote it, or a maintainer who re-ran it --
pins the digest right after writing; the checker then verifies a passing gate only on exactly
those bytes.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

from residentkv.errors import UsageError
from residentkv.lowering.yamlio import round_trip_yaml

__all__ = ["pin_trace_digests"]


def pin_trace_digests(descriptor: Path) -> dict[str, str]:
    """Set ``sha256`` on every trace anchor of *descriptor* to its file's digest.

    Returns ``{relative trace path: sha256}`` of the traces pinned. A cited trace that does not
    exist is a usage error (nothing is written).
    """
    yaml = round_trip_yaml()
    doc: Any = yaml.load(descriptor.read_text(encoding="utf-8"))
    pinned: dict[str, str] = {}
    for row in doc.get("rows") or []:
        for anchor in (row.get("anchors") or {}).values():
            if not isinstance(anchor, dict) or anchor.get("kind") != "trace":
                continue
            rel = str(anchor["path"])
            if rel not in pinned:
                pinned[rel] = _digest(descriptor.parent / rel, descriptor)
            anchor["sha256"] = pinned[rel]
    buf = io.StringIO()
    yaml.dump(doc, buf)
    descriptor.write_text(buf.getvalue(), encoding="utf-8")
    return pinned


def _digest(path: Path, descriptor: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as e:
        raise UsageError(f"{descriptor}: cited trace {path}: {e.strerror or e}",
                         path=str(descriptor)) from None
