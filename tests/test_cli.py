"""The CLI as a user runs it: exit codes, formats, messages; never a traceback for bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from residentkv import __version__
from residentkv.cli import main

TRACES = Path(__file__).parent.parent / "src" / "residentkv" / "data" / "traces"


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "--version")
    assert code == 0 and __version__ in out


def test_passing_gate_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "trace", "check", str(TRACES / "success_path.jsonl"),
                       "--gate", "observation")
    assert code == 0
    assert "observation" in out and "pass" in out


def test_failing_gate_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "trace", "check", str(TRACES / "success_path.jsonl"))
    assert code == 1 and "FAIL" in out


def test_json_output_is_deterministic_and_complete(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("trace", "check", str(TRACES / "two_claim_attribution.jsonl"), "--format", "json")
    _, first, _ = cli(capsys, *args)
    _, second, _ = cli(capsys, *args)
    assert first == second
    data = json.loads(first)
    result = data["traces"][0]["results"][0]
    assert set(result) == {"gate", "claim_id", "passed", "missing", "controls", "evidence",
                           "boundary", "deciding", "why", "because", "illegal"}
    assert "judges the evidence given" in data["boundary"]


def test_markdown_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "trace", "check", str(TRACES / "claimed_load_failure.jsonl"),
                       "--format", "md", "--gate", "failure_outcome")
    assert code == 0 and out.startswith("# residentkv trace check") and "| c-1 |" in out


def test_claim_filter_with_unknown_claim_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = cli(capsys, "trace", "check", str(TRACES / "success_path.jsonl"),
                     "--claim", "c-404")
    assert code == 1


@pytest.mark.parametrize(
    ("content", "code", "fragment"),
    [
        (b"", 2, "T009"),
        (b"garbage\nmore garbage\n", 2, ":1: error[T001 invalid_json]"),
        (b"\x00\x01\x02binary", 2, "T008 not_text"),
    ],
)
def test_unusable_traces_exit_2_with_located_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: bytes, code: int, fragment: str
) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(content)
    # unusable whatever claim is asked for (a --claim once turned this into exit 1)
    assert cli(capsys, "trace", "check", str(path), "--claim", "c-1")[0] == code
    got, out, err = cli(capsys, "trace", "check", str(path))
    assert got == code
    assert fragment in out + err
    assert "Traceback" not in out + err


def test_duplicated_seq_exits_1_with_location(capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path) -> None:
    lines = (TRACES / "success_path.jsonl").read_text().splitlines()
    lines.insert(3, lines[2])
    (tmp_path / "t.jsonl").write_text("\n".join(lines) + "\n")
    code, out, _ = cli(capsys, "trace", "check", str(tmp_path / "t.jsonl"))
    assert code == 1 and "t.jsonl:4: error[T006 non_increasing_seq]" in out


def test_long_line_limit_is_configurable(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "trace", "check", str(TRACES / "success_path.jsonl"),
                       "--max-line-bytes", "100")
    assert code == 2 and "T007 line_too_long" in out


def test_missing_file_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = cli(capsys, "trace", "check", str(tmp_path / "nope.jsonl"))
    assert code == 2 and "nope.jsonl: error[T010 unreadable_trace]" in err


@pytest.mark.parametrize(
    "args",
    [("trace", "check"), ("trace", "check", "--gate", "nonsense", "x"), ("frobnicate",),
     ("schema", "nonsense"), ("explain", "X999")],
)
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], args: tuple[str, ...]) -> None:
    code, out, err = cli(capsys, *args)
    assert code == 2 and "Traceback" not in out + err


def test_internal_error_exits_101_with_short_message(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from residentkv.commands import trace as trace_cmd

    def boom(*_: object, **__: object) -> None:
        raise RuntimeError("kaboom")

    monkeypatch.setattr(trace_cmd, "check_trace", boom)
    code, _, err = cli(capsys, "trace", "check", str(TRACES / "success_path.jsonl"))
    assert code == 101
    assert "internal error[E101]: RuntimeError: kaboom" in err and "Traceback" not in err
    code, _, err = cli(capsys, "--traceback", "trace", "check",
                       str(TRACES / "success_path.jsonl"))
    assert code == 101 and "Traceback" in err


def test_event_schema_validates_every_test_trace_event(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "schema", "event")
    assert code == 0
    schema = json.loads(out)
    validator = jsonschema.Draft202012Validator(schema)
    for path in TRACES.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            validator.validate(json.loads(line))
    bad = json.loads((TRACES / "success_path.jsonl").read_text().splitlines()[0])
    bad["surprise"] = 1
    assert list(validator.iter_errors(bad))


def test_claim_schema(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "schema", "claim")
    schema = json.loads(out)
    assert code == 0 and "footprint_blocks" in schema["properties"]


def test_explain_known_code(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "explain", "t006")
    assert code == 0 and "non_increasing_seq" in out and "why:" in out


def test_module_entry_point_runs() -> None:
    proc = subprocess.run([sys.executable, "-m", "residentkv", "--version"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and __version__ in proc.stdout


def test_core_imports_without_torch_or_vllm() -> None:
    code = ("import sys, residentkv.cli, residentkv.trace.gates; "
            "bad = [m for m in ('torch', 'vllm') if m in sys.modules]; "
            "sys.exit(1 if bad else 0)")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
