"""Descriptor format ``residentkv.descriptor/v1`` (SPEC §6): models and located loading.

A descriptor file holds rows; each row says what a mapping of a protection mode onto a runtime
*asserts* and cites anchors as evidence. Loading never trusts the file: every schema error
(unknown field, wrong type, missing field), a duplicate key, an obligation citing an anchor that
does not exist, an anchor nobody cites, an empty evidence list and an unsafe path becomes a
finding located at ``path:line:col``. A row with findings is *invalid* and the classifier places
it in ``unknown_evidence``; only a file that cannot be read as a descriptor at all is an
unusable input (exit code 2).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from residentkv.findings import Finding
from residentkv.limits import read_input
from residentkv.lowering.bundles import OBLIGATIONS
from residentkv.lowering.yamlio import (
    DescriptorError,
    load_yaml,
    locate,
    plain,
    validation_findings,
)
from residentkv.model.vocabulary import (
    CLASSES as CLASSES,
)
from residentkv.model.vocabulary import (
    GATE_NAMES,
    Asserts,
    Mechanism,
    ObligationStatus,
    RowClass,
)

DESCRIPTOR_SCHEMA = "residentkv.descriptor/v1"
GATES = GATE_NAMES
Status = ObligationStatus
_LINES = re.compile(r"^(\d{1,18})-(\d{1,18})$")  # bounded: int() refuses > 4,300 digits


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def unsafe_path(path: str) -> str | None:
    """Why *path* may not be used as a relative path inside a root, or ``None`` if it may."""
    if not path or "\\" in path or "\x00" in path:
        return "empty, backslash or NUL in path"
    p = PurePosixPath(path)
    if p.is_absolute() or re.match(r"^[A-Za-z]:", path):
        return "absolute path"
    if ".." in p.parts:
        return "path leaves its root (..)"
    return None


def parse_lines(spec: str) -> tuple[int, int]:
    """``"120-160"`` -> (120, 160); ``ValueError`` unless 1 <= start <= end."""
    m = _LINES.match(spec)
    if not m or not 1 <= int(m[1]) <= int(m[2]):
        raise ValueError(f"lines must be START-END with 1 <= START <= END, got {spec!r}")
    return int(m[1]), int(m[2])


#: a quote with fewer non-space characters than this occurs almost anywhere: it proves nothing
MIN_QUOTE_CHARS = 6


def _real_quote(v: str | None) -> str | None:
    """Refuse empty, whitespace-only and trivially short quotes (they match any text)."""
    if v is not None and len(re.sub(r"\s+", "", v)) < MIN_QUOTE_CHARS:
        raise PydanticCustomError(
            "trivial_quote", "quote {quote} is empty or trivially short (fewer than {n} "
            "non-space characters): it would match almost any text",
            {"quote": repr(v[:40]), "n": MIN_QUOTE_CHARS})
    return v


class _PathAnchor(_Frozen):
    path: str = Field(min_length=1)
    note: str | None = None

    @field_validator("path")
    @classmethod
    def _safe(cls, v: str) -> str:
        why = unsafe_path(v)
        if why:
            raise PydanticCustomError("unsafe_path", "unsafe path {path}: {why}",
                                      {"path": repr(v), "why": why})
        return v


class Reviewed(_Frozen):
    """A curator's record that a changed anchored text was re-read and the row still holds
    (written by ``residentkv anchors review``; informational -- the sha256 still verifies)."""

    release: str = Field(min_length=1, description="the release re-read, e.g. vllm==0.33.0")
    date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    reason: str = Field(min_length=1)


class SourceAnchor(_PathAnchor):
    """A file in a released package or git tree: symbol and/or lines + sha256, or a quote."""

    kind: Literal["source"]
    package: str = Field(min_length=1)
    version: str | None = None
    symbol: str | None = Field(default=None, pattern=r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")
    lines: str | None = None
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    quote: str | None = Field(default=None, min_length=1)
    reviewed: Reviewed | None = None

    @field_validator("quote")
    @classmethod
    def _quote(cls, v: str | None) -> str | None:
        return _real_quote(v)

    @field_validator("lines")
    @classmethod
    def _lines(cls, v: str | None) -> str | None:
        if v is not None:
            parse_lines(v)
        return v

    @model_validator(mode="after")
    def _complete(self) -> SourceAnchor:
        if self.sha256 is None and self.quote is None:
            raise ValueError("a source anchor needs sha256 or quote")
        if self.symbol is None and self.lines is None:
            raise ValueError("a source anchor needs symbol or lines")
        if self.symbol is not None and not self.path.endswith(".py"):
            raise ValueError("symbol is only resolvable in .py files; use lines")
        return self


class DocAnchor(_Frozen):
    """A documentation URL + quote: cited, never verifiable offline."""

    kind: Literal["doc"]
    url: str = Field(min_length=1)
    quote: str = Field(min_length=1)
    note: str | None = None

    @field_validator("quote")
    @classmethod
    def _quote(cls, v: str) -> str | None:
        return _real_quote(v)


class TraceAnchor(_PathAnchor):
    """A JSONL trace (relative to the descriptor file), a gate and a claim: the gate is run."""

    kind: Literal["trace"]
    gate: str
    claim: str = Field(min_length=1)
    #: the trace file's sha256: without it a passing gate is cited, never verified (SPEC §4.1)
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")

    @field_validator("gate")
    @classmethod
    def _gate(cls, v: str) -> str:
        if v not in GATES:
            raise ValueError(f"unknown gate {v!r}; expected one of {', '.join(GATES)}")
        return v


class SimAnchor(_Frozen):
    """A MicroRuntime scenario: evidence about semantics, never about a runtime."""

    kind: Literal["sim"]
    scenario: str = Field(min_length=1)
    note: str | None = None


Anchor = Annotated[SourceAnchor | DocAnchor | TraceAnchor | SimAnchor, Field(discriminator="kind")]


class Obligation(_Frozen):
    """The curator's assertion about one of B1-B4, and the anchors that back it."""

    status: Status
    evidence: list[Annotated[str, Field(min_length=1)]]
    note: str | None = None


