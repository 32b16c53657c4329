"""``residentkv check``: load descriptors and bundles, verify anchors, classify every row.

The result is a value (:class:`CheckResult`) whose JSON form (:func:`residentkv.report.json_report.
to_json`) is canonical; every report renders that JSON and none re-evaluates.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from residentkv.errors import UsageError
from residentkv.findings import Finding
from residentkv.lowering.anchors import AnchorResult, Verifier
from residentkv.lowering.bundles import SHORT, Bundle, load_bundles
from residentkv.lowering.classify import GRANTING, Verdict, classify
from residentkv.lowering.descriptor import (
    Anchor,
    LoadedDescriptor,
    LoadedRow,
    Row,
    SourceAnchor,
    TraceAnchor,
    read_descriptor,
)
from residentkv.lowering.rules import Evidence, weigh
from residentkv.lowering.sources import SourceRoot, confined, open_root, parse_source_option
from residentkv.trust.roots import ATTEST_HELP, TraceTrust

CHECK_SCHEMA = "residentkv.check/v1"
GLOBAL_BOUNDARY = (
    "residentkv judges the evidence given, not unaudited behaviour: a class says what the "
    "cited and verified anchors show about this mapping, not that the runtime behaves so in "
    "every run, version or configuration."
)
CONFORMANT = ("native_conformance", "adapter_policy_evidence")


class RowResult(BaseModel):
    """Everything reported about one row."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    path: str
    line: int | None
    runtime: str | None
    mode: str | None
    mechanism: str | None
    lowers: str | None
    asserts: str | None
    klass: str
    rule: int
    expect: str | None
    bundle: str | None
    boundary: str
    verdict: Verdict | None
    anchors: list[AnchorResult]
    reasons: list[str]
    findings: list[Finding]


