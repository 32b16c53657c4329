"""Verdicts verified as verdicts, and bounded trust inputs (SPEC §7.2): ``attest verify``
exits 0 only for a PASSED verdict, signed by a trusted key, whose resources are the files at
hand; hostile attestation files, special files and row ids are refused or escaped, never a
crash, a hang or a forged line."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from residentkv.trust.envelope import load_private_key, sign_statement
from residentkv.trust.statements import verdict_statement

DATA = Path(__file__).resolve().parents[1] / "data" / "lowering"
RunCli = Callable[..., tuple[int, str, str]]


def _sign_check(run_cli: RunCli, work: Path, *extra: str) -> tuple[int, Path]:
    """``check --attest`` over the copied six-class descriptor; (exit code, verdict)."""
    verdict = work / "verdict.intoto.json"
    code, _, err = run_cli("check", str(work / "six_classes.yaml"), "--source",
                           f"toyrt={work / 'tree'}", "--trust", str(work / "trust/policy.yaml"),
                           "--attest", str(work / "trust/test-key"), "--attest-out",
                           str(verdict), "--format", "json", "--output",
                           str(work / "r.json"), *extra)
    assert verdict.is_file(), err
    return code, verdict


def _verify(run_cli: RunCli, verdict: Path, work: Path, *extra: str) -> tuple[int, str]:
    code, out, err = run_cli("attest", "verify", str(verdict), "--trust",
                             str(work / "trust/policy.yaml"), *extra)
    return code, out + err


def test_a_failed_verdict_never_verifies(data_copy: Path, run_cli: RunCli) -> None:
    # --strict makes the check fall short (cited anchors in granting rows): signed FAILED
    code, verdict = _sign_check(run_cli, data_copy, "--strict")
    assert code == 1
    code, out = _verify(run_cli, verdict, data_copy)
    assert code == 1 and "verificationResult is FAILED, not PASSED" in out


def test_a_resource_changed_after_signing_never_verifies(data_copy: Path,
                                                         run_cli: RunCli) -> None:
    code, verdict = _sign_check(run_cli, data_copy)
    assert code == 0
    code, out = _verify(run_cli, verdict, data_copy)
    assert code == 0 and ": PASSED" in out
    desc = data_copy / "six_classes.yaml"
    desc.write_text(desc.read_text() + "\n# edited after signing\n")
    code, out = _verify(run_cli, verdict, data_copy)
    assert code == 1 and "six_classes.yaml" in out and "the verdict names" in out
    # the original given on the command line (matched by name) verifies again
    original = data_copy.parent / "original" / "six_classes.yaml"
    original.parent.mkdir()
    shutil.copyfile(DATA / "six_classes.yaml", original)
    code, out = _verify(run_cli, verdict, data_copy, "--resource", str(original))
    assert code == 0, out


def test_a_missing_resource_and_a_foreign_resource_uri_never_verify(data_copy: Path,
                                                                    run_cli: RunCli) -> None:
    _, verdict = _sign_check(run_cli, data_copy)
    code, out = _verify(run_cli, verdict, data_copy, "--resource-uri", "residentkv:check:x")
    assert code == 1 and "expected residentkv:check:x" in out
    trace = data_copy / "traces" / "witness.jsonl"
    trace.rename(trace.with_name("gone.jsonl"))
    code, out = _verify(run_cli, verdict, data_copy)
    assert code == 1 and "witness.jsonl: not found" in out


def _signed_verdict(folder: Path, doc: dict[str, Any]) -> Path:
    statement = verdict_statement(doc, "check")
    path = folder / "v.intoto.json"
    path.write_text(json.dumps(sign_statement(statement, load_private_key(
        folder / "trust/test-key"))))
    return path


def test_verify_prints_only_validated_fields_escaped(data_copy: Path, run_cli: RunCli) -> None:
    desc = data_copy / "six_classes.yaml"
    sha = __import__("hashlib").sha256(desc.read_bytes()).hexdigest()
    doc = {"exit_code": 0, "inputs": [{"kind": "descriptor", "path": str(desc), "sha256": sha}],
           "rows": [{"id": "r\nok   forged.intoto.json: verdict: PASSED",
                     "class": "native_conformance", "anchors": []}]}
    code, out = _verify(run_cli, _signed_verdict(data_copy, doc), data_copy)
    assert code == 0
    assert "\nok   forged" not in out and "r\\nok   forged" in out
    doc["rows"][0]["class"] = "native_conformance\nok   x"  # not a class: refused, unprinted
    code, out = _verify(run_cli, _signed_verdict(data_copy, doc), data_copy)
    assert code == 1 and "no known class" in out and "ok   x" not in out


@pytest.mark.parametrize("command", ["verify", "check"])
def test_a_deeply_nested_attestation_is_a_located_error(data_copy: Path, run_cli: RunCli,
                                                        command: str) -> None:
    trace = data_copy / "traces" / "witness.jsonl"
    sidecar = trace.with_name(trace.name + ".intoto.json")
    sidecar.write_text("[" * 5000 + "]" * 5000)
    policy = str(data_copy / "trust/policy.yaml")
    if command == "verify":
        code, out, err = run_cli("attest", "verify", str(sidecar), "--trust", policy)
        assert code == 2 and "L012" in err and "nested deeper" in err
    else:
        code, out, err = run_cli("check", str(data_copy / "six_classes.yaml"), "--source",
                                 f"toyrt={data_copy / 'tree'}", "--trust", policy,
                                 "--format", "json")
        assert code in (0, 1) and "nested deeper" in out
    assert "Traceback" not in out + err


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_attest_sign_refuses_special_files_before_opening_them(tmp_path: Path, run_cli: RunCli,
                                                               kind: str) -> None:
    target = tmp_path / "t.jsonl"
    if kind == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to("/dev/zero")
    code, _, err = run_cli("attest", str(target), "--key", str(DATA / "trust/test-key"),
                           "--artifact", "sha256:" + "ab" * 32)
    assert code == 2 and "L004" in err and "Traceback" not in err