class Obligations(_Frozen):
    """B1-B4, all required."""

    claim_identity: Obligation
    materialization_predicate: Obligation
    ordered_lifecycle: Obligation
    claim_scoped_outcomes: Obligation

    def items(self) -> list[tuple[str, Obligation]]:
        """(name, obligation) in B1-B4 order."""
        return [(n, getattr(self, n)) for n in OBLIGATIONS]


class Runtime(_Frozen):
    """The runtime a row is about (a version makes source anchors pinnable)."""

    name: str = Field(min_length=1)
    version: str | None = None


class Row(_Frozen):
    """One runtime/mode mapping."""

    id: str = Field(min_length=1)
    runtime: Runtime
    mode: str = Field(min_length=1)
    mechanism: Mechanism
    lowers: str = Field(min_length=1)
    asserts: Asserts
    obligations: Obligations
    anchors: dict[str, Anchor] = Field(min_length=1)
    expect: RowClass | None = None
    boundary: str = Field(min_length=1)


class Descriptor(_Frozen):
    """A descriptor file: the schema id and one or more rows."""

    schema_: Literal["residentkv.descriptor/v1"] = Field(alias="schema")
    rows: list[Row] = Field(min_length=1)


def descriptor_fields() -> frozenset[str]:
    """Every field name a descriptor row may hold, at any depth (for "did you mean")."""
    models = (Row, Runtime, Obligations, Obligation, SourceAnchor, DocAnchor, TraceAnchor,
              SimAnchor)
    return frozenset(name for m in models for name in m.model_fields)


def descriptor_json_schema() -> dict[str, Any]:
    """JSON Schema of a descriptor file (``residentkv schema descriptor``)."""
    schema = Descriptor.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = DESCRIPTOR_SCHEMA
    return schema


