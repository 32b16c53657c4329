"""Fuzz the commands that read user files: never exit 101, never hang past the bound, and never
grant from a mutant what its parent did not grant.

A short derandomized run is part of every test run; ``make fuzz-inputs`` runs the same tests
randomized for ``RESIDENTKV_FUZZ_SECONDS`` seconds in total (see ``tests/fuzz/fuzz_harness.py``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from fuzz_harness import assert_no_crash, fuzz, write
from hypothesis import given
from hypothesis import strategies as st
from input_strategies import archive, artifact_trace, descriptor_text, v1_trace

from residentkv.lowering.check import run_check
from residentkv.lowering.classify import GRANTING, RANK
from residentkv.suite.runner import shipped_suite

DATA = Path(__file__).resolve().parents[1] / "data" / "lowering"
BASE_TRACE = (DATA / "traces/witness.jsonl").read_text().splitlines()
BASE_DESCRIPTOR = (DATA / "six_classes.yaml").read_text()
FORMATS = st.sampled_from(["text", "json", "md"])


def _scratch() -> Path:
    return Path(tempfile.mkdtemp(prefix="residentkv-fuzz-"))


@fuzz
@given(trace=v1_trace(BASE_TRACE), fmt=FORMATS, stdin=st.booleans())
def test_trace_check_never_crashes(trace: bytes, fmt: str, stdin: bool) -> None:
    folder = _scratch()
    try:
        path = write(folder, "t.jsonl", trace)
        args = ["trace", "check", "-" if stdin else str(path), "--format", fmt]
        assert_no_crash(args, stdin=trace if stdin else None)
    finally:
        shutil.rmtree(folder)


@fuzz
@given(trace=artifact_trace(), stdin=st.booleans())
def test_trace_import_never_crashes(trace: bytes, stdin: bool) -> None:
    folder = _scratch()
    try:
        path = write(folder, "a.jsonl", trace)
        out = folder / "v1.jsonl"
        args = ["trace", "import", "--dialect", "resident-kv-artifact",
                "-" if stdin else str(path), "-o", str(out)]
        code, _ = assert_no_crash(args, stdin=trace if stdin else None)
        if code != 2 and out.exists():
            for line in out.read_text().splitlines():  # NaN/Infinity tokens, not "c-NaN"
                json.loads(line, parse_constant=_refuse_constant)
            assert_no_crash(["trace", "check", str(out)])  # what we write, we can read
    finally:
        shutil.rmtree(folder)


def _refuse_constant(token: str) -> None:
    raise AssertionError(f"the importer wrote the non-JSON token {token}")


def _evidence_copy() -> Path:
    folder = _scratch()
    shutil.copytree(DATA / "traces", folder / "traces")
    shutil.copytree(DATA / "tree", folder / "tree")
    return folder


@fuzz
@given(text=descriptor_text(BASE_DESCRIPTOR), fmt=st.sampled_from(["text", "json", "md",
                                                                   "sarif"]))
def test_check_never_crashes(text: str, fmt: str) -> None:
    folder = _evidence_copy()
    try:
        path = write(folder, "d.yaml", text.encode("utf-8", "surrogatepass"))
        assert_no_crash(["check", str(path), "--source", f"toyrt={folder / 'tree'}",
                         "--format", fmt])
    finally:
        shutil.rmtree(folder)


CASES = sorted(p.name for p in shipped_suite().iterdir()
               if p.is_dir() and not p.name.startswith(("_", ".")))
CASE_EDITS = st.sampled_from([
    lambda t: t, lambda t: t.replace("descriptor: ", "descriptor: ../", 1),
    lambda t: t.replace("shared:toyrt", "shared:../../..", 1),
    lambda t: t.replace("path: ", "path: /etc/", 1),
    lambda t: t.replace("codes: [", "codes: [[", 1), lambda t: t + "\nsurprise: [1]\n",
    lambda t: t.replace("kind: ", "kind: [/x] ", 1), lambda t: t[: len(t) // 2],
])


#: what else a case folder may hold: nothing, a FIFO, a sparse 1 TiB file, a sparse 4 MiB one
EXTRAS = st.sampled_from([None, "fifo", "sparse-1TiB", "sparse-4MiB"])


@fuzz
@given(case=st.sampled_from(CASES), edit=CASE_EDITS,
       link=st.sampled_from([None, "/", "..", "../..", "loop", "_shared->/"]), extra=EXTRAS)
def test_suite_cases_never_crash_or_leave_their_folder(case: str, edit: object,
                                                       link: str | None,
                                                       extra: str | None) -> None:
    folder = _scratch()
    try:
        suite = folder / "suite"
        shutil.copytree(shipped_suite() / "_shared", suite / "_shared")
        shutil.copytree(shipped_suite() / case, suite / case)
        yaml = suite / case / "case.yaml"
        yaml.write_text(edit(yaml.read_text()))  # type: ignore[operator]
        if link == "loop":
            os.symlink(suite / case / "b", suite / case / "a")
            os.symlink(suite / case / "a", suite / case / "b")
        elif link == "_shared->/":  # the whole shared folder is a link to the root
            shutil.rmtree(suite / "_shared")
            os.symlink("/", suite / "_shared")
            yaml.write_text(yaml.read_text().replace("shared:toyrt", "shared:etc"))
        elif link is not None:
            shutil.rmtree(suite / "_shared" / "toyrt")
            os.symlink(link, suite / "_shared" / "toyrt")
        refused = _add_extra(suite / case, extra)
        code, _ = assert_no_crash(["suite", str(suite), "--mutants", "3"])
        # "_shared/toyrt -> .." stays inside the suite (the suite folder itself): a case that
        # never reads its source tree (a bundle refused first, say) may pass with it
        if link not in (None, "loop", "..") and re.search("shared:(toyrt|etc)",
                                                            yaml.read_text()):
            assert code == 1  # a case reading a shared tree that links out never passes
        if refused:
            assert code == 1  # a special or sparse file fails its case before any copy
    finally:
        shutil.rmtree(folder)


def _add_extra(case: Path, extra: str | None) -> bool:
    """Put *extra* into the case folder; whether the suite must refuse it."""
    if extra == "fifo":
        os.mkfifo(case / "pipe")
        return True
    if extra is None:
        return False
    blob = case / "blob"
    with blob.open("wb") as fh:  # a hole: nothing written, nothing allocated
        fh.truncate(1 << 40 if extra == "sparse-1TiB" else 4 << 20)
    # over the size limit, or a hole this file system did not allocate
    return extra == "sparse-1TiB" or blob.stat().st_blocks * 512 * 2 < blob.stat().st_size


ANCHOR_ROW = """schema: residentkv.descriptor/v1
rows:
  - id: r
    runtime: {name: p}
    mode: m
    mechanism: native
    lowers: offloadable
    asserts: substrate
    boundary: b
    obligations:
      claim_identity: {status: absent, evidence: [a1]}
      materialization_predicate: {status: absent, evidence: [a2]}
      ordered_lifecycle: {status: absent, evidence: [a1]}
      claim_scoped_outcomes: {status: absent, evidence: [a1]}
    anchors:
      a1: {kind: source, package: p, path: p/x.py, lines: "1-2", quote: "X = 1 X = 1"}
      a2: {kind: source, package: p, path: p/big.py, lines: "1-1", quote: "000000"}
