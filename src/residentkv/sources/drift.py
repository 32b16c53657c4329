"""``residentkv anchors drift``: re-verify anchored rows against another release.

For every source anchor of a package given a new root, the anchor is verified against that root
and placed in one of:

``unchanged``
    same content at the same lines;
``moved``
    same content (same sha256 / quote), new lines in the same file: the anchor still verifies;
``changed``
    the file and symbol exist but the content differs (the verifier's ``drifted``); a line-range
    anchor is first searched for by content (:mod:`residentkv.sources.locate`) and reported as
    ``found at A-B (similarity s)`` or ``not found``, never as "now at" its old lines;
``relocated``
    the anchor's file or symbol is gone, but a symbol with the same name and the same content
    exists elsewhere in the new release (reported as a hint; the anchor as written is missing);
``vanished``
    neither the anchored symbol nor its content can be found;
``failed``
    the verifier refused the anchor (unsafe path, unparsable file).

An anchor shared by several rows (a primitive's two rows share one YAML block) is listed and
counted once, with the rows citing it. Then every row with a compared anchor is classified
against the baseline and against the new release. Anchors naming a release other than the
baseline's (rows of another release kept side by side, e.g. vLLM 0.33.0 beside 0.32.0) are not
compared. Fail-closed: a row with any anchor that changed, was relocated or vanished is *stale*
-- its curated review describes code that is no longer there -- and falls to
``unknown_evidence`` until it is re-reviewed and re-anchored (``residentkv anchors make``);
nothing is re-anchored automatically.
(``residentkv check`` against the new release judges obligation by obligation and may keep such
a row where its remaining anchors put it; ``drift`` is stricter on purpose.) Nothing here
touches the network.
"""

from __future__ import annotations

import re
import tarfile
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from residentkv.lowering.anchors import (
    AnchorResult,
    Verifier,
    digest,
    python_symbols,
    source_lines,
    squash,
)
from residentkv.lowering.bundles import load_bundles
from residentkv.lowering.check import CheckResult, run_check
from residentkv.lowering.descriptor import SourceAnchor, read_descriptor
from residentkv.lowering.sources import PathRefused, SourceRoot
from residentkv.sources.locate import locate

__all__ = ["AnchorDrift", "DriftReport", "RowDrift", "drift", "find_relocation", "python_files"]

DriftStatus = Literal["unchanged", "moved", "changed", "relocated", "vanished", "failed"]
#: statuses that mean the anchor no longer backs its row in the new release
BROKEN: frozenset[str] = frozenset({"changed", "relocated", "vanished", "failed"})


@dataclass(frozen=True)
class AnchorDrift:
    """What became of one source anchor in the new release."""

    row: str
    anchor: str
    package: str
    path: str
    symbol: str | None
    lines: str | None
    status: DriftStatus
    detail: str
    now: str | None = None
    #: every row citing this anchor (the first is ``row``)
    rows: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"row": self.row, "rows": list(self.rows or (self.row,)), "anchor": self.anchor,
                "package": self.package, "path": self.path, "symbol": self.symbol,
                "lines": self.lines, "status": self.status, "detail": self.detail,
                "now": self.now}


@dataclass(frozen=True)
class RowDrift:
    """A row's class against the baseline and against the new release."""

    row: str
    before: str
    after: str

    @property
    def fell(self) -> bool:
        return self.before != self.after


