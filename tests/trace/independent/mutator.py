"""An unconstrained mutator of v1 traces: 1–3 blind edits of a legal trace.

Unlike the defect grammar in ``tests/strategies/traces.py`` (which knows what each edit breaks),
this knows nothing about the semantics: it drops, duplicates, swaps or moves any event, or
relabels any field of any event (ids, generations, scopes, tiers, seq, outcome and blocking
ids, arbiter, source, holds and the numbers), with values drawn from the trace's own
vocabulary so that most mutants stay well formed and reach the gates' semantics. What the
mutant means is decided afterwards, by the independent acceptor.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

SHIPPED = Path(__file__).resolve().parents[3] / "src" / "residentkv" / "data" / "traces"

STRUCTURAL = ("drop", "duplicate", "swap", "swap_adjacent", "move", "insert")
#: fields worth relabelling even when an event lacks them (a label on a load, a job id, ...)
OPTIONAL_KEYS = ("generation", "job_id", "owner_scope", "position", "claim_id", "request_id")
TIERS = ("device", "host", "disk")
MODES = ("soft_priority", "hard_protected", "demotable", "expiring", "offloadable",
         "best_effort")
EVENT_SWAPS = {
    "claim_demoted": ("claim_expired", "claim_released"),
    "claim_expired": ("claim_demoted", "claim_released"),
    "claim_released": ("claim_demoted", "claim_expired"),
    "kv_store_started": ("kv_load_started",),
    "kv_load_finished": ("kv_store_finished",),
    "kv_store_finished": ("kv_load_finished",),
    "claim_restored": ("claim_reused",),
    "claim_reused": ("claim_restored",),
    "request_started": ("request_finished",),
}


def shipped_traces() -> dict[str, list[dict[str, Any]]]:
    """The legal traces the package ships, by file name."""
    return {p.name: [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
            for p in sorted(SHIPPED.glob("*.jsonl"))}


def to_bytes(events: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(e) + "\n" for e in events).encode()


@dataclass
class Mutant:
    """A mutated trace and the edits that made it (printed when a property fails)."""

    origin: str
    events: list[dict[str, Any]]
    edits: list[str] = field(default_factory=list)

    def data(self) -> bytes:
        return to_bytes(self.events)

    def __repr__(self) -> str:
        return f"Mutant<{self.origin}; {'; '.join(self.edits)}>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """What hypothesis prints for a falsifying example (not every field of every event)."""
        printer.text(repr(self))

    def compact(self) -> str:
        """One short line per event (what a reader needs to judge it by hand)."""
        skip = {"schema", "ts_ns", "event", "claim_id", "request_id", "object_id",
                "cache_identity", "request_token_map_id", "predicate_id", "bytes"}
        return "\n".join(
            f"{e.get('seq')!s:>4} {e.get('event')} {e.get('claim_id') or '-'} "
            f"{e.get('request_id') or '-'} "
            + " ".join(f"{k}={json.dumps(v)}" for k, v in e.items() if k not in skip)
            for e in self.events)


def _vocabulary(events: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Values the trace already uses, so relabels hit other real ids rather than noise."""
    vocab: dict[str, set[Any]] = {"claims": set(), "requests": set(), "scopes": set(),
                                  "labels": set(), "jobs": set(), "seqs": set()}
    for e in events:
        for key in ("claim_id", "outcome_claim_id"):
            if isinstance(e.get(key), str):
                vocab["claims"].add(e[key])
        if isinstance(e.get("request_id"), str):
            vocab["requests"].add(e["request_id"])
        if isinstance(e.get("owner_scope"), str):
            vocab["scopes"].add(e["owner_scope"])
        if isinstance(e.get("generation"), int):
            vocab["labels"].add(e["generation"])
        if e.get("job_id") is not None:
            vocab["jobs"].add(e["job_id"])
        if isinstance(e.get("seq"), int):
            vocab["seqs"].add(e["seq"])
    return {k: sorted(v, key=repr) for k, v in vocab.items()}


