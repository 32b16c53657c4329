"""Drift and review locate a changed line-range anchor by content before they diff it.

The synthetic release pair: in 2.0 the anchored function moved down (new code above it) *and*
changed (one line edited), while the old line numbers now hold unrelated code.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from sourcekit import pair_descriptor

from residentkv.lowering.anchors import make_anchor
from residentkv.lowering.sources import open_root
from residentkv.sources.drift import drift
from residentkv.sources.locate import locate
from residentkv.sources.review import review_items

RunCli = Callable[..., tuple[int, str, str]]

EVICT = '''def evict(pool, block):
    """Drop a cached block; nobody is told."""
    pool.blocks.remove(block)
    pool.stats["evicted"] += 1
    return None
'''
OLD = "import os\n\n\n" + EVICT + "\n\ndef keep(pool, block):\n    return block in pool.blocks\n"
FILLER = "".join(f"def helper_{i}(x):\n    return x * {i} + 7\n\n\n" for i in range(6))
MOVED_AND_CHANGED = ("import os\n\n\n" + FILLER
                     + EVICT.replace('pool.stats["evicted"] += 1', 'pool.stats["evicted"] += n')
                     + "\n\ndef keep(pool, block):\n    return block in pool.blocks\n")
GONE = "import os\n\n\n" + FILLER + "\n\ndef keep(pool, block):\n    return block in pool.blocks\n"


def _descriptor(folder: Path, anchor: dict[str, str]) -> Path:
    return pair_descriptor(folder, "evict", {"s_range": anchor}, ("s_range",) * 4)


def _where(source: str, needle: str) -> str:
    """1-based START-END of the evict function in *source* (the test's own ground truth)."""
    lines = source.splitlines()
    first = next(i for i, line in enumerate(lines, 1) if line.startswith("def evict"))
    last = next(i for i, line in enumerate(lines, 1) if i > first and needle in line)
    return f"{first}-{last}"


@pytest.fixture
def pair(wheel_factory: Callable[..., Path], tmp_path: Path) -> Callable[[str], tuple[Path, Path,
                                                                                      Path]]:
    def make(new_source: str) -> tuple[Path, Path, Path]:
        old = wheel_factory("rt", "1.0", {"rt/pool.py": OLD})
        new = wheel_factory("rt", "2.0", {"rt/pool.py": new_source})
        anchor = make_anchor(open_root("rt", old), f"rt/pool.py:{_where(OLD, 'return None')}",
                             "1.0")
        assert "symbol" not in anchor  # a bare line range: the class of anchor at stake
        return old, new, _descriptor(tmp_path, anchor)
    return make


def test_locate_finds_the_moved_and_changed_text_and_not_the_old_lines() -> None:
    found = locate(EVICT, MOVED_AND_CHANGED)
    assert found is not None and found.found
    assert found.lines == _where(MOVED_AND_CHANGED, "return None")
    assert found.lines != _where(OLD, "return None")
    assert 0.6 <= found.similarity < 1.0
    gone = locate(EVICT, GONE)
    assert gone is None or not gone.found


def test_drift_reports_where_the_text_was_found(pair: Callable[[str], tuple[Path, Path, Path]],
                                                tmp_path: Path) -> None:
    old, new, desc = pair(MOVED_AND_CHANGED)
    report = drift([desc], {"rt": open_root("rt", old)}, {"rt": open_root("rt", new)})
    (a,) = report.anchors  # the pair's shared anchor is listed once ...
    assert a.rows == ("rt/evict/substrate", "rt/evict/hard_protected")  # ... with both rows
    assert a.status == "changed"
    now = _where(MOVED_AND_CHANGED, "return None")
    assert f"found at {now} (similarity" in a.detail and a.now == f"rt/pool.py:{now}"
    assert "now at lines" not in a.detail
    assert report.to_json()["summary"] == {"changed": 1}
    assert {r.row for r in report.rows if r.fell} == {"rt/evict/substrate",
                                                      "rt/evict/hard_protected"}


def test_drift_says_not_found_when_the_text_is_gone(
        pair: Callable[[str], tuple[Path, Path, Path]]) -> None:
    old, new, desc = pair(GONE)
    report = drift([desc], {"rt": open_root("rt", old)}, {"rt": open_root("rt", new)})
    (a,) = report.anchors
    assert a.status == "changed" and "not found" in a.detail and a.now is None


def test_review_diffs_against_the_found_lines_and_approval_writes_them(
        pair: Callable[[str], tuple[Path, Path, Path]], cli_run: RunCli) -> None:
    old, new, desc = pair(MOVED_AND_CHANGED)
    (it,) = review_items([desc], "rt", "2.0", {"rt": open_root("rt", old)},
                         open_root("rt", new))
    now = _where(MOVED_AND_CHANGED, "return None")
    assert it.status == "changed" and it.new_lines == now
    assert it.cited_by == ["rt/evict/substrate", "rt/evict/hard_protected"]
    diff = it.diff()
    assert '-    pool.stats["evicted"] += 1' in diff and '+    pool.stats["evicted"] += n' in diff
    assert f"rt/pool.py:{_where(OLD, 'return None')} (rt 1.0)" in diff
    assert f"rt/pool.py:{now} (new)" in diff
    assert "helper_" not in diff  # not the unrelated code now sitting at the old lines
    code, out, _ = cli_run("anchors", "review", str(desc), "--to", f"rt={new}", "--release",
                           "2.0", "--from", f"rt={old}", "--approve", "--reason", "moved, one "
                           "counter changed: statuses hold", "--date", "2026-12-02")
    assert code == 0, out
    assert out.count("cited by rt/evict/substrate, rt/evict/hard_protected") == 1
    assert f'lines: "{now}"' in desc.read_text()
    code, out, _ = cli_run("anchors", "review", str(desc), "--to", f"rt={new}", "--release",
                           "2.0", "--from", f"rt={old}", "--format", "json")
    assert code == 0 and '"pending": 0' in out


def test_not_found_cannot_be_approved_without_an_explicit_location(
        pair: Callable[[str], tuple[Path, Path, Path]], cli_run: RunCli) -> None:
    old, new, desc = pair(GONE)
    before = desc.read_text()
    args = ("anchors", "review", str(desc), "--to", f"rt={new}", "--release", "2.0", "--from",
            f"rt={old}", "--approve", "--reason", "r", "--date", "2026-12-02")
    code, out, _ = cli_run(*args)
    assert code == 1 and "not-found" in out and "--at s_range=START-END" in out
    assert desc.read_text() == before  # nothing approved, nothing written
    keep = next(i for i, line in enumerate(GONE.splitlines(), 1) if line.startswith("def keep"))
    code, out, _ = cli_run(*args, "--at", f"s_range={keep}-{keep + 1}")
    assert code == 0 and f"at {keep}-{keep + 1} as given with --at" in out
    assert f'lines: "{keep}-{keep + 1}"' in desc.read_text()


@pytest.mark.parametrize("spec", ["s_range", "s_range=5", "s_range=9-3", "=1-2"])
def test_explicit_location_usage_errors(pair: Callable[[str], tuple[Path, Path, Path]],
                                        cli_run: RunCli, spec: str) -> None:
    old, new, desc = pair(GONE)
    code, _, err = cli_run("anchors", "review", str(desc), "--to", f"rt={new}", "--release",
                           "2.0", "--from", f"rt={old}", "--at", spec)
    assert code == 2 and "--at" in err