@dataclass
class DriftReport:
    """The anchors compared and the rows re-classified."""

    baseline: dict[str, str]
    target: dict[str, str]
    anchors: list[AnchorDrift] = field(default_factory=list)
    rows: list[RowDrift] = field(default_factory=list)

    @property
    def broken(self) -> list[AnchorDrift]:
        return [a for a in self.anchors if a.status in BROKEN]

    @property
    def exit_code(self) -> int:
        """0 when every compared anchor still verifies (unchanged or moved), else 1."""
        return 1 if self.broken else 0

    def to_json(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for a in self.anchors:
            counts[a.status] = counts.get(a.status, 0) + 1
        return {
            "schema": "residentkv.drift/v1",
            "baseline": self.baseline, "target": self.target,
            "summary": dict(sorted(counts.items())),
            "rows_citing": len({r for a in self.anchors for r in (a.rows or (a.row,))}),
            "anchors": [a.to_json() for a in self.anchors],
            "rows": [{"id": r.row, "before": r.before, "after": r.after, "fell": r.fell}
                     for r in self.rows],
            "exit_code": self.exit_code,
        }


def python_files(root: SourceRoot) -> Iterator[str]:
    """Relative paths of the ``.py`` files of a source root (directory, wheel or sdist)."""
    loc = root.location
    if loc.is_dir():
        base = loc.resolve()
        for p in sorted(base.rglob("*.py")):
            if p.is_file():
                yield p.relative_to(base).as_posix()
        return
    if zipfile.is_zipfile(loc):
        with zipfile.ZipFile(loc) as zf:
            yield from sorted(n for n in zf.namelist() if n.endswith(".py"))
        return
    with tarfile.open(loc) as tf:
        names = [m.name for m in tf.getmembers() if m.isfile()]
    tops = {PurePosixPath(n).parts[0] for n in names}
    strip = len(tops) == 1 and all(len(PurePosixPath(n).parts) > 1 for n in names)
    for n in sorted(names):
        rel = str(PurePosixPath(*PurePosixPath(n).parts[1:])) if strip else n
        if rel.endswith(".py"):
            yield rel


def _content_matches(a: SourceAnchor, chunk: list[str]) -> bool:
    if a.sha256 is not None and digest(chunk) != a.sha256:
        return False
    return a.quote is None or squash(a.quote) in squash("\n".join(chunk))


def find_relocation(root: SourceRoot, a: SourceAnchor) -> str | None:
    """``path:symbol (lines)`` of a symbol with the anchor's name and content, if one exists.

    Only symbol anchors can be relocated (a bare line range has no name to look for).
    """
    if a.symbol is None:
        return None
    leaf = a.symbol.rsplit(".", 1)[-1]
    needle = re.compile(rf"\b(def|class)\s+{re.escape(leaf)}\b|\b{re.escape(leaf)}\s*[:=]")
    for rel in python_files(root):
        try:
            data = root.read(rel)
        except PathRefused:
            continue
        if data is None:
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if not needle.search(text):
            continue
        try:
            spans = python_symbols(text)
        except (SyntaxError, ValueError):
            continue
        lines = source_lines(text)
        for name, (first, last) in spans.items():
            if (name == leaf or name.endswith("." + leaf)) and _content_matches(
                    a, lines[first - 1: last]):
                if rel == a.path and name == a.symbol:
                    continue
                return f"{rel}:{name} (lines {first}-{last})"
    return None


def _classify_anchor(row: str, aid: str, a: SourceAnchor, r: AnchorResult,
                     root: SourceRoot, old_text: str | None) -> AnchorDrift:
    def mk(status: DriftStatus, detail: str, now: str | None = None) -> AnchorDrift:
        return AnchorDrift(row=row, anchor=aid, package=a.package, path=a.path,
                           symbol=a.symbol, lines=a.lines, status=status, detail=detail,
                           now=now)

    if r.result == "drifted" and a.symbol is None:
        return mk("changed", *_located(a, root, old_text))

    if r.result == "verified":
        if a.lines is not None and r.lines is not None and r.lines != a.lines:
            return mk("moved", f"same content, moved from lines {a.lines} to {r.lines}",
                      f"{a.path}:{r.lines}")
        return mk("unchanged", "same content at the same lines", f"{a.path}:{r.lines or a.lines}")
    if r.result == "drifted":
        return mk("changed", r.detail, f"{a.path}:{r.lines}" if r.lines else None)
    if r.result == "missing":
        found = find_relocation(root, a)
        if found is not None:
            return mk("relocated", f"{r.detail}; the same content is now at {found} "
                                   "(re-anchor after review)", found)
        return mk("vanished", r.detail)
    return mk("failed", r.detail)


def _located(a: SourceAnchor, root: SourceRoot, old_text: str | None) -> tuple[str, str | None]:
    """(detail, now) of a changed line-range anchor: where its old text is in the new file."""
    if old_text is None:
        return (f"content of lines {a.lines} changed; the old text is not available, so it was "
                "not searched for", None)
    try:
        data = root.read(a.path)
    except PathRefused as e:
        return f"content changed; {a.path} refused: {e}", None
    found = locate(old_text, data.decode("utf-8", "replace")) if data is not None else None
    if found is None:
        return f"content of lines {a.lines} changed; not found in the new release", None
    now = f"{a.path}:{found.lines}" if found.found else None
    return f"content of lines {a.lines} changed; {found.describe()}", now


def old_text(verifier: Verifier, aid: str, a: SourceAnchor, base_dir: Path) -> str | None:
    """The anchored text in the anchor's own release, when a root holds it and it verifies."""
    r = verifier.verify(aid, a, base_dir)
    return verifier.verified_text(a, r)


def drift(descriptors: Sequence[str | Path], baseline: Mapping[str, SourceRoot],
          target: Mapping[str, SourceRoot], *, bundles_dir: str | Path | None = None,
          labels: Mapping[str, str] | None = None) -> DriftReport:
    """Compare the source anchors of *descriptors* for the packages in *target*.

    *baseline* gives roots for every package (what the rows are classified against before);
    *target* replaces some of them (the new releases).
    """
    labels = labels or {}
    report = DriftReport(
        baseline={n: labels.get(f"baseline:{n}", str(r.location)) for n, r in baseline.items()},
        target={n: labels.get(f"target:{n}", str(r.location)) for n, r in target.items()})
    modes = set(load_bundles(bundles_dir))
    verifier, base_verifier = Verifier(dict(target)), Verifier(dict(baseline))
    considered: set[str] = set()
    shared: dict[tuple[str, str, str], tuple[AnchorDrift, list[str]]] = {}
    for path in descriptors:
        for lr in read_descriptor(path, modes).rows:
            if lr.row is None:
                continue
            for aid, anchor in lr.row.anchors.items():
                if isinstance(anchor, SourceAnchor) and anchor.package in target:
                    if _other_release(anchor, baseline.get(anchor.package)):
                        continue  # a row of another release (e.g. vllm 0.33.0 beside 0.32.0)
                    considered.add(lr.row_id)
                    key = (str(path), aid, anchor.model_dump_json())
                    if key in shared:  # the same anchor block cited by another row
                        shared[key][1].append(lr.row_id)
                        continue
                    res = verifier.verify(aid, anchor, Path(path).parent)
                    old = (old_text(base_verifier, aid, anchor, Path(path).parent)
                           if res.result == "drifted" and anchor.symbol is None else None)
                    shared[key] = (_classify_anchor(lr.row_id, aid, anchor, res,
                                                    target[anchor.package], old), [lr.row_id])
    report.anchors = [replace(a, rows=tuple(rows)) for a, rows in shared.values()]
    before = run_check(descriptors, bundles_dir=bundles_dir, verifier=Verifier(dict(baseline)))
    after = run_check(descriptors, bundles_dir=bundles_dir,
                      verifier=Verifier({**baseline, **target}))
    stale = {r for a in report.anchors if a.status in BROKEN for r in a.rows}
    report.rows = [r for r in _row_drift(before, after, stale) if r.row in considered]
    return report


def _other_release(a: SourceAnchor, base: SourceRoot | None) -> bool:
    """Whether *a* names a release other than the baseline's (only when both are known)."""
    return (base is not None and base.version is not None and a.version is not None
            and a.version != base.version)


def _row_drift(before: CheckResult, after: CheckResult, stale: set[str]) -> list[RowDrift]:
    """A row with any broken anchor is stale: its review described code that changed, so it
    falls to unknown_evidence whatever its other anchors still show (fail-closed)."""
    now = {r.id: r.klass for r in after.rows}
    return [RowDrift(r.id, r.klass,
                     "unknown_evidence" if r.id in stale else now.get(r.id, "unknown_evidence"))
            for r in before.rows]


def render_drift_text(report: DriftReport) -> str:
    """Plain text: one line per anchor that is not unchanged, then the rows whose class fell."""
    out = []
    for pkg, loc in sorted(report.target.items()):
        out.append(f"drift {pkg}: {report.baseline.get(pkg, '(no baseline)')} -> {loc}")
    for a in report.anchors:
        if a.status == "unchanged":
            continue
        where = f"{a.path}:{a.symbol or a.lines}"
        out.append(f"  {a.status:9} {a.anchor} {where}: {a.detail}")
        out.append(f"            cited by {', '.join(a.rows or (a.row,))}")
    fell = [r for r in report.rows if r.fell]
    for r in fell:
        out.append(f"  row {r.row}: {r.before} -> {r.after} (fail-closed)")
    doc = report.to_json()
    counts = doc["summary"]
    out.append("anchors: " + (", ".join(f"{k} {v}" for k, v in counts.items()) or "none compared")
               + f" ({len(report.anchors)} distinct, cited by {doc['rows_citing']} rows)"
               + f"; rows whose class changed: {len(fell)}")
    return "\n".join(out) + "\n"
