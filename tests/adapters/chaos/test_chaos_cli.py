"""``residentkv chaos check`` and ``chaos run``'s usage errors, and the three reports."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from chaoskit import PASS, clean_run
from residentkv.adapters.vllm.chaos.history import check_history
from residentkv.jsontext import write_json
from residentkv.report.registry import render

RunCli = Callable[..., tuple[int, str, str]]


def _folder(tmp: Path) -> Path:
    hist, _sink = clean_run(tmp)
    write_json(tmp / "history.json", hist.to_json())
    return tmp


def test_check_judges_a_run_folder_and_fails_when_conformance_fails(
        tmp_path: Path, cli_run: RunCli) -> None:
    folder = _folder(tmp_path)
    rc, out, _ = cli_run("chaos", "check", str(folder))
    assert rc == 1  # every figure is zero, but the hand-built sink is no strict v1 stream
    assert "chaos: FAIL (conformance fail)" in out
    assert "error[C009 conformance_failed]" in out
    rc, out, _ = cli_run("chaos", "check", str(folder), "--format", "json")
    doc = json.loads(out)
    assert rc == 1 and doc["figures"]["disagreements"] == 0 and not doc["passed"]
    page = (folder / "chaos.html").read_text(encoding="utf-8")
    assert 'id="verdict" class="verdict fail"' in page and "<svg" in page


def test_check_refuses_an_unreadable_history_with_its_location(tmp_path: Path,
                                                               cli_run: RunCli) -> None:
    rc, _, err = cli_run("chaos", "check", str(tmp_path))
    assert rc == 2 and f"{tmp_path / 'history.json'}: error[C013 invalid_history]" in err
    (tmp_path / "history.json").write_text('{"schema": "x"}', encoding="utf-8")
    rc, _, err = cli_run("chaos", "check", str(tmp_path))
    assert rc == 2 and "C013" in err and "Traceback" not in err
    folder = _folder(tmp_path)
    (folder / "trace.jsonl").unlink()
    rc, _, err = cli_run("chaos", "check", str(folder))
    assert rc == 2 and "event sink is not there" in err


def test_run_refuses_traffic_off_the_loopback_and_half_an_attachment(
        tmp_path: Path, cli_run: RunCli) -> None:
    sock = tmp_path / "engine.sock"
    sock.write_text("", encoding="utf-8")
    rc, _, err = cli_run("chaos", "run", "--url", "http://10.0.0.7:8000",
                         "--control-socket", str(sock))
    assert rc == 2 and "loopback interface only" in err
    rc, _, err = cli_run("chaos", "run", "--url", "http://127.0.0.1:8000")
    assert rc == 2 and "--url and --control-socket go together" in err
    rc, _, err = cli_run("chaos", "run", "--fault", "none", "--fault", "kill_engine")
    assert rc == 2 and "cannot be combined" in err


def test_the_three_reports_render_one_document(tmp_path: Path) -> None:
    hist, sink = clean_run(tmp_path)
    doc = check_history(hist, sink, conformance=PASS)
    text = render("chaos", "text", doc)
    assert "figures that must be zero" in text and text.rstrip().endswith(
        "chaos: pass (every figure that must be zero is zero; conformance passes)")
    assert json.loads(render("chaos", "json", doc)) == json.loads(json.dumps(doc))
    page = render("chaos", "html", doc)
    assert page.count("<circle") == len(doc["timeline"]) == 3
    assert "Content-Security-Policy" in page and "<script" not in page