class LoadedRow(BaseModel):
    """A row as loaded: the model if valid, the raw fields always, the findings and where."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    path: str
    index: int
    line: int | None
    raw: dict[str, Any]
    row: Row | None
    findings: list[Finding]
    #: "expect", "anchors.a1", "obligations.claim_identity" ... -> (line, col)
    locs: dict[str, tuple[int | None, int | None]] = Field(default_factory=dict)

    def loc(self, key: str) -> tuple[int | None, int | None]:
        """Where *key* of this row is, falling back to the row itself."""
        return self.locs.get(key, (self.line, None))

    @property
    def row_id(self) -> str:
        """The row's id, or ``path#rows[i]`` when the row has no usable id."""
        rid = self.raw.get("id")
        return rid if isinstance(rid, str) and rid else f"{self.path}#rows[{self.index}]"


class LoadedDescriptor(BaseModel):
    """One descriptor file: its digest and its rows."""

    model_config = ConfigDict(frozen=True)

    path: str
    sha256: str
    rows: list[LoadedRow]


def read_descriptor(path: str | Path, known_modes: set[str]) -> LoadedDescriptor:
    """Read and validate one descriptor file; unusable files raise :class:`DescriptorError`."""
    p = str(path)
    data = read_input(path, "descriptor")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise DescriptorError(f"not UTF-8 text (byte {e.start + 1}: {e.reason}); expected a "
                              "UTF-8 YAML file", code="L001", path=p, line=line,
                              col=col) from None
    return parse_descriptor(text, p, known_modes, sha256=hashlib.sha256(data).hexdigest())


def parse_descriptor(
    text: str, path: str, known_modes: set[str], *, sha256: str = ""
) -> LoadedDescriptor:
    """Validate descriptor *text*; row problems become findings, file problems raise."""
    root = load_yaml(text, path)
    _check_top(root, path)
    try:
        rows = [_load_row(root, i, path, known_modes) for i in range(len(root["rows"]))]
    except DescriptorError as e:
        e.path = e.path or path  # plain() does not know which file it expands
        raise
    rows = _flag_duplicate_ids(rows, root, path)
    return LoadedDescriptor(path=path, sha256=sha256 or hashlib.sha256(text.encode()).hexdigest(),
                            rows=rows)


def _check_top(root: Any, path: str) -> None:
    if not isinstance(root, dict):
        raise DescriptorError("the file is not a YAML mapping; expected `schema:` and `rows:`",
                              code="D001", path=path, line=1, col=1,
                              help="start the file with `schema: residentkv.descriptor/v1`")
    # "$schema" names a JSON Schema for editors (yaml-language-server); the checker ignores it
    extra = sorted(str(k) for k in root if k not in ("schema", "rows", "$schema"))
    if root.get("schema") != DESCRIPTOR_SCHEMA or extra:
        line, col = locate(root, (extra[0],) if extra else ("schema",))
        raise DescriptorError(_top_message(root.get("schema"), extra),
                              code="D001" if not extra else "D003", path=path, line=line,
                              col=col, help=_top_help(extra))
    rows = root.get("rows")
    if not isinstance(rows, list) or not rows:
        line, col = locate(root, ("rows",))
        raise DescriptorError("no rows; expected a non-empty list under `rows:` (no vacuous "
                              "truth)", code="D012", path=path, line=line, col=col,
                              help="add at least one row")


def _top_message(found: Any, extra: list[str]) -> str:
    parts = [] if found == DESCRIPTOR_SCHEMA else [
        "no schema key" if found is None else f"schema is {json.dumps(found, default=str)}"]
    if extra:
        parts.append(f"unknown top-level key(s): {', '.join(extra)}")
    return "; ".join(parts) + f"; expected schema: {DESCRIPTOR_SCHEMA} and rows"


def _top_help(extra: list[str]) -> str:
    close = difflib.get_close_matches(extra[0], ["schema", "rows"], n=1) if extra else []
    return (f"did you mean {close[0]}?" if close
            else "see `residentkv schema descriptor`")


