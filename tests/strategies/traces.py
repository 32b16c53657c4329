"""Generated v1 traces with their oracle: legal lifecycles, a defect grammar, raw-line defects.

Three layers, each readable on its own:

1. **Legal traces** (:func:`build_legal`): a :class:`Plan` per claim (its protection mode and
   path through SPEC §2–§4: success, controlled failure, both, expiry, demotion, capacity
   conflict, soft loss reported as harm, resident only), built into events by
   :class:`_Builder`, the claims' events interleaved (each claim's own order kept) with noise
   (generic counters, unclaimed requests and stores). The trace knows which gate each claim must
   pass and which it must fail (:func:`legal_expectations`).
2. **Defects** (:data:`DEFECTS`): name -> function that changes a legal trace and declares the
   (claim, gate) pairs that SPEC says it must break. 1–3 are applied at a time
   (:func:`build_defective`); a defect never edits an event an earlier one touched and never
   picks a claim an earlier one picked, so each declared break survives the others.
3. **Raw-line defects** (:data:`RAW_DEFECTS`): JSON type perturbations and duplicate keys,
   applied to the serialized lines (:func:`build_raw`); v1 is strictly typed JSON without
   duplicate keys, so the trace is not well formed and every gate of every claim must fail.

Hypothesis draws only a :class:`Shape` (:func:`shapes`); :func:`families` turns one shape into
a legal trace, several defective ones and one with raw-line defects.

The oracle comes from the SPEC, not from either implementation: tests compare the streaming
gates and the reference semantics against it, and against each other.
"""

from __future__ import annotations

import itertools
import json
import random
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from hypothesis import strategies as st

from residentkv.model.events import EVENT_MODELS, SCHEMA_ID
from residentkv.model.vocabulary import ALL_GATE_NAMES, GATE_NAMES, GateName, StopCause

OBSERVATION, FAILURE_OUTCOME = GateName.OBSERVATION.value, GateName.FAILURE_OUTCOME.value
LIFECYCLE, ATTRIBUTION = GateName.LIFECYCLE.value, GateName.ATTRIBUTION.value
CONFORMANCE = GateName.CONFORMANCE.value
BLOCK_TOKENS = 128
HAS_PROVENANCE = "stream_started" in EVENT_MODELS


class Kind(StrEnum):
    """One claim's path through its lifecycle in a legal trace."""

    SUCCESS = "success"        # offloadable: stored, offloaded, then k >= 1 restore-and-reuse
    FAILURE = "failure"        # offloadable: stored, offloaded, one controlled failed restore
    LIFECYCLE = "lifecycle"    # offloadable: k >= 1 successful restores, then a failed one
    RESIDENT = "resident"      # offloadable: stored and offloaded, never restored (untouched)
    EXPIRING = "expiring"      # materialized, expired, maybe lost after the expiry
    DEMOTABLE = "demotable"    # materialized, demoted, maybe lost after the demotion
    HARD = "hard_protected"    # materialized; a conflicting request refused naming the claim
    SOFT = "soft_priority"     # materialized; maybe lost, the loss reported as harm first


OFFLOADED = frozenset({Kind.SUCCESS, Kind.FAILURE, Kind.LIFECYCLE, Kind.RESIDENT})
SUCCEEDS = frozenset({Kind.SUCCESS, Kind.LIFECYCLE})
FAILS = frozenset({Kind.FAILURE, Kind.LIFECYCLE})
MODE = {Kind.EXPIRING: "expiring", Kind.DEMOTABLE: "demotable", Kind.HARD: "hard_protected",
        Kind.SOFT: "soft_priority"}
ENDING = {Kind.EXPIRING: "claim_expired", Kind.DEMOTABLE: "claim_demoted"}


#: legal variations a plan may take, each chosen with probability 1/3
STYLES = (
    "submitted",            # claim_submitted before claim_accepted
    "transfer_generation",  # kv_lookup and kv_load_* carry the restore generation
    "refused_status",       # the failed request finishes "refused" rather than "error"
    "deferred",             # a hard_protected conflict defers the request (then served)
    "rematerialized",       # a second evaluation that still holds
    "reoffload",            # stored and offloaded again after each reuse
)


@dataclass(slots=True)
class Plan:
    """What one claim does in a legal trace."""

    claim_id: str
    kind: Kind
    owner_scope: str
    predicate: dict[str, Any]
    footprint: int
    successes: int          # successful restore cycles (SUCCESS, LIFECYCLE)
    labels: list[int]       # the generation label of each restore cycle: distinct, any order
    loss: bool              # EXPIRING/DEMOTABLE: lost after the ending; SOFT: harm, then loss
    release: bool           # SUCCESS/RESIDENT/HARD/SOFT without loss: released at the end
    styles: frozenset[str] = frozenset()  # legal variations, see STYLES
    #: SPEC §9.1: its process stopped while it was open: harmed (engine_restarted at the next
    #: stream's head, or shutdown before its stream_closed)
    stopped: bool = False
    #: its last restore fails and the incarnation dies right after the failed load (the chain
    #: cut off, answered by the harm at the next stream's head)
    cut: bool = False

    @property
    def cycles(self) -> int:
        return self.successes + (self.kind in FAILS)

    @property
    def needed(self) -> range:
        """The block positions the predicate needs."""
        start = self.predicate.get("start") or 0
        return range(start, start + self.predicate["blocks"])

    def quiet(self) -> bool:
        """A non-target that leaves attribution passing: restored and served, or untouched."""
        return not self.stopped and (self.kind in (Kind.SUCCESS, Kind.RESIDENT) or (
            self.kind is Kind.SOFT and not self.loss))

    def open_at_end(self) -> bool:
        """Accepted and not ended when its events end (its stream's stop must end it)."""
        return self.cut or (not self.release and (
            self.kind in (Kind.SUCCESS, Kind.RESIDENT, Kind.HARD)
            or (self.kind is Kind.SOFT and not self.loss)))


@dataclass(slots=True)
class Ev:
    """An event under construction: its JSON body (no seq yet) and builder tags."""

    body: dict[str, Any]
    owner: str | None           # the plan claim it belongs to; None for noise
    role: str                   # its part in the owner's lifecycle (see _Builder)
    cycle: int | None = None    # the owner's restore cycle it belongs to
    touched: bool = False       # edited or relied on by a defect: later defects leave it alone


Key = tuple[str, str]  # (claim, gate)