def _values_for(key: str, value: Any, vocab: dict[str, list[Any]]) -> list[Any]:
    """Candidate replacement values for *key* (currently *value*)."""
    claims = [*vocab["claims"], "c-new"]
    if key in ("claim_id", "outcome_claim_id"):
        return [*claims, None]
    if key == "request_id":
        return [*vocab["requests"], "r-new", None]
    if key == "blocking_claim_ids":
        return [[], *([c] for c in claims), [*claims[:2]]]
    if key == "generation":
        base = [*vocab["labels"], 0, 1, 2]
        if isinstance(value, int):
            base += [value - 1, value + 1]
        return [*base, None]
    if key == "owner_scope":
        return [*vocab["scopes"], "tenant:a/session:1", "tenant:x/session:9", None]
    if key in ("tier", "from_tier", "to_tier"):
        return list(TIERS)
    if key == "seq":
        s = value if isinstance(value, int) else 0
        return [*vocab["seqs"], s - 1, s + 1, 2**63 - 1, 2**63, 2**64 + 1, -1]
    if key == "arbiter":
        return ["scheduler_boundary", "admission", "harness"]
    if key == "source":
        return ["offload_tier", "fallback_recompute", "test", "microruntime"]
    if key == "status":
        return ["served", "refused", "error", None]
    if key == "policy":
        return ["fail", "recompute"]
    if key == "protection_mode":
        return list(MODES)
    if key == "registration":
        return ["pre_registered", "post_hoc"]
    if key == "outcome_type":
        return ["refusal", "demotion", "expiry", "harm"]
    if key == "job_id":
        return [*vocab["jobs"], 99, None]
    if key == "event":
        return list(EVENT_SWAPS.get(str(value), (value,)))
    if key == "invalid_block_ids":
        return [[], [0], [0, 1], [1]]
    if key == "predicate" and isinstance(value, dict):
        blocks = value.get("blocks", 1)
        return [
            {**value, "blocks": blocks + 1}, {**value, "blocks": max(1, blocks - 1)},
            {**value, "id": "p-other"},
            {"id": value.get("id"), "kind": "contiguous_range", "blocks": blocks, "start": 1},
            {"id": value.get("id"), "kind": "leading_prefix_at_least", "blocks": blocks},
        ]
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value - 1, value + 1, 0, 1, 2, 3, 2**63]
    if isinstance(value, float):
        return [0.0, value + 1]
    if isinstance(value, str) or value is None:
        return [f"{value}-x" if value else "x", None]
    if isinstance(value, dict):
        return [{k: v for k, v in value.items() if k != "holds"}, {**value, "holds": True}]
    return [None]


def _templates(claim: Any, request: Any) -> list[dict[str, Any]]:
    """Events the legal traces rarely contain, to insert anywhere: ends, losses, failures
    without a job, harness refusals, fallback restores, another tenant's request."""
    claim_fields = {"object_id": f"prefix:{claim}", "predicate_id": "p-lead2"}
    return [
        {"event": "claim_harmed", "claim_id": claim, "request_id": None, **claim_fields,
         "cause": "evicted", "before": {"surviving": 2, "leading": 2, "required": 2,
                                        "holds": True},
         "after": {"surviving": 1, "leading": 0, "required": 2, "holds": False}},
        {"event": "claim_released", "claim_id": claim, "request_id": None, "reason": "done"},
        {"event": "claim_expired", "claim_id": claim, "request_id": None},
        {"event": "claim_demoted", "claim_id": claim, "request_id": None},
        {"event": "block_evicted", "claim_id": claim, "request_id": None, "block_id": 1,
         "protected": False, "reason": "lru", "position": 0},
        {"event": "kv_load_failed", "claim_id": claim, "request_id": request,
         "invalid_block_ids": [0]},
        {"event": "claim_restored", "claim_id": claim, "request_id": request, "generation": 0,
         "source": "fallback_recompute"},
        {"event": "active_request_refused", "claim_id": claim, "request_id": request,
         "outcome_claim_id": claim, "blocking_claim_ids": [claim], "feasibility": "x",
         "arbiter": "harness"},
        {"event": "request_started", "claim_id": None, "request_id": request,
         "owner_scope": "tenant:x/session:9"},
        {"event": "request_finished", "claim_id": None, "request_id": request,
         "status": "served", "finish_reason": "length"},
        {"event": "observation_gap", "claim_id": None, "request_id": None,
         "reason": "batch sequence jumped"},
    ]


