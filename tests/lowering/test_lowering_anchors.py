"""Anchor verification against a source tree, a wheel and an sdist built here, and traces."""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml

from residentkv.lowering.anchors import (
    AnchorResult,
    Verifier,
    digest,
    make_anchor,
    normalise,
    python_symbols,
)
from residentkv.lowering.descriptor import DocAnchor, Row, SimAnchor, SourceAnchor, TraceAnchor
from residentkv.lowering.rules import TRACE_FILE_RULES, Evidence, weigh
from residentkv.lowering.sources import SourceError, open_root

DATA = Path(__file__).resolve().parents[1] / "data" / "lowering"
ROW_YAML = """
id: r
runtime: {name: toyrt, version: "0.1"}
mode: m
mechanism: adapter
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
TREE = DATA / "tree"
CFG_SHA = "99e6fe3bbeb52ae10fd354ba7e68ed19f728f706d898381574987e9dd14ee17e"


def src(**kw: object) -> SourceAnchor:
    base: dict[str, object] = {"kind": "source", "package": "toyrt", "path": "toyrt/cache.py"}
    return SourceAnchor.model_validate({**base, **kw})


def verify(root: Path | str, anchor: SourceAnchor | TraceAnchor, base: Path = DATA) -> tuple[
        str, str | None, str | None]:
    v = Verifier({"toyrt": open_root("toyrt", root)})
    r = v.verify("a1", anchor, base)
    return r.result, r.code, r.lines


def test_symbol_verified_in_tree() -> None:
    assert verify(TREE, src(symbol="RetentionConfig", sha256=CFG_SHA)) == (
        "verified", None, "8-16")


def test_method_and_module_names_resolve() -> None:
    spans = python_symbols((TREE / "toyrt/cache.py").read_text())
    assert spans["RetentionConfig.evictable"] == (15, 16)
    assert spans["DEFAULT_PRIORITY"] == (5, 5)


def test_drifted_symbol_reports_its_new_range(tmp_path: Path) -> None:
    text = (TREE / "toyrt/cache.py").read_text()
    moved = text.replace("DEFAULT_PRIORITY = 35\n", "DEFAULT_PRIORITY = 35\nOTHER = 1\n\n")
    moved = moved.replace("return self.duration_s is None",
                          "return False or self.duration_s is None")
    (tmp_path / "toyrt").mkdir()
    (tmp_path / "toyrt/cache.py").write_text(moved)
    result, code, lines = verify(tmp_path, src(symbol="RetentionConfig", lines="8-16",
                                               sha256=CFG_SHA))
    assert (result, code, lines) == ("drifted", "A001", "10-18")


def test_moved_but_unchanged_symbol_is_verified_at_new_lines(tmp_path: Path) -> None:
    text = (TREE / "toyrt/cache.py").read_text()
    (tmp_path / "toyrt").mkdir()
    (tmp_path / "toyrt/cache.py").write_text("# a new header line\n\n" + text)
    assert verify(tmp_path, src(symbol="RetentionConfig", lines="8-16", sha256=CFG_SHA)) == (
        "verified", None, "10-18")


def test_line_range_anchor_relocates_exact_text(tmp_path: Path) -> None:
    sha = digest((TREE / "toyrt/NOTES.txt").read_text().splitlines()[3:6])
    (tmp_path / "toyrt").mkdir()
    (tmp_path / "toyrt/NOTES.txt").write_text("intro\n" + (TREE / "toyrt/NOTES.txt").read_text())
    anchor = src(path="toyrt/NOTES.txt", lines="4-6", sha256=sha)
    assert verify(TREE, anchor) == ("verified", None, "4-6")
    assert verify(tmp_path, anchor) == ("verified", None, "5-7")


def test_quote_must_occur_in_the_range() -> None:
    hit = src(path="toyrt/NOTES.txt", lines="4-6", quote="still   evicted\nunder pressure")
    moved = src(path="toyrt/NOTES.txt", lines="1-2", quote="still evicted under pressure")
    miss = src(path="toyrt/NOTES.txt", lines="4-6", quote="never evicted")
    assert verify(TREE, hit)[0] == "verified"
    assert verify(TREE, moved) == ("verified", None, "5-6")
    assert verify(TREE, miss)[:2] == ("drifted", "A001")


def test_missing_file_and_symbol() -> None:
    assert verify(TREE, src(path="toyrt/gone.py", symbol="X", sha256=CFG_SHA))[:2] == (
        "missing", "A002")
    assert verify(TREE, src(symbol="RetentionConfig.pin", sha256=CFG_SHA))[:2] == (
        "missing", "A002")


def test_range_past_end_of_file_is_drift() -> None:
    anchor = src(path="toyrt/NOTES.txt", lines="5-99", quote="evicted under")
    assert verify(TREE, anchor)[:2] == ("drifted", "A001")


def test_unparsable_python_fails(tmp_path: Path) -> None:
    (tmp_path / "toyrt").mkdir()
    (tmp_path / "toyrt/cache.py").write_text("def broken(:\n")
    assert verify(tmp_path, src(symbol="broken", sha256=CFG_SHA))[:2] == ("failed", "A007")


def test_no_source_given_is_unverifiable() -> None:
    r = Verifier({}).verify("a1", src(symbol="RetentionConfig", sha256=CFG_SHA), DATA)
    assert (r.result, r.code) == ("unverifiable", "A003")


def test_doc_and_sim_are_unverifiable() -> None:
    v = Verifier({})
    doc = DocAnchor(kind="doc", url="https://example.invalid", quote="quoted sentence")
    sim = SimAnchor(kind="sim", scenario="soft_priority_conflict")
    assert v.verify("d", doc, DATA).result == "unverifiable"
    assert v.verify("s", sim, DATA).result == "unverifiable"


def test_path_traversal_refused_even_if_the_model_is_bypassed() -> None:
    anchor = SourceAnchor.model_construct(kind="source", package="toyrt",
                                          path="../six_classes.yaml", symbol=None, lines="1-2",
                                          sha256=None, quote="evicted under")
    assert verify(TREE, anchor)[:2] == ("failed", "A005")


def test_symlink_out_of_the_root_refused(tmp_path: Path) -> None:
    (tmp_path / "toyrt").mkdir()
    os.symlink(DATA / "six_classes.yaml", tmp_path / "toyrt" / "link.txt")
    assert verify(tmp_path, src(path="toyrt/link.txt", lines="1-2", quote="evicted under"))[:2] == (
        "failed", "A005")


def _wheel(path: Path, extra: dict[str, bytes] | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for f in (TREE / "toyrt").iterdir():
            z.write(f, f"toyrt/{f.name}")
        z.writestr("toyrt-0.1.dist-info/METADATA", "Name: toyrt\nVersion: 0.1\n")
        for name, data in (extra or {}).items():
            z.writestr(zipfile.ZipInfo(name), data)
    return path


def test_wheel_read_in_place(tmp_path: Path) -> None:
    whl = _wheel(tmp_path / "toyrt-0.1-py3-none-any.whl")
    assert verify(whl, src(symbol="RetentionConfig", sha256=CFG_SHA)) == (
        "verified", None, "8-16")
    assert not list(tmp_path.glob("toyrt/*")), "nothing extracted"


def test_zip_slip_members_are_never_indexed(tmp_path: Path) -> None:
    whl = _wheel(tmp_path / "evil.whl", {"../evil.py": b"X = 1\n", "/abs.py": b"X = 1\n",
                                         "toyrt/../../evil2.py": b"X = 1\n"})
    root = open_root("toyrt", whl)
    assert sorted(root.refused_members) == ["../evil.py", "/abs.py", "toyrt/../../evil2.py"]
    anchor = SourceAnchor.model_construct(kind="source", package="toyrt", path="../evil.py",
                                          symbol="X", lines=None, sha256=CFG_SHA, quote=None)
    assert Verifier({"toyrt": root}).verify("a", anchor, DATA).result == "failed"
    assert root.read("evil.py") is None


def test_sdist_tarball_strips_its_top_directory(tmp_path: Path) -> None:
    sdist = tmp_path / "toyrt-0.1.tar.gz"
    with tarfile.open(sdist, "w:gz") as t:
        t.add(TREE / "toyrt", arcname="toyrt-0.1/toyrt")
        info = tarfile.TarInfo("toyrt-0.1/../../slip.py")
        info.size = 0
        t.addfile(info, io.BytesIO(b""))
    root = open_root("toyrt", sdist)
    assert root.refused_members == ["toyrt-0.1/../../slip.py"]
    assert verify(sdist, src(symbol="RetentionConfig", sha256=CFG_SHA))[0] == "verified"
    assert len(root.digest() or "") == 64


@pytest.mark.parametrize("bad", ["nope/", "x.rar"])
def test_unusable_source_is_a_user_error(tmp_path: Path, bad: str) -> None:
    target = tmp_path / bad
    if bad.endswith(".rar"):
        target.write_bytes(b"x")
    with pytest.raises(SourceError):
        open_root("toyrt", target)


def test_corrupt_wheel_is_a_user_error(tmp_path: Path) -> None:
    (tmp_path / "bad.whl").write_bytes(b"not a zip")
    with pytest.raises(SourceError):
        open_root("toyrt", tmp_path / "bad.whl")


def test_normalisation_ignores_indentation_and_trailing_space() -> None:
    a = ["    def f():", "        return 1   ", ""]
    b = ["", "def f():", "    return 1"]
    assert normalise(a) == normalise(b) == "def f():\n    return 1\n"
    assert digest(a) == digest(b)
    assert digest(["def f():", "    return 2"]) != digest(b)


def test_make_anchor_round_trips() -> None:
    root = open_root("toyrt", TREE)
    made = make_anchor(root, "toyrt/cache.py:RetentionConfig", "0.1")
    assert made["sha256"] == CFG_SHA and made["lines"] == "8-16"
    lines = make_anchor(root, "toyrt/NOTES.txt:4-6")
    assert verify(TREE, SourceAnchor.model_validate(lines))[0] == "verified"
    with pytest.raises(ValueError):
        make_anchor(root, "toyrt/cache.py:Nope")


def _pin(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def _trace(gate: str, claim: str, path: str = "traces/witness.jsonl", *, pin: bool = True,
           base: Path = DATA) -> TraceAnchor:
    return TraceAnchor(kind="trace", path=path, gate=gate, claim=claim,
                       sha256=_pin(base / path) if pin else None)


@pytest.mark.parametrize(("anchor", "expected"), [
    (_trace("observation", "c-1"), ("verified", None)),
    (_trace("failure_outcome", "c-1"), ("verified", None)),
    (_trace("lifecycle", "c-1"), ("verified", None)),
    (_trace("attribution", "c-1"), ("failed", "A004")),
    (_trace("failure_outcome", "c-obs", "traces/observe_only.jsonl"), ("failed", "A004")),
    (_trace("failure_outcome", "c-fb", "traces/fallback.jsonl"), ("failed", "A008")),
    # no event concerns an absent claim: no control fires for it (SPEC §9.1), the gate fails
    (_trace("observation", "c-404"), ("failed", "A004")),
    (_trace("observation", "c-1", "traces/nope.jsonl"), ("missing", "A002")),
])
def test_trace_anchors_run_their_gate(anchor: TraceAnchor, expected: tuple[str, str]) -> None:
    r = Verifier().verify("t", anchor, DATA)
    assert (r.result, r.code) == expected


def _rewrite(tmp_path: Path, first: str | None) -> TraceAnchor:
    """witness.jsonl with its stream_started line replaced (or dropped when *first* is None)."""
    lines = (DATA / "traces/witness.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "t.jsonl").write_text((first or "") + "".join(lines[1:]))
    return _trace("observation", "c-1", "t.jsonl", base=tmp_path)


def _started(emitter: str, runtime: str = "toyrt") -> str:
    return json.dumps({"schema": "residentkv.event/v1", "seq": 0, "ts_ns": 1,
                       "source": "x", "event": "stream_started", "claim_id": None,
                       "request_id": None, "emitter": {"name": emitter, "version": "1"},
                       "runtime": {"name": runtime, "version": "0.1"}}) + "\n"


def _weighed(anchor: TraceAnchor, base: Path) -> AnchorResult:
    """The anchor verified, then weighed by the rules no row changes (the trace file's own)."""
    v = Verifier()
    r = v.verify("t", anchor, base)
    sha = v.trace_inputs.get(str(base / anchor.path))
    row = Row.model_validate(yaml.safe_load(ROW_YAML))
    ev = Evidence(anchor=anchor, row=row, releases=frozenset(), sources={},
                  facts=v.facts_of(sha) if sha else None)
    return weigh(ev, r, TRACE_FILE_RULES).result


def test_a_trace_without_provenance_is_only_cited(tmp_path: Path) -> None:
    r = _weighed(_rewrite(tmp_path, None), tmp_path)
    assert (r.result, r.code) == ("unverifiable", "A011")


@pytest.mark.parametrize("emitter", ["residentkv.microruntime", "ResidentKV.MicroRuntime",
                                     "residentkv_microruntime", "residentkv-microruntime"])
def test_a_simulator_emitter_is_recognised_exact_after_normalisation(
        tmp_path: Path, emitter: str) -> None:
    # a name only ever demotes: a folded look-alike of the simulator's name is cited too
    r = _weighed(_rewrite(tmp_path, _started(emitter)), tmp_path)
    assert (r.result, r.code) == ("unverifiable", "A003")


@pytest.mark.parametrize(("emitter", "runtime", "version"), [
    (" residentkv.vllm ", "toyrt", "0.1"), ("residentkv.vllm", "toy rt", "0.1"),
    ("residentkv.vllm", "toyrt", " 0.1"), ("residentkv\nvllm", "toyrt", "0.1")])
def test_a_provenance_name_or_version_with_whitespace_is_refused(
        tmp_path: Path, emitter: str, runtime: str, version: str) -> None:
    # names and versions compare exactly: one that would need trimming names nothing
    line = json.dumps({"event": "stream_started", "schema": "residentkv.event/v1", "seq": 0,
                       "ts_ns": 1, "source": "t", "claim_id": None, "request_id": None,
                       "emitter": {"name": emitter, "version": "1"},
                       "runtime": {"name": runtime, "version": version}}) + "\n"
    r = _weighed(_rewrite(tmp_path, line), tmp_path)
    assert (r.result, r.code) == ("unverifiable", "A011")


@pytest.mark.parametrize("emitter", ["residentkv.vllm", "micro.runtime.x", "toyrt.scheduler"])
def test_provenance_is_reported_as_typed_and_decides_nothing(tmp_path: Path,
                                                             emitter: str) -> None:
    r = _weighed(_rewrite(tmp_path, _started(emitter)), tmp_path)
    assert r.result == "verified" and r.provenance is not None
    assert r.provenance.emitter == emitter and r.root is None


def test_an_unpinned_trace_is_only_cited() -> None:
    r = _weighed(_trace("observation", "c-1", pin=False), DATA)
    assert (r.result, r.code) == ("unverifiable", "A010")


def test_a_pin_that_differs_from_the_file_is_drift() -> None:
    anchor = _trace("observation", "c-1").model_copy(update={"sha256": "0" * 64})
    r = _weighed(anchor, DATA)
    assert (r.result, r.code) == ("drifted", "A001")


def test_trace_gate_results_are_cached_per_digest_gate_claim() -> None:
    v = Verifier()
    first = v.verify("t1", _trace("observation", "c-1"), DATA)
    second = v.verify("t2", _trace("observation", "c-1"), DATA)
    assert (first.id, second.id) == ("t1", "t2")
    assert len(v._gates) == 1
    assert list(v.trace_inputs) == [str(DATA / "traces/witness.jsonl")]


def test_empty_trace_fails(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_text("")
    r = Verifier().verify("t", _trace("observation", "c-1", "empty.jsonl"), tmp_path)
    assert r.result == "failed"


@pytest.mark.parametrize("source", ["microruntime", "MicroRuntime", "residentkv.vllm.x",
                                    "ResidentKV.vllm.scheduler", " residentkv.vllm",
                                    "residentkv_vllm.scheduler"])
def test_the_events_own_source_never_decides_provenance(tmp_path: Path, source: str) -> None:
    text = (DATA / "traces/witness.jsonl").read_text()
    (tmp_path / "t.jsonl").write_text(text.replace('"source":"testdata"', f'"source":"{source}"'))
    r = _weighed(_trace("observation", "c-1", "t.jsonl", base=tmp_path), tmp_path)
    assert (r.result, r.code) == ("verified", None)
    assert r.provenance is not None and r.provenance.emitter == "toyrt.scheduler"


# --- anchors verify fails closed when it verified nothing --------------------------------------

SOURCE_ONLY = """schema: residentkv.descriptor/v1
rows:
  - id: toy/source-only
    runtime: {name: toyrt, version: "0.1"}
    mode: "a row whose only evidence is one source anchor (test data)"
    mechanism: native
    lowers: offloadable
    asserts: conformance
    obligations:
      claim_identity:            {status: partial, evidence: [s_emit]}
      materialization_predicate: {status: unknown, evidence: []}
      ordered_lifecycle:         {status: unknown, evidence: []}
      claim_scoped_outcomes:     {status: unknown, evidence: []}
    anchors:
      s_emit: {kind: source, package: toyrt, version: "0.1", path: toyrt/events.py,
               symbol: EMITTER,
               sha256: c979e50600873c088f6c03a571e87f136935536dcfe0029b0a0e8f373ed12dea}
    expect: unknown_evidence
    boundary: "test data"
"""


def test_anchors_verify_that_verified_nothing_fails(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Every anchor unverifiable (no --source, no cache) is not a pass: exit 1, with A050."""
    desc = tmp_path / "d.yaml"
    desc.write_text(SOURCE_ONLY)
    cache = tmp_path / "empty-cache"
    cache.mkdir()
    for extra in (["--no-cache"], ["--cache", str(cache)]):
        code, out, _ = run_cli("anchors", "verify", str(desc), *extra)
        assert code == 1, out
        assert "s_emit source unverifiable" in out
        assert f"{desc}: error[A050 nothing_verified]" in out
    code, out, _ = run_cli("anchors", "verify", str(desc), "--no-cache", "--source",
                           f"toyrt={TREE}")
    assert code == 0 and "s_emit source verified" in out and "A050" not in out


# --- one way to count lines ---------------------------------------------------------------

#: every character str.splitlines() ends a line at, besides \n, \r\n and \r
SEPARATORS = ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


@pytest.mark.parametrize("sep", [*SEPARATORS, "\r\n"], ids=repr)
def test_make_and_verify_count_lines_alike(tmp_path: Path, sep: str, run_cli) -> None:  # type: ignore[no-untyped-def]
    """A separator in a comment or string must not shift a window: ``anchors make`` and
    ``anchors verify`` (symbol and line-range anchors) agree, on ``\\n``-counted lines."""
    nl = "\r\n" if sep == "\r\n" else "\n"
    body = nl.join([
        "# a comment with a separator" + (sep if sep != "\r\n" else "") + " inside it",
        'NOTE = "text with a separator' + (sep if sep != "\r\n" else "") + ' in a string"',
        "",
        "def evict(block):",
        "    drop(block)  # separator" + (sep if sep != "\r\n" else "") + "here",
        "    return block",
        "",
    ])
    pkg = tmp_path / "tree" / "m"
    pkg.mkdir(parents=True)
    (pkg / "pool.py").write_bytes(body.encode("utf-8"))
    root = open_root("m", tmp_path / "tree")
    by_symbol = make_anchor(root, "m/pool.py:evict")
    assert by_symbol["lines"] == "4-6"  # what sed -n and editors show
    by_range = make_anchor(root, "m/pool.py:1-6")
    for anchor in (by_symbol, by_range):
        result = Verifier({"m": root}).verify("a1", SourceAnchor.model_validate(anchor), DATA)
        assert (result.result, result.lines) == ("verified", anchor["lines"]), result.detail
    code, out, _ = run_cli("anchors", "make", "m/pool.py:evict", "--source",
                           f"m={tmp_path / 'tree'}")
    assert code == 0 and "lines: 4-6" in out


# --- one read per trace, however many anchors cite it ---------------------------------------

def test_a_trace_is_read_once_however_many_anchors_cite_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from residentkv.trace.gates import GATE_NAMES, check_trace
    from residentkv.trace.reader import TraceReader

    anchors = [_trace(g, c) for g in GATE_NAMES for c in ("c-1", "c-2", "c-404")]
    # what each anchor's gate says on its own (read here before counting starts)
    alone = {(a.gate, a.claim): check_trace(DATA / a.path, [a.gate], a.claim) for a in anchors}
    reads: list[str] = []
    real_init = TraceReader.__init__

    def counting_init(self: TraceReader, path: object, **kw: object) -> None:
        reads.append(str(path))
        real_init(self, path, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(TraceReader, "__init__", counting_init)
    v = Verifier()
    results = [v.verify(f"t{i}", a, DATA) for i, a in enumerate(anchors)]
    assert reads == [str((DATA / "traces/witness.jsonl").resolve())]
    for a, r in zip(anchors, results, strict=True):
        check = alone[(a.gate, a.claim)]
        ok = all(x.passed for x in check.results) and not check.problem_count
        assert (r.result == "verified") == ok, (a, r.detail)
        fired = {k for x in check.results for k, on in x.controls.items() if on}
        assert set(r.controls) == fired


def test_a_trace_that_changes_while_judged_is_refused(tmp_path: Path) -> None:
    from residentkv.lowering.trace_runs import TraceRuns, trace_key

    trace = tmp_path / "t.jsonl"
    trace.write_bytes((DATA / "traces" / "witness.jsonl").read_bytes())
    key = trace_key(trace, _pin(trace) or "")
    with trace.open("ab") as fh:
        fh.write(b"\n")
    with pytest.raises(Exception, match="changed while it was read"):
        TraceRuns().run(key)