@dataclass
class GenTrace:
    """A generated trace, the oracle for it, and how it was made (for failure reports)."""

    plans: list[Plan]
    events: list[Ev]
    rnd: random.Random
    interleaved: bool
    expect: dict[Key, bool] = field(default_factory=dict)
    breaks: set[Key] = field(default_factory=set)
    defects: list[str] = field(default_factory=list)
    subjects: set[str] = field(default_factory=set)
    raw: dict[int, str] = field(default_factory=dict)
    jobs: Iterator[int] = field(default_factory=lambda: itertools.count(10_000))
    fresh: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    #: SPEC §9.1: the claims open where the reading stops (None: not promised)
    live: set[str] | None = None

    def __repr__(self) -> str:
        return f"GenTrace<{self.describe()}>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """What hypothesis prints for a falsifying example (not every field of every event)."""
        printer.text(repr(self))

    # --- output ---------------------------------------------------------------------------
    def records(self) -> list[dict[str, Any]]:
        """The events as v1 objects, ts_ns assigned in list order, seq in each stream's
        (SPEC §9.1: it starts afresh at every stream_started after the first)."""
        out = []
        seq = 0
        for i, e in enumerate(self.events):
            if e.role == "opener" and i:
                seq = 0
            rec = {"schema": SCHEMA_ID, "seq": seq, "ts_ns": 1000 * (i + 1)}
            seq += 1
            rec.update(e.body)
            out.append(rec)
        return out

    def data(self) -> bytes:
        lines = [self.raw.get(i) or json.dumps(r) for i, r in enumerate(self.records())]
        return "".join(line + "\n" for line in lines).encode()

    def compact(self) -> str:
        """One short line per event: seq, event, claim, request, the fields that matter."""
        skip = {"schema", "seq", "ts_ns", "event", "claim_id", "request_id", "object_id",
                "cache_identity", "request_token_map_id", "predicate_id", "bytes"}
        lines = []
        for i, r in enumerate(self.records()):
            fields = " ".join(f"{k}={json.dumps(v)}" for k, v in r.items() if k not in skip)
            raw = "  RAW " + self.raw[i] if i in self.raw else ""
            lines.append(f"{i:>3} {r['event']} {r['claim_id'] or '-'} {r['request_id'] or '-'} "
                         f"{fields}{raw}")
        return "\n".join(lines)

    def describe(self) -> str:
        kinds = ", ".join(f"{p.claim_id}:{p.kind}x{p.cycles}" for p in self.plans)
        how = "interleaved" if self.interleaved else "sequential"
        return f"claims [{kinds}] {how}; defects {self.defects or ['none']}"

    # --- finding and editing events --------------------------------------------------------
    def plan(self, claim: str) -> Plan:
        return next(p for p in self.plans if p.claim_id == claim)

    def find(self, owner: str | None = None, role: str | None = None,
             cycle: int | None = None, request: str | None = None) -> list[int]:
        return [i for i, e in enumerate(self.events)
                if (owner is None or e.owner == owner) and (role is None or e.role == role)
                and (cycle is None or e.cycle == cycle)
                and (request is None or e.body.get("request_id") == request)]

    def one(self, owner: str, role: str, cycle: int | None = None) -> int:
        return self.find(owner, role, cycle)[0]

    def pos(self, lo: int, hi: int) -> int:
        """A random insertion index in ``[lo, hi]`` (insert before that index), inside the
        body of the stream holding index *lo* (before its stop events, SPEC §9.1)."""
        return self.rnd.randint(lo, max(lo, min(hi, self.body_end(lo))))

    def body_end(self, i: int) -> int:
        """The index of the first stop event (an opener, a shutdown harm, a closer) at or
        after *i*: a defect's events stay in the stream of what it changes."""
        return next((j for j in range(max(i, 1), len(self.events))
                     if self.events[j].role in _STOPS), len(self.events))

    def insert(self, at: int, ev: Ev) -> int:
        ev.touched = True
        self.events.insert(at, ev)
        return at

    def insert_after(self, after: int, evs: list[Ev], before: int | None = None) -> None:
        """Insert *evs* in order at random places after index *after* (and before *before*)."""
        for ev in evs:
            hi = len(self.events) if before is None else before
            after = self.insert(self.pos(after + 1, hi), ev)
            if before is not None:
                before += 1

    def touch(self, *indices: int) -> None:
        for i in indices:
            self.events[i].touched = True

    def untouched(self, *indices: int) -> bool:
        return not any(self.events[i].touched for i in indices)

    def request(self) -> str:
        return f"r-x{next(self.fresh)}"

    def must_fail(self, claim: str, *gates: str) -> None:
        self.breaks.update((claim, g) for g in gates)

    def claims(self) -> list[str]:
        return [p.claim_id for p in self.plans]


# --- building legal events -----------------------------------------------------------------

def ident(plan: Plan) -> dict[str, Any]:
    """The identity tuple every claim event repeats (SPEC §3)."""
    tenant = plan.owner_scope.split("/")[0]
    return {
        "object_id": f"prefix:{plan.claim_id}",
        "cache_identity": f"tiny-llama|tok|vllm-prefix|{tenant}|{BLOCK_TOKENS}|bf16|-",
        "request_token_map_id": f"tokmap:{plan.claim_id}",
        "predicate_id": plan.predicate["id"],
    }


def event(name: str, claim: str | None, request: str | None, /, source: str = "generated",
          **fields: Any) -> dict[str, Any]:
    """A v1 body without seq/ts_ns: envelope first, then the event's fields."""
    return {"source": source, "event": name, "claim_id": claim, "request_id": request, **fields}


class _Builder:
    """Builds one claim's legal events in lifecycle order."""

    def __init__(self, plan: Plan, jobs: Iterator[int]) -> None:
        self.plan, self.jobs, self.out = plan, jobs, []
        self.requests = itertools.count()
        self.cycle: int | None = None
        self.tokens = plan.footprint * BLOCK_TOKENS

    def request_id(self) -> str:
        return f"r-{self.plan.claim_id.removeprefix('c-')}.{next(self.requests)}"

    def add(self, role: str, name: str, request: str | None, *, claimed: bool = True,
            **fields: Any) -> None:
        p = self.plan
        body = event(name, p.claim_id if claimed else None, request, **fields)
        if name.startswith("claim_") and claimed:
            body.update(ident(p))
        self.out.append(Ev(body, p.claim_id, role, self.cycle))

    def start(self, request: str, owner_scope: str | None = None) -> None:
        self.add("start", "request_started", request, claimed=False, prompt_tokens=self.tokens,
                 owner_scope=owner_scope or self.plan.owner_scope)

    def finish(self, request: str, status: str = "served", reason: str = "length") -> None:
        self.add("finish", "request_finished", request, claimed=False, status=status,
                 finish_reason=reason)

    def transfer(self, **fields: Any) -> dict[str, Any]:
        """Fields of a substrate event of the current cycle (its generation, in some styles)."""
        if "transfer_generation" in self.plan.styles and self.cycle is not None:
            fields["generation"] = self.plan.labels[self.cycle]
        return fields

    def resident(self, r: str) -> None:
        p = self.plan
        extra = {"expires_after_s": 30.0} if p.kind is Kind.EXPIRING else {}
        if "submitted" in p.styles:
            self.add("submitted", "claim_submitted", r, owner_scope=p.owner_scope)
        self.add("accept", "claim_accepted", r, registration="pre_registered",
                 protection_mode=MODE.get(p.kind, "offloadable"), footprint_blocks=p.footprint,
                 predicate=p.predicate, owner_scope=p.owner_scope, **extra)
        self.add("materialized", "claim_materialized", r, surviving=p.footprint,
                 leading=p.footprint, required=p.predicate["blocks"], holds=True, tier="device")
        if "rematerialized" in p.styles and p.kind not in OFFLOADED:
            self.add("materialized", "claim_materialized", r, surviving=p.footprint,
                     leading=p.footprint, required=p.predicate["blocks"], holds=True,
                     tier="device")
        if p.kind in OFFLOADED:
            self.offload(r, p.labels[0])

    def offload(self, r: str, generation: int) -> None:
        p = self.plan
        job, size = next(self.jobs), p.footprint * 2048
        self.add("store_started", "kv_store_started", r, job_id=job, bytes=size,
                 from_tier="device", to_tier="host")
        self.add("store_finished", "kv_store_finished", r, job_id=job, bytes=size,
                 success=True, from_tier="device", to_tier="host")
        self.add("offloaded", "claim_offloaded", r, generation=generation,
                 from_tier="device", to_tier="host", block_count=p.footprint)

    def restore_required(self, r: str, cycle: int) -> tuple[int, int]:
        self.cycle = cycle
        gen, job = self.plan.labels[cycle], next(self.jobs)
        self.add("lookup", "kv_lookup", r, **self.transfer(hit_tokens=self.tokens,
                                                           async_load=True))
        self.add("restore_required", "claim_restore_required", r, generation=gen,
                 from_tier="host", to_tier="device", tokens=self.tokens)
        self.add("load_started", "kv_load_started", r,
                 **self.transfer(job_id=job, bytes=self.plan.footprint * 2048))
        return gen, job

    def restore_ok(self, r: str, cycle: int) -> None:
        gen, job = self.restore_required(r, cycle)
        self.add("load_ok", "kv_load_finished", r,
                 **self.transfer(job_id=job, bytes=self.plan.footprint * 2048, success=True))
        self.add("restored", "claim_restored", r, source="offload_tier", generation=gen)
        self.add("reused", "claim_reused", r, generation=gen, holds=True)
        if "reoffload" in self.plan.styles and cycle + 1 < len(self.plan.labels):
            self.offload(r, self.plan.labels[cycle + 1])

    def restore_fails(self, r: str, cycle: int) -> None:
        p = self.plan
        gen, job = self.restore_required(r, cycle)
        blocks = list(range(p.footprint))
        self.add("load_bad", "kv_load_finished", r, **self.transfer(
            job_id=job, bytes=p.footprint * 2048, success=False, injected=True))
        self.add("load_failed", "kv_load_failed", r, **self.transfer(
            invalid_block_ids=blocks, job_id=job, injected=True))
        self.add("sched_fail", "scheduler_load_failure", r, policy="fail",
                 invalid_block_count=len(blocks), failed_tokens=self.tokens,
                 finish_status="FINISHED_ERROR")
        self.add("restore_failed", "claim_restore_failed", r, generation=gen,
                 reason="injected load failure", injected=True, outcome_type="refusal",
                 outcome_claim_id=p.claim_id)
        self.add("refusal", "active_request_refused", r, outcome_claim_id=p.claim_id,
                 blocking_claim_ids=[p.claim_id], feasibility="restore_failed",
                 arbiter="scheduler_boundary")

    def build(self) -> list[Ev]:
        p = self.plan
        r0 = self.request_id()
        self.start(r0)
        self.resident(r0)
        self.finish(r0)
        for cycle in range(p.successes):
            r = self.request_id()
            self.cycle = cycle
            self.start(r)
            self.restore_ok(r, cycle)
            self.finish(r)
        if p.kind in FAILS:
            r = self.request_id()
            self.cycle = p.successes
            self.start(r)
            self.restore_fails(r, p.successes)
            status = "refused" if "refused_status" in p.styles else "error"
            self.finish(r, status, status)
        self.cycle = None
        self.outcomes()
        return self.out

    def outcomes(self) -> None:
        """What follows residency for the modes that do not restore."""
        p = self.plan
        if p.kind in ENDING:
            self.add("ending", ENDING[p.kind], None, reason="policy")
            if p.loss:
                self.lose(0, "lost", "claim_block_lost_after_release")
        elif p.kind is Kind.HARD:
            r = self.request_id()
            self.start(r, owner_scope="tenant:z/session:1")
            if "deferred" in p.styles:
                self.add("conflict", "active_request_deferred", r, reason="capacity",
                         blocking_claim_ids=[p.claim_id])
                self.finish(r)
            else:
                self.add("conflict", "active_request_refused", r, outcome_claim_id=p.claim_id,
                         blocking_claim_ids=[p.claim_id], arbiter="admission", shortfall=50,
                         feasibility="infeasible_preserve_resident_and_active")
                self.finish(r, "refused", "infeasible")
        elif p.kind is Kind.SOFT and p.loss:
            need = p.predicate["blocks"]
            self.add("harm", "claim_harmed", None, cause="evicted under pressure",
                     before={"surviving": p.footprint, "leading": p.footprint,
                             "required": need, "holds": True},
                     after={"surviving": p.footprint - 1, "leading": p.needed[0],
                            "required": need, "holds": False})
            self.lose(p.needed[0], "evicted")
        if p.release:
            self.add("released", "claim_released", None, reason="owner released")

    def lose(self, position: int, role: str, name: str = "block_evicted") -> None:
        if name == "block_evicted":
            self.add(role, name, None, block_id=1000 + position, protected=False, reason="lru",
                     position=position)
        else:
            self.add(role, name, None, block_id=1000 + position, position=position)