def _load_row(root: Any, i: int, path: str, known_modes: set[str]) -> LoadedRow:
    node = root["rows"][i]
    line = locate(root, ("rows", i))[0]
    raw = plain(node) if isinstance(node, dict) else {}
    try:
        row: Row | None = Row.model_validate(raw if isinstance(node, dict) else node)
        findings = _semantic_findings(row, node, root, i, path, known_modes)  # type: ignore[arg-type]
    except ValidationError as e:
        row, findings = None, validation_findings(e, root, path, ("rows", i),
                                                  known_fields=descriptor_fields())
        findings += _reference_findings(raw, root, i, path)
    return LoadedRow(path=path, index=i, line=line, raw=raw, locs=_row_locs(root, i, raw),
                     row=row if not findings else None, findings=findings)


def _row_locs(root: Any, i: int, raw: dict[str, Any]) -> dict[str, tuple[int | None, int | None]]:
    out = {k: locate(root, ("rows", i, k)) for k in raw}
    for group in ("anchors", "obligations"):
        for k in _mapping(raw.get(group)):
            out[f"{group}.{k}"] = locate(root, ("rows", i, group, k))
    return out


def _semantic_findings(
    row: Row, node: Any, root: Any, i: int, path: str, known_modes: set[str]
) -> list[Finding]:
    out = _reference_findings(plain(node), root, i, path)
    for name, ob in row.obligations.items():
        if not ob.evidence and ob.status != "unknown":
            line, col = locate(root, ("rows", i, "obligations", name, "evidence"))
            out.append(Finding(code="D008", path=path, line=line, col=col,
                               message=f"{name}: status {ob.status!r} with an empty evidence "
                                       "list; expected at least one anchor id",
                               help="cite the anchor that shows it, or use status: unknown"))
    if row.lowers not in known_modes:
        line, col = locate(root, ("rows", i, "lowers"))
        out.append(Finding(code="D011", path=path, line=line, col=col,
                           message=f"lowers {row.lowers!r} has no obligation bundle; expected "
                                   f"one of {', '.join(sorted(known_modes))}",
                           help="fix the mode, or add a bundle with --bundles DIR"))
    return out


def _reference_findings(raw: dict[str, Any], root: Any, i: int, path: str) -> list[Finding]:
    """Obligations citing undefined anchors, and anchors no obligation cites."""
    anchors = _mapping(raw.get("anchors"))
    obligations = _mapping(raw.get("obligations"))
    cited: set[str] = set()
    out: list[Finding] = []
    for name, ob in obligations.items():
        evidence = ob.get("evidence") if isinstance(ob, dict) else None
        for j, aid in enumerate(evidence if isinstance(evidence, list) else []):
            if not isinstance(aid, str):
                continue  # a list or mapping in an evidence list: a type error (D004) already
            cited.add(aid)
            if aid not in anchors:
                line, col = locate(root, ("rows", i, "obligations", name, "evidence", j))
                out.append(Finding(code="D006", path=path, line=line, col=col,
                                   message=f"{name} cites anchor {aid!r}, which the row does not "
                                           "define; expected one of "
                                           f"{', '.join(sorted(anchors)) or 'none'}",
                                   help="define the anchor under `anchors:` or fix the id"))
    for aid in anchors:
        if aid not in cited:
            line, col = locate(root, ("rows", i, "anchors", aid))
            out.append(Finding(code="D007", path=path, line=line, col=col,
                               message=f"anchor {aid!r} is cited by no obligation; expected "
                                       "every anchor to back some obligation",
                               help="cite it in an obligation's evidence list or remove it"))
    return out


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _flag_duplicate_ids(rows: list[LoadedRow], root: Any, path: str) -> list[LoadedRow]:
    seen: dict[str, int] = {}
    out = []
    for r in rows:
        rid = r.raw.get("id")
        if isinstance(rid, str) and rid in seen:
            line, col = locate(root, ("rows", r.index, "id"))
            dup = Finding(code="D010", path=path, line=line, col=col,
                          message=f"row id {rid!r} repeats row {seen[rid]}; expected unique ids",
                          help="give each row its own id")
            r = r.model_copy(update={"row": None, "findings": [*r.findings, dup]})
        elif isinstance(rid, str):
            seen[rid] = r.index
        out.append(r)
    return out
