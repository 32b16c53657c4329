"""Single mutations of passing traces, each knowing the gate requirement it must break.

A mutant is *killed* when (a) its gate fails with the broken requirement among the missing ids
and (b) it passes no gate its parent failed (never stronger than its parent). Anything else is
a survivor: a bug in the gates or in this generator, reported with the mutant's description.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from residentkv.model.events import IDENTITY_FIELDS
from residentkv.trace.gates import COMMON, FAILURE, GATE_NAMES, OBSERVATION, GateResult, check_trace

Events = list[dict[str, Any]]
#: (requirements the mutation must break — any of them, the mutation, the mutated events)
Mutations = Iterator[tuple[frozenset[str], str, Events]]

OTHER_CLAIM = "mutant:other-claim"

#: (earlier requirement, later requirement): swapping their evidence events breaks the later
SWAPS: tuple[tuple[str, str], ...] = (
    ("store_succeeded", "offloaded"),
    ("offloaded", "lookup_hit"),
    ("restore_required", "load_succeeded"),
    ("restored_from_offload", "reused_after_restore"),
    ("claim_load_failed", "scheduler_failure_branch"),
    ("claim_load_failed", "restore_failed_scoped"),
    ("claim_load_failed", "refusal_attributed"),
)
#: requirement -> the one that breaks when the evidence events of the pair are swapped
_SWAP_BREAKS = {
    ("store_succeeded", "offloaded"): "store_succeeded",
    ("offloaded", "lookup_hit"): "lookup_hit",
    ("restore_required", "load_succeeded"): "load_succeeded",
    ("restored_from_offload", "reused_after_restore"): "reused_after_restore",
    ("claim_load_failed", "scheduler_failure_branch"): "scheduler_failure_branch",
    ("claim_load_failed", "restore_failed_scoped"): "restore_failed_scoped",
    ("claim_load_failed", "refusal_attributed"): "refusal_attributed",
}
@dataclass(frozen=True)
class TraceMutant:
    """One single mutation of a passing (trace, gate, claim)."""

    operator: str
    parent: str
    gate: str
    claim: str
    breaks: frozenset[str]
    description: str
    events: tuple[str, ...]  # JSON lines


@dataclass(frozen=True)
class Verdict:
    mutant: TraceMutant
    killed: bool
    why: str


def _lines(events: Events, renumber: bool = True) -> tuple[str, ...]:
    out = []
    for i, e in enumerate(events):
        out.append(json.dumps(dict(e, seq=i) if renumber else e, separators=(",", ":")))
    return tuple(out)


def _index(events: Events, seq: int) -> int:
    return next(i for i, e in enumerate(events) if e["seq"] == seq)


def _copy(events: Events) -> Events:
    return [dict(e) for e in events]


_CHAIN = frozenset({
    "restore_required", "lookup_hit", "load_succeeded", "restored_from_offload",
    "reused_after_restore", "claim_load_failed", "scheduler_failure_branch",
    "restore_failed_scoped", "refusal_attributed", "outcome_before_finish",
})
_AFTER_LOAD_FAILURE = frozenset({
    "claim_load_failed", "scheduler_failure_branch", "restore_failed_scoped",
    "refusal_attributed", "outcome_before_finish",
})
#: event type of the target claim -> requirements its removal (or relabelling) breaks
BREAKS_BY_EVENT: dict[str, frozenset[str]] = {
    "claim_accepted": frozenset({"claim_accepted_before_lifecycle", "predicate_fixed",
                                 "multiple_claims"}),
    "claim_materialized": frozenset({"materialized"}),
    "kv_store_finished": frozenset({"store_succeeded"}),
    "claim_offloaded": frozenset({"offloaded"}),
    "kv_lookup": frozenset({"lookup_hit"}),
    "claim_restore_required": _CHAIN,
    "kv_load_finished": frozenset({"load_succeeded"}),
    "kv_load_failed": _AFTER_LOAD_FAILURE,
    "scheduler_load_failure": frozenset({"scheduler_failure_branch"}),
    "claim_restore_failed": frozenset({"restore_failed_scoped"}),
    "active_request_refused": frozenset({"refusal_attributed", "outcome_before_finish"}),
    "request_finished": frozenset({"outcome_before_finish"}),
    "claim_restored": frozenset({"restored_from_offload", "reused_after_restore"}),
    "claim_reused": frozenset({"reused_after_restore"}),
    "claim_expired": frozenset({"expiry_before_loss"}),
    "claim_demoted": frozenset({"demotion_before_loss"}),
}
_OBSERVATION = frozenset(OBSERVATION)
_FAILURE = frozenset(FAILURE)
_COMMON = frozenset(COMMON)


def _is_load_failure(e: dict[str, Any]) -> bool:
    return e["event"] == "kv_load_failed" or (
        e["event"] == "kv_load_finished" and not e.get("success"))


def _base(e: dict[str, Any]) -> frozenset[str]:
    if _is_load_failure(e):
        return _AFTER_LOAD_FAILURE
    return BREAKS_BY_EVENT.get(e["event"], frozenset())


def _expand(base: frozenset[str], result: GateResult) -> frozenset[str]:
    """Add the composite requirements a broken part takes down; keep what *result* relied on."""
    wanted = set(base)
    if result.gate == "lifecycle":
        if base & _OBSERVATION:
            wanted |= {"success_generation", "generations_ordered"}
        if base & _FAILURE:
            wanted |= {"failure_generation", "generations_ordered"}
    if result.gate == "attribution" and base & (_COMMON | _FAILURE):
        wanted.add("target_failure_outcome")
    return frozenset(wanted) & frozenset(result.evidence)


def _same_role(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if _is_load_failure(a):
        kind = _is_load_failure(b)
    else:
        kind = a["event"] == b["event"] and a.get("success") == b.get("success")
    return kind and a.get("claim_id") == b.get("claim_id") and a.get(
        "request_id") == b.get("request_id")


def _redundant(events: Events, i: int) -> bool:
    """Another event of the same role, claim and request would still stand in for events[i]."""
    return any(_same_role(events[i], e) for j, e in enumerate(events) if j != i)


def _targets(events: Events, result: GateResult) -> Iterator[tuple[int, frozenset[str]]]:
    """Evidence events the gate relied on whose loss must break something it requires."""
    relied = {s for seqs in result.evidence.values() for s in seqs}
    for i, e in enumerate(events):
        if e["seq"] not in relied:
            continue
        breaks = _expand(_base(e), result)
        if breaks and not _redundant(events, i):
            yield i, breaks


def _drop(events: Events, result: GateResult) -> Mutations:
    for i, breaks in _targets(events, result):
        mutated = _copy(events)
        gone = mutated.pop(i)
        yield breaks, f"drop {gone['event']} (seq {gone['seq']})", mutated


def _relabel(events: Events, result: GateResult) -> Mutations:
    for i, breaks in _targets(events, result):
        mutated = _copy(events)
        e = mutated[i]
        field = "outcome_claim_id" if e["event"] == "active_request_refused" else "claim_id"
        if e.get(field) != result.claim_id:
            continue
        e[field] = OTHER_CLAIM
        if field == "outcome_claim_id":
            breaks = _expand(frozenset({"refusal_attributed"}), result)
        if not breaks:
            continue
        yield breaks, f"change {field} of {e['event']} (seq {e['seq']}) to {OTHER_CLAIM}", \
            mutated


def _swap(events: Events, result: GateResult) -> Mutations:
    for first, second in SWAPS:
        a, b = result.evidence.get(first), result.evidence.get(second)
        if not a or not b:
            continue
        mutated = _copy(events)
        i, j = _index(mutated, a[0]), _index(mutated, b[0])
        if i == j:
            continue
        mutated[i], mutated[j] = mutated[j], mutated[i]
        yield frozenset({_SWAP_BREAKS[(first, second)]}), (
            f"swap {events[i]['event']} (seq {a[0]}) with {events[j]['event']} (seq {b[0]})"
        ), mutated


def _strip_identity(events: Events, result: GateResult) -> Mutations:
    for i, e in enumerate(events):
        if e.get("claim_id") == result.claim_id and e["event"].startswith("claim_"):
            for field in IDENTITY_FIELDS:
                if field in e:
                    mutated = _copy(events)
                    del mutated[i][field]
                    what = f"strip {field} from {e['event']} (seq {e['seq']})"
                    yield frozenset({"identity_complete"}), what, mutated
            return


def _duplicate_seq(events: Events, result: GateResult) -> Mutations:
    for i, _ in _targets(events, result):
        if i == 0:
            continue
        mutated = _copy(events)
        mutated[i]["seq"] = mutated[i - 1]["seq"]
        what = f"duplicate seq {mutated[i]['seq']} on {events[i]['event']}"
        yield frozenset({"trace_well_formed"}), what, mutated
        return


def _refusal_after_finish(events: Events, result: GateResult) -> Mutations:
    if "outcome_before_finish" not in result.evidence:
        return
    refusal = next((i for i, e in enumerate(events) if e["event"] == "active_request_refused"
                    and e.get("outcome_claim_id") == result.claim_id), None)
    if refusal is None:
        return
    request = events[refusal].get("request_id")
    finish = next((i for i, e in enumerate(events) if i > refusal
                   and e["event"] == "request_finished" and e.get("request_id") == request), None)
    if finish is None:
        return
    mutated = _copy(events)
    mutated.insert(finish, mutated.pop(refusal))  # the finish shifted up by one: lands after it
    yield frozenset({"outcome_before_finish"}), "move the refusal after request_finished", \
        mutated


def _restore_after_failure(events: Events, result: GateResult) -> Mutations:
    seqs = result.evidence.get("restore_failed_scoped")
    if not seqs:
        return
    mutated = _copy(events)
    i = _index(mutated, seqs[0])
    template = mutated[i]
    restored = {k: template[k] for k in ("schema", "ts_ns", "source", "claim_id", "request_id",
                                         *IDENTITY_FIELDS) if k in template}
    restored.update(event="claim_restored", seq=template["seq"],
                    generation=template.get("generation", 0), source="fallback_recompute")
    mutated.insert(i + 1, restored)
    what = "add claim_restored(fallback_recompute) after the failure"
    yield frozenset({"no_restore_after_failure"}), what, mutated


def _smear(events: Events, result: GateResult) -> Mutations:
    seqs = result.evidence.get("refusal_attributed")
    if not seqs:
        return
    mutated = _copy(events)
    e = mutated[_index(mutated, seqs[0])]
    e["blocking_claim_ids"] = [result.claim_id, OTHER_CLAIM]
    yield frozenset({"refusal_attributed"}), "replace blocking_claim_ids with two claims", mutated


Operator = Callable[[Events, GateResult], Mutations]

OPERATORS: dict[str, Operator] = {
    "drop_event": _drop,
    "swap_events": _swap,
    "change_claim_id": _relabel,
    "strip_identity_field": _strip_identity,
    "duplicate_seq": _duplicate_seq,
    "refusal_after_finish": _refusal_after_finish,
    "restore_after_failure": _restore_after_failure,
    "blocking_claim_smear": _smear,
}
#: operators that keep the stream's own seqs (renumbering would repair them)
_KEEP_SEQS = {"duplicate_seq"}


def generate(parent: str, events: Events, result: GateResult) -> Iterator[TraceMutant]:
    """Every single mutation of a passing gate result's trace."""
    for name, operator in OPERATORS.items():
        for breaks, description, mutated in operator(events, result):
            yield TraceMutant(name, parent, result.gate, result.claim_id, breaks, description,
                              _lines(mutated, renumber=name not in _KEEP_SEQS))


