"""Duplicate JSON keys on v1 lines, found without parsing every line twice.

JSON parsers (msgspec, pydantic, the standard library) keep the last value of a repeated key,
so ``{"outcome_claim_id": "c-OTHER", …, "outcome_claim_id": "c-1"}`` would silently mean
``c-1``. v1 lines are strict JSON without duplicate keys (SPEC §4.1).

The exact check (the standard library's parser with a pairs hook) costs several times a fast
decode, so a line the fast decoder accepted is first counted: ``raw.count(b'":')`` is at least
the number of key tokens when no whitespace separates a key from its colon (a ``":`` inside a
string value is always ``\\":``, which can only over-count). The number of *distinct* keys is
known exactly from the decoded type: every required key is present (decoding succeeded), and an
optional key is present iff the bytes ``"name":`` occur (inside a string value a quote is always
escaped, so that pattern only matches a real key). When the two counts agree there is no
duplicate; otherwise, and for any line this reasoning does not cover (whitespace before a
colon, a key name used twice in one event type), the exact check decides.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from residentkv.model.events import ALL_EVENT_TYPES

__all__ = ["duplicate_key", "first_duplicate_key"]


@dataclass(frozen=True, slots=True)
class _KeyFacts:
    """What the decoded type says about the keys of a line."""

    required: int
    optional_tokens: tuple[bytes, ...]


def _keys(model: type[BaseModel]) -> tuple[list[str], list[str]] | None:
    """(required key names, optional key names) of *model*, nested models included.

    ``None`` when an optional field is itself a model (its keys may or may not be present).
    """
    required: list[str] = []
    optional: list[str] = []
    for attr, field in model.model_fields.items():
        key = field.alias or attr
        nested = field.annotation
        is_model = isinstance(nested, type) and issubclass(nested, BaseModel)
        if field.is_required():
            required.append(key)
            if is_model:
                inner = _keys(nested)  # type: ignore[arg-type]
                if inner is None:
                    return None
                required.extend(inner[0])
                optional.extend(inner[1])
        elif is_model or _holds_model(nested):
            return None
        else:
            optional.append(key)
    return required, optional


def _holds_model(annotation: Any) -> bool:
    return any(isinstance(a, type) and issubclass(a, BaseModel)
               for a in getattr(annotation, "__args__", ()))


def _facts(model: type[BaseModel]) -> _KeyFacts | None:
    keys = _keys(model)
    if keys is None:
        return None
    required, optional = keys
    names = required + optional
    if len(set(names)) != len(names) and set(optional) & {
            n for n in names if names.count(n) > 1}:
        return None  # an optional name that also occurs elsewhere cannot be counted by pattern
    return _KeyFacts(len(required), tuple(f'"{n}":'.encode() for n in optional))


_FACTS: dict[str, _KeyFacts | None] = {
    str(m.model_fields["event"].annotation.__args__[0]): _facts(m)  # type: ignore[union-attr]
    for m in ALL_EVENT_TYPES
}
_SPACED = (b'" ', b'"\t', b'"\r')


class _Duplicate(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _Duplicate(key)
        seen[key] = value
    return seen


def first_duplicate_key(raw: bytes) -> str | None:
    """The first key some object of *raw* repeats (exact; slow), or ``None``."""
    try:
        json.loads(raw, object_pairs_hook=_refuse_duplicates)
    except _Duplicate as dup:
        return dup.key
    except (ValueError, RecursionError):
        return None  # not parseable here: the decoder that accepted it has the last word
    return None


def duplicate_key(raw: bytes, event: str) -> str | None:
    """The repeated key of a line that decoded as *event*, or ``None`` (see the module doc)."""
    facts = _FACTS.get(event)
    if facts is not None and not any(s in raw for s in _SPACED):
        tokens = raw.count(b'":')
        present = facts.required
        if tokens != present:
            present += sum(1 for t in facts.optional_tokens if t in raw)
        if tokens == present:
            return None
    return first_duplicate_key(raw)
