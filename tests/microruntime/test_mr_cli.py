"""``residentkv litmus`` / ``residentkv sweep`` through the real CLI entry point (exit codes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from residentkv import cli as cli_module


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        cli_module.main(argv)
    out, err = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 0), out, err


def test_litmus_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["litmus", "--out", str(tmp_path)], capsys)
    assert code == 0, out
    assert "8/8 litmus items passed" in out
    assert (tmp_path / "L3-hard_exclude.jsonl").is_file()


def test_litmus_json_and_only(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["litmus", "--only", "l1,L6", "--format", "json"], capsys)
    data = json.loads(out)
    assert code == 0 and [i["id"] for i in data["items"]] == ["L1", "L6"] and data["passed"]


def test_litmus_unknown_item_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["litmus", "--only", "L9"], capsys)
    assert code == 2 and "L9" in err and "Traceback" not in err


def test_litmus_failure_exits_1(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "residentkv.lowering.check", None)
    code, out, _ = run(["litmus", "--only", "C1"], capsys)
    assert code == 1 and "NOT RUN" in out


def test_sweep_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["sweep", "--resident", "60", "--active", "70", "--usable", "80..150",
                          "--format", "json", "--out", str(tmp_path)], capsys)
    assert code == 0, err
    rows = json.loads(out)["rows"]
    native = [r["resident_victims"] for r in rows if r["policy"] == "native"]
    assert native == [50, 40, 30, 20, 10, 0, 0, 0]
    assert (tmp_path / "traces" / "hard_exclude-u80.jsonl").is_file()
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "pip install -e '.[plot]'" in err
    else:
        assert (tmp_path / "sweep.png").is_file() and (tmp_path / "sweep.svg").is_file()


def test_sweep_text_without_out(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["sweep", "--usable", "80,130"], capsys)
    assert code == 0 and "hard_exclude" in out and "--out DIR" in err


@pytest.mark.parametrize(
    "args",
    [["--usable", "150..80"], ["--step", "0"], ["--resident", "0"], ["--usable", "x"]],
)
def test_sweep_bad_usage(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["sweep", *args], capsys)
    assert code == 2 and "Traceback" not in err and "error" in err