def _noise(rnd: random.Random, jobs: Iterator[int]) -> list[Ev]:
    """Events no claim owns: never evidence, only controls may notice them."""
    out: list[Ev] = []
    for n in range(rnd.randint(0, 3)):
        choice = rnd.randrange(3)
        if choice == 0:
            out.append(Ev(event("generic_counter", None, None, name="kv_hits", value=n), None,
                          "noise"))
            continue
        r = f"r-n{n}"
        out.append(Ev(event("request_started", None, r, prompt_tokens=64,
                            owner_scope="tenant:n/session:1"), None, "noise"))
        if choice == 2:  # an ordinary offload of KV nobody claimed
            job = next(jobs)
            for name, extra in (("kv_store_started", {}), ("kv_store_finished",
                                                           {"success": True})):
                out.append(Ev(event(name, None, r, job_id=job, bytes=2048, from_tier="device",
                                    to_tier="host", **extra), None, "noise"))
        out.append(Ev(event("request_finished", None, r, status="served",
                            finish_reason="length"), None, "noise"))
    return out


def _interleave(rnd: random.Random, queues: list[list[Ev]], shuffle: bool) -> list[Ev]:
    """Merge the queues keeping each one's order: one after another, or event by event."""
    if not shuffle:
        return [e for q in queues for e in q]
    heads = [q[::-1] for q in queues if q]
    out: list[Ev] = []
    while heads:
        q = rnd.choice(heads)
        out.append(q.pop())
        if not q:
            heads.remove(q)
    return out


#: roles that bound a stream's body (events a defect inserts stay before them)
_STOPS = frozenset({"opener", "shutdown", "closer"})


def legal_expectations(plans: list[Plan]) -> dict[Key, bool]:
    """(claim, gate) -> must pass (True) or must fail (False), from SPEC §4 alone.

    observation: a complete offload/restore/reuse cycle. failure_outcome: a controlled failure
    with an attributed refusal. lifecycle: the paths the mode promises (offloadable: success
    then failure; expiring/demotable: the ending before any loss; hard_protected: an attributed
    conflict; soft_priority: both generations, like offloadable, so the materialized-only
    soft_priority plan here never passes it). attribution: two or more
    claims, this one's controlled failure, every other claim restored or untouched.
    """
    expect: dict[Key, bool] = {}
    for p in plans:
        others = [q for q in plans if q is not p]
        c = p.claim_id
        expect[c, OBSERVATION] = p.kind in SUCCEEDS
        expect[c, FAILURE_OUTCOME] = p.kind in FAILS and not p.cut
        # a soft_priority claim here is only materialized: its lifecycle asks for both
        # generations, like offloadable's (SPEC §4); a claim its process's stop harmed has
        # no harmless lifecycle
        expect[c, LIFECYCLE] = p.kind not in (Kind.SUCCESS, Kind.FAILURE, Kind.RESIDENT,
                                              Kind.SOFT) and not p.stopped
        expect[c, ATTRIBUTION] = (p.kind in FAILS and not p.cut and bool(others)
                                  and all(q.quiet() for q in others))
        # SPEC §9.1: a legal history, decided once, every failure answered (a cut chain by the
        # harm at the next stream's head), every loss announced, nothing vanished
        expect[c, CONFORMANCE] = True
    return expect


@dataclass(frozen=True)
class Shape:
    """What hypothesis draws: the structure of a trace. Everything else follows from ``seed``,
    so a failure shrinks to fewer claims, cycles and defects while generation stays cheap."""

    claims: tuple[tuple[Kind, int], ...]  # (kind, successful restore cycles) per claim
    interleaved: bool
    seed: int


_SEED = st.integers(0, 2**32 - 1)
_KIND = st.sampled_from(list(Kind))
_TARGET = st.sampled_from([Kind.FAILURE, Kind.LIFECYCLE])
_QUIET = st.sampled_from([Kind.SUCCESS, Kind.RESIDENT, Kind.SOFT])
# now and then ten and more cycles: bounded gate state must prune resolved history
_SUCCESSES = st.sampled_from((1, 2, 3, 1, 2, 1, 10, 12, 18))


@st.composite
def shapes(draw: st.DrawFn, max_claims: int = 4, min_claims: int = 1,
           kinds_from: tuple[Kind, ...] | None = None) -> Shape:
    """min_claims..max_claims claims; often an attribution mix (one failing target, quiet
    others), or each claim of any kind (of *kinds_from* only, when given)."""
    n = draw(st.integers(min_claims, max_claims))
    if kinds_from is not None:
        kinds = [draw(st.sampled_from(kinds_from)) for _ in range(n)]
    elif n > 1 and draw(st.booleans()):
        kinds = [draw(_TARGET), *(draw(_QUIET) for _ in range(n - 1))]
        if draw(st.booleans()):
            kinds.reverse()
    else:
        kinds = [draw(_KIND) for _ in range(n)]
    claims = tuple((k, draw(_SUCCESSES) if k in SUCCEEDS else 0) for k in kinds)
    return Shape(claims, n > 1 and draw(st.booleans()), draw(_SEED))


def _plan(rnd: random.Random, index: int, kind: Kind, successes: int) -> Plan:
    footprint = rnd.randint(1, 8)
    blocks = rnd.randint(1, footprint)
    if rnd.random() < 0.25:
        start = rnd.randint(0, footprint - blocks)
        predicate = {"id": f"p-range{start}-{blocks}", "kind": "contiguous_range",
                     "blocks": blocks, "start": start}
    else:
        predicate = {"id": f"p-lead{blocks}", "kind": "leading_prefix_at_least",
                     "blocks": blocks}
    labels = list(range(successes + (kind in FAILS))) or [0]
    if rnd.random() < 0.25:  # SPEC §4.2: labels increase, not necessarily by one
        labels = [3 * g + 1 for g in labels]
    return Plan(
        claim_id=f"c-{index}", kind=kind, owner_scope=f"tenant:{'ab'[index % 2]}/session:{index}",
        predicate=predicate, footprint=footprint, successes=successes, labels=labels,
        loss=(loss := kind in (Kind.EXPIRING, Kind.DEMOTABLE, Kind.SOFT) and rnd.random() < 0.5),
        release=kind in (Kind.SUCCESS, Kind.RESIDENT, Kind.HARD, Kind.SOFT) and not loss
        and rnd.random() < 0.25,
        styles=frozenset(x for x in STYLES if rnd.random() < 1 / 3),
    )


