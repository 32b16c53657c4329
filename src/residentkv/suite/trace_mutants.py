"""Single mutations of passing traces, each knowing the gate requirement it must break.

A mutant is *killed* when (a) its gate fails with the broken requirement among the missing ids
and (b) it passes no gate its parent failed (never stronger than its parent). Anything else is
a survivor: a bug in the gates or in this generator, reported with the mutant's description.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from residentkv.model.events import IDENTITY_FIELDS
from residentkv.trace.gates import COMMON, FAILURE, GATE_NAMES, OBSERVATION, GateResult, check_trace

Event = dict[str, Any]
Events = list[Event]
SPACING = 10  # parents are renumbered seq = 10 * index, so a mutant can insert between events


@dataclass(frozen=True)
class Edit:
    """A mutation as edits of the parent: replaced (None = dropped) and inserted events."""

    replace: dict[int, Event | None] = field(default_factory=dict)
    insert_after: dict[int, Event] = field(default_factory=dict)


#: (requirements the mutation must break — any of them, the mutation, the edit)
Mutations = Iterator[tuple[frozenset[str], str, Edit]]

OTHER_CLAIM = "mutant:other-claim"

#: (earlier requirement, later requirement) -> the one that breaks when their evidence events
#: are swapped
SWAPS: dict[tuple[str, str], str] = {
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


def _dump(e: Event) -> str:
    return json.dumps(e, separators=(",", ":"))


class Parent:
    """A passing trace prepared for mutation: spaced seqs, serialized once, indexed."""

    def __init__(self, name: str, events: Events) -> None:
        self.name = name
        self.events = [dict(e, seq=i * SPACING) for i, e in enumerate(events)]
        self.lines = [_dump(e) for e in self.events]
        self.index = {e["seq"]: i for i, e in enumerate(self.events)}
        self.roles: dict[tuple[Any, ...], int] = {}
        for e in self.events:
            self.roles[_role(e)] = self.roles.get(_role(e), 0) + 1
        self.accepted = sum(e["event"] == "claim_accepted" for e in self.events)

    def failed_before(self, claim: str, index: int) -> bool:
        """Whether a load of *claim* failed before events[index]."""
        return any(_is_load_failure(e) and e.get("claim_id") == claim
                   for e in self.events[:index])

    def apply(self, edit: Edit) -> tuple[str, ...]:
        out: list[str] = []
        for i, line in enumerate(self.lines):
            if i in edit.replace:
                new = edit.replace[i]
                if new is not None:
                    out.append(_dump(new))
            else:
                out.append(line)
            if i in edit.insert_after:
                out.append(_dump(edit.insert_after[i]))
        return tuple(out)

    def data(self) -> bytes:
        return ("\n".join(self.lines) + "\n").encode()


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


def _role(e: Event) -> tuple[Any, ...]:
    kind = "load_failure" if _is_load_failure(e) else (e["event"], e.get("success"))
    return (kind, e.get("claim_id"), e.get("request_id"))


def _targets(p: Parent, result: GateResult) -> Iterator[tuple[int, frozenset[str]]]:
    """Evidence events the gate relied on whose loss must break something it requires.

    A restore recorded after a failure of the claim is evidence for one gate and a violation
    for another (no_restore_after_failure): removing it would legitimately repair the other
    gate, so it is not a single-fault mutation and is left alone.
    """
    for seq in sorted({s for seqs in result.evidence.values() for s in seqs}):
        i = p.index.get(seq)
        if i is None:
            continue
        e = p.events[i]
        if e["event"] == "claim_restored" and p.failed_before(result.claim_id, i):
            continue
        if e.get("claim_id") not in (None, result.claim_id) and e.get(
                "outcome_claim_id") != result.claim_id:
            # another claim's event: only the claim count can hang on it
            base = frozenset({"multiple_claims"}) if (
                e["event"] == "claim_accepted" and p.accepted == 2) else frozenset()
        else:
            base = _base(e)
        breaks = _expand(base, result)
        # another event of the same role, claim and request would still stand in for it
        if breaks and p.roles[_role(e)] == 1:
            yield i, breaks


def _drop(p: Parent, result: GateResult) -> Mutations:
    for i, breaks in _targets(p, result):
        e = p.events[i]
        yield breaks, f"drop {e['event']} (seq {e['seq']})", Edit(replace={i: None})


def _relabel(p: Parent, result: GateResult) -> Mutations:
    for i, breaks in _targets(p, result):
        e = p.events[i]
        field_ = "outcome_claim_id" if e["event"] == "active_request_refused" else "claim_id"
        if e.get(field_) != result.claim_id:
            continue
        if field_ == "outcome_claim_id":
            breaks = _expand(frozenset({"refusal_attributed"}), result)
        if breaks:
            yield breaks, f"change {field_} of {e['event']} (seq {e['seq']}) to {OTHER_CLAIM}", \
                Edit(replace={i: {**e, field_: OTHER_CLAIM}})


def _swap(p: Parent, result: GateResult) -> Mutations:
    for (first, second), breaks in SWAPS.items():
        a, b = result.evidence.get(first), result.evidence.get(second)
        if not a or not b or a[0] not in p.index or b[0] not in p.index:
            continue
        i, j = p.index[a[0]], p.index[b[0]]
        if i == j:
            continue
        ei, ej = p.events[i], p.events[j]
        yield frozenset({breaks}), (
            f"swap {ei['event']} (seq {a[0]}) with {ej['event']} (seq {b[0]})"
        ), Edit(replace={i: {**ej, "seq": ei["seq"]}, j: {**ei, "seq": ej["seq"]}})


def _strip_identity(p: Parent, result: GateResult) -> Mutations:
    for i, e in enumerate(p.events):
        if e.get("claim_id") == result.claim_id and e["event"].startswith("claim_"):
            for name in IDENTITY_FIELDS:
                if name in e:
                    stripped = {k: v for k, v in e.items() if k != name}
                    yield frozenset({"identity_complete"}), \
                        f"strip {name} from {e['event']} (seq {e['seq']})", \
                        Edit(replace={i: stripped})
            return


def _duplicate_seq(p: Parent, result: GateResult) -> Mutations:
    for i, _ in _targets(p, result):
        if i == 0:
            continue
        e = p.events[i]
        seq = p.events[i - 1]["seq"]
        yield frozenset({"trace_well_formed"}), f"duplicate seq {seq} on {e['event']}", \
            Edit(replace={i: {**e, "seq": seq}})
        return


def _refusal_after_finish(p: Parent, result: GateResult) -> Mutations:
    if "outcome_before_finish" not in result.evidence:
        return
    events = p.events
    refusal = next((i for i, e in enumerate(events) if e["event"] == "active_request_refused"
                    and e.get("outcome_claim_id") == result.claim_id), None)
    if refusal is None:
        return
    request = events[refusal].get("request_id")
    finish = next((i for i, e in enumerate(events) if i > refusal
                   and e["event"] == "request_finished" and e.get("request_id") == request), None)
    if finish is None:
        return
    moved = {**events[refusal], "seq": events[finish]["seq"] + 1}
    yield frozenset({"outcome_before_finish"}), "move the refusal after request_finished", \
        Edit(replace={refusal: None}, insert_after={finish: moved})


def _restore_after_failure(p: Parent, result: GateResult) -> Mutations:
    seqs = result.evidence.get("restore_failed_scoped")
    if not seqs or seqs[0] not in p.index:
        return
    i = p.index[seqs[0]]
    template = p.events[i]
    restored = {k: template[k] for k in ("schema", "ts_ns", "source", "claim_id", "request_id",
                                         *IDENTITY_FIELDS) if k in template}
    restored.update(event="claim_restored", seq=template["seq"] + 1,
                    generation=template.get("generation", 0), source="fallback_recompute")
    yield frozenset({"no_restore_after_failure"}), \
        "add claim_restored(fallback_recompute) after the failure", \
        Edit(insert_after={i: restored})


def _smear(p: Parent, result: GateResult) -> Mutations:
    seqs = result.evidence.get("refusal_attributed")
    if not seqs or seqs[0] not in p.index:
        return
    i = p.index[seqs[0]]
    smeared = {**p.events[i], "blocking_claim_ids": [result.claim_id, OTHER_CLAIM]}
    yield frozenset({"refusal_attributed"}), "replace blocking_claim_ids with two claims", \
        Edit(replace={i: smeared})


Operator = Callable[[Parent, GateResult], Mutations]

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


def generate(parent: Parent, result: GateResult) -> Iterator[TraceMutant]:
    """Every single mutation of a passing gate result's trace."""
    for name, operator in OPERATORS.items():
        for breaks, description, edit in operator(parent, result):
            yield TraceMutant(name, parent.name, result.gate, result.claim_id, breaks,
                              description, parent.apply(edit))


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


def parents_of(parent: Parent) -> Iterator[tuple[GateResult, set[str]]]:
    """The passing (gate, claim) results of one trace, with each claim's passing gate set."""
    check = check_trace(parent.name, GATE_NAMES, stream=io.BytesIO(parent.data()))
    passed: dict[str, set[str]] = {}
    for r in check.results:
        if r.passed:
            passed.setdefault(r.claim_id, set()).add(r.gate)
    for r in check.results:
        if r.passed:
            yield r, passed[r.claim_id]


def mutants_of(name: str, events: Events) -> Iterator[tuple[TraceMutant, set[str]]]:
    """Every mutant of every passing (gate, claim) of one trace, with the parent's passes."""
    parent = Parent(name, events)
    for result, passed in parents_of(parent):
        for mutant in generate(parent, result):
            yield mutant, passed
