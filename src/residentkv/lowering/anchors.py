"""Anchor verification (SPEC §6): is the cited evidence really there, unchanged?

Results: ``verified``, ``drifted`` (file/symbol found, content changed; the new line range is
reported), ``missing``, ``unverifiable`` (doc quotes, sim scenarios, and source anchors whose
package was given no ``--source``), ``failed`` (a trace gate that did not pass, a refused path,
an unparsable file).

Normalisation (what ``sha256`` hashes): the anchored lines are decoded as UTF-8 (any newline
convention), trailing whitespace is stripped from each line, the common leading indentation is
removed, leading and trailing blank lines are dropped, and the lines are joined with ``\\n`` plus
one final ``\\n``. A ``quote`` matches when, with every whitespace run collapsed to one space, it
occurs in the anchored range. So re-indenting or re-wrapping whitespace never drifts an anchor;
any other change does.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import textwrap
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from residentkv.errors import TraceReadError
from residentkv.lowering.descriptor import (
    Anchor,
    DocAnchor,
    SimAnchor,
    SourceAnchor,
    TraceAnchor,
    parse_lines,
    unsafe_path,
)
from residentkv.lowering.sources import PathRefused, SourceRoot

ResultName = Literal["verified", "drifted", "missing", "unverifiable", "failed"]
Span = tuple[int, int]


class AnchorResult(BaseModel):
    """The verification result of one anchor."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    kind: str
    result: ResultName
    detail: str
    code: str | None = None
    lines: str | None = None
    gate: str | None = None
    controls: tuple[str, ...] = ()
    boundary: str | None = None
    emitters: tuple[str, ...] = ()


def normalise(lines: list[str]) -> str:
    """The documented normal form of anchored lines (see the module docstring)."""
    body = textwrap.dedent("\n".join(line.rstrip() for line in lines)).split("\n")
    while body and not body[0].strip():
        body.pop(0)
    while body and not body[-1].strip():
        body.pop()
    return "\n".join(body) + "\n"


def digest(lines: list[str]) -> str:
    """sha256 (hex) of the normal form of *lines*."""
    return hashlib.sha256(normalise(lines).encode("utf-8")).hexdigest()


def squash(text: str) -> str:
    """Whitespace runs collapsed to one space (how quotes are compared)."""
    return re.sub(r"\s+", " ", text).strip()


def python_symbols(source: str) -> dict[str, Span]:
    """Qualified name -> (first, last) line of every class, function and module-level name.

    Decorators belong to the symbol they decorate. ``SyntaxError`` propagates.
    """
    spans: dict[str, Span] = {}
    _walk(ast.parse(source), "", spans)
    return spans


