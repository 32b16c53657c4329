"""Rewrites that keep a trace legal under SPEC §4.2, so they must not change any gate verdict.

The mutator looks for false passes; these look for false fails: each rewrite changes only
something SPEC declares irrelevant or explicitly legal (the carrying request's start naming the
claim, an identical second acceptance, a load labelled with its cycle's generation, a BOM and
blank lines, large or sparse seqs, shifted labels, a predicate that holds by the F−1 rule, ...).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

Events = list[dict[str, Any]]
BOM = b"\xef\xbb\xbf"
INT64_MAX = 2**63 - 1


def _renumber(events: Events) -> Events:
    for i, e in enumerate(events):
        e["seq"], e["ts_ns"] = i, 1000 * (i + 1)
    return events


def _first_accepts(events: Events) -> dict[str, int]:
    out: dict[str, int] = {}
    for i, e in enumerate(events):
        if e.get("event") == "claim_accepted":
            out.setdefault(e["claim_id"], i)
    return out


def carrying_start_names_claim(events: Events) -> Events:
    """SPEC §4.2: the carrying request's request_started may name the claim before acceptance."""
    for claim, i in _first_accepts(events).items():
        r = events[i]["request_id"]
        for e in events[:i]:
            if e["event"] == "request_started" and e["request_id"] == r and not e["claim_id"]:
                e["claim_id"] = claim
                break
    return events


def identical_second_accept(events: Events) -> Events:
    """SPEC §4.2: a second claim_accepted identical in every defining field changes nothing."""
    for i in sorted(_first_accepts(events).values(), reverse=True):
        events.insert(i + 1, copy.deepcopy(events[i]))
    return _renumber(events)


def submitted_first(events: Events) -> Events:
    """SPEC §2: submitted -> accepted (the identity tuple repeated, same request)."""
    for i in sorted(_first_accepts(events).values(), reverse=True):
        a = events[i]
        body = {k: a[k] for k in ("schema", "seq", "ts_ns", "source", "claim_id", "request_id",
                                  "object_id", "cache_identity", "request_token_map_id",
                                  "predicate_id") if k in a}
        body["event"] = "claim_submitted"
        events.insert(i, body)
    return _renumber(events)


def load_labels(events: Events) -> Events:
    """SPEC §4.2: a load's label, if present, is its request's open cycle's."""
    open_cycle: dict[tuple[Any, Any], int] = {}
    for e in events:
        key = (e.get("claim_id"), e.get("request_id"))
        if e["event"] == "claim_restore_required":
            open_cycle[key] = e["generation"]
        elif e["event"] in ("kv_load_started", "kv_load_finished", "kv_load_failed") \
                and key in open_cycle:
            e["generation"] = open_cycle[key]
    return events


def shifted_labels(events: Events) -> Events:
    """Labels only need to increase: adding a constant keeps every order."""
    for e in events:
        if isinstance(e.get("generation"), int):
            e["generation"] += 5
    return events


def large_seqs(events: Events) -> Events:
    """SPEC §4.2 Numbers: seq runs up to 2^63−1; the last event takes the largest."""
    base = INT64_MAX - len(events) + 1
    for i, e in enumerate(events):
        e["seq"] = base + i
    return events


def sparse_seqs(events: Events) -> Events:
    """seq is only an order: gaps mean nothing."""
    for i, e in enumerate(events):
        e["seq"] = 7 + 1000 * i
    return events


def owner_scopes(events: Events) -> Events:
    """One tenant throughout: every request and claim declares the same owner scope."""
    for e in events:
        if e["event"] in ("request_started", "claim_accepted") or (
                e["event"] == "claim_submitted" and e.get("owner_scope") is not None):
            e["owner_scope"] = "tenant:a/session:1"
    return events


def noise(events: Events) -> Events:
    """Events that name no claim (a counter, an unclaimed request with an ordinary store)."""
    extra: Events = [
        {"event": "generic_counter", "claim_id": None, "request_id": None, "name": "hits",
         "value": 3},
        {"event": "request_started", "claim_id": None, "request_id": "r-noise",
         "prompt_tokens": 8},
        {"event": "kv_store_started", "claim_id": None, "request_id": "r-noise", "job_id": 900,
         "bytes": 10, "from_tier": "device", "to_tier": "host"},
        {"event": "kv_store_finished", "claim_id": None, "request_id": "r-noise", "job_id": 900,
         "bytes": 10, "success": True, "from_tier": "device", "to_tier": "host"},
        {"event": "request_finished", "claim_id": None, "request_id": "r-noise",
         "status": "served", "finish_reason": "length"},
    ]
    for n, e in enumerate(extra):
        events.insert(min(len(events), 1 + 2 * n),
                      {"schema": "residentkv.event/v1", "seq": 0, "ts_ns": 0,
                       "source": "test", **e})
    return _renumber(events)


