"""Duplicate JSON keys on v1 lines, found without parsing every line twice.

JSON parsers (msgspec, pydantic, the standard library) keep the last value of a repeated key,
so ``{"outcome_claim_id": "c-OTHER", …, "outcome_claim_id": "c-1"}`` would silently mean
``c-1``. v1 lines are strict JSON without duplicate keys (SPEC §4.1).

The exact check (the standard library's parser with a pairs hook) costs several times a fast
decode, so lines the fast decoder accepted are first settled by counting colons, a whole read
chunk at a time (:func:`repeated_keys`):

- Outside strings a colon occurs once per key token, so a line's colons are its key tokens
  plus the colons inside its string tokens.
- Re-encoding the decoded event with defaults omitted (:mod:`residentkv.model.fast_events`)
  writes one key per distinct key that holds a non-default value — no more than the distinct
  keys, so no more than the key tokens — and the final value of each string, whose colons the
  line held in one of its string tokens: when the line has no backslash, a string token's bytes
  are its value.

So without backslashes the re-encoded colons never exceed the line's, over any set of lines,
and equal counts leave no room for a repeated key. Lines written by residentkv's writer are
byte for byte that re-encoding, which names each key once: for them one comparison of bytes
replaces the counts. A line whose counts differ is judged alone:
a key written with its default value is absent from the re-encoding, so each optional key
whose token ``"name":`` the line holds and the re-encoding does not is counted as one more
distinct key (only names that occur once in the event type, so that the token is that key's).
Equal counts then settle the line as well; anything else (a backslash, colons the count cannot
place) goes to the exact check.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import msgspec

from residentkv.model.fast_events import FAST_STRUCTS

__all__ = ["duplicate_key", "first_duplicate_key", "repeated_keys"]

_ENCODE = msgspec.json.Encoder().encode
_ENCODE_LINES = msgspec.json.Encoder().encode_lines


def _key_names(struct: type[msgspec.Struct]) -> tuple[list[str], list[str]]:
    """(every key name, the names of keys that may be absent) of *struct*, nested included."""
    names: list[str] = []
    optional: list[str] = []
    for field in msgspec.structs.fields(struct):
        names.append(field.encode_name)
        if not field.required:
            optional.append(field.encode_name)
        for part in (field.type, *getattr(field.type, "__args__", ())):
            if isinstance(part, type) and issubclass(part, msgspec.Struct):
                inner, inner_optional = _key_names(part)
                names += inner
                optional += inner_optional
    return names, optional


def _optional_tokens(struct: type[msgspec.Struct]) -> tuple[bytes, ...]:
    """The tokens ``"name":`` of the keys of *struct* that may be absent and whose name occurs
    once in it (so a token of that name is that key's)."""
    names, optional = _key_names(struct)
    return tuple(f'"{n}":'.encode() for n in optional if names.count(n) == 1)


_OPTIONAL_TOKENS: dict[type[msgspec.Struct], tuple[bytes, ...]] = {
    s: _optional_tokens(s) for s in FAST_STRUCTS.values()
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


def _settled(raw: bytes, event: msgspec.Struct, encoded: bytes) -> bool:
    """Whether the colon count alone shows that *raw* repeats no key (see the module doc);
    *encoded* is *event* re-encoded."""
    if b"\\" in raw:
        return False
    missing = raw.count(b":") - encoded.count(b":")
    if missing <= 0:
        return missing == 0
    for token in _OPTIONAL_TOKENS[type(event)]:
        if token in raw and token not in encoded:
            missing -= 1  # a key written with its default value
            if missing == 0:
                return True
    return False


def duplicate_key(raw: bytes, event: msgspec.Struct) -> str | None:
    """The repeated key of a line the fast decoder read as *event*, or ``None``."""
    return None if _settled(raw, event, _ENCODE(event)) else first_duplicate_key(raw)


def repeated_keys(raws: Sequence[bytes], events: Sequence[msgspec.Struct]) -> dict[int, str]:
    """The repeated key of each line that has one, by index; ``{}`` when no line does.

    *events* are the fast-decoded Structs of *raws*; when the colon counts of the whole chunk
    agree, no line is looked at alone (see the module doc).
    """
    if not raws:
        return {}
    joined, encoded = b"\n".join(raws), _ENCODE_LINES(events)
    if len(encoded) == len(joined) + 1 and encoded.startswith(joined):
        return {}  # the lines are the events' own encoding, which names each key once
    if b"\\" not in joined and joined.count(b":") == encoded.count(b":"):
        return {}
    found: dict[int, str] = {}
    # msgspec writes no raw newline inside a line: the chunk's encoding splits into its lines
    lines = encoded.split(b"\n")[:-1]
    for i, (raw, event, line) in enumerate(zip(raws, events, lines, strict=True)):
        if not _settled(raw, event, line):
            key = first_duplicate_key(raw)
            if key is not None:
                found[i] = key
    return found