def build_legal(shape: Shape, variant: int = 0) -> GenTrace:
    """The legal trace of *shape* (the same for every *variant*), its oracle in ``expect``;
    *variant* only seeds what defects applied later choose."""
    rnd = random.Random(shape.seed)
    claim_plans = [_plan(rnd, i + 1, k, n) for i, (k, n) in enumerate(shape.claims)]
    jobs = itertools.count()
    queues = [_Builder(p, jobs).build() for p in claim_plans]
    queues.append(_noise(rnd, jobs))
    events = _interleave(rnd, queues, shape.interleaved)
    if HAS_PROVENANCE:
        events.insert(0, _opener(None))
    t = GenTrace(claim_plans, events, random.Random(shape.seed * 7919 + variant),
                 shape.interleaved)
    t.expect = legal_expectations(claim_plans)
    t.live = {p.claim_id for p in claim_plans if p.open_at_end()}
    return t


def _opener(incarnation: str | None) -> Ev:
    return Ev(event("stream_started", None, None, emitter={
        "name": "residentkv.tests", "version": "0"}, runtime={"name": "generated",
        "version": "0"}, stream_id="generated", replica=None, rank=None,
        **({"incarnation": incarnation} if incarnation else {})), None, "opener")


# --- the defect grammar ----------------------------------------------------------------------
#
# A defect takes a legal trace and a subject claim it may change, edits the events and declares
# with must_fail() what SPEC says the edit breaks. It returns False when it does not apply to
# that subject (nothing was changed).

Apply = Callable[[GenTrace, Plan], bool]


@dataclass(frozen=True)
class Defect:
    name: str
    breaks: str     # the gates it can break, and why, for the docs and failure reports
    apply: Apply


def _failure_broken(t: GenTrace, p: Plan) -> None:
    """The claim's controlled failure no longer meets failure_outcome: neither does anything
    that needs it (attribution's target_failure_outcome, lifecycle's failure generation)."""
    t.must_fail(p.claim_id, FAILURE_OUTCOME, ATTRIBUTION)
    if p.kind is Kind.LIFECYCLE:
        t.must_fail(p.claim_id, LIFECYCLE)


def _observation_broken(t: GenTrace, p: Plan) -> None:
    """No restore cycle of the claim meets observation: nor does lifecycle's success one."""
    t.must_fail(p.claim_id, OBSERVATION)
    if p.kind is Kind.LIFECYCLE:
        t.must_fail(p.claim_id, LIFECYCLE)


def _everything_broken(t: GenTrace, claims: list[str]) -> None:
    """Illegal or not well formed: every gate, conformance included, fails for *claims*."""
    for c in claims:
        t.must_fail(c, *ALL_GATE_NAMES)


def _attribution_broken(t: GenTrace) -> None:
    """A failure/outcome event names a non-target (or no claim): attribution fails for all."""
    for c in t.claims():
        t.must_fail(c, ATTRIBUTION)


def _failure_events(t: GenTrace, p: Plan) -> dict[str, int] | None:
    """Indices of the claim's failed restore cycle, by role, if all are untouched."""
    if p.kind not in FAILS or p.cut:  # a chain its incarnation's death cut off has no rest
        return None
    cycle = p.successes
    found = {t.events[i].role: i for i in t.find(p.claim_id, cycle=cycle)}
    return found if t.untouched(*found.values()) else None


def _affected_request(t: GenTrace, f: dict[str, int]) -> str:
    return str(t.events[f["restore_required"]].body["request_id"])


def _new_request(t: GenTrace, lo: int, hi: int, after: int | None = None,
                 status: str = "refused") -> tuple[str, int]:
    """Start a fresh request somewhere in [lo, hi]; finish it after index *after* (if given)."""
    r = t.request()
    at = t.insert(t.pos(lo, hi), Ev(event("request_started", None, r, prompt_tokens=64,
                                          owner_scope="tenant:x/session:1"), None, "start"))
    if after is not None:
        after += after >= at
        t.insert_after(after, [Ev(event("request_finished", None, r, status=status,
                                        finish_reason=status), None, "finish")])
    return r, at


def refusal_other_request(t: GenTrace, p: Plan) -> bool:
    """The attributed refusal refuses another request (class 1): not the affected one."""
    f = _failure_events(t, p)
    if f is None:
        return False
    ref, affected = f["refusal"], _affected_request(t, f)
    r, at = _new_request(t, 0, ref)
    ref += at <= ref
    t.events[ref].body["request_id"] = r
    t.touch(ref)
    if t.rnd.random() < 0.5:  # and comes after the affected request finished
        moved = t.events.pop(ref)
        fin = next(i for i in t.find(request=affected) if t.events[i].role == "finish")
        t.events.insert(t.pos(fin + 1, len(t.events)), moved)
    fin_new = len(t.events)
    t.insert(fin_new, Ev(event("request_finished", None, r, status="refused",
                               finish_reason="refused"), None, "finish"))
    _failure_broken(t, p)
    return True


def relabel_failed_restore(t: GenTrace, p: Plan) -> bool:
    """The failed restore belongs to another request than the one refused (class 1)."""
    f = _failure_events(t, p)
    if f is None:
        return False
    roles = ("lookup", "restore_required", "load_started", "load_bad", "load_failed",
             "sched_fail", "restore_failed")
    first = min(f[x] for x in roles)
    r, at = _new_request(t, 0, first)
    for x in roles:
        i = f[x] + (at <= f[x])
        t.events[i].body["request_id"] = r
        t.touch(i)
    last = max(f[x] + (at <= f[x]) for x in roles)
    t.insert_after(last, [Ev(event("request_finished", None, r, status="error",
                                   finish_reason="error"), None, "finish")])
    _failure_broken(t, p)
    return True


def early_finish(t: GenTrace, p: Plan) -> bool:
    """The affected request finishes before its refusal (vLLM's order), again after (class 2)."""
    f = _failure_events(t, p)
    if f is None:
        return False
    r = _affected_request(t, f)
    t.touch(f["finish"], f["refusal"])
    t.insert(t.pos(f["restore_required"] + 1, f["refusal"]),
             Ev(event("request_finished", None, r, status="error", finish_reason="error"),
                p.claim_id, "finish_early"))
    _failure_broken(t, p)
    return True


def duplicate_finish(t: GenTrace, p: Plan) -> bool:
    """A request of the claim finishes twice: a well-formedness problem (SPEC §4.1)."""
    finishes = [i for i in t.find(p.claim_id, "finish") if t.untouched(i)]
    if not finishes:
        return False
    i = t.rnd.choice(finishes)
    t.touch(i)
    copy = Ev(dict(t.events[i].body), p.claim_id, "finish_again")
    t.insert_after(i, [copy])
    _everything_broken(t, t.claims())
    return True


def decoy_refusal(t: GenTrace, p: Plan) -> bool:
    """An early decoy refusal before the affected request finishes, the attributed refusal
    after it (class 3): timing and attribution must be met by one and the same event."""
    f = _failure_events(t, p)
    if f is None:
        return False
    c, r = p.claim_id, _affected_request(t, f)
    refusal = t.events.pop(f["refusal"])
    refusal.touched = True
    fin = next(i for i in t.find(request=r) if t.events[i].role == "finish")
    t.touch(fin)
    t.events.insert(t.pos(fin + 1, len(t.events)), refusal)
    kind = t.rnd.choice(["other_request", "harness", "smeared"])
    others = [x for x in t.claims() if x != c] or ["c-ghost"]
    blocking = [c, t.rnd.choice(others)] if kind == "smeared" else [c]
    decoy = event("active_request_refused", c, r, outcome_claim_id=c,
                  blocking_claim_ids=blocking, feasibility="restore_failed",
                  arbiter="harness" if kind == "harness" else "scheduler_boundary")
    lo = f["restore_required"] + 1
    if kind == "other_request":
        decoy["request_id"], at = _new_request(t, lo, fin, after=fin)
        lo, fin = at + 1, fin + 1
    t.insert(t.pos(lo, fin), Ev(decoy, c, "decoy"))
    _failure_broken(t, p)
    if kind == "smeared":
        _attribution_broken(t)
    t.defects[-1] += f"[{kind}]"
    return True