class CheckResult(BaseModel):
    """The result of one ``check`` run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    inputs: list[dict[str, str]]
    rows: list[RowResult]

    @property
    def exit_code(self) -> int:
        """1 if any row has an error finding (mismatch, overclaim, invalid row), else 0."""
        return int(any(f.severity == "error" for r in self.rows for f in r.findings))


def example_paths() -> list[str]:
    """The example descriptors shipped in the package (``check --examples``)."""
    folder = resources.files("residentkv").joinpath("data", "descriptors", "examples")
    return [str(f) for f in sorted(folder.iterdir(), key=lambda f: f.name)
            if f.name.endswith((".yaml", ".yml"))]


def open_sources(options: Sequence[str]) -> dict[str, SourceRoot]:
    """``--source NAME=PATH`` options -> opened roots (a name given twice is a usage error)."""
    roots: dict[str, SourceRoot] = {}
    for opt in options:
        name, path = parse_source_option(opt)
        if name in roots:
            raise UsageError(f"--source {name} given twice; expected one root per package")
        roots[name] = open_root(name, path)
    return roots


def run_check(
    descriptors: Sequence[str | Path],
    sources: Sequence[str] = (),
    bundles_dir: str | Path | None = None,
    *,
    verifier: Verifier | None = None,
    trust: TraceTrust | None = None,
) -> CheckResult:
    """Check every row of every descriptor file (file-level problems raise, exit code 2).

    *trust* holds the roots of trust of this run (live traces, the trust policy); without it
    only the package root can make a trace grant (SPEC §7.1).
    """
    if not descriptors:
        raise UsageError("no descriptor given; expected at least one DESCRIPTOR file")
    bundles = load_bundles(bundles_dir)
    verifier = verifier or Verifier(open_sources(sources))
    trust = trust or TraceTrust()
    loaded = [read_descriptor(p, set(bundles)) for p in descriptors]
    rows = []
    for i, d in enumerate(loaded):
        context = _Context(d, verifier, trust)
        rows += [_check_row(r, bundles, verifier, context) for r in _dedupe(d, loaded[:i])]
    return CheckResult(inputs=_inputs(loaded, bundles, verifier), rows=rows)


class _Context:
    """What the whole descriptor verified (the releases its source roots declare, for trace
    provenance) and the roots of trust of this run."""

    def __init__(self, d: LoadedDescriptor | None = None, verifier: Verifier | None = None,
                 trust: TraceTrust | None = None) -> None:
        self.releases: set[tuple[str, str]] = set()
        self.trust = trust or TraceTrust()
        roots = set()
        for lr in d.rows if d is not None and verifier is not None else ():
            assert verifier is not None
            for aid, a in (lr.row.anchors.items() if lr.row is not None else ()):
                if not isinstance(a, SourceAnchor):
                    continue
                r = verifier.verify(aid, a, Path(lr.path).parent)
                root = verifier.root_for(a)
                if r.result == "verified" and root is not None:
                    roots.add(root)
        for root in roots:
            self.releases |= root.releases()


def _dedupe(d: LoadedDescriptor, before: list[LoadedDescriptor]) -> list[LoadedRow]:
    """Flag a row id already used in an earlier file (within a file the loader flags it)."""
    earlier = {r.row_id: e.path for e in before for r in e.rows}
    out = []
    for r in d.rows:
        if r.row_id in earlier:
            line, col = r.loc("id")
            dup = Finding(code="D010", path=r.path, line=line, col=col,
                          message=f"row id {r.row_id!r} already used in {earlier[r.row_id]}; "
                                  "expected unique ids", help="give each row its own id")
            r = r.model_copy(update={"row": None, "findings": [*r.findings, dup]})
        out.append(r)
    return out


def _check_row(lr: LoadedRow, bundles: dict[str, Bundle], verifier: Verifier,
               context: _Context | None = None) -> RowResult:
    raw = lr.raw
    base = {
        "id": lr.row_id, "path": lr.path, "line": lr.line, "runtime": _runtime(raw.get("runtime")),
        "mode": _str(raw.get("mode")), "mechanism": _str(raw.get("mechanism")),
        "lowers": _str(raw.get("lowers")), "asserts": _str(raw.get("asserts")),
        "expect": _str(raw.get("expect")),
        "boundary": _str(raw.get("boundary")) or "(no boundary given: the row is invalid)",
    }
    if lr.row is None:
        reason = f"row invalid ({len(lr.findings)} finding(s)): unknown_evidence (fail-closed)"
        return _finish(lr, RowResult(**base, klass="unknown_evidence", rule=0, bundle=None,
                                     verdict=None, anchors=[], reasons=[reason],
                                     findings=list(lr.findings)))
    row, bundle = lr.row, bundles[lr.row.lowers]
    base_dir = Path(lr.path).parent
    context = context or _Context()
    verified = {aid: verifier.verify(aid, a, base_dir) for aid, a in row.anchors.items()}
    weighed = {aid: weigh(_evidence(a, row, base_dir, verifier, context), verified[aid])
               for aid, a in row.anchors.items()}
    results = {aid: w.result for aid, w in weighed.items()}
    untrusted = {aid: w.untrusted for aid, w in weighed.items()}
    verdict = _invalid_view(_with_roots(classify(row, results, bundle), results), results)
    findings = (_anchor_findings(lr, results) + _obligation_findings(lr, verdict)
                + _untrusted_findings(lr, row, untrusted, results, verdict, bundle))
    return _finish(lr, RowResult(**base, klass=verdict.klass, rule=verdict.rule,
                                 bundle=f"{bundle.mode}@v{bundle.version}", verdict=verdict,
                                 anchors=list(results.values()), reasons=verdict.reasons,
                                 findings=findings))


def _evidence(a: Anchor, row: Row, base_dir: Path, verifier: Verifier,
              context: _Context) -> Evidence:
    """What the row rules may read about anchor *a* of *row* (after it was verified)."""
    ev = Evidence(anchor=a, row=row, releases=frozenset(context.releases),
                  sources=verifier.sources)
    if isinstance(a, SourceAnchor):
        return replace(ev, source_root=verifier.root_for(a))
    if isinstance(a, TraceAnchor):
        sha = verifier.trace_inputs.get(str(base_dir / a.path))
        return replace(ev, facts=verifier.facts_of(sha) if sha is not None else None,
                       path=confined(base_dir.resolve(), a.path), trust=context.trust)
    return ev


def _with_roots(verdict: Verdict, results: dict[str, AnchorResult]) -> Verdict:
    """A granting verdict names the root of trust of every trace it rests on (SPEC §7.1)."""
    rooted = [f"{aid}: {r.root}" for aid, r in results.items() if r.root is not None]
    if verdict.klass not in GRANTING or not rooted:
        return verdict
    return verdict.model_copy(update={
        "reasons": [*verdict.reasons, "roots of trust: " + "; ".join(rooted)]})


def _invalid_view(verdict: Verdict, results: dict[str, AnchorResult]) -> Verdict:
    """An anchor that is an error of the descriptor itself (an anchor version its root's
    metadata denies, A031) makes the row invalid: unknown_evidence, whatever else it shows."""
    bad = sorted(f"{aid} ({r.code})" for aid, r in results.items() if r.code in ERROR_CODES)
    if not bad:
        return verdict
    return verdict.model_copy(update={
        "klass": "unknown_evidence", "rule": 0,
        "reasons": [*verdict.reasons, f"row invalid: anchor(s) {', '.join(bad)} contradict "
                                      "their source root: unknown_evidence (fail-closed)"]})


def _untrusted_findings(lr: LoadedRow, row: Row, bound: dict[str, AnchorResult],
                        results: dict[str, AnchorResult], verdict: Verdict,
                        bundle: Bundle) -> list[Finding]:
    """A row that would have granted had its cited traces a root of trust says so, with how
    to attest them (it is never granted)."""
    if verdict.klass in GRANTING:
        return []
    would = classify(row, bound, bundle)
    if would.klass not in GRANTING:
        return []
    cited = sorted(aid for aid, r in results.items()
                   if r.code in UNROOTED and bound[aid].result == "verified")
    if not cited:  # it falls short for another reason than trust (e.g. an invalid anchor)
        return []
    line, col = lr.loc("id")
    return [Finding(code="O015", path=lr.path, line=line, col=col, severity="note",
                    message=f"evidence cited, not trusted: on trace(s) {', '.join(cited)} this "
                            f"row would be {would.klass}, but no root of trust (live, package "
                            "or attested) stands behind them, so it is "
                            f"{verdict.klass}",
                    help=ATTEST_HELP)]


def _finish(lr: LoadedRow, res: RowResult) -> RowResult:
    """Add the expect and overclaim findings, which compare the class with the row's claims."""
    extra: list[Finding] = []
    if res.expect is not None and res.expect != res.klass:
        line, col = lr.loc("expect")
        extra.append(Finding(code="O010", path=lr.path, line=line, col=col,
                             message=f"row {res.id!r} is {res.klass}; expected {res.expect}",
                             help="expect is checked, never trusted: fix the evidence or the "
                                  "expectation"))
    if res.asserts == "conformance" and res.klass not in CONFORMANT:
        line, col = lr.loc("asserts")
        extra.append(Finding(code="O011", path=lr.path, line=line, col=col,
                             severity="warning" if res.expect == res.klass else "error",
                             message=f"row {res.id!r} asserts conformance; its evidence reaches "
                                     f"{res.klass}", help="assert substrate, or cite verified "
                                                          "evidence for every obligation"))
    extra += _mode_findings(lr, res)
    return res.model_copy(update={"findings": [*res.findings, *extra]})


