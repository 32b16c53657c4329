"""Anchor verification (SPEC §6): is the cited evidence really there, unchanged?

Results: ``verified``, ``drifted`` (file/symbol found, content changed; the new line range is
reported), ``missing``, ``unverifiable`` (doc quotes, sim scenarios, and source anchors whose
package was given no ``--source``), ``failed`` (a trace gate that did not pass, a refused path,
an unparsable file).

Lines are counted one way everywhere (:func:`source_lines`): a line ends at ``\n`` (``\r\n``
included); no other character ends a line.

Normalisation (what ``sha256`` hashes): the anchored lines are decoded as UTF-8, trailing
whitespace is stripped from each line, the common leading indentation is
removed, leading and trailing blank lines are dropped, and the lines are joined with ``\\n`` plus
one final ``\\n``. A ``quote`` matches when, with every whitespace run collapsed to one space, it
occurs in the anchored range. So re-indenting or re-wrapping whitespace never drifts an anchor;
any other change does.
"""

from __future__ import annotations

import ast
import bisect
import hashlib
import re
import textwrap
from dataclasses import replace
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from residentkv.errors import UserInputError
from residentkv.limits import regular_file
from residentkv.lowering.descriptor import (
    Anchor,
    DocAnchor,
    SimAnchor,
    SourceAnchor,
    TraceAnchor,
    parse_lines,
)
from residentkv.lowering.provenance import Provenance, TraceFacts, scan_file
from residentkv.lowering.sources import PathRefused, SourceRoot, confined
from residentkv.lowering.trace_runs import TraceKey, TraceRuns, trace_key
from residentkv.trust.package import package_data_dir

Span = tuple[int, int]


class AnchorState(StrEnum):
    """The result of verifying one anchor, strongest first (SPEC §6)."""

    VERIFIED = "verified"
    UNVERIFIABLE = "unverifiable"
    DRIFTED = "drifted"
    MISSING = "missing"
    FAILED = "failed"

    @property
    def strength(self) -> int:
        """2 verified, 1 cited (unverifiable), 0 none (drifted, missing, failed)."""
        return {"verified": 2, "unverifiable": 1}.get(self.value, 0)


ResultName = AnchorState


class TraceProvenance(BaseModel):
    """The ``stream_started`` a trace opens with, as typed (it decides nothing by itself)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    emitter: str
    emitter_version: str
    runtime: str
    runtime_version: str

    @classmethod
    def of(cls, p: Provenance | None) -> TraceProvenance | None:
        if p is None:
            return None
        return cls(emitter=p.emitter, emitter_version=p.emitter_version, runtime=p.runtime,
                   runtime_version=p.runtime_version)

    def typed(self) -> Provenance:
        return Provenance(self.emitter, self.emitter_version, self.runtime,
                          self.runtime_version)


class AnchorResult(BaseModel):
    """The verification result of one anchor."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    kind: str
    result: AnchorState
    detail: str
    code: str | None = None
    lines: str | None = None
    gate: str | None = None
    controls: tuple[str, ...] = ()
    boundary: str | None = None
    #: trace anchors: the file's sha256, its claim's protection modes, the requirement ids the
    #: gate's evidence shows, and the provenance event that opens the trace
    sha256: str | None = None
    claim_modes: tuple[str, ...] = ()
    shown: tuple[str, ...] = ()
    provenance: TraceProvenance | None = None
    #: trace anchors that may grant: the root of trust behind them (SPEC §7.1) and the facts
    #: it rests on (who emitted the trace, on what, and how that is known; SPEC §7.2)
    root: str | None = None
    facts: tuple[str, ...] = ()

    @property
    def verified(self) -> bool:
        return self.result is AnchorState.VERIFIED


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


#: an anchored text or quote with fewer non-space characters than this identifies nothing
MIN_ANCHORED_CHARS = 6
#: lines hashed while searching for a moved sha256-only anchor (bounds the search)
MAX_RELOCATE_LINES = 2_000_000


def trivial(text: str) -> bool:
    """True for text too short to identify anything (``}``, ``pass``, whitespace)."""
    return len(re.sub(r"\s+", "", text)) < MIN_ANCHORED_CHARS


def _quote_starts(quote: str, lines: list[str], n: int) -> list[int]:
    """Window starts (0-based) of *n* lines that may hold *quote*, found in linear time.

    The file is squashed once with a map from squashed offsets to lines; each occurrence of the
    squashed quote gives the line it starts on, and the window that ends at its last line.
    """
    needle = squash(quote)
    if not needle:
        return []
    parts: list[str] = []
    line_at: list[int] = []  # squashed offset where each line starts
    pos = 0
    for line in lines:
        piece = squash(line)
        if piece and parts:
            pos += 1  # the one space that joins it to the text before
        line_at.append(pos)
        if piece:
            parts.append(piece)
            pos += len(piece)
    text = " ".join(parts)
    out: list[int] = []
    found = text.find(needle)
    while found != -1 and len(out) < 1000:
        first = bisect.bisect_right(line_at, found) - 1
        last = bisect.bisect_right(line_at, found + len(needle) - 1) - 1
        if last - first < n:
            out.append(max(0, min(first, len(lines) - n)))
        found = text.find(needle, found + 1)
    return sorted(set(out))