def _walk(node: ast.AST, prefix: str, spans: dict[str, Span]) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([d.lineno for d in child.decorator_list] + [child.lineno])
            spans.setdefault(prefix + child.name, (first, child.end_lineno or child.lineno))
            _walk(child, f"{prefix}{child.name}.", spans)
        elif isinstance(child, ast.Assign | ast.AnnAssign):
            targets = child.targets if isinstance(child, ast.Assign) else [child.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    end = child.end_lineno or child.lineno
                    spans.setdefault(prefix + t.id, (child.lineno, end))


class Verifier:
    """Verifies anchors against ``--source`` roots and trace files, caching per input.

    Parsed Python files are cached per (root, path) and trace gate results per
    (trace sha256, gate, claim), so many rows citing one trace run its gate once.
    """

    def __init__(self, sources: dict[str, SourceRoot] | None = None) -> None:
        self.sources = sources or {}
        self._symbols: dict[tuple[str, str], dict[str, Span]] = {}
        self._text: dict[tuple[str, str], tuple[str, list[str]]] = {}
        self._trace_digest: dict[Path, str] = {}
        self._gates: dict[tuple[str, str, str], AnchorResult] = {}
        self._trace_where: dict[tuple[str, str], str | AnchorResult] = {}
        self.trace_inputs: dict[str, str] = {}

    def verify(self, aid: str, anchor: Anchor, base_dir: Path) -> AnchorResult:
        """Verify one anchor; trace paths are relative to *base_dir* (the descriptor's folder)."""
        if isinstance(anchor, SourceAnchor):
            return self._source(aid, anchor)
        if isinstance(anchor, TraceAnchor):
            return self._trace(aid, anchor, base_dir)
        why = ("a doc quote cannot be verified offline" if isinstance(anchor, DocAnchor)
               else "a sim scenario is evidence about semantics, never about a runtime")
        assert isinstance(anchor, DocAnchor | SimAnchor)
        return AnchorResult(id=aid, kind=anchor.kind, result="unverifiable", detail=why,
                            code="A003")

    # --- source anchors -------------------------------------------------------------------

    def root_for(self, a: SourceAnchor) -> SourceRoot | None:
        """The root an anchor is verified against: ``package==version`` when given, else the
        package's root -- unless that root is known to hold another release (fail-closed)."""
        if a.version is not None and f"{a.package}=={a.version}" in self.sources:
            return self.sources[f"{a.package}=={a.version}"]
        root = self.sources.get(a.package)
        if root is not None and None not in (root.version, a.version) \
                and root.version != a.version:
            return None
        return root

    def _source(self, aid: str, a: SourceAnchor) -> AnchorResult:
        root = self.root_for(a)
        if root is None:
            have = self.sources.get(a.package)
            why = (f"no source for {a.package} {a.version} (the {a.package} root holds "
                   f"{have.version})" if have is not None
                   else f"no --source given for package {a.package!r}")
            return self._res(aid, a, "unverifiable", "A003", why)
        try:
            data = root.read(a.path)
        except PathRefused as e:
            return self._res(aid, a, "failed", "A005", f"path refused: {e}")
        if data is None:
            return self._res(aid, a, "missing", "A002", f"{a.path} not found in {root.name}")
        key = (f"{root.name}@{root.location}", a.path)
        if key not in self._text:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                return self._res(aid, a, "failed", "A006", f"{a.path} is not UTF-8 text")
            self._text[key] = (text, text.splitlines())
        lines = self._text[key][1]
        span = self._span(aid, root, a, lines)
        if isinstance(span, AnchorResult):
            return span
        return self._compare(aid, a, lines, span)

    def _span(
        self, aid: str, root: SourceRoot, a: SourceAnchor, lines: list[str]
    ) -> Span | AnchorResult:
        if a.symbol is None:
            assert a.lines is not None
            return parse_lines(a.lines)
        key = (f"{root.name}@{root.location}", a.path)
        if key not in self._symbols:
            try:
                self._symbols[key] = python_symbols(self._text[key][0])
            except (SyntaxError, ValueError) as e:
                return self._res(aid, a, "failed", "A007", f"cannot parse {a.path}: {e}")
        span = self._symbols[key].get(a.symbol)
        if span is None:
            return self._res(aid, a, "missing", "A002",
                             f"symbol {a.symbol} not found in {a.path}")
        return span

    def _compare(self, aid: str, a: SourceAnchor, lines: list[str], span: Span) -> AnchorResult:
        where = f"{span[0]}-{span[1]}"
        if span[1] > len(lines):
            return self._res(aid, a, "drifted", "A001",
                             f"lines {where} run past the end of {a.path} ({len(lines)} lines)")
        if self._matches(a, lines[span[0] - 1: span[1]]):
            moved = f" (moved from {a.lines})" if a.lines and a.lines != where else ""
            return self._res(aid, a, "verified", None, f"content matches at {where}{moved}",
                             where)
        if a.symbol is None:
            found = self._relocate(aid, a, lines, span)
            if found is not None:
                return found
        return self._res(aid, a, "drifted", "A001",
                         f"content of {a.symbol or a.path} changed; now at lines {where}", where)

    @staticmethod
    def _matches(a: SourceAnchor, chunk: list[str]) -> bool:
        if a.sha256 is not None and digest(chunk) != a.sha256:
            return False
        return a.quote is None or squash(a.quote) in squash("\n".join(chunk))

    def _relocate(
        self, aid: str, a: SourceAnchor, lines: list[str], span: Span
    ) -> AnchorResult | None:
        """A line-range anchor whose exact text moved: find the same-length window."""
        n = span[1] - span[0] + 1
        for start in range(len(lines) - n + 1):
            if self._matches(a, lines[start: start + n]):
                where = f"{start + 1}-{start + n}"
                return self._res(aid, a, "verified", None,
                                 f"content matches at {where} (moved from {a.lines})", where)
        return None

    @staticmethod
    def _res(aid: str, a: SourceAnchor, result: ResultName, code: str | None, detail: str,
             lines: str | None = None) -> AnchorResult:
        return AnchorResult(id=aid, kind=a.kind, result=result, code=code, detail=detail,
                            lines=lines)

    # --- trace anchors --------------------------------------------------------------------

    def _trace(self, aid: str, a: TraceAnchor, base_dir: Path) -> AnchorResult:
        where = (str(base_dir), a.path)
        if where not in self._trace_where:
            self._trace_where[where] = self._locate_trace(a, base_dir)
        found = self._trace_where[where]
        if isinstance(found, AnchorResult):
            return found.model_copy(update={"id": aid, "gate": a.gate})
        key = (found, a.gate, a.claim)
        if key not in self._gates:
            self._gates[key] = _simulated(self._run_gate(a, base_dir / a.path),
                                          base_dir / a.path)
        return self._gates[key].model_copy(update={"id": aid})

    def _locate_trace(self, a: TraceAnchor, base_dir: Path) -> str | AnchorResult:
        """The trace's sha256, or the result that refuses it (resolved once per path)."""
        base = base_dir.resolve()
        target = (base / a.path).resolve()
        if unsafe_path(a.path) or not target.is_relative_to(base):
            return AnchorResult(id="", kind="trace", result="failed", code="A005",
                                detail=f"trace path {a.path!r} leaves the descriptor's folder")
        if not target.is_file():
            return AnchorResult(id="", kind="trace", result="missing", code="A002",
                                detail=f"trace {a.path} not found")
        return self._digest(target, str(base_dir / a.path))

    def _digest(self, target: Path, shown: str) -> str:
        if target not in self._trace_digest:
            self._trace_digest[target] = hashlib.sha256(target.read_bytes()).hexdigest()
        self.trace_inputs[shown] = self._trace_digest[target]
        return self._trace_digest[target]

    @staticmethod
    def _run_gate(a: TraceAnchor, target: Path) -> AnchorResult:
        from residentkv.trace.gates import check_trace

        base = {"id": "", "kind": "trace", "gate": a.gate}
        try:
            check = check_trace(target, gates=[a.gate], claim_id=a.claim)
        except TraceReadError as e:
            return AnchorResult(**base, result="failed", code="A004", detail=f"unreadable: {e}")
        mine = [r for r in check.results if r.gate == a.gate and r.claim_id == a.claim]
        fired = tuple(sorted(k for r in mine for k, v in r.controls.items() if v))
        boundary = mine[0].boundary if mine else None
        if mine and all(r.passed for r in mine) and not check.problem_count:
            return AnchorResult(**base, result="verified", controls=fired, boundary=boundary,
                                detail=f"gate {a.gate} passed for claim {a.claim}")
        missing = sorted({m for r in mine for m in r.missing})
        detail = (f"gate {a.gate} failed for claim {a.claim}: missing "
                  f"{', '.join(missing) or '(trace problems)'}")
        if fired:
            detail += f"; controls fired: {', '.join(fired)}"
        if check.problems:
            detail += "; trace problems: " + "; ".join(p.message for p in check.problems[:3])
        return AnchorResult(**base, result="failed", code="A008" if fired else "A004",
                            controls=fired, boundary=boundary, detail=detail)


SIMULATED_SOURCES = ("microruntime",)
#: event sources of residentkv's own runtime adapters (e.g. residentkv.vllm.scheduler)
ADAPTER_SOURCES = ("residentkv.",)


def _simulated(result: AnchorResult, target: Path) -> AnchorResult:
    """A passing gate on a MicroRuntime trace is cited, never verified (sim is not a runtime).

    Trace results also record their emitters, so a native row can refuse adapter evidence.
    """
    emitters = trace_sources(target)
    result = result.model_copy(update={"emitters": tuple(sorted(emitters))})
    if result.result != "verified":
        return result
    sims = sorted(e for e in emitters if e.startswith(SIMULATED_SOURCES))
    if not sims:
        return result
    return result.model_copy(update={
        "result": "unverifiable", "code": "A003",
        "detail": f"{result.detail}, but the trace is simulated (source {', '.join(sims)}): "
                  "evidence about semantics, never about a runtime"})


def native_view(result: AnchorResult) -> AnchorResult:
    """How a *native* row may use this result: an adapter's trace never shows the runtime.

    A passing gate on a trace emitted by a residentkv adapter is evidence about the adapter;
    for a row that claims the unmodified runtime binds the obligation it is cited, not verified.
    """
    adapters = sorted(e for e in result.emitters if e.startswith(ADAPTER_SOURCES))
    if result.kind != "trace" or result.result != "verified" or not adapters:
        return result
    return result.model_copy(update={
        "result": "unverifiable", "code": "A009",
        "detail": f"{result.detail}, but the trace was emitted by an adapter "
                  f"({', '.join(adapters)}): adapter evidence never shows native behaviour"})


def trace_sources(target: Path) -> set[str]:
    """Envelope ``source`` values of a trace (claim_restored reuses the name for its tier)."""
    found: set[str] = set()
    with target.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("event") != "claim_restored":
                found.add(str(event.get("source")))
    return found


def make_anchor(root: SourceRoot, spec: str, version: str | None = None) -> dict[str, str]:
    """A ready-to-paste source anchor for ``PATH[:SYMBOL|:START-END]`` in *root*.

    Raises :class:`ValueError` with a user-facing message when the target cannot be anchored.
    """
    path, _, target = spec.partition(":")
    data = root.read(path)
    if data is None:
        raise ValueError(f"{path} not found in source {root.name!r}")
    lines = data.decode("utf-8").splitlines()
    anchor: dict[str, str] = {"kind": "source", "package": root.name}
    if version:
        anchor["version"] = version
    anchor["path"] = path
    if not target:
        span: Span = (1, max(len(lines), 1))
    elif re.fullmatch(r"\d+-\d+", target):
        span = parse_lines(target)
    else:
        found = python_symbols("\n".join(lines)).get(target)
        if found is None:
            raise ValueError(f"symbol {target} not found in {path}")
        span, anchor["symbol"] = found, target
    if span[1] > len(lines):
        raise ValueError(f"lines {span[0]}-{span[1]} run past the end of {path}")
    anchor["lines"] = f"{span[0]}-{span[1]}"
    anchor["sha256"] = digest(lines[span[0] - 1: span[1]])
    return anchor
