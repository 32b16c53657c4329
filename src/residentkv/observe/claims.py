"""The observer's claims file: which prefixes to watch, under which ResidentClaim.

YAML (or JSON, a subset of YAML)::

    objects:                      # optional: token ids per object_id, shared by claims
      sys-prompt: [11, 12, ...]
    claims:
      - claim_id: c-1             # every ResidentClaim field (``residentkv schema claim``)
        ...
        tokens: [11, 12, ...]     # the claimed prefix's token ids, or taken from objects
        cache_salt: s-1           # optional: the salt its requests carry (default: none)
        lora_name: adapter-a      # optional: the LoRA adapter it runs under (default: none)
        session_id: sess-7        # optional: only chains this session stored count
        kv_groups: [0]            # optional: the KV-cache groups it needs (default: every
                                  # group the runtime stored claimed blocks in)

A claim needs ``footprint_blocks`` full blocks of tokens (``cache_identity.block_size`` each):
the runtime publishes full blocks only. Every problem is a located ``L030``/``L031`` error; a
misspelt key is answered with the nearest one.
"""

from __future__ import annotations

import difflib
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from residentkv.errors import UserInputError
from residentkv.limits import read_bounded
from residentkv.lowering.yamlio import (
    DescriptorError,
    load_yaml,
    locate,
    plain,
    validation_findings,
)
from residentkv.model.claim import ResidentClaim

INVALID = "L030"
TOO_SHORT = "L031"
_TOP_KEYS = frozenset({"claims", "objects"})
#: what a claim entry may hold beside the ResidentClaim fields
_BINDING_KEYS = ("tokens", "cache_salt", "lora_name", "session_id", "kv_groups")
_CLAIM_KEYS = frozenset(ResidentClaim.model_fields) | frozenset(_BINDING_KEYS)


def block_key(tokens: Sequence[int]) -> bytes:
    """One block's token ids as compact bytes: compared without building tuples, and never
    traversed by the garbage collector (10,000 claims hold millions of token ids)."""
    return array("q", tokens).tobytes()


@dataclass(frozen=True)
class ObservedClaim:
    """A claim to watch, the token ids of the prefix it names (one key per block,
    :func:`block_key`) and what its blocks are stored under: the cache salt and LoRA adapter
    (none unless named), the session (any unless named) and the KV-cache groups it needs
    (every group the runtime stores claimed blocks in, unless named)."""

    claim: ResidentClaim
    blocks: tuple[bytes, ...]
    first_token: int = 0
    cache_salt: str | None = None
    lora_name: str | None = None
    session_id: str | None = None
    kv_groups: frozenset[int] | None = None

    @classmethod
    def of(cls, claim: ResidentClaim, tokens: Sequence[int], *, cache_salt: str | None = None,
           lora_name: str | None = None, session_id: str | None = None,
           kv_groups: frozenset[int] | None = None) -> ObservedClaim:
        """*claim* over the first ``footprint_blocks`` full blocks of *tokens*."""
        size = claim.cache_identity.block_size
        return cls(claim, tuple(block_key(tokens[j * size:(j + 1) * size])
                                for j in range(claim.footprint_blocks)), tokens[0],
                   cache_salt, lora_name, session_id, kv_groups)

    @property
    def claim_id(self) -> str:
        return self.claim.claim_id

    @property
    def block_size(self) -> int:
        return self.claim.cache_identity.block_size

    @property
    def needed(self) -> range:
        """The positions the predicate needs."""
        p = self.claim.predicate
        start = p.start or 0
        return range(start, start + p.blocks)


class ClaimsFileError(UserInputError):
    """A claims file the observer cannot use (exit code 2)."""

    code = INVALID


def load_claims(path: str | Path) -> list[ObservedClaim]:
    """Read and validate a claims file; the first problem raises :class:`ClaimsFileError`."""
    shown = str(path)
    text = read_bounded(path, "claims file").decode("utf-8", errors="replace")
    try:
        root = load_yaml(text, shown, code=INVALID)
        data = plain(root)
    except DescriptorError as e:
        limit = e.code == "L003"
        raise ClaimsFileError(e.message, code=e.code if limit else INVALID, path=shown,
                              line=e.line, col=e.col) from None
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list):
        raise ClaimsFileError("expected a mapping with a list under 'claims'", path=shown,
                              line=1, col=1)
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        line, col = locate(root, (unknown[0],))
        raise ClaimsFileError(f"unknown top-level key {unknown[0]!r}; expected claims, objects",
                              path=shown, line=line, col=col)
    objects = _objects(data.get("objects", {}), root, shown)
    out: list[ObservedClaim] = []
    seen: set[str] = set()
    for i, entry in enumerate(data["claims"]):
        claim = _one(entry, i, objects, root, shown)
        if claim.claim_id in seen:
            line, col = locate(root, ("claims", i, "claim_id"))
            raise ClaimsFileError(f"claim_id {claim.claim_id!r} appears twice; expected each "
                                  "claim once", path=shown, line=line, col=col)
        seen.add(claim.claim_id)
        out.append(claim)
    if not out:
        raise ClaimsFileError("no claims; expected at least one", path=shown, line=1, col=1)
    return out


