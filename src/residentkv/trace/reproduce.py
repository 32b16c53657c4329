"""Reproduce the research artifact's published per-scenario gate table from its raw traces.

Every trace under the fixtures folder is imported (dialect ``resident-kv-artifact``) and judged
by our gates. The published value of each (trace, gate) is read from the run's own
``summary.json`` where it has one, else from the artifact's aggregate files; an aggregate rate
that is neither all-pass nor all-fail is reported as *mixed* (it says nothing about one run).
Disagreements are never bent away: each carries a reason built from the requirement ids our
gate found missing and the seqs of the affected request's events. A disagreement whose missing
requirements have no documented explanation is *unexplained* and makes the command fail; so
does a run in which nothing could be compared (no vacuous reproduction): a scenario without a
trace, or a trace that names no claim, is never a reproduced row, whatever the table says.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from residentkv.errors import UserInputError
from residentkv.limits import MAX_JSON_DEPTH, json_depth_ok, read_bounded
from residentkv.model.events import Envelope
from residentkv.trace.gates import GateResult, check_events
from residentkv.trace.importers import DIALECTS

MIXED = "mixed"


@dataclass(frozen=True)
class Row:
    """One (trace, gate) comparison."""

    scenario: str
    trace: str | None
    gate: str
    ours: str
    published: str | None
    agree: bool
    explained: bool
    reason: str
    #: a gate judged a claim of a trace here (no trace, or a claimless one, judges nothing)
    judged: bool = True

    def to_json_obj(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "trace": self.trace, "gate": self.gate,
                "ours": self.ours, "published": self.published, "agree": self.agree,
                "explained": self.explained, "reason": self.reason, "judged": self.judged}


def load_manifest() -> dict[str, Any]:
    """The shipped manifest (data/reproduction/paper_traces.yaml)."""
    text = (files("residentkv.data") / "reproduction" / "paper_traces.yaml").read_text()
    manifest: dict[str, Any] = YAML(typ="safe").load(text)
    return manifest


def _published(root: Path, manifest: dict[str, Any], scenario: str, run_dir: str,
               gate: str) -> tuple[str | None, str]:
    """The published value of (run, gate) and where it comes from.

    The run's own summary.json first; the scenario aggregate only when the run has none. A
    rate that is neither all-pass nor all-fail is ``mixed N/M``.
    """
    own = _run_value(root / scenario / run_dir / manifest["run_summary"],
                     manifest["run_keys"][gate])
    if own is not None:
        return own, "the run's own summary.json"
    source = next((v for pattern, v in manifest["published_by"].items()
                   if fnmatch.fnmatch(run_dir, pattern)), None)
    if source is None:
        return None, "no published table covers this run"
    aggregate = _json_file(root / manifest["aggregates"][source])
    rate = _dig(aggregate, "scenarios", scenario, manifest["gate_keys"][gate])
    if not isinstance(rate, dict):
        return None, "the aggregate has no rate for it"
    passed, total = rate.get("passed"), rate.get("total")
    if not (_count(passed) and _count(total)) or not total or passed > total:
        return None, "the aggregate's rate is malformed"
    where = f"the aggregate {manifest['aggregates'][source]}"
    if passed == total:
        return "pass", where
    if passed == 0:
        return "fail", where
    return f"{MIXED} {passed}/{total}", where


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _dig(value: Any, *keys: str) -> Any:
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _run_value(path: Path, key: str) -> str | None:
    """pass/fail from a run's summary.json (its list of missing requirements), if it has one."""
    missing = _dig(_json_file(path), "evaluation", "gate_summary", key)
    if not isinstance(missing, list):
        return None
    return "pass" if not missing else "fail"


def _json_file(path: Path) -> Any:
    """A small JSON file, or ``None`` when absent, special, too large, too deep or invalid."""
    if not path.exists():
        return None
    try:
        data = read_bounded(path, "summary")
    except UserInputError:
        return None
    if not json_depth_ok(data, MAX_JSON_DEPTH):
        return None
    try:
        return json.loads(data, parse_constant=lambda name: None)
    except (ValueError, RecursionError):
        return None


def _affected(events: list[Envelope], claim: str) -> set[str]:
    """The request(s) a disagreement is about: the one whose restore of *claim* failed, else
    the one that had to restore it, else every request that carried the claim."""
    for kinds in (("claim_restore_failed", "kv_load_failed"), ("claim_restore_required",)):
        found = {e.request_id for e in events if e.claim_id == claim and e.request_id
                 and e.event in kinds}  # type: ignore[attr-defined]
        if found:
            return found
    return {e.request_id for e in events if e.claim_id == claim and e.request_id}


