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
    """``attest verify`` of a verdict over the copied six-class descriptor (its resourceUri
    unless *extra* gives another)."""
    uri = () if "--resource-uri" in extra else (
        "--resource-uri", f"residentkv:check:{work / 'six_classes.yaml'}")
    code, out, err = run_cli("attest", "verify", str(verdict), "--trust",
                             str(work / "trust/policy.yaml"), *uri, *extra)
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
        code, out, err = run_cli("attest", "verify", str(sidecar), "--trust", policy,
                                 "--kind", "trace")
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


def test_a_trace_attestation_never_passes_for_a_verdict(data_copy: Path, run_cli: RunCli
                                                        ) -> None:
    # a one-line trace named "verdict", signed by a key trusted for its emitter (not for
    # verdicts) as verdict.intoto.json: the statement's predicate type says it is a trace
    # attestation, and attest verify, asked for a verdict, refuses it (A056)
    trace = data_copy / "verdict"
    shutil.copyfile(data_copy / "traces" / "witness.jsonl", trace)
    code, _, err = run_cli("attest", str(trace), "--key", str(data_copy / "trust/test-key"),
                           "--artifact",
                           str(data_copy / "tree" / "toyrt-0.1.dist-info" / "RECORD"))
    assert code == 0, err
    envelope = data_copy / "verdict.intoto.json"
    for extra in ((), ("--resource", str(data_copy / "six_classes.yaml"))):
        code, out = _verify(run_cli, envelope, data_copy, "--resource-uri",
                            "residentkv:check:six_classes.yaml", *extra)
        assert code == 1 and out.startswith("FAIL ") and "A056" in out, out
        assert "a trace attestation" in out and "not a signed verdict" in out
    # asked for a trace attestation, it verifies as one; an honest verdict asked for as a
    # trace attestation is refused the same way
    code, out, _ = run_cli("attest", "verify", str(envelope), "--trust",
                           str(data_copy / "trust/policy.yaml"), "--kind", "trace")
    assert code == 0, out
    _, verdict = _sign_check(run_cli, data_copy)
    code, out, _ = run_cli("attest", "verify", str(verdict), "--trust",
                           str(data_copy / "trust/policy.yaml"), "--kind", "trace")
    assert code == 1 and "a signed verdict" in out and "A056" in out


def test_a_verdict_is_verified_only_against_the_resource_uri_the_verifier_names(
        data_copy: Path, run_cli: RunCli) -> None:
    # which resource the verdict must be about is the verifier's to say (as SLSA's verifiers
    # require): no --resource-uri is a usage error, and the URI compares exactly
    _, verdict = _sign_check(run_cli, data_copy)
    code, out, err = run_cli("attest", "verify", str(verdict), "--trust",
                             str(data_copy / "trust/policy.yaml"))
    assert code == 2 and "--resource-uri" in err
    uri = f"residentkv:check:{data_copy / 'six_classes.yaml'}"
    for near in (uri + " ", uri.upper(), uri + ",x.yaml", uri.replace("check", "audit")):
        code, out = _verify(run_cli, verdict, data_copy, "--resource-uri", near)
        assert code == 1 and "expected" in out, near
    code, out, err = run_cli("attest", "verify", str(verdict), "--trust",
                             str(data_copy / "trust/policy.yaml"), "--kind", "trace",
                             "--resource-uri", uri)
    assert code == 2 and "--resource-uri are for verdicts" in err


def _bloated(data_copy: Path, shape: str) -> tuple[Path, str]:
    """(attestation, policy) past one trust limit of docs/limits.md."""
    sidecar = data_copy / "traces" / "witness.jsonl.intoto.json"
    policy = str(data_copy / "trust/policy.yaml")
    envelope = json.loads(sidecar.read_text())
    if shape == "signatures":  # 17 signatures of 17 key ids (the limit is 16)
        sig = envelope["signatures"][0]["sig"]
        envelope["signatures"] = [{"keyid": f"{i:064x}", "sig": sig} for i in range(17)]
    elif shape == "size":  # 16 MiB and one byte
        envelope["pad"] = "x" * (16 << 20)
    elif shape == "statement":  # a signed statement nested 65 deep (the limit is 64)
        statement: Any = {"_type": "https://in-toto.io/Statement/v1", "x": []}
        inner = statement["x"]
        for _ in range(64):
            inner.append([])
            inner = inner[0]
        envelope = sign_statement(statement, load_private_key(data_copy / "trust/test-key"))
    elif shape == "key":  # a public key file of 64 KiB and one byte
        (data_copy / "trust/test-key.pub").write_bytes(b"A" * (64 * 1024 + 1))
    sidecar.write_text(json.dumps(envelope))
    return sidecar, policy


@pytest.mark.parametrize(("shape", "code", "says"), [
    ("signatures", "L012", "17 signatures; expected at most 16"),
    ("size", "L003", "larger than 16777216 bytes"),
    ("statement", "L012", "nested deeper than 64"),
    ("key", "L011", "larger than 65536 bytes"),
])
def test_trust_inputs_are_bounded_before_they_are_parsed(data_copy: Path, run_cli: RunCli,
                                                         shape: str, code: str,
                                                         says: str) -> None:
    sidecar, policy = _bloated(data_copy, shape)
    exit_code, out, err = run_cli("attest", "verify", str(sidecar), "--trust", policy,
                                  "--kind", "trace")
    assert exit_code == 2 and code in err and says in err, out + err
    assert "Traceback" not in out + err
