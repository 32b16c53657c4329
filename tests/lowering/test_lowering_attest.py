"""``residentkv attest`` / ``attest verify`` through the CLI: trace attestations (good, wrong
key, key not trusted for the emitter or runtime, statement over another trace, tampered trace
or envelope) and signed verdicts (``check --attest``); every report format names the root of
each granting trace."""

from __future__ import annotations

import base64
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from attesting import policy_file

DATA = Path(__file__).resolve().parents[1] / "data" / "lowering"
TREE = DATA / "tree"
TRUST = DATA / "trust" / "policy.yaml"
RunCli = Callable[..., tuple[int, str, str]]
ARTIFACT = str(DATA / "tree" / "toyrt-0.1.dist-info" / "RECORD")


@pytest.fixture
def signed(tmp_path: Path, run_cli: RunCli) -> tuple[Path, Path]:
    """(trace, policy): a copy of the toy witness trace attested by a new key the policy
    trusts for toyrt's emitter on toyrt."""
    trace = tmp_path / "t.jsonl"
    shutil.copyfile(DATA / "traces" / "witness.jsonl", trace)
    key, policy = policy_file(tmp_path)
    code, out, err = run_cli("attest", str(trace), "--key", str(key), "--artifact", ARTIFACT)
    assert code == 0, err
    assert (tmp_path / "t.jsonl.intoto.json").is_file() and "t.jsonl.intoto.json" in out
    return trace, policy


def _verify(run_cli: RunCli, path: Path, policy: Path, *extra: str) -> tuple[int, str]:
    """``attest verify`` of a trace attestation (``--kind trace``), or with *extra* options."""
    code, out, err = run_cli("attest", "verify", str(path), "--trust", str(policy),
                             *(extra or ("--kind", "trace")))
    return code, out + err


def test_a_good_trace_attestation_verifies(signed: tuple[Path, Path], run_cli: RunCli) -> None:
    trace, policy = signed
    code, out = _verify(run_cli, trace.with_name("t.jsonl.intoto.json"), policy)
    assert code == 0 and out.startswith("ok ") and "attested (signed by key 'key'" in out


def test_a_wrong_key_does_not_verify(signed: tuple[Path, Path], tmp_path: Path,
                                     run_cli: RunCli) -> None:
    trace, _ = signed
    (tmp_path / "other").mkdir()
    _, other = policy_file(tmp_path / "other")  # another key, trusted for the same names
    code, out = _verify(run_cli, trace.with_name("t.jsonl.intoto.json"), other)
    assert code == 1 and out.startswith("FAIL ") and "not signed by any key" in out


@pytest.mark.parametrize(("emitters", "runtimes"), [(["toyrt.cache"], ["toyrt"]),
                                                    (["toyrt.scheduler"], ["vllm"])])
def test_a_key_not_trusted_for_that_emitter_or_runtime(
        signed: tuple[Path, Path], tmp_path: Path, run_cli: RunCli,
        emitters: list[str], runtimes: list[str]) -> None:
    trace, _ = signed
    _, narrow = policy_file(tmp_path, emitters, runtimes)  # the same key, other names
    code, out = _verify(run_cli, trace.with_name("t.jsonl.intoto.json"), narrow)
    assert code == 1 and "does not trust for emitter 'toyrt.scheduler'" in out


def test_a_statement_over_another_trace_does_not_vouch(signed: tuple[Path, Path],
                                                       tmp_path: Path,
                                                       run_cli: RunCli) -> None:
    trace, policy = signed
    # the same claims and provenance, one more event: another sha256 than the statement's
    other = tmp_path / "u.jsonl"
    lines = trace.read_text().splitlines()
    other.write_text("\n".join([*lines, lines[-1]]) + "\n")
    shutil.copyfile(trace.with_name("t.jsonl.intoto.json"),
                    tmp_path / "u.jsonl.intoto.json")
    code, out = _verify(run_cli, tmp_path / "u.jsonl.intoto.json", policy)
    assert code == 1 and "does not vouch for this trace" in out and "not this trace" in out


def test_a_trace_edited_after_signing_does_not_verify(signed: tuple[Path, Path],
                                                      run_cli: RunCli) -> None:
    trace, policy = signed
    trace.write_text(trace.read_text().replace('"prompt_tokens":297', '"prompt_tokens":298'))
    code, out = _verify(run_cli, trace.with_name("t.jsonl.intoto.json"), policy)
    assert code == 1 and "does not vouch for this trace" in out


