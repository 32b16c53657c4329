"""The audit job (see :mod:`residentkv.audit`): a value in, a value out, files written.

Fail-closed throughout: a pinned release that cannot be fetched leaves its anchors
``unverifiable`` (cited at best) and the audit falls short (exit 1); a live witness run whose
scenarios do not all match SPEC §9 falls short; a suite this build does not have is reported as
not available and never counted as a pass.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from securesystemslib.signer._crypto_signer import CryptoSigner

import residentkv.report.audit_report  # noqa: F401  (registers the audit reporters)
from residentkv import __version__
from residentkv.adapters.vllm.release import installed_vllm
from residentkv.audit.observed import (
    attach_observed,
    is_expected_observed_failure,
    observed_shortfalls,
)
from residentkv.errors import UsageError, install_hint
from residentkv.jsontext import write_json
from residentkv.lowering.anchors import Verifier
from residentkv.lowering.check import run_check
from residentkv.lowering.classify import GRANTING
from residentkv.lowering.curation import annotate, curated_rows, review_counts
from residentkv.lowering.trace_pins import pin_trace_digests
from residentkv.report.audit_result import AuditResult
from residentkv.report.json_report import to_json
from residentkv.report.registry import RenderOptions, render
from residentkv.sources.cache import cache_dir, find_archive
from residentkv.sources.fetch import FetchResult, Runner, fetch, sha256_file
from residentkv.sources.pins import PINS, Pin
from residentkv.sources.roots import cached_roots, runtime_descriptor_paths, runtimes_dir
from residentkv.trust.attest import attest_recorded
from residentkv.trust.live import LiveRoot
from residentkv.trust.policy import TrustPolicy
from residentkv.trust.roots import ATTESTATION_SUFFIX, TraceTrust

__all__ = [
    "ADAPTER_FILE",
    "ADAPTER_SCENARIOS",
    "AUDIT_FILES",
    "HTML_FILE",
    "WITNESS_SCENARIOS",
    "AuditOptions",
    "AuditResult",
    "run_audit",
    "save_witness_traces",
    "suite_summary",
    "write_report",
]

ADAPTER_FILE = "residentkv_vllm_adapter.yaml"
#: the witness scenarios whose traces back the adapter rows (claim ids end in -0-target); the
#: package ships these (``python -m residentkv.audit.refresh``)
ADAPTER_SCENARIOS: tuple[str, ...] = (
    "success_path", "claimed_load_failure", "multi_claim_targeted_failure")
#: what ``audit --live`` runs: the adapter's scenarios plus content integrity and isolation as a
#: pair, whose traces the report shows as timelines (every run must match SPEC §9)
WITNESS_SCENARIOS: tuple[str, ...] = (
    *ADAPTER_SCENARIOS, "corrupted_restore", "cross_tenant_reuse")
TRACE_DIR = Path("traces") / "witness"
WITNESS_PRODUCER = "the vLLM witness run by this audit (--live)"

WitnessRunner = Callable[[Sequence[str], int, Path], list[Any]]


@dataclass
class AuditOptions:
    """What one audit run uses. Defaults: the shipped descriptors, the user cache, fetch on."""

    out: Path = Path("residentkv-report")
    cache: Path | None = None
    fetch: bool = True
    live: bool = False
    descriptors: Sequence[Path] | None = None
    bundles_dir: str | None = None
    pins: Sequence[Pin] = PINS
    index_url: str | None = None
    find_links: Sequence[str] = ()
    no_index: bool = False
    fetch_runner: Runner | None = None
    witness_runner: WitnessRunner | None = None
    #: the trust policy (``--trust``): keys whose trace attestations may grant
    trust_policy: TrustPolicy | None = None
    #: ``--attest KEY`` with ``--live``: sign the traces the live witness records
    trace_signer: CryptoSigner | None = None
    #: ``--live``: also run the observer scenario on real vLLM and attach its trace (off only
    #: where a test replays the witness and no vLLM runs)
    observe: bool = True
    progress: Callable[[str], None] = lambda _msg: None
    #: what the renderers get: the source root of repo-relative paths and the command's name
    render: RenderOptions = field(default_factory=lambda: RenderOptions.for_command("audit"))


# ------------------------------------------------------------------------------- sources


def _sources(opts: AuditOptions, cache: Path) -> list[dict[str, Any]]:
    missing = [p for p in opts.pins if find_archive(cache, p) is None]
    results: dict[str, FetchResult] = {}
    if missing and opts.fetch:
        opts.progress(f"fetching {', '.join(p.requirement for p in missing)} into {cache}")
        kwargs: dict[str, Any] = {"index_url": opts.index_url, "find_links": opts.find_links,
                                  "no_index": opts.no_index}
        if opts.fetch_runner is not None:
            kwargs["runner"] = opts.fetch_runner
        results = {r.pin.key: r for r in fetch(missing, cache, **kwargs)}
    out: list[dict[str, Any]] = []
    for pin in opts.pins:
        have = find_archive(cache, pin)
        r = results.get(pin.key)
        if have is not None:
            status = r.status if r is not None else "cached"
            out.append({"package": pin.package, "requirement": pin.requirement,
                        "status": status, "path": str(have), "sha256": sha256_file(have),
                        "detail": r.detail if r is not None else "already in the cache"})
        else:
            detail = r.detail if r is not None else "not in the cache and fetching is off"
            out.append({"package": pin.package, "requirement": pin.requirement,
                        "status": "missing", "path": None, "sha256": None, "detail": detail})
    return out


# ------------------------------------------------------------------------------- witness


def _trace_record(path: Path) -> dict[str, str]:
    return {"path": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def save_witness_traces(runs: Sequence[Any], dest: Path, *, command: str,
                        live: LiveRoot | None = None) -> dict[str, Any]:
    """Copy the index-0 trace of each witness scenario to ``dest/traces/witness/NAME.jsonl``
    and record where it came from in ``PROVENANCE.json`` (the traces are never edited).

    With *live* (a live run), each copy must hash to the digest the witness's writer recorded
    as it wrote the trace (``run.trace_sha256``, handed back over a pipe): only those copies
    are live (SPEC §7.2); a trace changed after it was written, or one with no writer's
    digest, stops the run (L034)."""
    folder = dest / TRACE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    saved = []
    for run in runs:
        if run.index != 0 or run.scenario not in WITNESS_SCENARIOS:
            continue
        target = folder / f"{run.scenario}.jsonl"
        shutil.copyfile(run.trace, target)
        if live is not None:
            written = getattr(run, "trace_sha256", None)
            if written is None:
                raise UsageError(f"the witness recorded no digest for {run.trace} as it wrote "
                                 "it; nothing it wrote is live", code="L034", path=str(target))
            live.record(target, WITNESS_PRODUCER, written)
        saved.append({"scenario": run.scenario, "file": target.name,
                      "sha256": hashlib.sha256(target.read_bytes()).hexdigest(),
                      "gates": dict(run.gates), "matched": bool(run.matched)})
    provenance = {
        "produced_by": "residentkv.adapters.vllm.witness.run_witness",
        "command": command,
        "residentkv": __version__,
        "vllm": _vllm_version(),
        "scenarios": saved,
        "note": "written by the witness on real vLLM; never edited by hand",
    }
    write_json(folder / "PROVENANCE.json", provenance, indent=1)
    return provenance


def _vllm_version() -> str | None:
    installed = installed_vllm()
    return None if installed is None else f"{installed[0]}=={installed[1]}"


def _shipped_witness() -> dict[str, Any]:
    folder = runtimes_dir() / TRACE_DIR
    traces = [_trace_record(p) for p in sorted(folder.glob("*.jsonl"))]
    prov_path = folder / "PROVENANCE.json"
    provenance = (json.loads(prov_path.read_text(encoding="utf-8"))
                  if prov_path.is_file() else None)
    return {"mode": "shipped", "traces": traces, "provenance": provenance,
            "detail": "adapter rows classified on the witness traces shipped with the package"}


def _live_witness(opts: AuditOptions, descriptors: list[Path],
                  trust: TraceTrust) -> tuple[dict[str, Any], list[Path]]:
    runner = opts.witness_runner
    if runner is None:
        if importlib.util.find_spec("vllm") is None:
            raise UsageError("audit --live runs the witness on real vLLM, which is not "
                             f"installed; install it with {install_hint('vllm')} "
                             "(or make install-vllm), or drop --live to use the shipped traces")
        from residentkv.adapters.vllm.witness import run_witness

        runner = run_witness
    work = trust.live.create(opts.out / "witness")  # empty, or refused (SPEC §7.2)
    opts.progress(f"running the vLLM witness ({', '.join(WITNESS_SCENARIOS)}) in {work}")
    runs = runner(WITNESS_SCENARIOS, 1, work / "runs")
    live_dir = work / "live"
    provenance = save_witness_traces(runs, live_dir, command="residentkv audit --live",
                                     live=trust.live)
    recorded = [live_dir / TRACE_DIR / s["file"] for s in provenance["scenarios"]]
    if opts.trace_signer is not None:  # only what this run wrote is ever signed
        signed = attest_recorded(recorded, opts.trace_signer)
        opts.progress(f"signed {len(signed)} live trace(s): TRACE{ATTESTATION_SUFFIX}")
    shipped = runtimes_dir() / ADAPTER_FILE
    live_desc = live_dir / ADAPTER_FILE
    shutil.copyfile(shipped, live_desc)
    pin_trace_digests(live_desc)  # the fresh traces, as the witness just wrote them
    swapped = [live_desc if p.name == ADAPTER_FILE else p for p in descriptors]
    if live_desc not in swapped:
        swapped.append(live_desc)
    matched = sum(1 for r in runs if r.matched)
    info = {"mode": "live", "passed": bool(runs) and matched == len(runs),
            "matched": matched, "runs": len(runs), "descriptor": str(live_desc),
            "results": [{"scenario": r.scenario, "gates": dict(r.gates),
                         "matched": bool(r.matched), "error": r.error,
                         "latency_ms": r.latency_ms} for r in runs],
            "provenance": provenance}
    return info, swapped


def _live_observer(opts: AuditOptions, descriptors: list[Path],
                   trust: TraceTrust) -> tuple[dict[str, Any], list[Path]]:
    from residentkv.observe.scenario import run_observed_vllm

    work = trust.live.create(opts.out / "observe")
    opts.progress(f"running the observer on plain vLLM in {work}")
    run = run_observed_vllm(work)
    return attach_observed(run, descriptors, work, trust)


# ------------------------------------------------------------------------------- suite


def suite_summary() -> dict[str, Any]:
    """Run the bad-lowering suite shipped in the package: every case and every mutant.

    The suite's failure is a finding of the audit (``passed: false`` with the reason), never a
    crash and never a pass.
    """
    from residentkv.suite.run import run_suite, summary_lines
    from residentkv.suite.runner import shipped_suite

    try:
        result = run_suite(shipped_suite())
    except Exception as e:
        return {"available": True, "passed": False, "lines": [],
                "detail": f"suite: raised {type(e).__name__}: {e}"}
    ok = sum(c.passed for c in result.cases)
    generated = sum(t.generated for t in result.operators.values())
    killed = sum(t.killed for t in result.operators.values())
    detail = (f"suite: {'passed' if result.passed else 'FAILED'} ({ok}/{len(result.cases)} "
              f"cases, {killed}/{generated} mutants killed)")
    return {"available": True, "passed": result.passed, "detail": detail,
            "lines": summary_lines(result)}


# ------------------------------------------------------------------------------- the job


def run_audit(opts: AuditOptions) -> AuditResult:
    """Run the audit and write its reports into ``opts.out``."""
    cache = cache_dir(opts.cache)
    sources = _sources(opts, cache)
    roots, _absent = cached_roots(cache, opts.pins)
    descriptors = [Path(p) for p in (opts.descriptors or runtime_descriptor_paths())]
    if not descriptors:
        raise UsageError("no runtime descriptors found in this build; expected "
                         f"{runtimes_dir()} to hold the curated descriptors")
    try:
        opts.out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--out {opts.out}: cannot create the report folder: {e}",
                         path=str(opts.out)) from None
    trust = TraceTrust(policy=opts.trust_policy)
    observed: dict[str, Any] = {}
    if opts.live:
        witness, descriptors = _live_witness(opts, descriptors, trust)
        if opts.observe:
            observed, descriptors = _live_observer(opts, descriptors, trust)
        # anything beside the run's output traces that it did not write is cited, and said so
        witness["found"] = [str(p) for p in trust.live.found(
            opts.out / "witness" / "live" / TRACE_DIR)]
    else:
        witness = _shipped_witness()
    suite = suite_summary()
    opts.progress("verifying anchors and classifying rows")
    check = run_check(descriptors, bundles_dir=opts.bundles_dir, verifier=Verifier(roots),
                      trust=trust)
    doc = to_json(check)
    pinned = {p.package for p in opts.pins}
    annotate(doc, curated_rows(descriptors, opts.bundles_dir), pinned)
    unverified = [
        f"{a['row']} {a['id']}: {a['result']} ({a['detail']})"
        for a in _anchor_rows(doc)
        if a["result"] != "verified" and not is_expected_observed_failure(a)
        and (a["kind"] == "trace" or (a.get("target") or {}).get("package") in pinned)
    ]
    positive_public = [f"{r['id']}: {r['class']}" for r in doc["rows"]
                       if r["mechanism"] == "native" and r["class"] in GRANTING]
    result = AuditResult(check=check, doc=doc, sources=sources, witness=witness, suite=suite,
                         unverified=unverified, positive_public=positive_public,
                         reviews=review_counts(doc), observed=observed,
                         observed_short=observed_shortfalls(doc, observed) if observed else [])
    # the record (audit.json) names every file of the folder, itself included
    result.files.update({name: str(opts.out / name) for name, _kind, _fmt in AUDIT_FILES})
    for spec in AUDIT_FILES:
        write_report(result, opts.out, spec, opts.render)
    return result


def _anchor_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(a, row=r["id"]) for r in doc["rows"] for a in r["anchors"]]


#: the files every audit writes into its folder, each rendered by the reporter registry:
#: (file, report kind, format)
AUDIT_FILES: tuple[tuple[str, str, str], ...] = (
    ("report.json", "audit", "json"), ("report.md", "audit", "md"),
    ("report.sarif", "audit", "sarif"), ("audit.json", "audit-record", "json"))
#: the page ``--html`` adds beside them
HTML_FILE: tuple[str, str, str] = ("report.html", "audit", "html")


def write_report(result: AuditResult, out: Path, spec: tuple[str, str, str],
                 opts: RenderOptions) -> Path:
    """Render one (file, kind, format) of the audit through the registry into *out*, and name
    it in ``result.files``."""
    name, kind, fmt = spec
    text = render(kind, fmt, result, opts)
    path = out / name
    try:
        path.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}", path=str(path)) from None
    result.files[name] = str(path)
    return path