def _renumber(events: list[dict[str, Any]]) -> None:
    for i, e in enumerate(events):
        e["seq"], e["ts_ns"] = i, 1000 * (i + 1)


@st.composite
def edit(draw: st.DrawFn, mutant: Mutant, structural: bool) -> None:
    """Apply one edit to *mutant* in place."""
    ev = mutant.events
    n = len(ev)
    if structural:
        kind = draw(st.sampled_from(STRUCTURAL))
        i = draw(st.integers(0, n - 1))
        if kind == "drop" and n > 1:
            mutant.edits.append(f"drop #{i} {ev[i].get('event')}")
            del ev[i]
        elif kind == "duplicate":
            j = draw(st.integers(0, n))
            mutant.edits.append(f"duplicate #{i} {ev[i].get('event')} to #{j}")
            ev.insert(j, copy.deepcopy(ev[i]))
        elif kind == "swap_adjacent" and n > 1:
            i = min(i, n - 2)
            mutant.edits.append(f"swap #{i} {ev[i].get('event')} with next")
            ev[i], ev[i + 1] = ev[i + 1], ev[i]
        elif kind == "insert":
            vocab = _vocabulary(ev)
            claim = draw(st.sampled_from([*vocab["claims"], "c-new"]))
            request = draw(st.sampled_from([*vocab["requests"], "r-new"]))
            body = draw(st.sampled_from(_templates(claim, request)))
            mutant.edits.append(f"insert {body['event']} {claim} {request} at #{i}")
            ev.insert(i, {"schema": "residentkv.event/v1", "seq": 0, "ts_ns": 0,
                          "source": "test", **body})
        elif kind == "swap":
            j = draw(st.integers(0, n - 1))
            mutant.edits.append(f"swap #{i} {ev[i].get('event')} with #{j} "
                                f"{ev[j].get('event')}")
            ev[i], ev[j] = ev[j], ev[i]
        else:
            j = draw(st.integers(0, n - 1))
            moved = ev.pop(i)
            ev.insert(j, moved)
            mutant.edits.append(f"move #{i} {moved.get('event')} to #{j}")
        _renumber(ev)
        return
    i = draw(st.integers(0, n - 1))
    e = ev[i]
    keys = sorted(k for k in e if k not in ("schema", "ts_ns"))
    keys += [k for k in OPTIONAL_KEYS if k not in e]
    key = draw(st.sampled_from(keys))
    vocab = _vocabulary(ev)
    choices = _values_for(key, e.get(key), vocab)
    delete = key in e and key not in ("event", "seq") and draw(st.integers(0, 9)) == 0
    if delete:
        del e[key]
        mutant.edits.append(f"#{i} {e.get('event')}: delete {key}")
        return
    value = draw(st.sampled_from(choices))
    e[key] = copy.deepcopy(value)
    mutant.edits.append(f"#{i} {e.get('event')}: {key} := {json.dumps(value)}")


@st.composite
def mutants(draw: st.DrawFn, sources: st.SearchStrategy[Mutant]) -> Mutant:
    """A legal trace from *sources* with 1–3 blind edits (structural edits first, then
    relabels, so a relabelled seq is not renumbered away)."""
    source = draw(sources)
    mutant = Mutant(source.origin, copy.deepcopy(source.events))
    count = draw(st.integers(1, 3))
    kinds = sorted(draw(st.lists(st.booleans(), min_size=count, max_size=count)), reverse=True)
    for structural in kinds:
        draw(edit(mutant, structural))
    return mutant
