"""The capacity sweep reproduces SPEC §10, every figure read from the run's trace."""

from __future__ import annotations

import builtins
import json
from pathlib import Path
from typing import Any

import pytest

from residentkv.errors import UsageError
from residentkv.microruntime.facts import read_trace
from residentkv.microruntime.sweep import (
    SweepResult,
    parse_usable,
    render_json,
    render_text,
    row_from_trace,
    run_sweep,
)
from residentkv.report.pictures import sweep_grid

SPEC_USABLE = [80, 90, 100, 110, 120, 130, 150]
SPEC_VICTIMS = [50, 40, 30, 20, 10, 0, 0]


@pytest.fixture(scope="module")
def spec_sweep(tmp_path_factory: pytest.TempPathFactory) -> SweepResult:
    out = tmp_path_factory.mktemp("sweep")
    return run_sweep(60, 70, SPEC_USABLE, out)


def _rows(result: SweepResult, policy: str) -> list[Any]:
    return [r for r in result.rows if r.policy == policy]


@pytest.mark.parametrize("policy", ["native", "write_no_admit"])
def test_spec_victims_for_native_and_write_no_admit(spec_sweep: SweepResult, policy: str) -> None:
    rows = _rows(spec_sweep, policy)
    assert [r.usable for r in rows] == SPEC_USABLE
    assert [r.resident_victims for r in rows] == SPEC_VICTIMS
    assert all(r.active == "served" and r.harmed_claims == [] for r in rows)


def test_spec_hard_exclude(spec_sweep: SweepResult) -> None:
    for r in _rows(spec_sweep, "hard_exclude"):
        assert r.resident_victims == 0 and r.harmed_claims == []
        if r.usable < 130:
            assert (r.active, r.shortfall, r.blocking_claim_ids) == (
                "refused", 130 - r.usable, ["claim-resident"]
            )
        else:
            assert (r.active, r.shortfall, r.blocking_claim_ids) == ("served", None, [])


def test_other_policies(spec_sweep: SweepResult) -> None:
    for r in _rows(spec_sweep, "demote_on_conflict") + _rows(spec_sweep, "expiring"):
        assert r.resident_victims == max(0, 130 - r.usable) and r.harmed_claims == []
    assert [r.active for r in _rows(spec_sweep, "expiring")] == ["deferred"] * 5 + ["served"] * 2
    assert all(r.resident_victims == 0 and r.active == "served"
               for r in _rows(spec_sweep, "offload_resident"))
    assert spec_sweep.passed, spec_sweep.failures


def test_rows_are_the_traces_figures(spec_sweep: SweepResult) -> None:
    """Re-reading each trace independently (plain json) gives the same victim counts."""
    for row in spec_sweep.rows:
        path = Path(spec_sweep.traces[f"{row.policy}@{row.usable}"])
        events = [json.loads(line) for line in path.read_text().splitlines()]
        evicted = [e for e in events if e["event"] == "block_evicted" and e["claim_id"]]
        assert len(evicted) == row.resident_victims
        assert row_from_trace(read_trace(path), row.usable, row.policy) == row


def test_a_doctored_trace_changes_the_row(tmp_path: Path, spec_sweep: SweepResult) -> None:
    src = Path(spec_sweep.traces["native@80"])
    lines = src.read_text().splitlines()
    kept = [ln for ln in lines if '"block_evicted"' not in ln][: len(lines)]
    doctored = tmp_path / "t.jsonl"
    doctored.write_text("\n".join(kept) + "\n")
    assert row_from_trace(read_trace(doctored), 80, "native").resident_victims == 0


def test_json_form(spec_sweep: SweepResult) -> None:
    data = json.loads(render_json(spec_sweep))
    assert set(data["rows"][0]) == {
        "usable", "policy", "resident_victims", "active", "shortfall", "blocking_claim_ids",
        "harmed_claims",
    }
    assert data["failures"] == []


def test_text_table(spec_sweep: SweepResult) -> None:
    text = render_text(spec_sweep)
    assert "hard_exclude" in text and "claim-resident" in text


def test_expectation_failure_is_reported(tmp_path: Path) -> None:
    # active larger than the pool: refused for every policy, which the expectation knows
    result = run_sweep(10, 30, [20], tmp_path)
    assert result.passed
    assert {r.active for r in result.rows} == {"refused"}


@pytest.mark.parametrize(
    ("text", "step", "expected"),
    [("80..150", 10, [80, 90, 100, 110, 120, 130, 140, 150]), ("80..100", 15, [80, 95]),
     ("80,130", 10, [80, 130]), ("100", 1, [100])],
)
def test_parse_usable(text: str, step: int, expected: list[int]) -> None:
    assert parse_usable(text, step) == expected


@pytest.mark.parametrize(("text", "step"), [("150..80", 10), ("80..150", 0), ("a..b", 10),
                                            ("0", 1), ("", 1)])
def test_parse_usable_rejects(text: str, step: int) -> None:
    with pytest.raises(UsageError):
        parse_usable(text, step)


def test_plot_files(tmp_path: Path, spec_sweep: SweepResult) -> None:
    pytest.importorskip("matplotlib")
    paths = sweep_grid(spec_sweep, tmp_path)
    assert [p.name for p in paths] == ["sweep.png", "sweep.svg"]
    assert all(p.stat().st_size > 0 for p in paths)
    assert paths[1].read_text().lstrip().startswith("<?xml")


def test_plot_without_matplotlib_raises_import_error(
    tmp_path: Path, spec_sweep: SweepResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_import = builtins.__import__

    def fake_import(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("matplotlib"):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(ImportError):
        sweep_grid(spec_sweep, tmp_path)


def test_core_does_not_import_matplotlib() -> None:
    import subprocess
    import sys

    code = ("import sys, residentkv.microruntime.sweep, residentkv.commands.microruntime; "
            "print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