def source_lines(text: str) -> list[str]:
    """The lines of a source file, counted the one way every command counts them.

    A line ends at ``\n`` only (a ``\r`` just before it belongs to the line end): what
    editors, ``sed -n`` and ``git diff`` show. ``str.splitlines`` would also split at form
    feeds, vertical tabs, ``\x1c``-``\x1e``, ``\x85``, U+2028 and U+2029, which Python
    source may hold in comments and strings, and then ``anchors make`` and ``anchors verify``
    would disagree about a line window.
    """
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # a final newline ends the last line; it does not start another
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def python_symbols(source: str) -> dict[str, Span]:
    """Qualified name -> (first, last) line of every class, function and module-level name,
    in :func:`source_lines` numbering.

    Decorators belong to the symbol they decorate. ``SyntaxError`` propagates. Python's own
    parser also ends a line at a lone ``\r``; it is handed the text with a lone ``\r`` as a
    space, so that its line numbers are :func:`source_lines` numbers.
    """
    spans: dict[str, Span] = {}
    text = "\n".join(line.replace("\r", " ") for line in source_lines(source))
    try:
        tree = ast.parse(text)
    except (RecursionError, MemoryError) as e:
        # a 200,000-term expression exhausts the parser's stack: not a crash, a refused file
        raise ValueError(f"too deeply nested for the Python parser ({type(e).__name__})") from None
    _walk(tree, "", spans)
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


def _text_key(root: SourceRoot, path: str) -> tuple[str, str]:
    # per root location: two releases of one package are two roots with the same name
    return (f"{root.name}@{root.location}", path)


