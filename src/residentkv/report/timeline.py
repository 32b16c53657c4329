"""Witness and observed traces as timelines: per request, the claim's lifecycle in seq order,
and each failure linked to the outcome it became. A display extraction of a v1 trace (read with the
strict reader, so an invalid trace shows its problems instead of a picture); it judges nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from residentkv.model.events import event_to_dict
from residentkv.trace.reader import TraceReader

#: display category of each event type (anything else is "other")
CATEGORY: dict[str, str] = {
    "request_started": "request", "request_finished": "request",
    "claim_submitted": "claim", "claim_accepted": "claim", "claim_materialized": "claim",
    "claim_offloaded": "claim", "claim_restore_required": "claim", "claim_restored": "claim",
    "claim_reused": "claim", "claim_released": "claim", "claim_demoted": "claim",
    "claim_expired": "claim",
    "kv_lookup": "transfer", "kv_store_started": "transfer", "kv_store_finished": "transfer",
    "kv_load_started": "transfer", "kv_load_finished": "transfer",
    "kv_load_failed": "failure", "scheduler_load_failure": "failure",
    "claim_restore_failed": "failure", "claim_rejected": "failure",
    "block_evicted": "loss", "claim_block_lost_after_release": "loss",
    "active_request_refused": "outcome", "active_request_deferred": "outcome",
    "claim_harmed": "outcome", "future_reuse_denied": "outcome",
    "active_request_admitted": "request", "future_reuse_admitted": "request",
    # the observer could not see a window of the runtime's stream: what depends on it is unknown
    "observation_gap": "gap",
}
NO_REQUEST = "(no request)"
#: colour of each category, shared by the HTML report and the PNG pictures
CATEGORY_COLOURS: dict[str, str] = {
    "request": "#5b5b66", "claim": "#1f5fbf", "transfer": "#8a8a94",
    "failure": "#b3261e", "outcome": "#c46a00", "loss": "#d98880", "gap": "#6a3d9a",
    "other": "#999999",
}


def _category(e: dict[str, Any]) -> str:
    if e["event"] in ("kv_store_finished", "kv_load_finished") and e.get("success") is False:
        return "failure"
    return CATEGORY.get(e["event"], "other")


def timeline(path: str | Path, name: str | None = None) -> dict[str, Any]:
    """The JSON-able timeline of one trace file."""
    reader = TraceReader(path)
    events = [event_to_dict(e) for e in reader.events()]
    lanes: list[str] = list(dict.fromkeys(e.get("request_id") or NO_REQUEST for e in events))
    rows = _collapse([{"seq": e["seq"], "event": e["event"], "claim": e.get("claim_id"),
                       "request": e.get("request_id") or NO_REQUEST, "category": _category(e),
                       "status": e.get("status"), "count": 1} for e in events])
    return {"name": name or Path(path).stem, "path": str(path), "lanes": lanes,
            "events": rows, "links": _links(rows),
            "problems": [p.render() for p in reader.problems]}


def _key(e: dict[str, Any]) -> tuple[str, str, str | None]:
    return e["event"], e["request"], e["claim"]


def _collapse(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fold repeats (a a a, or a b a b) into their first occurrence with a ``count``, so fifty
    evictions read as one mark "x50" instead of fifty."""
    out: list[dict[str, Any]] = []
    i = 0
    while i < len(rows):
        e = rows[i]
        if out and _key(out[-1]) == _key(e):
            out[-1]["count"] += 1
            i += 1
        elif (len(out) >= 2 and i + 1 < len(rows) and _key(out[-2]) == _key(e)
              and _key(out[-1]) == _key(rows[i + 1]) and _key(e) != _key(rows[i + 1])):
            out[-2]["count"] += 1
            out[-1]["count"] += 1
            i += 2
        else:
            out.append(e)
            i += 1
    return out


def _links(rows: list[dict[str, Any]]) -> list[dict[str, int]]:
    """Failure -> outcome: the first failure of a claim to the next outcome naming that claim."""
    out: list[dict[str, int]] = []
    for i, e in enumerate(rows):
        if e["category"] != "failure" or e["claim"] is None:
            continue
        nxt = next((o for o in rows[i + 1:] if o["category"] == "outcome"
                    and o["claim"] == e["claim"]), None)
        if nxt is not None and not any(link["to"] == nxt["seq"] for link in out):
            out.append({"from": e["seq"], "to": nxt["seq"]})
    return out


def event_label(e: dict[str, Any]) -> str:
    """The short label of a timeline mark: the event without its family prefix, x count."""
    label = e["event"].removeprefix("claim_").removeprefix("active_request_")
    return f"{label} x{e['count']}" if e["count"] > 1 else label