def f_minus_one(events: Events) -> Events:
    """SPEC §4.2 Predicates: footprint F, leading L, surviving F−1 proves every position but L.

    Every claim's predicate becomes contiguous_range(1, 1) over a footprint of 2, and each
    materialization reports surviving 1, leading 0: position 1 is present, so it holds.
    """
    predicate = {"id": "p-range1-1", "kind": "contiguous_range", "blocks": 1, "start": 1}
    for e in events:
        if e["event"].startswith("claim_") and "predicate_id" in e:
            e["predicate_id"] = predicate["id"]
        if e["event"] == "claim_accepted":
            e["predicate"], e["footprint_blocks"] = dict(predicate), 2
        elif e["event"] == "claim_materialized":
            e.update(surviving=1, leading=0, required=1, holds=True)
        elif e["event"] in ("block_evicted", "claim_block_lost_after_release") \
                and e.get("position") is not None:
            e["position"] = 1  # a loss stays a loss of a needed position
    return events


def increasing_labels(events: Events) -> Events:
    """Each claim's generation labels renamed 0, 1, 2, ... in order of first appearance.

    The defect generator draws distinct labels in any order; SPEC §4.2 wants each new cycle's
    label above every earlier one, which this restores without changing anything else.
    """
    ranks: dict[Any, dict[int, int]] = {}
    for e in events:
        g = e.get("generation")
        if isinstance(g, int) and not isinstance(g, bool):
            rank = ranks.setdefault(e.get("claim_id"), {})
            e["generation"] = rank.setdefault(g, len(rank))
    return events


def store_labels(events: Events) -> Events:
    """SPEC §4.2: a store's label is >= every earlier cycle's and <= every later one's; the
    label of the claim_offloaded that follows it is both."""
    for i, e in enumerate(events):
        if e["event"] in ("kv_store_started", "kv_store_finished") and e.get("claim_id"):
            following = (x.get("generation") for x in events[i + 1:]
                         if x["event"] == "claim_offloaded" and x["claim_id"] == e["claim_id"])
            label = next(following, None)
            if isinstance(label, int):
                e["generation"] = label
    return events


def resident_reuse(events: Events) -> Events:
    """SPEC §4.2 Order: a reuse while the claim is resident since a materialization with no
    offload since (right after each claim's first materialization, on its request)."""
    done: set[Any] = set()
    for i in range(len(events) - 1, -1, -1):
        e = events[i]
        if e["event"] != "claim_materialized" or not e.get("holds"):
            continue
        first = all(not (x["event"] == "claim_materialized" and x["claim_id"] == e["claim_id"])
                    for x in events[:i])
        if first and e["claim_id"] not in done:
            done.add(e["claim_id"])
            reuse = {k: v for k, v in e.items() if k in (
                "schema", "seq", "ts_ns", "source", "claim_id", "request_id", "object_id",
                "cache_identity", "request_token_map_id", "predicate_id")}
            events.insert(i + 1, {**reuse, "event": "claim_reused", "generation": 0,
                                  "holds": True})
    return _renumber(events)


EVENT_REWRITES: dict[str, Callable[[Events], Events]] = {
    f.__name__: f for f in (carrying_start_names_claim, identical_second_accept,
                            submitted_first, load_labels, store_labels, shifted_labels,
                            large_seqs, sparse_seqs, owner_scopes, noise, f_minus_one,
                            resident_reuse)
}


def bom_and_blank_lines(events: Events) -> bytes:
    """SPEC §4.2 Numbers: a BOM before the first line is ignored; blank lines carry nothing."""
    lines = [json.dumps(e) for e in events]
    return BOM + "\n\n".join(lines).encode() + b"\n\n"


def rewritten(name: str, events: Events) -> bytes:
    """The bytes of *events* after the rewrite *name* (``bom_and_blank_lines`` included)."""
    events = copy.deepcopy(events)
    if name == "bom_and_blank_lines":
        return bom_and_blank_lines(events)
    return "".join(json.dumps(e) + "\n" for e in EVENT_REWRITES[name](events)).encode()


REWRITES: tuple[str, ...] = (*EVENT_REWRITES, "bom_and_blank_lines")
