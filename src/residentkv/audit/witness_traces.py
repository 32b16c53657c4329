"""Which witness traces an audit classified the adapter rows on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["witness_trace_paths"]


def witness_trace_paths(witness: dict[str, Any]) -> list[Path]:
    """The witness traces an audit classified the adapter rows on (shipped or live)."""
    if witness.get("mode") == "live" and witness.get("descriptor"):
        folder = Path(witness["descriptor"]).parent / "traces" / "witness"
        return sorted(folder.glob("*.jsonl"))
    return [Path(t["path"]) for t in witness.get("traces", [])]
