"""A JSON document read at C speed, with line:column of any path found only when asked.

A claims file of ten thousand claims is tens of megabytes of token ids; read as YAML it would
take minutes. :func:`load_json` parses it with the standard library's C scanner (refusing a
duplicate key, which JSON parsers otherwise resolve silently), and :func:`locator` answers
"where is ``claims.3.tokens``?" by walking the text to that path, skipping every other value
with the same C scanner — so locations cost nothing until an error needs one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any

#: a path into a document: mapping keys and list indices
Loc = tuple[str | int, ...]
#: 1-based (line, column), or (None, None) when the path is not in the document
Position = tuple[int | None, int | None]

_SPACE = re.compile(r"[ \t\n\r]*")
_SKIP = json.JSONDecoder().raw_decode


class JsonDocumentError(ValueError):
    """Not a JSON document, or one with a duplicate key; ``position`` says where."""

    def __init__(self, message: str, position: Position) -> None:
        super().__init__(message)
        self.message = message
        self.position = position


class _Duplicate(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise _Duplicate(k)
            seen.add(k)
    return out


def load_json(text: str) -> Any:
    """The value of the JSON document *text*; :class:`JsonDocumentError` when it is not one, or
    when a mapping holds a key twice (located at the second occurrence)."""
    try:
        return json.loads(text, object_pairs_hook=_unique)
    except json.JSONDecodeError as e:
        raise JsonDocumentError(f"not valid JSON: {e.msg}", (e.lineno, e.colno)) from None
    except RecursionError:
        raise JsonDocumentError("the JSON nests too deep to read", (1, 1)) from None
    except _Duplicate as e:
        where = _duplicate_at(text, e.key)
        raise JsonDocumentError(f"key {e.key!r} appears twice in one mapping; expected each key "
                                "once", _position(text, where)) from None


def locator(text: str) -> Callable[[Loc], Position]:
    """``locate(path)``: where the value at *path* is written (a mapping entry: its key), or the
    deepest part of the path the document holds."""
    return lambda loc: _position(text, _find(text, loc))


def _position(text: str, index: int | None) -> Position:
    if index is None:
        return (None, None)
    line = text.count("\n", 0, index) + 1
    return (line, index - (text.rfind("\n", 0, index) + 1) + 1)


def _ws(text: str, i: int) -> int:
    m = _SPACE.match(text, i)
    return m.end() if m else i


def _find(text: str, loc: Loc) -> int | None:
    i = _ws(text, 0)
    at: int | None = i if i < len(text) else None
    for key in loc:
        found = _child(text, i, key)
        if found is None:
            continue                           # like the YAML locator: skip what is not there
        at, i = found
    return at


def _child(text: str, i: int, key: str | int) -> tuple[int, int] | None:
    """(where the entry is written, where its value starts) of *key* in the container at *i*."""
    if i >= len(text):
        return None
    opener = text[i]
    if opener == "{" and isinstance(key, str):
        for at, name, value in _entries(text, i):
            if name == key:
                return at, value
    elif opener == "[" and isinstance(key, int):
        for n, value in enumerate(_items(text, i)):
            if n == key:
                return value, value
    return None


def _entries(text: str, i: int) -> Iterator[tuple[int, str, int]]:
    """(key position, key, value position) of each entry of the mapping at *i*."""
    i = _ws(text, i + 1)
    while i < len(text) and text[i] == '"':
        name, end = scanstring(text, i + 1)
        assert isinstance(name, str) and isinstance(end, int)
        value = _ws(text, _ws(text, end) + 1)          # past the colon
        yield i, name, value
        i = _ws(text, _SKIP(text, value)[1])
        i = _ws(text, i + 1) if i < len(text) and text[i] == "," else i


def _items(text: str, i: int) -> Iterator[int]:
    """The position of each item of the list at *i*."""
    i = _ws(text, i + 1)
    while i < len(text) and text[i] != "]":
        yield i
        i = _ws(text, _SKIP(text, i)[1])
        i = _ws(text, i + 1) if i < len(text) and text[i] == "," else i


def _duplicate_at(text: str, key: str) -> int | None:
    """The position of the first repeated *key* of a mapping (a walk of the containers that
    hold a mapping; arrays of scalars are skipped whole)."""
    stack = [_ws(text, 0)]
    while stack:
        i = stack.pop()
        if i >= len(text):
            continue
        if text[i] == "{":
            seen: set[str] = set()
            for at, name, value in _entries(text, i):
                if name == key and name in seen:
                    return at
                seen.add(name)
                stack.append(value)
        elif text[i] == "[":
            value, _ = _SKIP(text, i)
            if any(isinstance(v, dict | list) for v in value):
                stack.extend(_items(text, i))
    return None
