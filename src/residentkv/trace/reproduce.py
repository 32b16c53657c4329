"""Reproduce the research artifact's published per-scenario gate table from its raw traces.

Every trace under the fixtures folder is imported (dialect ``resident-kv-artifact``) and judged
by our gates. The published value of each (trace, gate) is read from the run's own
``summary.json`` where it has one, else from the artifact's aggregate files; an aggregate rate
that is neither all-pass nor all-fail is reported as *mixed* (it says nothing about one run).
Disagreements are never bent away: each is explained by its true first cause, the one that
decides our verdict — the first illegal step of the run (SPEC §4.2–§4.3), or else the first
requirement the gate asks that the trace does not meet — with the artifact's own sequence
numbers of the events it cites; the other missing requirements follow as "also missing". A row
whose deciding cause has no documented explanation is *unexplained* and makes the command fail
(a row with no published value to compare with, too); so does a run in which nothing could be
compared (no vacuous reproduction): a scenario without a trace, or a trace that names no
claim, is never a reproduced row, whatever the table says.
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
from residentkv.model.vocabulary import GateName
from residentkv.trace.gates import GateResult, check_events
from residentkv.trace.importers import DIALECTS
from residentkv.trace.importers.base import ImportResult
from residentkv.trace.registry import GATES

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
    #: what decides our failing verdict: a violation (the first illegal step) or the first
    #: missing requirement; None when ours passes or nothing was judged
    cause: str | None = None

    def to_json_obj(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "trace": self.trace, "gate": self.gate,
                "ours": self.ours, "published": self.published, "agree": self.agree,
                "explained": self.explained, "reason": self.reason, "judged": self.judged,
                "cause": self.cause}


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


def _requests(events: list[Envelope], claim: str, at: int | None) -> set[str]:
    """The request(s) a cause is about: the one the illegal event at seq *at* names; else the
    one whose restore of *claim* failed, else the one that had to restore it, else every
    request that carried the claim."""
    if at is not None:
        found = {e.request_id for e in events if e.seq == at and e.request_id}
        if found:
            return found
    for kinds in (("claim_restore_failed", "kv_load_failed"), ("claim_restore_required",)):
        found = {e.request_id for e in events if e.claim_id == claim and e.request_id
                 and e.event in kinds}  # type: ignore[attr-defined]
        if found:
            return found
    return {e.request_id for e in events if e.claim_id == claim and e.request_id}


def _seqs(imported: ImportResult, event_types: list[str], claim: str, at: int | None) -> str:
    """The artifact's own sequence numbers of each cited event type among the concerned
    request's events only (another request's refusal or finish says nothing about this one)."""
    events = imported.events
    requests = _requests(events, claim, at)
    mine = [e for e in events if e.request_id in requests]
    found = []
    for t in event_types:
        seqs = [str(imported.origin.get(e.seq, e.seq)) for e in mine
                if e.event == t]  # type: ignore[attr-defined]
        found.append(f"{t} at event_sequence {', '.join(seqs)}" if seqs else f"no {t}")
    return f"request {', '.join(sorted(requests)) or '(none)'}: " + "; ".join(found)


def _cause(result: GateResult, imported: ImportResult,
           manifest: dict[str, Any]) -> tuple[str, str, bool]:
    """What decides a failing verdict (its id, the sentence saying why, whether it is
    documented): the first illegal step, else the first requirement the gate asks that is
    missing; the rest follow as "also missing"."""
    order = [r.value for r in GATES[GateName(result.gate)].requirements]
    missing = sorted(result.missing, key=lambda r: order.index(r) if r in order else len(order))
    first, rest = missing[0], missing[1:]
    step = result.illegal if first == "legal_transitions" else None
    if step is not None:
        entry = manifest["violations"].get(step.violation)
        where = imported.origin.get(step.seq, step.seq)
        head = (f"legal_transitions: the first illegal step is {step.event} at event_sequence "
                f"{where} in state {step.state}, {step.violation}")
        cause = step.violation
    else:
        entry = manifest["explanations"].get(first)
        head, cause = first, first
    if entry is None:
        text = f"{head}: no documented explanation"
    else:
        at = step.seq if step is not None else None
        text = (f"{head}: {entry['because']} "
                f"({_seqs(imported, entry['cite'], result.claim_id, at)})")
    if rest:
        text += f"; also missing: {', '.join(rest)}"
    return cause, text, entry is not None


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
        cause = None
        if result is None:
            why, explained = "the trace names no claim", published != "pass"
        elif result.passed:
            why = ("ours pass where the artifact's table says fail" if published == "fail"
                   else "ours pass")
            explained = published != "fail"
        else:
            cause, why, explained = _cause(result, imported, manifest)
        if published is None or published.startswith(MIXED):
            value = (f"the published rate {published.split()[1]} is mixed" if published
                     else f"no published value ({where})")
            reason = f"{value}: nothing to compare for this trace; ours {ours}: {why}"
        else:
            reason = ("agrees: " if published == ours else "") + why + f" [published: {where}]"
            if result is None and published == "pass":
                reason = ("the trace names no claim, yet the table says pass: nothing in this "
                          f"trace explains the disagreement [published: {where}]")
        rows.append(Row(scenario, str(trace.relative_to(root)), gate, ours, published,
                        published == ours, explained, reason, judged=result is not None,
                        cause=cause))
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


def unexplained(rows: Sequence[Row]) -> list[Row]:
    """Rows whose verdict is neither agreed with nor explained by a documented first cause:
    a compared row that disagrees unexplained, or a judged row with no published value whose
    failing verdict has no documented cause."""
    done = compared(rows)
    return [r for r in rows if (r in done and not (r.agree or r.explained))
            or (r not in done and r.judged and not r.explained)]


def succeeded(rows: Sequence[Row]) -> bool:
    """True when some gate judged a claim against a published value and every row agrees or is
    explained by its first cause.

    Nothing compared, or only claimless traces compared, is never a reproduction (no vacuous
    truth); an unexplained row never is either.
    """
    return any(r.judged for r in compared(rows)) and not unexplained(rows)
