"""Pictures: the sweep grid, timelines (collapsed repeats, failure -> outcome links), the
litmus and trace timeline pictures."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from residentkv.microruntime.sweep import run_sweep
from residentkv.report.timeline import timeline

ROOT = Path(__file__).resolve().parents[2]
WITNESS = ROOT / "src" / "residentkv" / "data" / "descriptors" / "runtimes" / "traces" / "witness"
RunCli = Callable[..., tuple[int, str, str]]


def test_sweep_grid_shows_outcomes_losses_and_the_threshold(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from residentkv.report.pictures import OUTCOME_COLOURS, sweep_grid

    result = run_sweep(60, 70, [100, 130], tmp_path)
    png, svg = sweep_grid(result, tmp_path / "pic")
    assert png.read_bytes().startswith(b"\x89PNG")
    text = svg.read_text()
    assert "resident + active = 130 blocks fit from here" in text
    for row in result.rows:
        assert f"{row.resident_victims} lost" in text
        if row.shortfall is not None:
            assert f"short {row.shortfall}" in text
    used = {r.active for r in result.rows}
    assert all(OUTCOME_COLOURS[a].lower() in text.lower() for a in used)


def test_timeline_collapses_repeats(tmp_path: Path) -> None:
    base = {"schema": "residentkv.event/v1", "ts_ns": 1, "source": "t"}
    events = [{**base, "event": "request_started", "claim_id": None, "request_id": "r",
               "prompt_tokens": 4, "owner_scope": None}]
    for _ in range(5):
        events.append({**base, "event": "block_evicted", "claim_id": None, "request_id": "r",
                       "block_id": 1, "protected": False, "reason": "lru"})
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps({**e, "seq": i}) + "\n" for i, e in enumerate(events)))
    t = timeline(trace)
    assert t["problems"] == []
    assert [(e["event"], e["count"]) for e in t["events"]] == [("request_started", 1),
                                                               ("block_evicted", 5)]


def test_witness_timelines_link_each_failure_to_its_outcome() -> None:
    t = timeline(WITNESS / "claimed_load_failure.jsonl")
    assert not t["problems"]
    (link,) = t["links"]
    seqs = {e["seq"]: e for e in t["events"]}
    assert seqs[link["from"]]["category"] == "failure"
    assert seqs[link["to"]]["event"] == "active_request_refused"
    assert timeline(WITNESS / "success_path.jsonl")["links"] == []


def test_trace_timeline_command(cli_run: RunCli, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "w.svg"
    rc, _, err = cli_run("trace", "timeline", str(WITNESS / "claimed_load_failure.jsonl"),
                         "--out", str(out))
    assert rc == 0, err
    text = out.read_text()
    assert "claimed_load_failure" in text and "refused" in text
    rc, _, err = cli_run("trace", "timeline", str(WITNESS / "success_path.jsonl"), "--out",
                         str(tmp_path / "w.txt"))
    assert rc == 2 and ".png or .svg" in err


def test_litmus_writes_its_timeline_picture(cli_run: RunCli, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    rc, _, err = cli_run("litmus", "--only", "L3", "--out", str(tmp_path))
    assert rc == 0, err
    assert (tmp_path / "litmus-timelines.png").read_bytes().startswith(b"\x89PNG")