"""


@fuzz
@given(arc=archive())
def test_archives_never_crash(arc: tuple[str, bytes]) -> None:
    folder = _scratch()
    try:
        name, data = arc
        path = write(folder, name, data)
        desc = write(folder, "d.yaml", ANCHOR_ROW.encode())
        assert_no_crash(["check", str(desc), "--source", f"p={path}"])
        assert_no_crash(["anchors", "verify", str(desc), "--source", f"p={path}"])
    finally:
        shutil.rmtree(folder)


# --- never grant from a mutant what its parent did not grant --------------------------------

TRACE_EDITS = st.sampled_from([
    ("drop the provenance", lambda ls: ls[1:]),
    ("emitter renamed like the adapter",
     lambda ls: [ls[0].replace('"toyrt.scheduler"', '"ResidentKV.vllm"'), *ls[1:]]),
    ("emitter renamed like the simulator",
     lambda ls: [ls[0].replace('"toyrt.scheduler"', '"MicroRuntime"'), *ls[1:]]),
    ("emitter case and separators", lambda ls: [ls[0].replace('"toyrt.scheduler"',
                                                              '" TOYRT_scheduler"'), *ls[1:]]),
    ("another runtime release", lambda ls: [ls[0].replace('"version":"0.1"}',
                                                          '"version":"0.2"}'), *ls[1:]]),
    ("claims become soft_priority", lambda ls: [ln.replace('"offloadable"', '"soft_priority"')
                                                for ln in ls]),
    ("claims become expiring", lambda ls: [ln.replace('"offloadable"', '"expiring"')
                                           for ln in ls]),
    ("sources claim the adapter", lambda ls: [ln.replace('"source":"testdata"',
                                                         '"source":"residentkv.vllm"')
                                              for ln in ls]),
    ("drop the last refusal", lambda ls: [ln for ln in ls
                                          if "active_request_refused" not in ln]),
    ("drop every third line", lambda ls: [ln for i, ln in enumerate(ls) if i % 3]),
])
DESCRIPTOR_EDITS = st.sampled_from([
    ("unpin a trace", lambda t: re.sub(r",\n\s+sha256: [0-9a-f]{64}\}", "}", t, count=1)),
    ("native for adapter", lambda t: t.replace("mechanism: adapter", "mechanism: native")),
    ("another mode", lambda t: t.replace("lowers: offloadable", "lowers: expiring")),
    ("drop the emitter anchor", lambda t: t.replace(", s_emit]", "]").replace(
        "      s_emit: {", "      x_unused: {")),
    ("no source", lambda t: t),
])


#: trace edits after which the trace is no longer shown to be written by the runtime itself
NOT_THE_RUNTIMES_OWN = frozenset({"drop the provenance", "emitter renamed like the adapter",
                                  "emitter renamed like the simulator",
                                  "emitter case and separators"})


def _classes(path: Path, source: Path | None) -> dict[str, str]:
    result = run_check([path], [f"toyrt={source}"] if source else [])
    return {r.id: r.klass for r in result.rows}


@fuzz
@given(trace_edit=TRACE_EDITS, desc_edit=DESCRIPTOR_EDITS, repin=st.booleans())
def test_mutants_never_grant_what_the_parent_did_not(
        trace_edit: tuple[str, object], desc_edit: tuple[str, object], repin: bool) -> None:
    folder = _evidence_copy()
    try:
        text = desc_edit[1](BASE_DESCRIPTOR)  # type: ignore[operator]
        source = None if desc_edit[0] == "no source" else folder / "tree"
        # Two parents: the shipped descriptor, and the edited descriptor on the untouched trace.
        # "native for adapter" asserts more than the shipped row, and the untouched trace is
        # the runtime's own emitter's, so only the second bounds what the child may get there.
        parents = _classes(write(folder, "parent.yaml", BASE_DESCRIPTOR.encode()),
                           folder / "tree")
        same = _classes(write(folder, "same.yaml", text.encode()), source)
        lines = (folder / "traces/witness.jsonl").read_text().splitlines()
        mutated = "\n".join(trace_edit[1](lines)) + "\n"  # type: ignore[operator]
        (folder / "traces/witness.jsonl").write_text(mutated)
        if repin:  # an attacker who edits the trace also edits the pins
            digest = hashlib.sha256(mutated.encode()).hexdigest()
            old = hashlib.sha256((DATA / "traces/witness.jsonl").read_bytes()).hexdigest()
            text = text.replace(old, digest)
        child = write(folder, "child.yaml", text.encode())
        for rid, klass in _classes(child, source).items():
            if klass not in GRANTING:
                continue
            why = f"{trace_edit[0]} / {desc_edit[0]}: {rid} -> {klass}: {mutated[:300]!r}"
            bounds = [same] if desc_edit[0] == "native for adapter" else [same, parents]
            for bound in bounds:
                before = bound.get(rid)
                assert before in GRANTING and RANK[klass] >= RANK[before], f"{before}; {why}"
            if trace_edit[0] in NOT_THE_RUNTIMES_OWN:
                assert klass != "native_conformance", why
    finally:
        shutil.rmtree(folder)
