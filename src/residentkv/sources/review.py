"""``residentkv anchors review``: re-read changed anchors against a new release, record it.

A row names the release it describes (``runtime.version``). For the rows that name the target
release, every source anchor of the target package is compared with that release:

``unchanged`` / ``moved``
    the anchored text is identical (at the same or at new lines): retargeting it to the new
    release needs no judgement and is written with the next approved review;
``changed``
    the file and symbol exist but the text differs: the old text (from the anchor's own release,
    the *baseline*) and the new text are shown as a unified diff. A line-range anchor is located
    first: its old text is searched for by content in the new file
    (:mod:`residentkv.sources.locate`), and the diff is against the lines found there (``found
    at A-B (similarity s)``), never against whatever now sits at the old line numbers. Only an
    approval -- interactive, or ``--approve --reason`` -- writes the new
    ``sha256``/``lines``/``version`` plus a ``reviewed: {release, date, reason}`` record into
    the descriptor. Until then the anchor stays *pending* and fails closed (it does not verify
    against the release its row names);
``not-found``
    a line-range anchor whose old text is not found in the new file: it cannot be approved until
    its new lines are given explicitly (``--at ID=START-END``), which makes it ``changed`` against
    those lines;
``vanished`` / ``failed``
    nothing to review: re-anchor with ``residentkv anchors make``;
``no-baseline``
    the old text cannot be found (no root holds the anchor's own release): no diff, no approval.

An anchor shared by several rows (a YAML alias) is one item, listing every row that cites it.
Descriptors are edited with ruamel's round-trip dumper, so comments, quoting, key order and the
YAML aliases shared by a primitive's two rows are preserved. Nothing here touches the network.
"""

from __future__ import annotations

import difflib
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from residentkv.lowering.anchors import Verifier, digest, normalise, source_lines, squash
from residentkv.lowering.bundles import load_bundles
from residentkv.lowering.descriptor import SourceAnchor, parse_lines, read_descriptor
from residentkv.lowering.sources import PathRefused, SourceRoot
from residentkv.lowering.yamlio import round_trip_yaml
from residentkv.sources.locate import locate, similarity

__all__ = ["ReviewItem", "apply_review", "review_items"]

ReviewStatus = Literal["unchanged", "moved", "changed", "not-found", "vanished", "failed",
                       "no-baseline"]
#: statuses an approval can resolve (the others need a new anchor)
REVIEWABLE: frozenset[str] = frozenset({"changed"})


@dataclass
class ReviewItem:
    """One source anchor of a row that names the target release."""

    descriptor: str
    row_index: int
    row: str
    anchor: str
    path: str
    symbol: str | None
    status: ReviewStatus
    detail: str
    old_release: str | None
    new_lines: str | None = None
    new_sha256: str | None = None
    old_text: str = ""
    new_text: str = ""
    approved: bool = False
    keeps_quote: bool = True
    #: every row citing this anchor (a primitive's two rows share one anchor block)
    rows: list[str] | None = None
    #: the anchored lines in the old release (the diff's left side)
    old_lines: str | None = None

    @property
    def cited_by(self) -> list[str]:
        return self.rows or [self.row]

    @property
    def where(self) -> str:
        return f"{self.path}:{self.symbol or self.new_lines}"

    def diff(self) -> str:
        """Unified diff of the anchored text, old release -> new release."""
        return "".join(difflib.unified_diff(
            _with_ends(self.old_text), _with_ends(self.new_text),
            fromfile=f"{self.path}:{self.symbol or self.old_lines} ({self.old_release})",
            tofile=f"{self.where} (new)"))

    def to_json(self) -> dict[str, Any]:
        return {"descriptor": self.descriptor, "row": self.row, "rows": self.cited_by,
                "anchor": self.anchor,
                "path": self.path, "symbol": self.symbol, "status": self.status,
                "detail": self.detail, "old_release": self.old_release,
                "new_lines": self.new_lines, "new_sha256": self.new_sha256,
                "approved": self.approved, "diff": self.diff() if self.old_text else None}


def _with_ends(text: str) -> list[str]:
    return [line + "\n" for line in source_lines(text)]


def _text(root: SourceRoot, path: str, lines: str) -> str:
    """The normalised text of *lines* of *path* in *root* (what the sha256 hashes)."""
    data = root.read(path)
    if data is None:
        return ""
    src = source_lines(data.decode("utf-8", errors="replace"))
    first, last = parse_lines(lines)
    return normalise(src[first - 1: last])


def _item(descriptor: str, index: int, row: str, aid: str, a: SourceAnchor,
          baseline: Verifier, target: Verifier, target_root: SourceRoot,
          at: str | None = None) -> ReviewItem:
    def mk(status: ReviewStatus, detail: str, **kw: Any) -> ReviewItem:
        return ReviewItem(descriptor=descriptor, row_index=index, row=row, anchor=aid,
                          path=a.path, symbol=a.symbol, status=status, detail=detail,
                          old_release=f"{a.package} {a.version or '(no version)'}", **kw)

    new = target.verify(aid, a, Path(descriptor).parent)
    if new.result == "verified":
        status: ReviewStatus = "moved" if a.lines and new.lines != a.lines else "unchanged"
        return mk(status, new.detail, new_lines=new.lines or a.lines, new_sha256=a.sha256)
    if new.result == "missing":
        return mk("vanished", f"{new.detail}; re-anchor with `residentkv anchors make`")
    if new.result != "drifted" or new.lines is None:
        return mk("failed", new.detail)
    old = baseline.verify(aid, a, Path(descriptor).parent)
    broot = baseline.root_for(a)
    old_lines = old.lines or a.lines
    if old.result != "verified" or broot is None or old_lines is None:
        new_text = _text(target_root, a.path, new.lines)
        return mk("no-baseline", f"the old text is not available ({old.detail}); give --from "
                                 f"{a.package}=PATH of {a.version or 'its release'}",
                  new_lines=new.lines, new_sha256=digest(source_lines(new_text)),
                  new_text=new_text)
    old_text = _text(broot, a.path, old_lines)
    lines: str | None = new.lines
    detail = new.detail
    if a.symbol is None:  # a line range names no code: find the old text before diffing
        lines, detail = _relocated_range(aid, a, old_text, target_root, at)
    if lines is None:
        return mk("not-found", detail, old_text=old_text, old_lines=old_lines)
    new_text = _text(target_root, a.path, lines)
    return mk("changed", detail, new_lines=lines, new_sha256=digest(source_lines(new_text)),
              old_text=old_text, new_text=new_text, old_lines=old_lines,
              keeps_quote=a.quote is None or squash(a.quote) in squash(new_text))