def _tamper_payload(envelope: Path, edit: dict[str, str]) -> None:
    """Rewrite the signed statement's text (the signature is left as it was)."""
    doc = json.loads(envelope.read_text())
    text = base64.b64decode(doc["payload"]).decode()
    for old, new in edit.items():
        assert old in text
        text = text.replace(old, new)
    doc["payload"] = base64.b64encode(text.encode()).decode()
    envelope.write_text(json.dumps(doc))


def test_a_tampered_envelope_does_not_verify(signed: tuple[Path, Path],
                                             run_cli: RunCli) -> None:
    trace, policy = signed
    sidecar = trace.with_name("t.jsonl.intoto.json")
    _tamper_payload(sidecar, {'"claims":{"c-1"': '"claims":{"c-2"'})
    code, out = _verify(run_cli, sidecar, policy)
    assert code == 1 and "not signed by any key" in out


def test_check_signs_a_verdict_that_verify_accepts(tmp_path: Path, run_cli: RunCli) -> None:
    work = tmp_path / "lowering"
    shutil.copytree(DATA, work)
    verdict = tmp_path / "verdict.intoto.json"
    code, _, err = run_cli("check", str(work / "six_classes.yaml"), "--source",
                           f"toyrt={work / 'tree'}", "--trust", str(work / "trust/policy.yaml"),
                           "--attest", str(work / "trust/test-key"), "--attest-out",
                           str(verdict), "--format", "json", "--output",
                           str(tmp_path / "r.json"))
    assert code == 0, err
    statement = json.loads(base64.b64decode(json.loads(verdict.read_text())["payload"]))
    assert statement["predicateType"] == "https://slsa.dev/verification_summary/v1"
    rows = {r["id"]: r for r in statement["predicate"]["residentkv.dev/rows"]}
    assert rows["toy/native/offloadable"]["class"] == "native_conformance"
    assert any(r.startswith("attested") for r in rows["toy/native/offloadable"]["roots"])
    uri = ("--resource-uri", f"residentkv:check:{work / 'six_classes.yaml'}")
    code, out = _verify(run_cli, verdict, work / "trust/policy.yaml", *uri)
    assert code == 0 and "PASSED" in out and "toy/native/offloadable: native_conformance" in out
    # the same key under a policy that does not let it sign verdicts
    _, no_verdicts = policy_file(tmp_path, ["toyrt.scheduler"], ["toyrt"], name="key")
    shutil.copyfile(work / "trust/test-key.pub", tmp_path / "key.pub")  # its entry: test-key
    code, out = _verify(run_cli, verdict, no_verdicts, *uri)
    assert code == 1 and "does not trust for verdicts" in out
    # the same verdict with one row's class raised: the signature no longer holds
    _tamper_payload(verdict, {'"class":"unknown_evidence"': '"class":"native_conformance"'})
    code, out = _verify(run_cli, verdict, work / "trust/policy.yaml", *uri)
    assert code == 1 and "not signed by any key" in out


@pytest.mark.parametrize("fmt", ["text", "md", "json", "sarif", "html"])
def test_every_report_format_names_the_root_of_each_granting_trace(run_cli: RunCli,
                                                                   fmt: str) -> None:
    code, out, err = run_cli("check", str(DATA / "six_classes.yaml"), "--source",
                             f"toyrt={TREE}", "--trust", str(TRUST), "--format", fmt)
    assert code == 0, err
    text = out.replace("&#x27;", "'")
    if fmt == "md":  # Markdown escapes every ASCII punctuation mark of user text
        text = re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", text)
    # the granting rows' trace anchors, each with its root (attested by the test key)
    for anchor in ("t_obs", "t_fail"):
        assert f"{anchor}: attested (signed by key 'test-key'" in text or (
            fmt in ("json", "sarif") and f'"{anchor}": "attested (signed by key' in text) or (
            fmt == "json" and '"root": "attested (signed by key' in text)
    assert text.count("attested (signed by key 'test-key'") >= 3


@pytest.mark.parametrize("doc", [
    '{"payloadType": 5, "payload": ["x"], "signatures": "none"}',  # two wrong types at once
    '[1]',
    '{"payloadType": "application/vnd.in-toto+json", "payload": "e30=", '
    '"signatures": [{"keyid": 7, "sig": null}]}',
])
def test_an_envelope_of_wrong_json_types_is_a_located_error(
        signed: tuple[Path, Path], run_cli: RunCli, tmp_path: Path, doc: str) -> None:
    _, policy = signed
    path = tmp_path / "t.jsonl.intoto.json"
    path.write_text(doc)
    code, out = _verify(run_cli, path, policy)
    assert code == 2, out
    assert f"{path}: error[L012 attestation_malformed]: not a DSSE envelope:" in out
    assert "Error" not in out.replace("error[", "")  # the user's terms, no Python exception
