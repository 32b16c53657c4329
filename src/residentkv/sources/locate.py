"""Where an anchored text lives now: a fuzzy search by content in a changed file.

A line-range anchor names lines, not code: once the file changes, the old range may hold
unrelated code. Before anything is diffed or approved, the anchored text of the old release is
searched for in the new file with :mod:`difflib`: candidate windows are aligned on lines the two
texts share, each window is scored with ``SequenceMatcher.ratio`` over stripped, non-blank lines,
and the best window is *found* when its similarity reaches :data:`SIMILARITY_FLOOR`. Below the
floor the text is *not found* (the best window is still reported, never used).
"""

from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass

from residentkv.lowering.anchors import source_lines

__all__ = ["SIMILARITY_FLOOR", "Located", "locate", "similarity"]

#: the lowest similarity at which a window counts as the anchored text, changed
SIMILARITY_FLOOR = 0.6
#: how many alignments (offsets shared by the most lines) are scored
MAX_ALIGNMENTS = 40
#: lines shorter than this (after stripping) do not align windows: ``)``, ``else:``, ``pass``
MIN_ALIGN_CHARS = 6


@dataclass(frozen=True)
class Located:
    """The best window for an anchored text in a new file."""

    first: int
    last: int
    similarity: float
    found: bool

    @property
    def lines(self) -> str:
        return f"{self.first}-{self.last}"

    def describe(self) -> str:
        """``found at A-B (similarity s)`` or ``not found (best ...)``."""
        if self.found:
            return f"found at {self.lines} (similarity {self.similarity:.2f})"
        return (f"not found (best window {self.lines}, similarity {self.similarity:.2f} < "
                f"{SIMILARITY_FLOOR})")


def _body(lines: list[str]) -> tuple[list[int], list[str]]:
    """(1-based line numbers, stripped text) of the non-blank lines."""
    numbers, text = [], []
    for no, line in enumerate(lines, 1):
        if line.strip():
            numbers.append(no)
            text.append(line.strip())
    return numbers, text


def similarity(old_text: str, new_text: str) -> float:
    """Similarity of two texts as the search scores it (stripped, non-blank lines)."""
    _, old = _body(source_lines(old_text))
    _, new = _body(source_lines(new_text))
    return difflib.SequenceMatcher(None, new, old, autojunk=False).ratio()


def locate(old_text: str, new_source: str, *, floor: float = SIMILARITY_FLOOR) -> Located | None:
    """The window of *new_source* most like *old_text*; ``None`` when nothing aligns at all."""
    _, old = _body(source_lines(old_text))
    numbers, new = _body(source_lines(new_source))
    if not old or not new:
        return None
    where: dict[str, list[int]] = {}
    for k, line in enumerate(old):
        if len(line) >= MIN_ALIGN_CHARS:
            where.setdefault(line, []).append(k)
    offsets: Counter[int] = Counter()
    for j, line in enumerate(new):
        for k in where.get(line, ()):
            offsets[j - k] += 1
    if not offsets:
        return None
    n = len(old)
    slack = max(2, n // 5)
    matcher = difflib.SequenceMatcher(None, autojunk=False)
    matcher.set_seq2(old)  # seq2 is the one difflib caches: the anchored text, scored many times
    best: tuple[float, int, int] | None = None
    for offset, _ in offsets.most_common(MAX_ALIGNMENTS):
        for start in range(max(0, offset - slack), min(len(new), offset + slack + 1)):
            for length in range(max(1, n - slack), n + slack + 1):
                window = new[start: start + length]
                if not window:
                    continue
                matcher.set_seq1(window)
                if best is not None and matcher.real_quick_ratio() <= best[0]:
                    continue
                ratio = matcher.ratio()
                if best is None or ratio > best[0]:
                    best = (ratio, start, start + len(window) - 1)
    assert best is not None
    ratio, first, last = best
    return Located(numbers[first], numbers[last], round(ratio, 4), ratio >= floor)