class Verifier:
    """Verifies anchors against ``--source`` roots and trace files, caching per input.

    Parsed Python files are cached per (root, path); a trace is hashed once per path and its
    gates are judged in one pass for every gate and claim (:class:`TraceRuns`), so any number
    of anchors citing one trace cost one read of it.
    """

    def __init__(self, sources: dict[str, SourceRoot] | None = None) -> None:
        self.sources = sources or {}
        self._symbols: dict[tuple[str, str], dict[str, Span]] = {}
        self._text: dict[tuple[str, str], tuple[str, list[str]]] = {}
        self._trace_digest: dict[Path, str] = {}
        self._trace_facts: dict[str, TraceFacts] = {}
        self._gates: dict[tuple[str, str, str], AnchorResult] = {}
        self._trace_where: dict[tuple[str, str], str | AnchorResult] = {}
        self._trace_keys: dict[str, TraceKey] = {}
        #: gate results per trace: one read of a trace whatever the number of anchors citing it
        self.trace_runs = TraceRuns()
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

    def verified_text(self, a: SourceAnchor, r: AnchorResult) -> str | None:
        """The anchored text of a verified source anchor (``None`` when not verified)."""
        root = self.root_for(a)
        cached = self._text.get(_text_key(root, a.path)) if root is not None else None
        if r.result != "verified" or r.lines is None or cached is None:
            return None
        start, end = parse_lines(r.lines)
        return "\n".join(cached[1][start - 1: end])

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
        key = _text_key(root, a.path)
        if key not in self._text:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                return self._res(aid, a, "failed", "A006", f"{a.path} is not UTF-8 text")
            self._text[key] = (text, source_lines(text))
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
        chunk = lines[span[0] - 1: span[1]]
        if a.sha256 is not None and trivial(normalise(chunk)):
            return self._res(aid, a, "failed", "A015",
                             f"the anchored text at {where} is empty or trivially short "
                             f"(fewer than {MIN_ANCHORED_CHARS} non-space characters): it "
                             "identifies nothing")
        if self._matches(a, chunk):
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
        if a.quote is None:
            return True
        # an empty or trivial quote would occur in any text: it never matches (F3)
        return not trivial(a.quote) and squash(a.quote) in squash("\n".join(chunk))

    def _relocate(
        self, aid: str, a: SourceAnchor, lines: list[str], span: Span
    ) -> AnchorResult | None:
        """A line-range anchor whose exact text moved: find the same-length window.

        A quote is found in one pass over the squashed file. A sha256 alone cannot be searched
        for faster than hashing each window, so that search stops after
        :data:`MAX_RELOCATE_LINES` hashed lines (then the anchor stays drifted, fail-closed).
        """
        n = span[1] - span[0] + 1
        starts = (_quote_starts(a.quote, lines, n) if a.quote is not None
                  else range(len(lines) - n + 1))
        budget = MAX_RELOCATE_LINES
        for start in starts:
            budget -= n
            if budget < 0:
                return None
            if self._matches(a, lines[start: start + n]):
                where = f"{start + 1}-{start + n}"
                return self._res(aid, a, "verified", None,
                                 f"content matches at {where} (moved from {a.lines})", where)
        return None

    @staticmethod
    def _res(aid: str, a: SourceAnchor, result: str, code: str | None, detail: str,
             lines: str | None = None) -> AnchorResult:
        return AnchorResult(id=aid, kind=a.kind, result=AnchorState(result), code=code,
                            detail=detail,
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
            self._gates[key] = self._run_gate(a, found)
        return self._gates[key].model_copy(update={"id": aid})

    def facts_of(self, sha256: str) -> TraceFacts:
        """What the one hash-and-scan pass learnt of the trace whose bytes hash to *sha256*."""
        return self._trace_facts[sha256]

    def _locate_trace(self, a: TraceAnchor, base_dir: Path) -> str | AnchorResult:
        """The trace's sha256, or the result that refuses it (resolved once per path)."""
        base = base_dir.resolve()
        target = confined(base, a.path)
        if target is None:
            return AnchorResult(id="", kind="trace", result="failed", code="A005",
                                detail=f"trace path {a.path!r} leaves the descriptor's folder")
        if not target.exists():
            return AnchorResult(id="", kind="trace", result="missing", code="A002",
                                detail=f"trace {a.path} not found")
        try:
            regular_file(target, "trace")
        except UserInputError as e:
            return AnchorResult(id="", kind="trace", result="failed",
                                code={"L004": "T021"}.get(e.code, e.code),
                                detail=f"trace {a.path}: {e.message}")
        return self._digest(target, str(base_dir / a.path))

    def _digest(self, target: Path, shown: str) -> str:
        if target not in self._trace_digest:
            before = trace_key(target, "")  # the file as it was when its hash began
            # one pass hashes and scans the trace; the git blob digest only where the package
            # root may need it (an editable install's index)
            facts = scan_file(target, git_blob=target.is_relative_to(package_data_dir()))
            self._trace_digest[target] = facts.sha256
            self._trace_facts[facts.sha256] = facts
            self._trace_keys[facts.sha256] = replace(before, sha256=facts.sha256)
        self.trace_inputs[shown] = self._trace_digest[target]
        return self._trace_digest[target]

    def _run_gate(self, a: TraceAnchor, sha: str) -> AnchorResult:
        facts = self._trace_facts[sha]
        base = {"id": "", "kind": "trace", "gate": a.gate, "sha256": sha,
                "claim_modes": tuple(sorted(facts.modes.get(a.claim, ()))),
                "provenance": TraceProvenance.of(facts.provenance)}
        try:  # one read of the trace serves every anchor citing it, whatever gate or claim
            run = self.trace_runs.run(self._trace_keys[sha])
        except UserInputError as e:
            return AnchorResult(**base, result="failed", code="A004", detail=f"unreadable: {e}")
        mine = run.result(a.gate, a.claim)
        fired = tuple(sorted(k for k, v in mine.controls.items() if v))
        if mine.passed and not run.problem_count:
            return AnchorResult(**base, result="verified", controls=fired,
                                boundary=mine.boundary, shown=tuple(sorted(mine.evidence)),
                                detail=f"gate {a.gate} passed for claim {a.claim}")
        detail = (f"gate {a.gate} failed for claim {a.claim}: missing "
                  f"{', '.join(mine.missing) or '(trace problems)'}")
        if fired:
            detail += f"; controls fired: {', '.join(fired)}"
        problems = run.problems[:3]
        if a.claim not in run.facts.order:
            problems = [f"no event for claim {a.claim!r}", *problems]
        if problems:
            detail += "; trace problems: " + "; ".join(problems)
        return AnchorResult(**base, result="failed", code="A008" if fired else "A004",
                            controls=fired, boundary=mine.boundary, detail=detail)


def make_anchor(root: SourceRoot, spec: str, version: str | None = None) -> dict[str, str]:
    """A ready-to-paste source anchor for ``PATH[:SYMBOL|:START-END]`` in *root*.

    Raises :class:`ValueError` with a user-facing message when the target cannot be anchored.
    """
    path, _, target = spec.partition(":")
    data = root.read(path)
    if data is None:
        raise ValueError(f"{path} not found in source {root.name!r}")
    lines = source_lines(data.decode("utf-8"))
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
