"""The observer's claims file: which prefixes to watch, under which ResidentClaim.

JSON (read as JSON, at C speed: a file named ``*.json`` or whose first character is ``{``) or
YAML::

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
                                  # group each of its blocks was seen stored in)

A claim needs ``footprint_blocks`` full blocks of tokens (``cache_identity.block_size`` each):
the runtime publishes full blocks only. A claim is a claim: ``best_effort`` (SPEC §4.2: not a
claim) is refused, and so is a claim whose own ``tokens`` differ from the ``objects`` entry of
the object it names. Every problem is a located ``L030``/``L031`` error; a misspelt key is
answered with the nearest one.
"""

from __future__ import annotations

import difflib
import functools
import struct
import threading
from array import array
from collections.abc import Callable, Sequence
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
from residentkv.model.claim import ProtectionMode, ResidentClaim
from residentkv.model.predicate import AcceptedPredicate
from residentkv.observe.jsondoc import JsonDocumentError, Loc, Position, load_json, locator
from residentkv.observe.stopping import check

INVALID = "L030"
TOO_SHORT = "L031"
_TOP_KEYS = frozenset({"claims", "objects"})
#: what a claim entry may hold beside the ResidentClaim fields
_BINDING_KEYS = ("tokens", "cache_salt", "lora_name", "session_id", "kv_groups")
_CLAIM_KEYS = frozenset(ResidentClaim.model_fields) | frozenset(_BINDING_KEYS)
_TOKEN_MAX = 2**63 - 1
#: where a path of the document is written
Locate = Callable[[Loc], Position]


def block_key(tokens: Sequence[int]) -> bytes:
    """One block's token ids as compact bytes (native signed 64-bit, as ``array("q")`` holds
    them): compared without building tuples, and never traversed by the garbage collector
    (10,000 claims hold millions of token ids)."""
    return _packer(len(tokens))(*tokens)


@functools.lru_cache(maxsize=64)
def _packer(n: int) -> Callable[..., bytes]:
    # a compiled struct packs a block's ids at less than half array()'s cost; a few block
    # sizes are ever seen, the bound keeps a stream of odd ones from growing the cache
    return struct.Struct(f"{n}q").pack


@dataclass(frozen=True)
class ObservedClaim:
    """A claim to watch, the token ids of the prefix it names (one key per block,
    :func:`block_key`) and what its blocks are stored under: the cache salt and LoRA adapter
    (none unless named), the session (any unless named) and the KV-cache groups it needs
    (every group each of its blocks was seen stored in, unless named)."""

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

    @functools.cached_property
    def event_identity(self) -> dict[str, str]:
        """The identity fields every claim event repeats (the claim is frozen: built once)."""
        return dict(zip(("object_id", "cache_identity", "request_token_map_id",
                         "predicate_id"), self.claim.identity, strict=True))

    @functools.cached_property
    def needed(self) -> range:
        """The positions the predicate needs (asked on every evaluation: computed once)."""
        return AcceptedPredicate.of(self.claim.predicate, self.claim.footprint_blocks).needed


class ClaimsFileError(UserInputError):
    """A claims file the observer cannot use (exit code 2)."""

    code = INVALID


def load_claims(path: str | Path, *, stop: threading.Event | None = None,
                deadline: float | None = None) -> list[ObservedClaim]:
    """Read and validate a claims file; the first problem raises :class:`ClaimsFileError`.
    Between claims, a set *stop* or a passed monotonic *deadline* raises
    :class:`~residentkv.observe.stopping.ObservationStopped`."""
    shown = str(path)
    text = read_bounded(path, "claims file").decode("utf-8", errors="replace")
    data, where = _document(text, shown, as_json=str(path).endswith(".json"))
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list):
        raise ClaimsFileError("expected a mapping with a list under 'claims'", path=shown,
                              line=1, col=1)
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        line, col = where((unknown[0],))
        raise ClaimsFileError(f"unknown top-level key {unknown[0]!r}; expected claims, objects",
                              path=shown, line=line, col=col)
    objects = _objects(data.get("objects", {}), where, shown)
    out: list[ObservedClaim] = []
    seen: set[str] = set()
    for i, entry in enumerate(data["claims"]):
        check(stop, deadline, "reading the claims file")
        claim = _one(entry, i, objects, where, shown)
        if claim.claim_id in seen:
            line, col = where(("claims", i, "claim_id"))
            raise ClaimsFileError(f"claim_id {claim.claim_id!r} appears twice; expected each "
                                  "claim once", path=shown, line=line, col=col)
        seen.add(claim.claim_id)
        out.append(claim)
    if not out:
        raise ClaimsFileError("no claims; expected at least one", path=shown, line=1, col=1)
    return out


