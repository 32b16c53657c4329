"""What the replicas' traces say about one request the harness sent (pure).

The harness sends one request at a time and notes how many lines each replica's trace had
before it (:attr:`Sent.marks`). The request that served it is the one ``request_started`` that
appears in any trace between those marks and the next request's; everything else is read from
the events of that request id in that trace.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Served", "read_events", "served"]

Event = dict[str, Any]
#: the events that mean the host tier's copy was (about to be) read for a request
RESTORE_EVENTS = frozenset({"claim_restore_required", "kv_load_started", "kv_load_finished",
                            "claim_restored"})


def read_events(path: Path) -> list[Event]:
    """The trace's events in file order; a torn or unparsable line is skipped (the gates report
    it: this is only for finding a request's events)."""
    out: list[Event] = []
    try:
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                try:
                    event = json.loads(line)
                except ValueError:
                    event = {}
                out.append(event if isinstance(event, dict) else {})
    except OSError:
        pass
    return out


@dataclass(frozen=True)
class Served:
    """The request that served one sent request: its replica, id and events."""

    replica: str
    request_id: str
    events: list[Event] = field(default_factory=list)

    def named(self, kind: str, claim_id: str | None = None) -> list[Event]:
        return [e for e in self.events if e.get("event") == kind
                and (claim_id is None or e.get("claim_id") == claim_id)]

    @property
    def restored_from_host(self) -> bool:
        return any(e.get("source") == "offload_tier" for e in self.named("claim_restored"))

    @property
    def read_host_tier(self) -> bool:
        return any(e.get("event") in RESTORE_EVENTS for e in self.events)

    def rejection(self, claim_id: str | None = None) -> Event | None:
        hits = self.named("claim_rejected", claim_id)
        return hits[0] if hits else None

    def rejection_of(self, claim_id: str | None) -> Event | None:
        """Its rejection of *claim_id*: one naming it, else one naming no claim (a replica
        names a claim in its first decision of it only, SPEC §4.2; whether an unnamed one may
        stand for the claim there is the fleet view's to judge)."""
        named = self.rejection(claim_id)
        if named is not None:
            return named
        return next((e for e in self.named("claim_rejected") if e.get("claim_id") is None),
                    None)

    @property
    def claim_ref(self) -> str | None:
        start = self.named("request_started")
        return start[0].get("claim_ref") if start else None


def served(marks: Mapping[str, int], upto: Mapping[str, int] | None,
           traces: Mapping[str, Sequence[Event]]) -> list[Served]:
    """Every request that started in a trace between *marks* and *upto* (to the end when
    None). One entry means the request was served once; none, that no replica saw it."""
    out = []
    for replica, events in traces.items():
        lo = marks.get(replica, 0)
        hi = len(events) if upto is None else upto.get(replica, len(events))
        for e in events[lo:hi]:
            if e.get("event") == "request_started" and isinstance(e.get("request_id"), str):
                rid = e["request_id"]
                out.append(Served(replica, rid, [x for x in events if x.get("request_id") == rid]))
    return out
