"""Untrusted text made safe to print: the one escaping function every text report uses.

A field of a report -- a row id, a boundary, a claim id, a path, a message quoting any of
them -- may hold whatever its author typed: a newline that starts a forged report line, a
carriage return that overwrites one, an ANSI or OSC escape sequence (``ESC ] 52`` writes the
terminal's clipboard), a Unicode line or paragraph separator, a bidirectional override.
:func:`printable` escapes every character that is not printable (Python's
:meth:`str.isprintable`: control characters, separators other than the space, format
characters) as its backslash escape, so one field always prints as one line of visible text.
:func:`printable_fields` applies it to every string of a JSON-like document (keys included)
before a text renderer lays it out.
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["printable", "printable_fields"]


def printable(value: object, limit: int | None = None) -> str:
    """*value* as one line of printable text: every non-printable character escaped
    (``\\n``, ``\\x1b``, ``\\u2028``), cut at *limit* characters (with ``…``) when given."""
    text = str(value)
    cut = text if limit is None else text[:limit]
    if cut.isprintable():
        out = cut
    else:
        out = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                      for c in cut)
    return out + ("…" if len(cut) < len(text) else "")


def printable_fields(doc: Any) -> Any:
    """*doc* with every string in it (mapping keys too) made :func:`printable`: dicts, lists
    and tuples are copied; a dataclass instance is copied with its string, dict, list and
    tuple fields escaped the same way; anything else is returned as it is."""
    if isinstance(doc, str):
        return printable(doc)
    if isinstance(doc, dict):
        return {printable_fields(k): printable_fields(v) for k, v in doc.items()}
    if isinstance(doc, list | tuple):
        return type(doc)(printable_fields(v) for v in doc)
    if dataclasses.is_dataclass(doc) and not isinstance(doc, type):
        return dataclasses.replace(doc, **{
            f.name: printable_fields(getattr(doc, f.name)) for f in dataclasses.fields(doc)
            if f.init and isinstance(getattr(doc, f.name), str | dict | list | tuple)})
    return doc
