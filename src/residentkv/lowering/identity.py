"""Who a trace is about and who emitted it, as types normalised once where they are parsed
(SPEC §7.2).

* :class:`RuntimeId` -- a distribution name as packaging compares it (PEP 503: case folded,
  runs of ``-``, ``_`` and ``.`` as one ``-``). Only a valid distribution name (PEP 508: ASCII
  letters and digits, with ``-``, ``_`` or ``.`` inside) is one: a name with whitespace or any
  other character is refused (:class:`IdentityError`), never trimmed or folded into another.
  Two runtimes are the same only when their ids are equal: ``vllm-cpu`` is not ``vllm``, and
  no prefix, substring or alias decides anything.
* :class:`EmitterName` -- the name an emitter gives itself, compared exactly as written, the
  way Python compares module names: ``vllm.envs`` is not ``vllm_envs`` nor ``VLLM.envs``. No
  folding of any kind: a resemblance between names never makes one the other. Read as a dotted
  module path only to look its module up in a distribution's ``RECORD``.
* :class:`RowTarget` -- what a row's ``runtime`` names: ``a`` is runtime ``a``; ``a+b`` is
  runtime ``a`` with adapter ``b`` (another distribution than ``a``); a trace binds the row
  only when its (runtime, adapter, version) is the row's, versions compared exactly.
* :class:`TraceOrigin` -- who emitted a trace, as its root of trust says.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

__all__ = ["EmitterName", "IdentityError", "RowTarget", "RuntimeId", "TraceOrigin", "pep503",
           "plain_token"]

_SEPARATORS = re.compile(r"[-_.]+")
#: PEP 508 distribution names (case-insensitive, ASCII only)
_DISTRIBUTION = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


class IdentityError(ValueError):
    """A name that is not a distribution name, or a version that is not one token."""


def pep503(name: str) -> str:
    """*name* as PEP 503 compares distribution names (nothing trimmed, nothing else folded)."""
    return _SEPARATORS.sub("-", name).lower()


def plain_token(value: str, what: str) -> str:
    """*value* when it is one non-empty token (no whitespace, no control character), else
    :class:`IdentityError`: a version or a name is never trimmed into another."""
    if not value or any(c.isspace() or not c.isprintable() for c in value):
        raise IdentityError(f"{what} {value!r} is not one token (it is empty or holds "
                            "whitespace or a control character); names and versions compare "
                            "exactly, nothing is trimmed")
    return value


@dataclass(frozen=True, order=True)
class RuntimeId:
    """A runtime distribution, by its PEP 503 name (build it with :meth:`parse`)."""

    key: str

    @classmethod
    def parse(cls, name: str) -> RuntimeId:
        """The distribution *name* names; :class:`IdentityError` when it is not a valid
        distribution name (whitespace, non-ASCII, an empty part)."""
        if not isinstance(name, str) or not _DISTRIBUTION.fullmatch(name):
            raise IdentityError(f"{name!r} is not a distribution name (ASCII letters and "
                                "digits, with -, _ or . inside; nothing is trimmed)")
        return cls(pep503(name))

    @classmethod
    def maybe(cls, name: str) -> RuntimeId | None:
        """The distribution *name* names, or ``None`` when it names none."""
        try:
            return cls.parse(name)
        except IdentityError:
            return None

    def __str__(self) -> str:
        return self.key


@dataclass(frozen=True)
class EmitterName:
    """An emitter's name, exactly as written: equal only to the same string."""

    text: str

    @classmethod
    def parse(cls, name: str) -> EmitterName:
        return cls(name)

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
        """The target, or why *name* and *version* name none: ``a+b+c``, a part that is not
        a distribution name (``vllm-cpu + residentkv``), an adapter that is the runtime
        itself (``a+a``), a version with whitespace (``" 0.32.0"``)."""
        parts = name.split("+")
        if len(parts) > 2:
            return (f"runtime name {name!r} is neither RUNTIME nor RUNTIME+ADAPTER (one "
                    "runtime distribution, at most one adapter distribution)")
        try:
            ids = [RuntimeId.parse(p) for p in parts]
            if version is not None:
                plain_token(version, "runtime version")
        except IdentityError as e:
            return f"runtime {name!r}: {e}"
        if len(ids) == 2 and ids[0] == ids[1]:
            return (f"runtime name {name!r} names {ids[0]} as its own adapter; an adapter is "
                    "another distribution (a native row names the runtime alone)")
        return cls(ids[0], ids[1] if len(ids) == 2 else None, version)

    def __str__(self) -> str:
        name = f"{self.runtime}+{self.adapter}" if self.adapter else str(self.runtime)
        return f"{name} {self.version}" if self.version else name


@dataclass(frozen=True)
class TraceOrigin:
    """Who emitted a trace and on what, as its root of trust says (never the trace alone).

    ``emitter_dist`` is the distribution that ships the emitter when the root names it (the
    live run and the package: residentkv itself; an attestation: its ``emitter.distribution``,
    which counts only as far as the trust policy or a ``RECORD`` bears it out).
    ``artifact_sha256`` is the runtime artifact an attestation names (``None`` for the live
    and package roots, whose runtime is the one the run or the package recorded).
    """

    emitter: EmitterName
    emitter_version: str
    emitter_dist: RuntimeId | None
    runtime: RuntimeId
    runtime_version: str
    artifact_sha256: str | None = None

    def target(self, native: bool) -> RowTarget | None:
        """The row target this trace binds: the runtime alone when its emitter is *native*,
        else the runtime with the emitter's distribution as adapter (``None``: none -- no
        distribution named, or the runtime named as its own adapter without RECORD showing
        it ships the emitter)."""
        if native:
            return RowTarget(self.runtime, None, self.runtime_version)
        if self.emitter_dist is None or self.emitter_dist == self.runtime:
            return None
        return RowTarget(self.runtime, self.emitter_dist, self.runtime_version)