def null_claim_failure(t: GenTrace, p: Plan) -> bool:
    """A failure or outcome event that names no claim (class 7)."""
    f = _failure_events(t, p)
    kind = t.rnd.choice(["unnamed_restore_failed", "null_envelope", "unnamed_harm"])
    if f is None or kind == "unnamed_harm":
        at = t.pos(t.one(p.claim_id, "materialized") + 1, len(t.events))
        t.insert(at, Ev(event("claim_harmed", None, None, cause="unknown", before={
            "surviving": 2, "leading": 2, "required": 2, "holds": True}, after={
            "surviving": 1, "leading": 0, "required": 2, "holds": False}), None, "harm"))
        kind = "unnamed_harm"
    else:
        body = t.events[f["restore_failed"]].body
        body["claim_id"] = None
        if kind == "unnamed_restore_failed":
            body["outcome_claim_id"] = None
            _failure_broken(t, p)
        t.touch(f["restore_failed"])
    _attribution_broken(t)
    t.defects[-1] += f"[{kind}]"
    return True


def outcome_names_non_target(t: GenTrace, p: Plan) -> bool:
    """The target's failure/outcome events name another claim (class 8, attribution rules)."""
    f = _failure_events(t, p)
    if f is None:
        return False
    c = p.claim_id
    other = t.rnd.choice([x for x in t.claims() if x != c] or ["c-ghost"])
    kind = t.rnd.choice(["restore_failed_outcome", "refusal_outcome", "refusal_blocking",
                         "refusal_envelope", "store_failed", "expired"])
    if kind == "expired" and (other == "c-ghost" or not t.untouched(*t.find(other))):
        kind = "store_failed"
    ref, rf = t.events[f["refusal"]].body, t.events[f["restore_failed"]].body
    t.touch(f["refusal"], f["restore_failed"])
    if kind == "restore_failed_outcome":
        rf["outcome_claim_id"] = other
        _failure_broken(t, p)
    elif kind == "refusal_outcome":
        ref["outcome_claim_id"] = other
        _failure_broken(t, p)
    elif kind == "refusal_blocking":
        ref["blocking_claim_ids"] = [other]
        _failure_broken(t, p)
    elif kind == "refusal_envelope":
        ref["claim_id"] = other
    elif kind == "store_failed":
        t.insert(t.pos(f["restore_required"], len(t.events)), Ev(event(
            "kv_store_finished", other, None, job_id=next(t.jobs), bytes=2048, success=False,
            from_tier="device", to_tier="host"), None, "store_failed"))
    else:
        t.insert(t.pos(t.find(other)[-1] + 1, len(t.events)), Ev(
            event("claim_expired", other, None, reason="ttl", **ident(t.plan(other))), other,
            "ending"))
        t.subjects.add(other)
    _attribution_broken(t)
    t.defects[-1] += f"[{kind}]"
    return True


def served_after_refusal(t: GenTrace, p: Plan) -> bool:
    """The refused request finishes ``served``: it contradicts the refusal (SPEC §4.1)."""
    f = _failure_events(t, p)
    if f is None:
        return False
    t.events[f["finish"]].body.update(status="served", finish_reason="length")
    t.touch(f["finish"], f["refusal"])
    _failure_broken(t, p)
    return True


def hard_conflict_misattributed(t: GenTrace, p: Plan) -> bool:
    """A hard_protected conflict that does not show the claim kept (class 8): the refusal names
    another claim, or comes after the claim was released, or is the claim's own restore
    failure instead of a capacity conflict."""
    if p.kind is not Kind.HARD:
        return False
    c, i = p.claim_id, t.one(p.claim_id, "conflict")
    if not t.untouched(i):
        return False
    refusal = t.events[i].body
    t.touch(i)
    deferred = refusal["event"] == "active_request_deferred"
    kind = t.rnd.choice(["names_other", "after_release"] + ([] if deferred
                                                            else ["own_restore_failure"]))
    if kind == "names_other":
        other = t.rnd.choice([x for x in t.claims() if x != c] or ["c-ghost"])
        refusal["blocking_claim_ids" if deferred else "outcome_claim_id"] = [other] if deferred \
            else other
        _attribution_broken(t)
    elif kind == "after_release":
        mat = t.one(c, "materialized")
        t.insert(t.pos(mat + 1, i), Ev(event("claim_released", c, None, reason="done",
                                             **ident(p)), c, "released"))
    else:
        refusal.update(arbiter="scheduler_boundary", feasibility="restore_failed")
        r = refusal["request_id"]
        t.insert(i, Ev(event("claim_restore_failed", c, r, generation=0, reason="load failed",
                             injected=True, outcome_type="refusal", outcome_claim_id=c,
                             **ident(p)), c, "restore_failed"))
    t.must_fail(c, LIFECYCLE)
    t.defects[-1] += f"[{kind}]"
    return True


def silent_loss(t: GenTrace, p: Plan) -> bool:
    """A needed position lost, or an evaluation that no longer holds, with no outcome before
    it (class 5): lifecycle fails, and so does attribution (a non-target not served)."""
    if p.kind not in (Kind.HARD, Kind.SOFT, Kind.EXPIRING, Kind.DEMOTABLE):
        return False
    mat = t.one(p.claim_id, "materialized")
    later = [i for i in t.find(p.claim_id) if i > mat and t.events[i].body["claim_id"]
             and t.events[i].role in ("ending", "harm", "released")]
    end = min(later, default=len(t.events))
    position = t.rnd.choice(list(p.needed))
    c = p.claim_id
    reevaluate = p.predicate["kind"] == "leading_prefix_at_least" and t.rnd.random() < 0.4
    if reevaluate:
        body = event("claim_materialized", c, None, surviving=p.footprint - 1,
                     leading=position, required=p.predicate["blocks"], holds=False,
                     tier="device", **ident(p))
    else:
        body = event("block_evicted", c, None, block_id=2000 + position,
                     protected=p.kind is Kind.HARD, reason="lru", position=position)
    t.insert(t.pos(mat + 1, end), Ev(body, c, "silent_loss"))
    t.must_fail(c, LIFECYCLE)
    _attribution_broken(t)
    t.defects[-1] += "[reevaluation]" if reevaluate else "[eviction]"
    return True


def holds_contradiction(t: GenTrace, p: Plan) -> bool:
    """claim_materialized says ``holds: true`` while its own numbers fail the predicate."""
    if p.kind not in (*SUCCEEDS, Kind.HARD, Kind.SOFT):
        return False
    if p.predicate["kind"] != "leading_prefix_at_least":
        return False
    evaluations = t.find(p.claim_id, "materialized")
    if not t.untouched(*evaluations):
        return False
    for i in evaluations:
        leading = t.rnd.randrange(p.predicate["blocks"])
        t.events[i].body.update(surviving=t.rnd.choice([leading, 59]), leading=leading,
                                holds=True)
        t.touch(i)
    if p.kind in SUCCEEDS:
        _observation_broken(t, p)
    if p.kind is not Kind.SUCCESS:
        t.must_fail(p.claim_id, LIFECYCLE)
    return True


def reaccept_changed(t: GenTrace, p: Plan) -> bool:
    """A second claim_accepted that changes the predicate or identity: ambiguous identity."""
    acc = t.one(p.claim_id, "accept")
    body = json.loads(json.dumps(t.events[acc].body))
    body["request_id"] = None
    change = t.rnd.choice(["blocks", "predicate_id", "object_id", "cache_identity"])
    if change == "blocks":
        body["predicate"]["blocks"] += 1
        body["footprint_blocks"] = max(body["footprint_blocks"], body["predicate"]["blocks"]
                                       + (body["predicate"].get("start") or 0))
    elif change == "predicate_id":
        body["predicate"]["id"] = body["predicate_id"] = body["predicate_id"] + "-v2"
    else:
        body[change] += "-v2"
    mat = t.one(p.claim_id, "materialized")
    t.insert(t.pos(mat + 1, len(t.events)), Ev(body, p.claim_id, "reaccept"))
    _everything_broken(t, [p.claim_id])
    t.defects[-1] += f"[{change}]"
    return True


def store_before_accept(t: GenTrace, p: Plan) -> bool:
    """The claim's store events before claim_accepted: nothing precedes acceptance."""
    if p.kind not in OFFLOADED:
        return False
    acc = t.one(p.claim_id, "accept")
    job = next(t.jobs)
    early = [Ev(event(name, p.claim_id, None, job_id=job, bytes=2048, from_tier="device",
                      to_tier="host", **extra), p.claim_id, "store_early")
             for name, extra in (("kv_store_started", {}),
                                 ("kv_store_finished", {"success": True}))]
    t.insert_after(-1, early, before=acc)
    _everything_broken(t, [p.claim_id])
    return True


def _success_cycle(t: GenTrace, p: Plan, cycle: int, request: str) -> list[Ev]:
    """The events of one more successful restore cycle, as the builder makes them."""
    b = _Builder(p, t.jobs)
    b.cycle = cycle
    b.start(request)
    b.restore_ok(request, cycle)
    b.finish(request)
    return b.out