def _document(text: str, shown: str, *, as_json: bool) -> tuple[Any, Locate]:
    """The file's value and where each path of it is written: JSON when it is named so or
    begins as JSON does (else, or when such a file that is not named ``.json`` does not parse
    as JSON, YAML)."""
    if as_json or text.lstrip()[:1] == "{":
        try:
            return load_json(text), locator(text)
        except JsonDocumentError as e:
            if as_json:
                raise ClaimsFileError(e.message, path=shown, line=e.position[0],
                                      col=e.position[1]) from None
    try:
        root = load_yaml(text, shown, code=INVALID)
        return plain(root), lambda loc: locate(root, loc)
    except DescriptorError as e:
        limit = e.code == "L003"
        raise ClaimsFileError(e.message, code=e.code if limit else INVALID, path=shown,
                              line=e.line, col=e.col) from None


def _objects(raw: Any, where: Locate, shown: str) -> dict[str, array[int]]:
    if not isinstance(raw, dict):
        line, col = where(("objects",))
        raise ClaimsFileError("objects: expected a mapping of object_id to token ids",
                              path=shown, line=line, col=col)
    return {k: _tokens(v, where, shown, ("objects", k)) for k, v in raw.items()}


def _tokens(raw: Any, where: Locate, shown: str, loc: Loc) -> array[int]:
    """Token ids: a non-empty list of integers from 0 to 2**63 - 1 (YAML's integer subclasses
    too; never a boolean)."""
    tokens = None
    if isinstance(raw, list) and raw:
        kinds = set(map(type, raw))
        if kinds == {int} or all(issubclass(k, int) and k is not bool for k in kinds):
            try:
                tokens = array("q", raw)
            except OverflowError:
                tokens = None
            if tokens is not None and min(tokens) < 0:
                tokens = None
    if tokens is None:
        line, col = where(loc)
        raise ClaimsFileError(f"{'.'.join(map(str, loc))}: expected a non-empty list of "
                              f"token ids (integers from 0 to {_TOKEN_MAX})", path=shown,
                              line=line, col=col)
    return tokens


def _one(entry: Any, i: int, objects: dict[str, array[int]], where: Locate,
         shown: str) -> ObservedClaim:
    at: Loc = ("claims", i)
    if not isinstance(entry, dict):
        line, col = where(at)
        raise ClaimsFileError(f"claims.{i}: expected a claim mapping", path=shown, line=line,
                              col=col)
    _misspelt(entry, where, shown, at)
    claim = _claim(entry, at, where, shown)
    binding = _binding(entry, where, shown, at)
    tokens = _claim_tokens(entry, claim, i, objects, where, shown)
    size = claim.cache_identity.block_size
    if len(tokens) < claim.footprint_blocks * size:
        line, col = where((*at, "tokens") if "tokens" in entry else at)
        raise ClaimsFileError(
            f"claims.{i}: {len(tokens)} tokens cover {len(tokens) // size} full blocks of "
            f"{size}; expected at least footprint_blocks={claim.footprint_blocks}",
            code=TOO_SHORT, path=shown, line=line, col=col)
    return ObservedClaim.of(claim, tokens, **binding)