def judge(mutant: TraceMutant, parent_passed: set[str]) -> Verdict:
    """Run every gate on the mutant; killed when it breaks what it should and is no stronger."""
    data = ("\n".join(mutant.events) + "\n").encode()
    check = check_trace(f"{mutant.parent}#{mutant.operator}", GATE_NAMES, mutant.claim,
                        stream=io.BytesIO(data))
    by_gate = {r.gate: r for r in check.results}
    target = by_gate[mutant.gate]
    stronger = {g for g, r in by_gate.items() if r.passed} - parent_passed
    if target.passed:
        return Verdict(mutant, False, f"{mutant.gate} still passes")
    if not mutant.breaks & set(target.missing):
        return Verdict(mutant, False, f"{mutant.gate} fails but not on any of "
                                      f"{', '.join(sorted(mutant.breaks))} "
                                      f"(missing {', '.join(target.missing)})")
    if stronger:
        return Verdict(mutant, False, f"mutant passes {', '.join(sorted(stronger))} "
                                      "which its parent failed")
    hit = sorted(mutant.breaks & set(target.missing))
    return Verdict(mutant, True, f"{mutant.gate} fails on {', '.join(hit)}")


def parents_of(name: str, events: Events) -> Iterator[tuple[GateResult, set[str]]]:
    """The passing (gate, claim) results of one trace, with each claim's passing gate set."""
    data = "".join(json.dumps(e) + "\n" for e in events).encode()
    check = check_trace(name, GATE_NAMES, stream=io.BytesIO(data))
    passed: dict[str, set[str]] = {}
    for r in check.results:
        if r.passed:
            passed.setdefault(r.claim_id, set()).add(r.gate)
    for r in check.results:
        if r.passed:
            yield r, passed[r.claim_id]