def restore_after_end(t: GenTrace, p: Plan) -> bool:
    """Restore or reuse after the claim ended: released, failed closed, expired (class 4)."""
    c = p.claim_id
    if p.kind in FAILS and t.rnd.random() < 0.6:
        f = _failure_events(t, p)
        if f is None:
            return False
        p.labels.append(max(p.labels) + 5)
        t.insert_after(f["refusal"], _success_cycle(t, p, len(p.labels) - 1, t.request()))
        _failure_broken(t, p)
        t.must_fail(c, LIFECYCLE)
        if p.kind is Kind.FAILURE:
            t.must_fail(c, OBSERVATION)
        t.defects[-1] += "[after_failed_closed]"
    elif p.kind in OFFLOADED and p.cycles:
        off = t.one(c, "offloaded")
        first = t.find(c, cycle=0)[0]
        t.insert(t.pos(off + 1, first), Ev(event("claim_released", c, None, reason="done",
                                                 **ident(p)), c, "released"))
        t.must_fail(c, LIFECYCLE)
        if p.kind in SUCCEEDS:
            _observation_broken(t, p)
        t.defects[-1] += "[after_release]"
    elif p.kind in ENDING:
        end = t.one(c, "ending")
        t.insert_after(end, [Ev(event("claim_reused", c, None, generation=0, holds=True,
                                      **ident(p)), c, "reused")])
        t.must_fail(c, LIFECYCLE)
        t.defects[-1] += "[after_ending]"
    else:
        return False
    return True


def _success_requests(t: GenTrace, p: Plan) -> list[int]:
    return [i for i in t.find(p.claim_id, "start")
            if t.events[i].cycle is not None and t.events[i].cycle < p.successes]


def reuse_other_owner(t: GenTrace, p: Plan) -> bool:
    """Every reuse is by a request of another owner_scope (SPEC §9 isolation)."""
    starts = _success_requests(t, p)
    if p.kind not in SUCCEEDS or not starts or not t.untouched(*starts):
        return False
    for i in starts:
        t.events[i].body["owner_scope"] = "tenant:intruder/session:9"
        t.touch(i)
    _observation_broken(t, p)
    return True


def _each_success_cycle(t: GenTrace, p: Plan, edit: Callable[[dict[str, int]], None]) -> bool:
    if p.kind not in SUCCEEDS:
        return False
    cycles = []
    for cycle in range(p.successes):
        found = {t.events[i].role: i for i in t.find(p.claim_id, cycle=cycle)}
        if not t.untouched(*found.values()):
            return False
        cycles.append(cycle)
    for cycle in cycles:  # indices move as events are inserted: look them up again each time
        edit({t.events[i].role: i for i in t.find(p.claim_id, cycle=cycle)})
    _observation_broken(t, p)
    return True


def load_ok_then_invalid(t: GenTrace, p: Plan) -> bool:
    """Each successful load's blocks are then reported invalid by the same job (class 4)."""
    def edit(f: dict[str, int]) -> None:
        ok = t.events[f["load_ok"]].body
        t.touch(f["load_ok"])
        t.insert(t.pos(f["load_ok"] + 1, f["finish"]), Ev(event(
            "kv_load_failed", p.claim_id, ok["request_id"], invalid_block_ids=[0],
            job_id=ok["job_id"]), p.claim_id, "load_failed_late"))
    if not _each_success_cycle(t, p, edit):
        return False
    for c in t.claims():  # a failed load of a claim: a non-target not served
        if c != p.claim_id:
            t.must_fail(c, ATTRIBUTION)
    return True


def reuse_before_offload_restore(t: GenTrace, p: Plan) -> bool:
    """Reuse follows a fallback restore and precedes the offload-tier restore (class 4)."""
    def edit(f: dict[str, int]) -> None:
        restored, reused = t.events[f["restored"]].body, t.events[f["reused"]].body
        t.touch(f["restored"], f["reused"])
        fallback = dict(restored, source="fallback_recompute")
        t.insert(f["restored"], Ev(dict(reused), p.claim_id, "reused_early"))
        t.insert(f["restored"], Ev(fallback, p.claim_id, "restored_fallback"))
    return _each_success_cycle(t, p, edit)


def reused_before_restored(t: GenTrace, p: Plan) -> bool:
    """Every reuse precedes its restore: restore after reuse (SPEC §4 control)."""
    def edit(f: dict[str, int]) -> None:
        i, j = f["restored"], f["reused"]
        t.events[i], t.events[j] = t.events[j], t.events[i]
        t.touch(i, j)
    return _each_success_cycle(t, p, edit)


def open_obligation_pruned(t: GenTrace, p: Plan) -> bool:
    """An early restore that never completes, then >= 10 restore cycles (class 6): bounded
    memory must not forget the open obligation."""
    if p.kind not in (Kind.SUCCESS, Kind.RESIDENT) or not t.untouched(*t.find(p.claim_id)):
        return False
    c = p.claim_id
    off = t.one(c, "offloaded")
    release = t.find(c, "released")
    first = t.find(c, cycle=0)[0] if p.cycles else release[0] if release else len(t.events)
    # the labels of the cycles to come: the open one's sits among them (bounded state that
    # orders cycles by label would prune it) or above them all
    top, extra = max(p.labels), max(0, 10 - p.successes) + t.rnd.randint(0, 2)
    labels = list(range(top + 1, top + extra + 2))
    middle = len(labels) >= 3 and t.rnd.random() < 0.7
    label = labels.pop(t.rnd.randrange(1, len(labels) - 1)) if middle else top + 100
    r = t.request()
    open_cycle = [
        Ev(event("request_started", None, r, prompt_tokens=64, owner_scope=p.owner_scope),
           c, "start"),
        Ev(event("kv_lookup", c, r, hit_tokens=BLOCK_TOKENS, async_load=True), c, "lookup"),
        Ev(event("claim_restore_required", c, r, generation=label, from_tier="host",
                 to_tier="device", tokens=BLOCK_TOKENS, **ident(p)), c, "restore_required"),
        Ev(event("request_finished", None, r, status="served", finish_reason="length"),
           c, "finish"),
    ]
    t.insert_after(off, open_cycle, before=first)
    for generation in labels[:extra]:
        p.labels.append(generation)
        mine = [i for i in t.find(c) if t.events[i].role != "released"]
        release = t.find(c, "released")
        t.insert_after(mine[-1], _success_cycle(t, p, len(p.labels) - 1, t.request()),
                       before=release[0] if release else None)
    t.defects[-1] += f"[open generation {label}]"
    t.must_fail(c, LIFECYCLE)
    for other in t.claims():
        if other != c:
            t.must_fail(other, ATTRIBUTION)
    return True


DEFECTS: dict[str, Defect] = {d.name: d for d in (
    Defect("refusal_other_request", "failure_outcome (+lifecycle, attribution of the claim)",
           refusal_other_request),
    Defect("relabel_failed_restore", "failure_outcome (+lifecycle, attribution of the claim)",
           relabel_failed_restore),
    Defect("early_finish", "failure_outcome (+lifecycle, attribution of the claim)",
           early_finish),
    Defect("duplicate_finish", "every gate of every claim (not well formed)", duplicate_finish),
    Defect("decoy_refusal", "failure_outcome; smeared: attribution of every claim",
           decoy_refusal),
    Defect("null_claim_failure", "attribution of every claim; unnamed outcome: failure_outcome",
           null_claim_failure),
    Defect("outcome_names_non_target", "attribution of every claim; wrong outcome ids: "
           "failure_outcome", outcome_names_non_target),
    Defect("served_after_refusal", "failure_outcome (+lifecycle, attribution of the claim)",
           served_after_refusal),
    Defect("hard_conflict_misattributed", "lifecycle; names another claim: attribution of "
           "every claim", hard_conflict_misattributed),
    Defect("silent_loss", "lifecycle of the claim, attribution of every claim", silent_loss),
    Defect("holds_contradiction", "observation, lifecycle", holds_contradiction),
    Defect("reaccept_changed", "every gate of the claim (ambiguous identity)", reaccept_changed),
    Defect("store_before_accept", "every gate of the claim", store_before_accept),
    Defect("restore_after_end", "lifecycle; observation when no cycle precedes the end; "
           "failure_outcome after failing closed", restore_after_end),
    Defect("reuse_other_owner", "observation (+lifecycle)", reuse_other_owner),
    Defect("load_ok_then_invalid", "observation (+lifecycle), attribution of the others",
           load_ok_then_invalid),
    Defect("reuse_before_offload_restore", "observation (+lifecycle)",
           reuse_before_offload_restore),
    Defect("reused_before_restored", "observation (+lifecycle)", reused_before_restored),
    Defect("open_obligation_pruned", "lifecycle of the claim, attribution of the others",
           open_obligation_pruned),
)}


def apply_defects(t: GenTrace, names: list[str],
                  registry: dict[str, Defect] | None = None) -> GenTrace:
    """Apply each named defect to a claim no earlier defect picked; the oracle becomes the
    union of the declared breaks (a legal pass is no longer promised)."""
    registry = DEFECTS if registry is None else registry
    for name in names:
        candidates = [p for p in t.plans if p.claim_id not in t.subjects]
        t.rnd.shuffle(candidates)
        for p in candidates:
            t.defects.append(f"{name}({p.claim_id})")
            if registry[name].apply(t, p):
                t.subjects.add(p.claim_id)
                break
            t.defects.pop()
    if t.defects:
        t.expect = {k: False for k in t.breaks}
        t.live = None
    return t


def build_defective(shape: Shape, variant: int, wanted: int) -> GenTrace:
    """The legal trace of *shape* with the first *wanted* (1–3) defects that apply, in an
    order *variant* shuffles."""
    t = build_legal(shape, variant)
    names = sorted(DEFECTS)
    t.rnd.shuffle(names)
    for name in names:
        apply_defects(t, [name])
        if len(t.defects) == wanted:
            break
    return t


# --- raw-line defects ------------------------------------------------------------------------

def _json_types(annotation: Any) -> set[type]:
    """The Python types of the JSON values a field's declared type admits (SPEC §3 types)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _json_types(get_args(annotation)[0])
    if origin is Literal:
        return {type(a) for a in get_args(annotation)}
    if origin in (Union, types.UnionType):
        return set().union(*(_json_types(a) for a in get_args(annotation)))
    return {annotation}


def _wrong_values(event_name: str, key: str, value: Any) -> list[Any]:
    """Values of a JSON type the field does not admit, which a lax reader would coerce back
    (``"injected": "yes"``, ``1``; ``"seq": "7"``, ``9.0``, ``true``)."""
    fields = EVENT_MODELS[event_name].model_fields
    field = fields.get(key) or next(f for f in fields.values() if f.alias == key)
    admitted = _json_types(field.annotation)
    if isinstance(value, bool):
        candidates: list[Any] = ["yes", "true", int(value), 0, 1]
    else:
        candidates = [str(value), float(value), value == 1]
    return [c for c in candidates if type(c) not in admitted]


def json_type(t: GenTrace) -> bool:
    """A bool or int field with a JSON value of a type the field does not admit."""
    records = t.records()
    i = t.rnd.choice([i for i in range(len(records)) if i not in t.raw])
    rec = records[i]
    wrong = {k: w for k, v in rec.items() if isinstance(v, bool | int)
             and (w := _wrong_values(rec["event"], k, v))}
    preferred = [k for k in ("injected", "seq") if k in wrong]
    key = t.rnd.choice(preferred if preferred and t.rnd.random() < 0.6 else sorted(wrong))
    rec[key] = t.rnd.choice(wrong[key])
    t.raw[i] = json.dumps(rec)
    t.defects[-1] += f"[{rec['event']}.{key}={json.dumps(rec[key])}]"
    return True


def _decoy(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str):
        return "c-OTHER" if value.startswith("c-") else value + "-decoy"
    if value is None:
        return "c-OTHER"
    return type(value)()


def duplicate_key(t: GenTrace) -> bool:
    """A line with one key twice, a decoy value first (a lax reader keeps the last)."""
    records = t.records()
    i = t.rnd.choice([i for i in range(len(records)) if i not in t.raw])
    rec = records[i]
    named = [k for k in ("outcome_claim_id", "claim_id", "injected") if k in rec]
    key = t.rnd.choice(named if named and t.rnd.random() < 0.6 else list(rec))
    text = json.dumps(rec)
    t.raw[i] = "{" + json.dumps(key) + ": " + json.dumps(_decoy(rec[key])) + ", " + text[1:]
    t.defects[-1] += f"[{rec['event']}.{key}]"
    return True


RAW_DEFECTS: dict[str, Callable[[GenTrace], bool]] = {
    "json_type": json_type,
    "duplicate_key": duplicate_key,
}


def build_raw(shape: Shape, variant: int, defects: int, lines: int) -> GenTrace:
    """The trace of *shape* with *defects* (0–3) defects, then 1–2 lines that are not strictly
    typed v1 JSON: not well formed, so every gate of every claim must fail."""
    t = build_defective(shape, variant, defects) if defects else build_legal(shape, variant)
    for _ in range(lines):
        name = t.rnd.choice(sorted(RAW_DEFECTS))
        t.defects.append(name)
        RAW_DEFECTS[name](t)
    t.expect = {(c, g): False for c in t.claims() for g in ALL_GATE_NAMES}
    t.live = None
    return t


_WANTED = st.integers(1, 3)


@st.composite
def families(draw: st.DrawFn, max_claims: int = 4, defective: int = 4, min_claims: int = 1,
             kinds_from: tuple[Kind, ...] | None = None) -> list[GenTrace]:
    """One legal trace, *defective* traces derived from it (1–3 defects each) and one with
    raw-line defects: the legal build is shared, so each example checks several traces."""
    shape = draw(shapes(max_claims, min_claims, kinds_from))
    out = [build_legal(shape)]
    out += [build_defective(shape, v + 1, draw(_WANTED)) for v in range(defective)]
    out.append(build_raw(shape, defective + 1, draw(st.integers(0, 3)), draw(st.integers(1, 2))))
    return out


# --- several incarnations in one file (SPEC §9.1) ---------------------------------------------
#
# A sink holds one stream per engine incarnation. Each stream is a legal build of its own claims
# (job ids and noise request ids start afresh in each, as a restarted engine's do); a claim open
# when its stream ends is ended by its process's stop: harmed (``shutdown``) before a graceful
# ``stream_closed``, or harmed (``engine_restarted``) at the head of the next stream when the
# incarnation died. The last stream may be left open (the reading stops mid-run): its open
# claims are live.


@dataclass(frozen=True)
class Life:
    """What hypothesis draws for a file of several streams."""

    shape: Shape                # every claim of the file
    streams: tuple[int, ...]    # the stream of each claim
    ends: tuple[str, ...]       # per stream: "closed", "crashed", or (the last) "open"
    seed: int


@st.composite
def lives(draw: st.DrawFn, max_claims: int = 5, max_streams: int = 3) -> Life:
    """2..max_streams streams; each but the last closed or crashed, the last closed or open."""
    shape = draw(shapes(max_claims))
    n = draw(st.integers(2, max_streams))
    streams = tuple(draw(st.integers(0, n - 1)) for _ in shape.claims)
    ends = (*(draw(st.sampled_from(("closed", "crashed"))) for _ in range(n - 1)),
            draw(st.sampled_from(("closed", "open"))))
    return Life(shape, streams, ends, draw(_SEED))


def _stop(p: Plan, cause: StopCause, role: str) -> Ev:
    """The harm that ends claim *p* because its process stopped (SPEC §9.1)."""
    need = p.predicate["blocks"]
    p.stopped = True
    return Ev(event("claim_harmed", p.claim_id, None, cause=cause.value,
                    before={"surviving": p.footprint, "leading": p.footprint,
                            "required": need, "holds": True},
                    after={"surviving": 0, "leading": 0, "required": need, "holds": False},
                    **ident(p)), p.claim_id, role)


def _cut_chain(evs: list[Ev], p: Plan) -> list[Ev]:
    """The claim's events up to the failed load of its failing restore: the incarnation dies
    there (the request never finishes, the failure is answered at the next stream's head)."""
    last = max(i for i, e in enumerate(evs) if e.role == "load_failed" and e.cycle == p.successes)
    return evs[:last + 1]


def build_life(life: Life, variant: int = 0) -> GenTrace:
    """The legal file of *life*, its oracle in ``expect`` and its live claims in ``live``."""
    rnd = random.Random(life.seed)
    plans = [_plan(rnd, i + 1, k, n) for i, (k, n) in enumerate(life.shape.claims)]
    events: list[Ev] = []
    left_open: list[Plan] = []  # what the previous (crashed) stream left open
    for k, end in enumerate(life.ends):
        mine = [p for p, s in zip(plans, life.streams, strict=True) if s == k]
        jobs = itertools.count(1)  # a restarted engine numbers its jobs afresh
        failing = [p for p in mine if p.kind in FAILS]
        cut = rnd.choice(failing) if end == "crashed" and failing and rnd.random() < 0.4 \
            else None
        queues = [_Builder(p, jobs).build() for p in mine if p is not cut]
        queues.append(_noise(rnd, jobs))
        body = _interleave(rnd, queues, life.shape.interleaved)
        if cut is not None:
            cut.cut = True
            body += _cut_chain(_Builder(cut, jobs).build(), cut)
        elif end == "crashed" and rnd.random() < 0.5:  # a request the death cut off
            body.append(Ev(event("request_started", None, "r-n0", prompt_tokens=64,
                                 owner_scope="tenant:n/session:1"), None, "noise"))
        head = [_stop(p, StopCause.ENGINE_RESTARTED, "head") for p in left_open]
        rnd.shuffle(head)
        events += [_opener(f"inc-{k}"), *head, *body]
        now_open = [p for p in mine if p.open_at_end()]
        left_open = now_open if end == "crashed" else []
        if end == "closed":
            events += [_stop(p, StopCause.SHUTDOWN, "shutdown") for p in now_open]
            events.append(Ev(event("stream_closed", None, None, reason="shutdown"), None,
                             "closer"))
    t = GenTrace(plans, events, random.Random(life.seed * 7919 + variant),
                 life.shape.interleaved)
    t.expect = legal_expectations(plans)
    last = len(life.ends) - 1
    t.live = {p.claim_id for p, s in zip(plans, life.streams, strict=True)
              if s == last and life.ends[s] == "open" and p.open_at_end()}
    return t


def _stream_of(t: GenTrace, i: int) -> int:
    return sum(1 for e in t.events[1:i + 1] if e.role == "opener")


def _body_start(t: GenTrace, k: int) -> int | None:
    """The index of stream *k*'s first body event slot (after its opener and head)."""
    openers = [i for i, e in enumerate(t.events) if e.role == "opener"]
    if k >= len(openers):
        return None
    i = openers[k] + 1
    while i < len(t.events) and t.events[i].role == "head":
        i += 1
    return i


def drop_stop(t: GenTrace, p: Plan) -> bool:
    """The harm that ends an open claim at a stop is missing: it vanished (SPEC §9.1)."""
    stops = [i for i in t.find(p.claim_id) if t.events[i].role in ("head", "shutdown")]
    if not stops or not t.untouched(*stops):
        return False
    i = stops[0]
    del t.events[i]
    # the head window closes at a later event that is no head ending; a shutdown harm's
    # stream_closed follows it
    if any(e.role != "head" for e in t.events[i:]):
        t.must_fail(p.claim_id, CONFORMANCE)
    t.must_fail(p.claim_id, *GATE_NAMES)
    return True


def late_head(t: GenTrace, p: Plan) -> bool:
    """The harm ending a claim the dead incarnation left open comes after the next stream's
    first event that is no such ending: the claim vanished at the restart."""
    heads = [i for i in t.find(p.claim_id, "head") if t.untouched(i)]
    if not heads:
        return False
    i = heads[0]
    k = _stream_of(t, i)
    start = _body_start(t, k)
    if start is None or start >= t.body_end(start):
        return False
    ev = t.events.pop(i)
    t.insert(t.pos(start, t.body_end(start - 1)), ev)
    _everything_broken(t, [p.claim_id])
    return True


def _later_body(t: GenTrace, p: Plan) -> int | None:
    """An insertion index in the body of a stream after claim *p*'s (None: no such stream)."""
    k = _stream_of(t, t.one(p.claim_id, "accept"))
    start = _body_start(t, k + 1 + t.rnd.randrange(2))
    if start is None:
        start = _body_start(t, k + 1)
    return None if start is None else t.pos(start, t.body_end(start))


def _later_request(t: GenTrace, p: Plan, *work: dict[str, Any]) -> bool:
    """A request of the claim's owner in a stream after the claim's, doing *work* (event
    bodies without a request): every gate of the claim fails (it ended before)."""
    at = _later_body(t, p)
    if at is None:
        return False
    r = t.request()
    evs = [Ev(event("request_started", None, r, prompt_tokens=64, owner_scope=p.owner_scope),
              p.claim_id, "start"),
           *(Ev(dict(body, request_id=r), p.claim_id, "again") for body in work),
           Ev(event("request_finished", None, r, status="served", finish_reason="length"),
              p.claim_id, "finish")]
    for offset, ev in enumerate(evs):
        t.insert(at + offset, ev)
    _everything_broken(t, [p.claim_id])
    return True


def accepted_again(t: GenTrace, p: Plan) -> bool:
    """A later incarnation accepts the claim again (its registration repeated): decided twice
    (SPEC §9.1: a claim id is decided once, across incarnations)."""
    if p.cut:
        return False
    return _later_request(t, p, t.events[t.one(p.claim_id, "accept")].body)


def restored_after_stop(t: GenTrace, p: Plan) -> bool:
    """A later incarnation restores the claim its predecessor's stop ended (its KV died with
    that process): restored after its end."""
    if not p.stopped or p.kind not in OFFLOADED:
        return False
    gen = max(p.labels) + 10
    return _later_request(
        t, p, event("claim_restore_required", p.claim_id, None, generation=gen,
                    from_tier="host", to_tier="device", tokens=BLOCK_TOKENS, **ident(p)),
        event("claim_restored", p.claim_id, None, generation=gen, source="offload_tier",
              **ident(p)))


def gap_while_open(t: GenTrace, p: Plan) -> bool:
    """An observation_gap right after the claim's acceptance: what happened to the open claim
    is unknown (conformance), and any gap fails every claim's scenario gates."""
    acc = t.one(p.claim_id, "accept")
    t.insert(acc + 1, Ev(event("observation_gap", None, None, reason="sequence_gap"), None,
                         "gap"))
    t.must_fail(p.claim_id, CONFORMANCE)
    for c in t.claims():
        t.must_fail(c, *GATE_NAMES)
    return True


def repeated_incarnation(t: GenTrace, p: Plan) -> bool:
    """A later stream names the incarnation of the one before it (T032): not well formed."""
    openers = [i for i, e in enumerate(t.events) if e.role == "opener"]
    if len(openers) < 2 or not t.untouched(openers[-1]):
        return False
    t.events[openers[-1]].body["incarnation"] = t.events[openers[-2]].body.get("incarnation")
    t.touch(openers[-1])
    _everything_broken(t, t.claims())
    return True


def event_after_close(t: GenTrace, p: Plan) -> bool:
    """An event after a stream's stream_closed (T031): not well formed."""
    closers = [i for i, e in enumerate(t.events) if e.role == "closer"]
    if not closers:
        return False
    t.insert(t.rnd.choice(closers) + 1, Ev(event("generic_counter", None, None,
                                                 name="kv_hits", value=1), None, "noise"))
    _everything_broken(t, t.claims())
    return True


LIFE_DEFECTS: dict[str, Defect] = {d.name: d for d in (
    Defect("drop_stop", "every gate of the claim (vanished)", drop_stop),
    Defect("late_head", "every gate of the claim (vanished at the restart)", late_head),
    Defect("accepted_again", "every gate of the claim (decided twice)", accepted_again),
    Defect("restored_after_stop", "every gate of the claim (restored after its end)",
           restored_after_stop),
    Defect("gap_while_open", "conformance of the claim; every scenario gate of every claim",
           gap_while_open),
    Defect("repeated_incarnation", "every gate of every claim (T032)", repeated_incarnation),
    Defect("event_after_close", "every gate of every claim (T031)", event_after_close),
)}


def build_life_defective(life: Life, variant: int, wanted: int) -> GenTrace:
    """The legal file of *life* with the first *wanted* (1–3) defects that apply, drawn from
    the multi-stream defects and the single-stream grammar (kept inside one stream)."""
    t = build_life(life, variant)
    registry = {**DEFECTS, **LIFE_DEFECTS}
    names = sorted(registry)
    t.rnd.shuffle(names)
    t.live = None
    for name in names:
        apply_defects(t, [name], registry)
        if len(t.defects) == wanted:
            break
    return t


@st.composite
def life_families(draw: st.DrawFn, defective: int = 4) -> list[GenTrace]:
    """One legal file of several streams, *defective* ones derived from it and one with
    raw-line defects."""
    life = draw(lives())
    out = [build_life(life)]
    out += [build_life_defective(life, v + 1, draw(_WANTED)) for v in range(defective)]
    raw = build_life(life, defective + 1)
    for _ in range(draw(st.integers(1, 2))):
        name = raw.rnd.choice(sorted(RAW_DEFECTS))
        raw.defects.append(name)
        RAW_DEFECTS[name](raw)
    raw.expect = {(c, g): False for c in raw.claims() for g in ALL_GATE_NAMES}
    raw.live = None
    out.append(raw)
    return out