def _claim(entry: dict[str, Any], at: Loc, where: Locate, shown: str) -> ResidentClaim:
    """The entry's ResidentClaim: valid, and a claim (``best_effort`` is not one)."""
    fields = {k: v for k, v in entry.items() if k not in _BINDING_KEYS}
    try:
        claim = ResidentClaim.model_validate(fields)
    except ValidationError as e:
        first = validation_findings(e, None, shown, at, default=INVALID)[0]
        line, col = where((*at, *e.errors(include_url=False)[0]["loc"]))
        hint = f"; {first.help}" if first.help else ""
        raise ClaimsFileError(f"{first.message}{hint}", path=shown, line=line,
                              col=col) from None
    if claim.protection_mode is ProtectionMode.BEST_EFFORT:
        line, col = where((*at, "protection_mode"))
        modes = ", ".join(m.value for m in ProtectionMode if m is not ProtectionMode.BEST_EFFORT)
        raise ClaimsFileError(f"{'.'.join(map(str, at))}.protection_mode: best_effort is not a "
                              f"claim (docs/concepts.md#the-words); expected one of {modes}",
                              path=shown, line=line, col=col)
    return claim


def _claim_tokens(entry: dict[str, Any], claim: ResidentClaim, i: int,
                  objects: dict[str, array[int]], where: Locate, shown: str) -> array[int]:
    """The claimed prefix: the claim's own ``tokens``, else its object's — never two that
    disagree."""
    at: Loc = ("claims", i)
    known = objects.get(claim.object_id)
    if "tokens" in entry:
        tokens = _tokens(entry["tokens"], where, shown, (*at, "tokens"))
        if known is not None and known != tokens:
            line, col = where((*at, "tokens"))
            raise ClaimsFileError(
                f"claims.{i}.tokens: differ from objects.{claim.object_id}, the object this "
                "claim names; expected one prefix per object (drop tokens, or name another "
                "object_id)", path=shown, line=line, col=col)
        return tokens
    if known is None:
        line, col = where(at)
        raise ClaimsFileError(f"claims.{i}: no tokens for object {claim.object_id!r}; expected "
                              "'tokens' on the claim or the object under 'objects'",
                              path=shown, line=line, col=col)
    return known


def _misspelt(entry: dict[str, Any], where: Locate, shown: str, at: Loc) -> None:
    """A key no claim entry holds: name the nearest one (a typo would otherwise read as a
    missing field, or silently leave a binding at its default)."""
    for key in entry:
        if key in _CLAIM_KEYS:
            continue
        close = difflib.get_close_matches(str(key), sorted(_CLAIM_KEYS), n=1, cutoff=0.6)
        hint = f"did you mean {close[0]}?" if close else (
            "a claim holds the ResidentClaim fields (`residentkv schema claim`) and "
            + ", ".join(_BINDING_KEYS))
        line, col = where((*at, key))
        raise ClaimsFileError(f"{'.'.join(map(str, at))}.{key}: unknown key; {hint}",
                              path=shown, line=line, col=col)


def _binding(entry: dict[str, Any], where: Locate, shown: str, at: Loc) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("cache_salt", "lora_name", "session_id"):
        value = entry.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            line, col = where((*at, key))
            raise ClaimsFileError(f"{'.'.join(map(str, at))}.{key}: expected a non-empty "
                                  "string (or leave it out: none)", path=shown, line=line,
                                  col=col)
        out[key] = value
    groups = entry.get("kv_groups")
    if groups is not None:
        ok = isinstance(groups, list) and groups and all(
            isinstance(g, int) and not isinstance(g, bool) and 0 <= g < 2**31 for g in groups)
        if not ok:
            line, col = where((*at, "kv_groups"))
            raise ClaimsFileError(f"{'.'.join(map(str, at))}.kv_groups: expected a "
                                  "non-empty list of KV-cache group indices (integers >= 0)",
                                  path=shown, line=line, col=col)
        out["kv_groups"] = frozenset(int(g) for g in groups)
    return out