def _mode_findings(lr: LoadedRow, res: RowResult) -> list[Finding]:
    """A bare lowercase word as ``mode`` (``pinned``) is usually a misplaced protection mode:
    say so (a warning, which ``check --strict`` refuses); ``mode`` describes the primitive."""
    if res.mode is None or not re.fullmatch(r"[a-z][a-z0-9_]*", res.mode.strip()):
        return []
    line, col = lr.loc("mode")
    return [Finding(code="D013", path=lr.path, line=line, col=col, severity="warning",
                    message=f"mode '{res.mode}' is a bare word; mode describes the runtime "
                            "primitive in words, and the protection mode goes in lowers "
                            f"(here: {res.lowers or 'missing'})",
                    help='describe what the runtime offers, e.g. mode: "pin=True lookups with '
                         'a pin timeout"')]


def _anchor_findings(lr: LoadedRow, results: dict[str, AnchorResult]) -> list[Finding]:
    out = []
    for aid, r in results.items():
        if r.code is None:
            continue
        line, col = lr.loc(f"anchors.{aid}")
        out.append(Finding(code=r.code, path=lr.path, line=line, col=col,
                           severity=("error" if r.code in ERROR_CODES else
                                     "note" if r.result == "unverifiable" else "warning"),
                           message=f"anchor {aid} ({r.kind}) {r.result}: {r.detail}",
                           help=_CODE_HELP.get(r.code, _ANCHOR_HELP.get(r.result))))
    return out