def _seqs(events: list[Envelope], event_types: list[str], claim: str) -> str:
    """Seqs of each cited event type among the affected request's events only (another
    request's refusal or finish says nothing about this one)."""
    requests = _affected(events, claim)
    mine = [e for e in events if e.request_id in requests]
    found = []
    for t in event_types:
        seqs = [str(e.seq) for e in mine if e.event == t]  # type: ignore[attr-defined]
        found.append(f"{t} at seq {', '.join(seqs)}" if seqs else f"no {t}")
    return f"request {', '.join(sorted(requests)) or '(none)'}: " + "; ".join(found)


def _reason(result: GateResult | None, events: list[Envelope], manifest: dict[str, Any],
            agree: bool) -> tuple[str, bool]:
    if result is None:
        # a claimless trace shows nothing: it may agree with a published fail, but a published
        # pass it cannot explain (the table saw something this trace does not hold)
        if agree:
            return "the trace names no claim: there is nothing a gate could show", True
        return ("the trace names no claim, yet the table says pass: nothing in this trace "
                "explains the disagreement"), False
    if agree:
        return "agrees", True
    if result.passed:
        return "ours pass where the artifact's table says fail", False
    explanations = manifest["explanations"]
    parts = []
    for req in result.missing:
        entry = explanations.get(req)
        if entry is None:
            parts.append(f"{req}: no documented explanation")
            continue
        parts.append(f"{req}: {entry['because']} "
                     f"({_seqs(events, entry['cite'], result.claim_id)})")
    explained = all(r in explanations for r in result.missing)
    return "; ".join(parts), explained


def _trace_rows(root: Path, trace: Path, manifest: dict[str, Any]) -> list[Row]:
    scenario, run_dir = trace.parent.parent.name, trace.parent.name
    imported = DIALECTS[manifest["dialect"]](trace)
    results = check_events(imported.events, manifest["gates"],
                           well_formed=not imported.report.problems)
    rows = []
    for gate in manifest["gates"]:
        mine = [r for r in results if r.gate == gate]
        result = next((r for r in mine if r.passed), mine[0] if mine else None)
        ours = "pass" if result is not None and result.passed else "fail"
        published, where = _published(root, manifest, scenario, run_dir, gate)
        if published is None or published.startswith(MIXED):
            why = (f"missing {', '.join(result.missing)}" if result is not None
                   else "the trace names no claim")
            value = (f"the published rate {published.split()[1]} is mixed" if published
                     else f"no published value ({where})")
            reason, explained = f"{value}: nothing to compare for this trace; ours {ours}" + (
                f" ({why})" if ours == "fail" else ""), True
        else:
            reason, explained = _reason(result, imported.events, manifest, published == ours)
            reason += f" [published: {where}]"
        rows.append(Row(scenario, str(trace.relative_to(root)), gate, ours, published,
                        published == ours, explained, reason, judged=result is not None))
    return rows


def reproduce(root: str | Path) -> list[Row]:
    """Compare our gates with the published table for every scenario under *root*."""
    root = Path(root)
    if not root.is_dir():
        raise UserInputError("fixtures folder not found", code="L001", path=str(root))
    manifest = load_manifest()
    scenarios = sorted(p for p in root.iterdir() if p.is_dir())
    if not scenarios:
        raise UserInputError("no scenario folders in the fixtures folder", code="L001",
                             path=str(root))
    rows: list[Row] = []
    for scenario in scenarios:
        traces = sorted(scenario.glob(f"*/{manifest['trace_file']}"))
        if not traces:
            rows += _no_trace_rows(root, scenario, manifest)
        for trace in traces:
            rows += _trace_rows(root, trace, manifest)
    return rows


def _no_trace_rows(root: Path, scenario: Path, manifest: dict[str, Any]) -> list[Row]:
    rows = []
    for gate in manifest["gates"]:
        published, _ = _published(root, manifest, scenario.name, "rep-001", gate)
        # no trace is no reproduction: even a published fail is not "agreed with" by nothing
        rows.append(Row(scenario.name, None, gate, "fail", published, False, True,
                        f"no evidence: {manifest['no_trace_reason']}; nothing to compare "
                        "(no trace reproduces a published value)", judged=False))
    return rows


def compared(rows: Sequence[Row]) -> list[Row]:
    """Rows with a trace and a published pass/fail to compare with (neither absent nor
    mixed). A scenario without a trace is never compared: nothing reproduces its value."""
    return [r for r in rows if r.published in ("pass", "fail") and r.trace is not None]


def succeeded(rows: Sequence[Row]) -> bool:
    """True when some gate judged a claim against a published value and every compared row
    agrees or is explained.

    Nothing compared, or only claimless traces compared, is never a reproduction (no vacuous
    truth); an unexplained disagreement never is either.
    """
    done = compared(rows)
    return any(r.judged for r in done) and all(r.agree or r.explained for r in done)