def _objects(raw: Any, root: Any, shown: str) -> dict[str, list[int]]:
    if not isinstance(raw, dict):
        line, col = locate(root, ("objects",))
        raise ClaimsFileError("objects: expected a mapping of object_id to token ids",
                              path=shown, line=line, col=col)
    return {k: _tokens(v, root, shown, ("objects", k)) for k, v in raw.items()}


def _tokens(raw: Any, root: Any, shown: str, loc: tuple[str | int, ...]) -> list[int]:
    ok = isinstance(raw, list) and raw and all(
        type(t) is int and 0 <= t < 2**63 for t in raw)
    if not ok:
        line, col = locate(root, loc)
        raise ClaimsFileError(f"{'.'.join(map(str, loc))}: expected a non-empty list of "
                              "token ids (integers >= 0)", path=shown, line=line, col=col)
    return list(raw)


def _one(entry: Any, i: int, objects: dict[str, list[int]], root: Any,
         shown: str) -> ObservedClaim:
    where: tuple[str | int, ...] = ("claims", i)
    if not isinstance(entry, dict):
        line, col = locate(root, where)
        raise ClaimsFileError(f"claims.{i}: expected a claim mapping", path=shown, line=line,
                              col=col)
    _misspelt(entry, root, shown, where)
    fields = {k: v for k, v in entry.items() if k not in _BINDING_KEYS}
    try:
        claim = ResidentClaim.model_validate(fields)
    except ValidationError as e:
        first = validation_findings(e, root, shown, where, default=INVALID)[0]
        hint = f"; {first.help}" if first.help else ""
        raise ClaimsFileError(f"{first.message}{hint}", path=shown, line=first.line,
                              col=first.col) from None
    binding = _binding(entry, root, shown, where)
    if "tokens" in entry:
        tokens = _tokens(entry["tokens"], root, shown, (*where, "tokens"))
    elif claim.object_id in objects:
        tokens = objects[claim.object_id]
    else:
        line, col = locate(root, where)
        raise ClaimsFileError(f"claims.{i}: no tokens for object {claim.object_id!r}; expected "
                              "'tokens' on the claim or the object under 'objects'",
                              path=shown, line=line, col=col)
    size = claim.cache_identity.block_size
    if len(tokens) < claim.footprint_blocks * size:
        line, col = locate(root, (*where, "tokens") if "tokens" in entry else where)
        raise ClaimsFileError(
            f"claims.{i}: {len(tokens)} tokens cover {len(tokens) // size} full blocks of "
            f"{size}; expected at least footprint_blocks={claim.footprint_blocks}",
            code=TOO_SHORT, path=shown, line=line, col=col)
    return ObservedClaim.of(claim, tokens, **binding)


def _misspelt(entry: dict[str, Any], root: Any, shown: str, where: tuple[str | int, ...]) -> None:
    """A key no claim entry holds: name the nearest one (a typo would otherwise read as a
    missing field, or silently leave a binding at its default)."""
    for key in entry:
        if key in _CLAIM_KEYS:
            continue
        close = difflib.get_close_matches(str(key), sorted(_CLAIM_KEYS), n=1, cutoff=0.6)
        hint = f"did you mean {close[0]}?" if close else (
            "a claim holds the ResidentClaim fields (`residentkv schema claim`) and "
            + ", ".join(_BINDING_KEYS))
        line, col = locate(root, (*where, key))
        raise ClaimsFileError(f"{'.'.join(map(str, where))}.{key}: unknown key; {hint}",
                              path=shown, line=line, col=col)


def _binding(entry: dict[str, Any], root: Any, shown: str,
             where: tuple[str | int, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("cache_salt", "lora_name", "session_id"):
        value = entry.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            line, col = locate(root, (*where, key))
            raise ClaimsFileError(f"{'.'.join(map(str, where))}.{key}: expected a non-empty "
                                  "string (or leave it out: none)", path=shown, line=line,
                                  col=col)
        out[key] = value
    groups = entry.get("kv_groups")
    if groups is not None:
        ok = isinstance(groups, list) and groups and all(
            isinstance(g, int) and not isinstance(g, bool) and 0 <= g < 2**31 for g in groups)
        if not ok:
            line, col = locate(root, (*where, "kv_groups"))
            raise ClaimsFileError(f"{'.'.join(map(str, where))}.kv_groups: expected a "
                                  "non-empty list of KV-cache group indices (integers >= 0)",
                                  path=shown, line=line, col=col)
        out["kv_groups"] = frozenset(int(g) for g in groups)
    return out
