"""Duplicate JSON keys on v1 lines, found without parsing every line twice.

JSON parsers (msgspec, pydantic, the standard library) keep the last value of a repeated key,
so ``{"outcome_claim_id": "c-OTHER", …, "outcome_claim_id": "c-1"}`` would silently mean
``c-1``. v1 lines are strict JSON without duplicate keys (SPEC §4.1).

The exact check (the standard library's parser with a pairs hook) costs several times a fast
decode, so a line the fast decoder accepted is first counted. Every key token is followed by
exactly one colon, whatever the whitespace, so ``raw.count(b":")`` is at least the number of key
tokens (a colon inside a string value can only over-count). The number of *distinct* keys is
known from the decoded type: every required key is present (decoding succeeded), and an optional
key is counted when the bytes ``"name":`` occur, each name once (a string value cannot hold
that pattern unescaped, and a token ``"name" :`` with whitespace is simply not counted: both
errors only lower the count). Each counted name stands for a different key token, so when the
colon count equals the counted keys every key token is a distinct key and there is no duplicate;
otherwise, and for an event type this reasoning does not cover (an optional nested model, a key
name used twice in one event type), the exact check decides.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from residentkv.model.events import ALL_EVENT_TYPES

__all__ = ["duplicate_key", "first_duplicate_key"]


@dataclass(frozen=True, slots=True)
class _KeyFacts:
    """What the decoded type says about the keys of a line."""

    required: int
    optional: re.Pattern[bytes] | None  # matches the token ``"name":`` of any optional key


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
    if not optional:
        return _KeyFacts(len(required), None)
    names_re = b"|".join(re.escape(n.encode()) for n in sorted(set(optional)))
    return _KeyFacts(len(required), re.compile(b'"(' + names_re + b')":'))


_FACTS: dict[str, _KeyFacts | None] = {
    str(m.model_fields["event"].annotation.__args__[0]): _facts(m)  # type: ignore[union-attr]
    for m in ALL_EVENT_TYPES
}


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
    if facts is not None:
        colons = raw.count(b":")
        if colons == facts.required or (facts.optional is not None and colons == (
                facts.required + len(set(facts.optional.findall(raw))))):
            return None
    return first_duplicate_key(raw)
