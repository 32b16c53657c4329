"""The automaton table (SPEC §4.2–§4.3): no blank cell, and both readers agree on every cell.

For every claim state a legal prefix reaches it; every event kind, in several variants (the
open cycle's request or another, the cycle's label or another, failure or success, ...), is
then appended and fed to the streaming reader (:mod:`residentkv.trace.acceptor`, through the
tracker) and to the reference reader (:mod:`residentkv.trace.semantics.legal`). Both must end
in the same state with the same first violation, and that outcome must be one the cell lists.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from residentkv.model.automaton import (
    CLAIM_ROWS,
    CLAIM_TABLE,
    KINDS,
    PRE,
    REQUEST_ROWS,
    REQUEST_TABLE,
    STAY,
    TERMINAL,
    VIOLATION_WHY,
    Phase,
    RequestPhase,
    Violation,
    render_table,
)
from residentkv.model.events import EVENT_ADAPTER, EVENT_MODELS, Envelope
from residentkv.trace.reader import TraceReader
from residentkv.trace.semantics import legal
from residentkv.trace.semantics.stream import Stream
from residentkv.trace.tracker import collect, stream_pass
from tracekit import Trace

C = "c-1"
IDENT = {"object_id": "prefix:c-1", "cache_identity": "m|t|d|s|16|bf16|-",
         "request_token_map_id": "tokmap:c-1", "predicate_id": "p-lead2"}
PRED = {"surviving": 2, "leading": 2, "required": 2, "holds": True}

#: the fields of one typical event of each kind (the envelope is added by ``ev``)
FIELDS: dict[str, dict[str, Any]] = {
    "stream_started": {"emitter": {"name": "t", "version": "0"},
                       "runtime": {"name": "t", "version": "0"}},
    "stream_closed": {"reason": "shutdown"},
    "claim_submitted": {"owner_scope": "tenant:a"},
    "claim_accepted": {"registration": "pre_registered", "protection_mode": "offloadable",
                       "footprint_blocks": 2, "owner_scope": "tenant:a",
                       "predicate": {"id": "p-lead2", "kind": "leading_prefix_at_least",
                                     "blocks": 2}},
    "claim_rejected": {"reason": "full"},
    "claim_materialized": {**PRED, "tier": "device"},
    "claim_offloaded": {"generation": 1, "from_tier": "device", "to_tier": "host",
                        "block_count": 2},
    "claim_restore_required": {"generation": 1, "from_tier": "host", "to_tier": "device",
                               "tokens": 32},
    "claim_restored": {"generation": 1, "source": "offload_tier"},
    "claim_reused": {"generation": 1, "holds": True},
    "claim_restore_failed": {"generation": 1, "reason": "x", "injected": True,
                             "outcome_type": "refusal", "outcome_claim_id": C},
    "claim_demoted": {}, "claim_expired": {}, "claim_released": {"reason": "done"},
    "claim_harmed": {"cause": "evicted", "before": PRED, "after": {**PRED, "holds": False}},
    "claim_block_lost_after_release": {"position": 0},
    "request_started": {"owner_scope": "tenant:a"},
    "request_finished": {"status": "served", "finish_reason": "length"},
    "active_request_admitted": {}, "active_request_deferred": {},
    "active_request_refused": {"outcome_claim_id": C, "blocking_claim_ids": [C],
                               "feasibility": "x", "arbiter": "scheduler_boundary"},
    "future_reuse_admitted": {}, "future_reuse_denied": {},
    "kv_lookup": {"hit_tokens": 32, "async_load": True},
    "kv_store_started": {"job_id": 9, "from_tier": "device", "to_tier": "host"},
    "kv_store_finished": {"job_id": 9, "success": True, "from_tier": "device",
                          "to_tier": "host"},
    "kv_load_started": {"job_id": 9},
    "kv_load_finished": {"job_id": 9, "success": True},
    "kv_load_failed": {"job_id": 9, "invalid_block_ids": [0]},
    "scheduler_load_failure": {"policy": "fail", "invalid_block_count": 1, "failed_tokens": 32,
                               "finish_status": "error"},
    "block_evicted": {"block_id": 1, "protected": False, "reason": "lru", "position": 0},
    "generic_counter": {"name": "n", "value": 1},
    "observation_gap": {"reason": "overflow"},
}

#: field changes that make other rows of a kind's cells decide
VARIANTS: dict[str, list[dict[str, Any]]] = {
    "claim_accepted": [{"protection_mode": "best_effort"}, {"footprint_blocks": 3},
                       {"request_id": "r-2"}, {"owner_scope": "tenant:b"}],
    "claim_materialized": [{"holds": False}, {"leading": 1, "surviving": 1, "holds": False},
                           {"leading": 1, "surviving": 1}],
    "claim_offloaded": [{"to_tier": "device"}, {"generation": 0}, {"generation": 5},
                        {"block_count": 1}, {"to_tier": "disk"}],
    "claim_restore_required": [{"generation": 0}, {"generation": 2}, {"from_tier": "disk"},
                               {"request_id": "r-3"}, {"request_id": None}],
    "claim_restored": [{"source": "fallback_recompute"}, {"generation": 2},
                       {"request_id": "r-1"}, {"request_id": "r-3"},
                       {"source": "fallback_recompute", "request_id": "r-3"}],
    "claim_reused": [{"generation": 2}, {"request_id": "r-1"}, {"request_id": "r-3"},
                     {"holds": False}],
    "claim_restore_failed": [{"generation": 2}, {"request_id": "r-1"},
                             {"outcome_claim_id": None}, {"outcome_claim_id": "c-2"}],
    "active_request_refused": [{"outcome_claim_id": None}, {"claim_id": None},
                               {"request_id": "r-1"}, {"request_id": "r-3"}],
    "active_request_deferred": [{"blocking_claim_ids": [C]}, {"request_id": "r-1"},
                                {"request_id": "r-3", "blocking_claim_ids": [C]}],
    "kv_store_started": [{"to_tier": "device"}, {"generation": 0}],
    "kv_store_finished": [{"success": False}, {"success": False, "request_id": None},
                          {"to_tier": "device"}, {"generation": 0}],
    "kv_load_started": [{"request_id": "r-1"}, {"generation": 2}, {"from_tier": "disk"},
                        {"from_tier": "host"}],
    "kv_load_finished": [{"success": False}, {"success": False, "request_id": None},
                         {"request_id": "r-1"}, {"generation": 2}, {"generation": 1},
                         {"job_id": 8}],
    "kv_load_failed": [{"invalid_block_ids": []}, {"request_id": None}, {"job_id": None},
                       {"generation": 2}, {"job_id": 8}, {"request_id": "r-1"}],
    "scheduler_load_failure": [{"request_id": None}, {"claim_id": None}],
    "request_started": [{"request_id": "r-2"}],
    "request_finished": [{"status": "refused"}],
}
#: violations of a request's run (the claim shares them), not of the claim's cell
REQUEST_VIOLATIONS = {o for cell in REQUEST_TABLE.values() for _, o in cell}

#: how a legal run reaches each state (after r-1, r-2 of tenant:a and r-3 of tenant:b start)
PREFIX: dict[Phase, list[tuple[str, dict[str, Any]]]] = {}
_RESIDENT = [("claim_accepted", {}), ("claim_materialized", {})]
_OFFLOADED = [*_RESIDENT, ("kv_store_started", {"generation": 0}),
              ("kv_store_finished", {"generation": 0}), ("claim_offloaded", {"generation": 0})]
_REQUIRED = [*_OFFLOADED, ("claim_restore_required", {}), ("kv_load_started", {})]
PREFIX.update({
    Phase.START: [],
    Phase.SUBMITTED: [("claim_submitted", {})],
    Phase.ACCEPTED: [("claim_accepted", {})],
    Phase.RESIDENT: _RESIDENT,
    Phase.OFFLOADED: _OFFLOADED,
    Phase.RESTORE_REQUIRED: _REQUIRED,
    Phase.LOAD_FAILED: [*_REQUIRED, ("kv_load_finished", {"success": False})],
    Phase.RESTORED: [*_REQUIRED, ("kv_load_finished", {}), ("claim_restored", {})],
    Phase.RECOMPUTED: [*_REQUIRED, ("claim_restored", {"source": "fallback_recompute"})],
    Phase.REJECTED: [("claim_submitted", {}), ("claim_rejected", {})],
    Phase.RELEASED: [*_RESIDENT, ("claim_released", {})],
    Phase.DEMOTED: [*_RESIDENT, ("claim_demoted", {})],
    Phase.EXPIRED: [*_RESIDENT, ("claim_expired", {})],
    Phase.HARMED: [*_RESIDENT, ("claim_harmed", {})],
    Phase.FAILED_CLOSED: [*_REQUIRED, ("kv_load_finished", {"success": False}),
                          ("claim_restore_failed", {})],
})

#: which request carries each event kind by default (the claim's or the restore cycle's)
_CARRIER_KINDS = {"claim_submitted", "claim_accepted", "claim_materialized", "kv_store_started",
                  "kv_store_finished", "claim_offloaded", "claim_rejected"}


def ev(seq: int, kind: str, change: dict[str, Any]) -> Envelope:
    """One validated event of *kind* naming the claim, with *change* applied."""
    claimless = kind in ("stream_started", "stream_closed", "observation_gap")
    body: dict[str, Any] = {
        "schema": "residentkv.event/v1", "seq": seq, "ts_ns": seq, "source": "test",
        "event": kind, "claim_id": None if claimless and "claim_id" not in change else C,
        "request_id": "r-1" if kind in _CARRIER_KINDS else (
            "r-9" if kind == "request_started" else "r-2"),
        **(IDENT if kind.startswith("claim_") else {}), **FIELDS[kind]}
    body.update(change)
    if claimless:
        body["claim_id"] = C  # the cell asks what naming the claim does
    return EVENT_ADAPTER.validate_python(body)  # type: ignore[return-value]


def starts() -> list[Envelope]:
    return [ev(0, "request_started", {"request_id": "r-1", "claim_id": None}),
            ev(1, "request_started", {"request_id": "r-2", "claim_id": None}),
            ev(2, "request_started", {"request_id": "r-3", "claim_id": None,
                                      "owner_scope": "tenant:b"})]


def both(events: list[Envelope]) -> tuple[tuple[Phase, Any], tuple[Phase, Any]]:
    """(state, first violation of the claim's own run) from the streaming and the reference
    reader; their first violations counting the requests that name the claim must agree too.
    """
    facts = collect(events)
    track = facts.claims.get(C)
    stream = Stream(events, True)
    assert (None if track is None else track.run.violation) == legal.claim_violation(stream, C)
    streaming = (Phase.START, None) if track is None else (track.run.phase, track.run.own)
    return streaming, legal.claim_run(stream, C)


def test_no_blank_cell() -> None:
    assert set(KINDS) == set(EVENT_MODELS)
    # declared per event kind, every state of every kind given exactly one cell
    assert set(CLAIM_ROWS) == set(REQUEST_ROWS) == set(KINDS)
    assert all(set(by_state) == set(Phase) for by_state in CLAIM_ROWS.values())
    assert all(set(by_state) == set(RequestPhase) for by_state in REQUEST_ROWS.values())
    for table, states in ((CLAIM_TABLE, Phase), (REQUEST_TABLE, RequestPhase)):
        assert set(table) == set(itertools.product(states, KINDS))
        for cell in table.values():  # type: ignore[attr-defined]
            assert cell and cell[-1][0] is None  # the last row is unguarded
            assert all(g is not None for g, _ in cell[:-1])
    used = {o for t in (CLAIM_TABLE, REQUEST_TABLE) for cell in t.values() for _, o in cell}
    assert set(VIOLATION_WHY) == set(Violation)
    # every violation is some cell's, but the accepting conditions checked where a stream
    # ends (SPEC §9.1: a claim open there vanished)
    assert set(Violation) - used == {Violation.UNFINISHED, Violation.NEVER_DECIDED,
                                     Violation.VANISHED}


@pytest.mark.parametrize("state", list(Phase))
def test_prefix_reaches_its_state_legally(state: Phase) -> None:
    events = starts() + [ev(3 + i, k, ch) for i, (k, ch) in enumerate(PREFIX[state])]
    streaming, reference = both(events)
    assert streaming == reference
    after, violation = streaming
    assert after is state
    if state is Phase.SUBMITTED:
        # the accepting condition: a claim its claim_submitted named must be decided
        assert violation is not None and violation.violation is Violation.NEVER_DECIDED
        assert violation.kind == "claim_submitted" and violation.seq == 3
    else:
        assert violation is None


@pytest.mark.parametrize(("state", "kind"), list(itertools.product(Phase, KINDS)),
                         ids=[f"{s.value}-{k}" for s, k in itertools.product(Phase, KINDS)])
def test_every_cell_agrees_in_both_readers(state: Phase, kind: str) -> None:
    prefix = starts() + [ev(3 + i, k, ch) for i, (k, ch) in enumerate(PREFIX[state])]
    seq = len(prefix)
    outcomes = {o for _, o in CLAIM_TABLE[state, kind]}
    for change in [{}, *VARIANTS.get(kind, [])]:
        if "claim_id" in change:
            continue  # a variant for the request's cell: the event does not name the claim
        events = [*prefix, ev(seq + 10, kind, change)]
        streaming, reference = both(events)
        assert streaming == reference, (change, streaming, reference)
        after, violation = streaming
        if violation is not None and violation.violation is Violation.NEVER_DECIDED:
            # the accepting condition, checked when the stream ends: the cell let it pass, and
            # the first event naming the undecided claim is this one or the prefix's
            # claim_submitted
            assert after in PRE
            if state is Phase.SUBMITTED:
                assert (violation.seq, violation.kind) == (3, "claim_submitted")
            else:
                assert kind in ("request_started", "claim_submitted")
                assert violation.seq == seq + 10
        elif violation is not None:
            assert (violation.seq, violation.state) == (seq + 10, state.value)
            assert violation.violation in outcomes
        else:
            assert after in outcomes or (after == state and STAY in outcomes), change


#: how a request's run reaches each state; "answered": it carried c-1 (a lookup), its load of
#: c-1 (job 9) failed and a refusal naming c-1 answered that before it finished (SPEC §4.3:
#: the late records of that failure may follow its finish)
REQUEST_PREFIX: dict[str, tuple[RequestPhase, list[tuple[str, dict[str, Any]]]]] = {
    "new": (RequestPhase.NEW, []),
    "started": (RequestPhase.STARTED, [("request_started", {})]),
    "refused": (RequestPhase.REFUSED, [("request_started", {}), ("active_request_refused", {
        "outcome_claim_id": None})]),
    "finished": (RequestPhase.FINISHED, [("request_started", {}), ("request_finished", {})]),
    "answered": (RequestPhase.FINISHED, [
        ("request_started", {}), ("kv_lookup", {"claim_id": C}),
        ("kv_load_started", {"claim_id": C}), ("kv_load_finished", {"claim_id": C,
                                                                    "success": False}),
        ("active_request_refused", {"claim_id": C, "outcome_claim_id": C}),
        ("request_finished", {"status": "error"})]),
}


@pytest.mark.parametrize(("prefix", "kind"), list(itertools.product(REQUEST_PREFIX, KINDS)))
def test_every_request_cell_agrees_in_both_readers(prefix: str, kind: str) -> None:
    state, steps = REQUEST_PREFIX[prefix]
    # a claimless event names no claim, and a claimless refusal no outcome claim
    events = [ev(i, k, {"request_id": "r-9", "claim_id": None, **(
        {"outcome_claim_id": None} if k == "active_request_refused" else {}), **change})
        for i, (k, change) in enumerate(steps)]
    named = [{"claim_id": None, **({"outcome_claim_id": None}
                                   if kind in ("active_request_refused", "claim_restore_failed")
                                   else {})}, {}] if prefix == "answered" else [{}]
    for change in [*named, *VARIANTS.get(kind, [])]:
        case = [*events, ev(10, kind, {**change, "request_id": "r-9"})]
        facts = stream_pass(case)
        run = facts.acceptor.requests["r-9"]
        phase, violation = legal.request_run(Stream(case, True), "r-9")
        assert (run.phase, run.own) == (phase, violation)
        outcomes = {o for _, o in REQUEST_TABLE[state, kind]}
        if violation is not None and violation.violation is not Violation.UNFINISHED:
            assert (violation.seq, violation.state) == (10, state.value)
            assert violation.violation in outcomes
        elif violation is None:
            assert phase in outcomes or (phase == state and STAY in outcomes)


def test_docs_show_the_generated_table() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "trace-gates.md").read_text()
    begin, end = "<!-- automaton:begin -->\n", "<!-- automaton:end -->"
    assert begin in docs and end in docs, "docs/trace-gates.md lacks the automaton markers"
    shown = docs.split(begin, 1)[1].split(end, 1)[0]
    assert shown == render_table(), "regenerate it from residentkv.model.automaton.render_table()"


# ------------------------------------------------------------ every state where a stream ends
def _stream_event(seq: int, kind: str, **fields: Any) -> Envelope:
    body = {"schema": "residentkv.event/v1", "seq": seq, "ts_ns": seq, "source": "test",
            "event": kind, "claim_id": None, "request_id": None, **fields}
    if kind == "stream_started":
        body.update(FIELDS["stream_started"])
    return EVENT_ADAPTER.validate_python(body)  # type: ignore[return-value]


def _harm(seq: int) -> Envelope:
    return ev(seq, "claim_harmed", {"request_id": None, "cause": "engine_restarted",
                                    "before": PRED, "after": {**PRED, "holds": False}})


@pytest.mark.parametrize("stop", ["close", "restart", "restart_ended"])
@pytest.mark.parametrize("state", list(Phase))
def test_every_state_where_a_stream_ends(state: Phase, stop: str) -> None:
    """SPEC §9.1, in both readers: a claim open (accepted, not ended) at a graceful
    stream_closed, or at the next incarnation's stream_started and not ended at its head,
    vanished; one in any other state did not."""
    events = [_stream_event(0, "stream_started", incarnation="a"),
              *(ev(1 + e.seq, e.event, {"request_id": e.request_id, "claim_id": None,
                                        "owner_scope": getattr(e, "owner_scope", None)})
                for e in starts()),
              *(ev(4 + i, k, ch) for i, (k, ch) in enumerate(PREFIX[state]))]
    seq = len(events)
    if stop == "close":
        events.append(_stream_event(seq, "stream_closed", reason="shutdown"))
    else:  # the next stream numbers its seqs afresh
        events.append(_stream_event(0, "stream_started", incarnation="b"))
        if stop == "restart_ended":
            events.append(_harm(1))
        events.append(ev(2, "request_started", {"request_id": "r-7", "claim_id": None}))
    facts = collect(events)
    track = facts.claims.get(C)
    stream = Stream(events, True)
    assert (None if track is None else track.run.violation) == legal.claim_violation(stream, C)
    own = None if track is None else track.run.own
    vanished = own is not None and own.violation is Violation.VANISHED
    open_at_end = state not in PRE and state not in TERMINAL
    # a harm needs a materialization first: an accepted claim's stop ends it by a release
    ended = stop == "restart_ended" and state is not Phase.ACCEPTED
    assert vanished == (open_at_end and not ended), own


def test_a_pass_keeps_per_claim_what_it_needs_not_per_request(tmp_path: Path) -> None:
    """A claim restored on 40 requests in turn: only its open cycle stays listed by request,
    and every later request keeps the claim's own id string, not its events' copies (the
    pass's memory grows with claims and open cycles, not with each request's events)."""
    t = Trace().started("r-0").accept(C, "r-0").resident(C, "r-0").finished("r-0")
    for g in range(40):
        rid = f"r-{g + 1}"
        t.started(rid).restore_ok(C, rid, generation=g, job=g + 1).finished(rid)
    facts = stream_pass(TraceReader(t.write(tmp_path / "t.jsonl")).events())
    assert {rid: len(held) for rid, held in facts.cycling.items()} == {"r-40": 1}
    run = facts.claims[C].run
    later = [req for rid, req in facts.acceptor.requests.items() if rid != "r-0"]
    assert len(later) == 40
    assert all(req.carried is run.claim_id and req.job_claim_id is run.claim_id
               for req in later)
    assert run.violation is None