#: anchor codes of a trace with no root of trust (what O015 says attesting would change)
UNROOTED: frozenset[str] = frozenset({"A030", "A035", "A053"})
#: anchor codes that are errors of the descriptor itself, not of its evidence
ERROR_CODES: frozenset[str] = frozenset({"A031"})

_CODE_HELP = {
    "A031": "fix the anchor's version, or give the source root of that release",
    "A030": ATTEST_HELP,
    "A035": ATTEST_HELP,
    "A053": ATTEST_HELP,
    "A051": "cite a trace by an emitter whose module the runtime's own distribution ships "
            "(give --source for its wheel), or describe the row as an adapter",
    "A052": "bind the row to the runtime and adapter the trace's root names "
            "(runtime: {name: RUNTIME+ADAPTER}), or cite a trace of this row's own",
    "A016": "re-audit the row's own release: `residentkv anchors review DESCRIPTOR --to "
            "PACKAGE==VERSION` for code, a trace recorded on that release for behaviour",
}


_ANCHOR_HELP = {
    "unverifiable": "give --source NAME=PATH for the package, or cite a trace the checker can run",
    "drifted": "re-audit the code and refresh the anchor with `residentkv anchors make`",
    "missing": "fix the path or symbol, or give the right source version",
    "failed": "the evidence does not show what it is cited for",
}


def _obligation_findings(lr: LoadedRow, v: Verdict) -> list[Finding]:
    out = []
    for name, o in v.obligations.items():
        line, col = lr.loc(f"obligations.{name}")
        if o.asserted == "satisfied" and not o.established:
            out.append(Finding(code="O012", path=lr.path, line=line, col=col, severity="note",
                               message=f"{SHORT[name]} {name}: "
                                       f"{o.reason.removeprefix(SHORT[name] + ': ')}"))
        if v.klass == "rejected_mapping" and o.effective in ("absent", "contradicted"):
            out.append(Finding(code="O013", path=lr.path, line=line, col=col, severity="note",
                               message=f"{SHORT[name]} {name} is {o.effective} "
                                       f"(anchor {o.decided_by})"))
    return out


def _inputs(
    loaded: list[LoadedDescriptor], bundles: dict[str, Bundle], verifier: Verifier
) -> list[dict[str, str]]:
    out = [{"kind": "descriptor", "path": d.path, "sha256": d.sha256} for d in loaded]
    out += [{"kind": "bundle", "path": b.source, "sha256": b.digest}
            for b in sorted(bundles.values(), key=lambda b: b.mode)]
    traces = sorted(verifier.trace_inputs.items())
    out += [{"kind": "trace", "path": p, "sha256": s} for p, s in traces]
    for name, root in sorted(verifier.sources.items()):
        out.append({"kind": "source", "path": f"{name}={root.location}",
                    "sha256": root.digest() or "(directory)"})
    return out


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _runtime(v: Any) -> str | None:
    if not isinstance(v, dict) or not isinstance(v.get("name"), str):
        return None
    return f"{v['name']} {v['version']}" if isinstance(v.get("version"), str) else v["name"]


def summary(result: CheckResult) -> dict[str, int]:
    """Rows per class."""
    return dict(sorted(Counter(r.klass for r in result.rows).items()))
