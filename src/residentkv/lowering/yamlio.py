"""YAML loading with locations: every value keeps the line/column it came from.

ruamel.yaml's round-trip loader records positions on each mapping and sequence; duplicate keys
are errors (a key given twice has no single meaning). Pydantic error locations (``('rows', 0,
'anchors', 'a1', 'sha256')``) are mapped back onto the YAML nodes so that every finding points at
``path:line:col``.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Collection, Sequence
from typing import Any

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.constructor import DuplicateKeyError
from ruamel.yaml.error import MarkedYAMLError
from ruamel.yaml.reader import ReaderError

from residentkv.errors import UserInputError
from residentkv.findings import Finding
from residentkv.limits import MAX_YAML_DEPTH, MAX_YAML_NODES

Loc = Sequence[str | int]


class DescriptorError(UserInputError):
    """A descriptor or bundle file that cannot be evaluated at all (exit code 2)."""

    code = "D001"

    def __init__(self, message: str, *, help: str | None = None, **where: Any) -> None:
        super().__init__(message, **where)
        self.help = help

    def __str__(self) -> str:
        head = super().__str__()
        return f"{head}\n  help: {self.help}" if self.help else head


def load_yaml(text: str, path: str, *, code: str = "D001") -> Any:
    """Parse *text* with the round-trip loader; unusable YAML raises :class:`DescriptorError`."""
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    _refuse_deep(text, path)
    try:
        doc = yaml.load(text)
    except ReaderError as e:
        where = _line_col(text, e.position)
        raise DescriptorError(
            f"character {_char(e.character)} is not allowed in YAML; expected printable text",
            help="remove control "
            "characters and NUL bytes (escape them inside a double-quoted string: \\x07)",
            code=code, path=path, line=where[0], col=where[1]) from None
    except RecursionError:
        raise DescriptorError(
            f"the YAML nests too deeply; expected at most {MAX_YAML_DEPTH} levels",
            help="flatten the document (see docs/limits.md)", code="L003", path=path,
            line=1, col=1) from None
    except DuplicateKeyError as e:
        mark = e.problem_mark
        raise DescriptorError(
            f"{_first_line(e.problem)}; expected each key once",
            help="remove or rename the repeated key", code="D002", path=path,
            line=mark.line + 1, col=mark.column + 1,
        ) from None
    except MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark is not None else (None, None)
        raise DescriptorError(
            f"not valid YAML: {e.problem or e.context}; expected a YAML mapping",
            help="fix the YAML syntax at this position", code=code, path=path, line=line, col=col,
        ) from None
    _refuse_non_string_keys(doc, path)
    return doc


def _refuse_non_string_keys(doc: Any, path: str) -> None:
    """Refuse a mapping key that is not a string, located at the key (``D040``; ``D041`` when
    another key of the mapping spells the same text).

    Every key residentkv reads (fields, row and anchor ids, obligation and source names) is a
    string. YAML reads ``1:`` as an integer and ``"1":`` as a string: two distinct keys that a
    later string conversion would collapse into one, silently keeping either value. Each node
    is visited once (aliases are not expanded here) and without recursion.
    """
    seen: set[int] = set()
    stack = [doc]
    while stack:
        node = stack.pop()
        if id(node) in seen or not isinstance(node, dict | list):
            continue
        seen.add(id(node))
        if isinstance(node, list):
            stack.extend(node)
            continue
        texts = {k for k in node if isinstance(k, str)}
        for key in node:
            if not isinstance(key, str):
                raise _key_error(node, key, texts, path)
        stack.extend(node.values())


def _key_error(node: Any, key: Any, texts: set[str], path: str) -> DescriptorError:
    shown = _short(key) if isinstance(key, bool | int | float) or key is None else None
    line, col = _key_pos(node, key)
    if shown is None:
        what = "a sequence" if isinstance(key, tuple | list) else "a mapping"
        return DescriptorError(f"{what} is used as a key; expected a string key",
                               code="D040", path=path, line=line, col=col,
                               help="use a plain (quoted) string as the key")
    twin = next((t for t in (str(key), shown) if t in texts), None)
    if twin is not None:
        return DescriptorError(
            f"key {shown} is given twice: once as {_kind(key)} and once as the string "
            f"\"{twin}\"; expected each key once, in one spelling", code="D041", path=path,
            line=line, col=col, help="remove one of the two keys (YAML reads an unquoted 1 as "
                                     "a number and \"1\" as a string)")
    return DescriptorError(f"key {shown} is {_kind(key)}, not a string; expected a string key",
                           code="D040", path=path, line=line, col=col,
                           help=f'quote the key exactly as written: "{shown}":')


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "an integer" if isinstance(value, int) else "a number"


def _key_pos(node: Any, key: Any) -> tuple[int | None, int | None]:
    lc = getattr(node, "lc", None)
    if lc is None:
        return _own_pos(node)
    try:
        line, col = lc.key(key)
    except (KeyError, TypeError, AttributeError):
        return _own_pos(node)
    return (int(line) + 1, int(col) + 1)


def _char(c: Any) -> str:
    return f"#x{ord(c) if isinstance(c, str) else int(c):04x}"


def _line_col(text: str, position: int) -> tuple[int, int]:
    line = text.count("\n", 0, position) + 1
    return line, position - (text.rfind("\n", 0, position) + 1) + 1


def _refuse_deep(text: str, path: str) -> None:
    """Refuse flow nesting (``[[[[...``) deeper than the limit before the parser recurses.

    Block nesting is bounded the same way by :func:`plain`; the parser's own recursion on
    either is caught in :func:`load_yaml`.
    """
    if text.count("[") + text.count("{") <= MAX_YAML_DEPTH:
        return
    depth = 0
    for i, ch in enumerate(text):
        if ch in "[{":
            depth += 1
            if depth > MAX_YAML_DEPTH:
                line, col = _line_col(text, i)
                raise DescriptorError(
                    f"the YAML nests more than {MAX_YAML_DEPTH} levels deep; expected a "
                    "flatter document", help="see docs/limits.md", code="L003", path=path,
                    line=line, col=col)
        elif ch in "]}":
            depth = max(depth - 1, 0)


def _first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if text else "repeated key"


def locate(root: Any, loc: Loc) -> tuple[int | None, int | None]:
    """1-based (line, col) of the deepest YAML node on *loc* (elements not in the YAML are skipped).

    Pydantic inserts union tags (``'source'``) into locations; skipping what the YAML does not
    hold lands on the nearest real node instead of losing the location.
    """
    node, pos = root, _own_pos(root)
    for key in loc:
        found = _child_pos(node, key)
        if found is None:
            continue
        pos, node = found
    return pos


def _own_pos(node: Any) -> tuple[int | None, int | None]:
    lc = getattr(node, "lc", None)
    if lc is None or lc.line is None:
        return (None, None)
    return (lc.line + 1, lc.col + 1)


def _child_pos(node: Any, key: str | int) -> tuple[tuple[int, int], Any] | None:
    lc = getattr(node, "lc", None)
    try:
        if isinstance(node, dict) and key in node and lc is not None:
            line, col = lc.key(key)
            return (line + 1, col + 1), node[key]
        if isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node) and lc:
            line, col = lc.item(key)
            return (line + 1, col + 1), node[key]
    except (KeyError, TypeError, AttributeError):
        return None
    return None


_PYDANTIC_CODES = {
    "extra_forbidden": ("D003", "remove the field or fix its spelling"),
    "missing": ("D005", "add the field"),
    "unsafe_path": ("D009", "use a relative path inside the source root or descriptor folder"),
    "trivial_quote": ("D014", "quote a distinctive sentence or line of the cited text"),
}


def validation_findings(
    err: ValidationError, root: Any, path: str, prefix: Loc = (), *, default: str = "D004",
    known_fields: Collection[str] = (),
) -> list[Finding]:
    """One located finding per pydantic error (unknown field, missing field, wrong type).

    A misspelt key gets "did you mean" (against the fields missing beside it and
    *known_fields*); a number where a string is expected gets the hint to quote it.
    """
    errors = err.errors(include_url=False)
    missing = {(tuple(e["loc"][:-1]), str(e["loc"][-1])) for e in errors if e["type"] == "missing"}
    out = []
    for e in errors:
        loc = (*prefix, *e["loc"])
        code, help_ = _PYDANTIC_CODES.get(
            e["type"], (default, "see `residentkv schema descriptor`"))
        if e["type"] == "extra_forbidden":
            near = {k for parent, k in missing if parent == tuple(e["loc"][:-1])}
            help_ = _did_you_mean(str(e["loc"][-1]), near or set(known_fields)) or help_
        elif e["type"] == "string_type" and isinstance(e.get("input"), int | float):
            help_ = (f"YAML reads an unquoted {e['input']} as a number; quote it exactly as "
                     f'written, e.g. {e["loc"][-1]}: "{e["input"]}"')
        line, col = locate(root, loc)
        where = ".".join(str(p) for p in loc) or "(top level)"
        found = "" if e["type"] in _PYDANTIC_CODES else f" (found {_short(e.get('input'))})"
        out.append(Finding(code=code, path=path, line=line, col=col, help=help_,
                           message=f"{where}: {e['msg']}{found}"))
    return out


def _did_you_mean(key: str, candidates: Collection[str]) -> str | None:
    close = difflib.get_close_matches(key, sorted(candidates), n=1, cutoff=0.7)
    return f"did you mean {close[0]}? (or remove the field)" if close else None


def _short(value: Any) -> str:
    """The offending value as the user wrote it in YAML/JSON terms (never a Python repr)."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


MAX_NODES = MAX_YAML_NODES


def plain(node: Any, *, budget: list[int] | None = None, depth: int = 0) -> Any:
    """Round-trip YAML containers as plain dicts/lists (what pydantic should validate).

    Aliases are expanded, so a node budget bounds the work: a document whose expansion exceeds
    :data:`MAX_NODES` (an alias bomb) is refused rather than expanded; so is one nested deeper
    than :data:`~residentkv.limits.MAX_YAML_DEPTH`.
    """
    budget = [MAX_NODES] if budget is None else budget
    budget[0] -= 1
    if budget[0] < 0:
        raise DescriptorError(f"the YAML expands to more than {MAX_NODES} nodes; expected a "
                              "descriptor of reasonable size", code="D001",
                              help="remove recursive or deeply nested aliases")
    if depth > MAX_YAML_DEPTH:
        line, col = _own_pos(node)
        raise DescriptorError(f"the YAML nests more than {MAX_YAML_DEPTH} levels deep; "
                              "expected a flatter document", code="L003", line=line, col=col,
                              help="see docs/limits.md")
    if isinstance(node, dict):
        return {str(k): plain(v, budget=budget, depth=depth + 1) for k, v in node.items()}
    if isinstance(node, list):
        return [plain(v, budget=budget, depth=depth + 1) for v in node]
    return node


def round_trip_yaml() -> YAML:
    """The ruamel round-trip settings under which the curated descriptors dump byte-identical."""
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml
