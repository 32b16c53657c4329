"""Property tests over random workloads, each property read from the trace."""

from __future__ import annotations

import io
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from residentkv.microruntime.policies import POLICIES
from residentkv.microruntime.runtime import MicroRuntime
from residentkv.microruntime.scenario import make_claim
from residentkv.model.claim import ProtectionMode as M
from residentkv.trace.writer import EventWriter

OBJECTS = [f"obj-{i}" for i in range(6)]
MODES = [M.HARD_PROTECTED, M.SOFT_PRIORITY, M.DEMOTABLE, M.EXPIRING, M.OFFLOADABLE,
         M.BEST_EFFORT]

op = st.one_of(
    st.tuples(st.just("claim"), st.sampled_from(OBJECTS), st.integers(1, 40),
              st.sampled_from(MODES), st.integers(1, 40), st.floats(0.5, 20)),
    st.tuples(st.just("req"), st.sampled_from(OBJECTS), st.integers(1, 50), st.booleans()),
    st.tuples(st.just("finish"), st.integers(0, 50)),
    st.tuples(st.just("release"), st.integers(0, 50)),
    st.tuples(st.just("advance"), st.floats(0, 10)),
)


def _run(policy: str, usable: int, ops: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    sink = io.StringIO()
    writer = EventWriter(sink, source="microruntime")
    # Every third claim's restores fail (injected), so failed-closed paths are exercised too.
    rt = MicroRuntime(usable, policy, writer=writer, host_blocks=usable // 2,
                      fail_loads_of={f"c{i}" for i in range(0, len(ops), 3)})
    claims: list[str] = []
    requests: list[str] = []
    now = 0.0
    for i, o in enumerate(ops):
        kind = o[0]
        if kind == "claim":
            _, obj, footprint, mode, pred, ttl = o
            cid = f"c{i}"
            rt.submit_claim(make_claim(cid, object_id=obj, footprint=footprint, mode=mode,
                                       predicate_blocks=min(pred, footprint),
                                       expires_after_s=ttl if mode is M.EXPIRING else None))
            claims.append(cid)
        elif kind == "req":
            rid = f"r{i}"
            rt.request(rid, o[1], o[2], hold=o[3])
            requests.append(rid)
        elif kind == "finish" and requests:
            rt.finish(requests[o[1] % len(requests)])
        elif kind == "release" and claims:
            rt.release_claim(claims[o[1] % len(claims)])
        elif kind == "advance":
            now += o[1]
            rt.advance(now)
        rt.check()  # the pool never over-allocates, after every operation
    rt.close()
    rt.check()
    writer.flush()
    return [json.loads(line) for line in sink.getvalue().splitlines()]


workloads = st.tuples(st.sampled_from(sorted(POLICIES)), st.integers(8, 64),
                      st.lists(op, max_size=40))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads)
def test_hard_claims_are_never_harmed_without_prior_release(w: tuple[Any, ...]) -> None:
    events = _run(*w)
    hard = {e["claim_id"] for e in events
            if e["event"] == "claim_accepted" and e["protection_mode"] == "hard_protected"}
    released: set[str] = set()
    for e in events:
        if e["event"] == "claim_released":
            released.add(e["claim_id"])
        if e["claim_id"] in hard and e["event"] in ("claim_harmed", "block_evicted"):
            assert e["claim_id"] in released, e


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads)
def test_only_soft_priority_claims_are_ever_harmed(w: tuple[Any, ...]) -> None:
    """Pinning modes end (release, demotion, expiry) before any loss; only a soft claim, which
    promises nothing, can be harmed — and then it is reported."""
    events = _run(*w)
    modes = {e["claim_id"]: e["protection_mode"] for e in events if e["event"] == "claim_accepted"}
    for e in events:
        if e["event"] == "claim_harmed":
            assert modes[e["claim_id"]] == "soft_priority", e
            assert e["before"]["holds"] and not e["after"]["holds"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads)
def test_every_request_ends_in_exactly_one_outcome(w: tuple[Any, ...]) -> None:
    events = _run(*w)
    by_req: dict[str, list[str]] = {}
    for e in events:
        if e["request_id"] and e["event"] in (
            "request_started", "active_request_admitted", "active_request_deferred",
            "active_request_refused", "request_finished",
        ):
            by_req.setdefault(e["request_id"], []).append(
                e["event"] if e["event"] != "request_finished" else f"finished:{e['status']}"
            )
    for rid, seq in by_req.items():
        assert seq[0] == "request_started" and seq.count("request_started") == 1, (rid, seq)
        finishes = [s for s in seq if s.startswith("finished:")]
        assert len(finishes) == 1 and seq[-1] == finishes[0], (rid, seq)
        assert seq.count("active_request_deferred") <= 1, (rid, seq)
        if finishes[0] == "finished:served":
            outcome = ("deferred-then-served" if "active_request_deferred" in seq else "served")
            assert seq.count("active_request_admitted") == 1
            assert "active_request_refused" not in seq
        else:
            outcome = "refused"
            assert seq.count("active_request_refused") == 1 and seq[-2] == "active_request_refused"
        assert outcome in {"served", "deferred-then-served", "refused"}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads)
def test_claim_lifecycles_are_legal_and_identities_stable(w: tuple[Any, ...]) -> None:
    from residentkv.microruntime.facts import EVENT_STATE
    from residentkv.model.lifecycle import ClaimLifecycle

    events = _run(*w)
    lives: dict[str, ClaimLifecycle] = {}
    idents: dict[str, tuple[Any, ...]] = {}
    for e in events:
        if e["event"] in EVENT_STATE:
            cid = e["claim_id"]
            lives.setdefault(cid, ClaimLifecycle(cid)).advance(EVENT_STATE[e["event"]])
            ident = (e["object_id"], e["cache_identity"], e["request_token_map_id"],
                     e["predicate_id"])
            assert None not in ident
            assert idents.setdefault(cid, ident) == ident
