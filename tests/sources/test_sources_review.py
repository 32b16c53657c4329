"""`anchors review`: a changed anchor is shown as a diff and written only on approval."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from sourcekit import pair_descriptor

from residentkv.cli import cli
from residentkv.commands import anchors as anchors_cmd
from residentkv.lowering.anchors import make_anchor
from residentkv.lowering.check import run_check
from residentkv.lowering.sources import open_root

OLD = '''class Pool:
    def evict(self, block):
        """Drop a cached block; nobody is told."""
        self.blocks.remove(block)

    def keep(self, block):
        return block in self.blocks
'''
# 2.0: evict gains a line (changed), keep moves down by one line (same text)
NEW = OLD.replace("        self.blocks.remove(block)\n",
                  "        self.blocks.remove(block)\n        self.log(block)\n")


def _descriptor(folder: Path, evict: dict[str, str], keep: dict[str, str]) -> Path:
    return pair_descriptor(folder, "pool", {"s_evict": evict, "s_keep": keep},
                           ("s_keep", "s_keep", "s_evict", "s_evict"))


@pytest.fixture
def pair(wheel_factory: Callable[..., Path], tmp_path: Path) -> tuple[Path, Path, Path]:
    old = wheel_factory("rt", "1.0", {"rt/pool.py": OLD})
    new = wheel_factory("rt", "2.0", {"rt/pool.py": NEW})
    root = open_root("rt", old)
    desc = _descriptor(tmp_path, make_anchor(root, "rt/pool.py:Pool.evict", "1.0"),
                       make_anchor(root, "rt/pool.py:Pool.keep", "1.0"))
    return old, new, desc


RunCli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def review(cli_run: RunCli) -> Callable[..., tuple[int, str]]:
    def run(desc: Path, old: Path, new: Path, *extra: str) -> tuple[int, str]:
        code, out, err = cli_run("anchors", "review", str(desc), "--to", f"rt={new}",
                                 "--release", "2.0", "--from", f"rt={old}", *extra)
        return code, out + err
    return run


def _classes(desc: Path, root: Path) -> dict[str, str]:
    return {r.id: r.klass for r in run_check([desc], [f"rt={root}"]).rows}


def test_unreviewed_change_is_shown_as_a_diff_and_stays_fail_closed(
        pair: tuple[Path, Path, Path], review: Callable[..., tuple[int, str]]) -> None:
    old, new, desc = pair
    before = desc.read_text()
    code, out = review(desc, old, new)
    assert code == 1
    assert "changed" in out and "+    self.log(block)" in out
    assert "moved" in out  # keep: same text at new lines, no judgement needed
    assert "pending 1" in out
    assert desc.read_text() == before  # nothing approved, nothing written
    # the rows name 2.0; the anchored text changed and nobody re-read it: fail-closed -- the
    # obligations resting on it have no usable evidence against 2.0
    for row in run_check([desc], [f"rt={new}"]).rows:
        assert row.verdict is not None
        effective = {n: o.effective for n, o in row.verdict.obligations.items()}
        assert effective["ordered_lifecycle"] == effective["claim_scoped_outcomes"] == "unknown"
        # the anchor still names 1.0, which the 2.0 root contradicts (A031): failed, no evidence
        assert {a.id: a.result for a in row.anchors}["s_evict"] == "failed"


def test_approval_writes_hash_lines_version_and_reviewed_record(
        pair: tuple[Path, Path, Path], review: Callable[..., tuple[int, str]]) -> None:
    old, new, desc = pair
    code, out = review(desc, old, new, "--approve", "--reason", "log only; still drops",
                        "--date", "2026-12-01")
    assert code == 0, out
    text = desc.read_text()
    assert text.startswith("# a curated file: this comment must survive the review\n")
    assert "# the release this row describes" in text
    assert "obligations: *obl" in text and "anchors: *anc" in text  # aliases kept
    assert ('reviewed: {release: "rt==2.0", date: "2026-12-01", '
            'reason: "log only; still drops"}') in text
    assert text.count("reviewed:") == 1  # only the changed anchor; keep was only retargeted
    assert 'version: "1.0"' not in text
    assert _classes(desc, new) == {"rt/pool/substrate": "approximation_substrate",
                                   "rt/pool/hard_protected": "rejected_mapping"}
    # reviewing again finds nothing left to do
    code, out = review(desc, old, new)
    assert code == 0 and "unchanged 2" in out and "pending 0" in out


def test_interactive_decline_writes_nothing(pair: tuple[Path, Path, Path],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    old, new, desc = pair
    before = desc.read_text()
    monkeypatch.setattr(anchors_cmd, "_stdin_is_tty", lambda: True)
    r = CliRunner().invoke(cli, ["anchors", "review", str(desc), "--to", f"rt={new}",
                                  "--release", "2.0", "--from", f"rt={old}"], input="n\n")
    assert r.exit_code == 1, r.output
    assert "approve?" in r.output
    assert desc.read_text() == before


@pytest.mark.parametrize("args", [["--approve"], ["--date", "1 Dec"], []])
def test_usage_errors(pair: tuple[Path, Path, Path], args: list[str], cli_run: RunCli) -> None:
    old, new, desc = pair
    argv = ["anchors", "review", str(desc), "--to", f"rt={new}", "--from", f"rt={old}", *args]
    if args:
        argv += ["--release", "2.0"]
    code, _out, err = cli_run(*argv)
    assert code == 2, err


def test_without_the_old_release_there_is_no_diff_and_no_approval(
        pair: tuple[Path, Path, Path], tmp_path: Path, cli_run: RunCli) -> None:
    _old, new, desc = pair
    before = desc.read_text()
    code, out, _err = cli_run("anchors", "review", str(desc), "--to", f"rt={new}",
                              "--release", "2.0", "--cache", str(tmp_path / "empty"),
                              "--approve", "--reason", "x")
    assert code == 1
    assert "no-baseline" in out
    assert desc.read_text() == before


def test_real_round_trip_vllm_0_32_to_0_33(pinned_cache: Path, tmp_path: Path,
                                           cli_run: RunCli) -> None:
    """The shipped 0.32.0 rows, renamed to 0.33.0 and reviewed against the real 0.33.0 wheel:
    the drifted anchors are pending and fail closed until approved; approval writes records that
    verify; a second review finds nothing left."""
    from residentkv.sources.roots import runtimes_dir

    desc = tmp_path / "vllm_next.yaml"
    desc.write_text((runtimes_dir() / "vllm.yaml").read_text().replace(
        'runtime: {name: vllm, version: "0.32.0"}', 'runtime: {name: vllm, version: "0.33.0"}'))
    args = ("anchors", "review", str(desc), "--to", "vllm==0.33.0", "--cache",
            str(pinned_cache), "--no-fetch")
    code, out, err = cli_run(*args)
    assert code == 1, out + err
    assert "changed" in out and "moved" in out and "\n-" in out and "\n+" in out
    results = _anchor_results(desc, pinned_cache)
    # pending anchors fail closed: every anchor still names 0.32.0, which the 0.33.0 root
    # contradicts (A031)
    assert results == {"failed"}, results
    # with both releases at hand, an anchor naming 0.32.0 verifies there, and is still cited
    assert _anchor_codes(desc, pinned_cache) == {"A016"}
    code, out, err = cli_run(*args, "--approve", "--reason", "round trip test", "--date",
                             "2026-12-01")
    assert code == 0, out + err
    text = desc.read_text()
    assert 'reviewed: {release: "vllm==0.33.0", date: "2026-12-01"' in text
    assert 'version: "0.32.0"' not in text.split("rows:", 1)[1].replace(
        'runtime: {name: vllm, version: "0.33.0"}', "")
    code, out, err = cli_run(*args)
    assert code == 0 and "pending 0" in out, out + err
    assert _anchor_results(desc, pinned_cache) == {"verified"}


def _anchor_results(desc: Path, cache: Path) -> set[str]:
    """The anchor results of *desc* checked against the 0.33.0 wheel alone."""
    from residentkv.sources import PINS
    from residentkv.sources.cache import find_archive

    wheel = find_archive(cache, next(p for p in PINS if p.key == "vllm==0.33.0"))
    rows = run_check([desc], [f"vllm={wheel}"]).rows
    return {a.result for r in rows for a in r.anchors}


def _anchor_codes(desc: Path, cache: Path) -> set[str | None]:
    """The codes of *desc*'s anchors checked against every cached release (0.32.0 and 0.33.0)."""
    from residentkv.lowering.anchors import Verifier
    from residentkv.sources.roots import cached_roots

    roots, _ = cached_roots(cache)
    rows = run_check([desc], verifier=Verifier(roots)).rows
    return {a.code for r in rows for a in r.anchors if a.kind == "source"}


@pytest.mark.parametrize("evidence", ['["1"]', "[1]"])
def test_an_integer_anchor_id_is_a_located_error_not_a_crash(
        pair: tuple[Path, Path, Path], review: Callable[..., tuple[int, str]],
        evidence: str) -> None:
    old, new, desc = pair
    text = desc.read_text().replace("      s_evict:\n", "      1:\n").replace(
        "[s_evict]", evidence)
    desc.write_text(text)
    line = text.splitlines().index("      1:") + 1
    code, out = review(desc, old, new, "--approve", "--reason", "x")
    assert code == 2 and "internal error" not in out, out
    assert f"{desc}:{line}:7: error[D040 non_string_key]" in out
    assert desc.read_text() == text  # nothing written