def _relocated_range(aid: str, a: SourceAnchor, old_text: str, root: SourceRoot,
                     at: str | None) -> tuple[str | None, str]:
    """(new lines or None, detail) of a changed line-range anchor in the new release."""
    data = root.read(a.path)
    source = data.decode("utf-8", errors="replace") if data is not None else ""
    if at is not None:
        first, last = parse_lines(at)
        given = "\n".join(source_lines(source)[first - 1: last])
        return at, (f"content of lines {a.lines} changed; at {at} as given with --at "
                    f"(similarity {similarity(old_text, given):.2f})")
    found = locate(old_text, source)
    if found is None or not found.found:
        why = found.describe() if found is not None else "not found (no line in common)"
        return None, (f"content of lines {a.lines} changed; {why}; it cannot be approved until "
                      f"its new lines are given with --at {aid}=START-END")
    return found.lines, f"content of lines {a.lines} changed; {found.describe()}"


def review_items(descriptors: Sequence[str | Path], package: str, release: str,
                 baseline: Mapping[str, SourceRoot], target_root: SourceRoot, *,
                 bundles_dir: str | Path | None = None,
                 at: Mapping[str, str] | None = None) -> list[ReviewItem]:
    """Every source anchor of *package* in the rows whose ``runtime.version`` is *release*.

    *baseline* holds roots for the anchors' own releases (keyed like the audit's roots), the
    *target_root* the new release. Anchors shared by two rows (a YAML alias) are one item.
    *at* gives explicit new lines (``START-END``) for line-range anchors, keyed ``ID`` or
    ``ROW:ID``.
    """
    at = at or {}
    modes = set(load_bundles(bundles_dir))
    base_v, target_v = Verifier(dict(baseline)), Verifier({package: target_root})
    items: list[ReviewItem] = []
    seen: dict[tuple[str, int], ReviewItem] = {}
    for path in descriptors:
        loaded = read_descriptor(path, modes)
        doc = round_trip_yaml().load(Path(path).read_text(encoding="utf-8"))
        for lr in loaded.rows:
            if lr.row is None or lr.row.runtime.version != release:
                continue
            node = doc["rows"][lr.index]["anchors"]
            for aid, a in lr.row.anchors.items():
                if not isinstance(a, SourceAnchor) or a.package != package:
                    continue
                key = (str(path), id(node[aid]))
                if key in seen:  # the same YAML mapping, reached through an alias
                    seen[key].cited_by.append(lr.row_id)
                    continue
                given = at.get(f"{lr.row_id}:{aid}", at.get(aid))
                try:
                    it = _item(str(path), lr.index, lr.row_id, aid, a, base_v, target_v,
                               target_root, given)
                except PathRefused as e:
                    it = ReviewItem(str(path), lr.index, lr.row_id, aid, a.path, a.symbol,
                                    "failed", f"path refused: {e}", None)
                it.rows = [lr.row_id]
                seen[key] = it
                items.append(it)
    return items


def apply_review(items: Sequence[ReviewItem], release: str, version: str, reason: str,
                 date: str) -> list[str]:
    """Write approved ``changed`` items and the retargets of identical text into their files.

    Returns the descriptor files written. Nothing is written for a file without an approved
    item (retargeting alone is bookkeeping, done with the review that needs it).
    """
    by_file: dict[str, list[ReviewItem]] = {}
    for it in items:
        by_file.setdefault(it.descriptor, []).append(it)
    written = []
    for path, its in by_file.items():
        if not any(it.approved for it in its):
            continue
        yaml = round_trip_yaml()
        doc = yaml.load(Path(path).read_text(encoding="utf-8"))
        for it in its:
            node = doc["rows"][it.row_index]["anchors"][it.anchor]
            if it.status in ("unchanged", "moved"):
                _retarget(node, version, it.new_lines)
            elif it.approved:
                _retarget(node, version, it.new_lines)
                node["sha256"] = it.new_sha256
                if not it.keeps_quote and "quote" in node:
                    del node["quote"]
                node["reviewed"] = _flow({"release": release, "date": date, "reason": reason})
        buf = io.StringIO()
        yaml.dump(doc, buf)
        Path(path).write_text(buf.getvalue(), encoding="utf-8")
        written.append(path)
    return written


def _retarget(node: Any, version: str, lines: str | None) -> None:
    node["version"] = type(node.get("version", ""))(version) if "version" in node else version
    if lines is not None and "lines" in node:
        node["lines"] = type(node["lines"])(lines)


def _flow(value: dict[str, str]) -> Any:
    from ruamel.yaml.comments import CommentedMap
    from ruamel.yaml.scalarstring import DoubleQuotedScalarString

    m = CommentedMap((k, DoubleQuotedScalarString(v)) for k, v in value.items())
    m.fa.set_flow_style()
    return m
