"""Facts read back from a simulated trace: every litmus verdict and sweep figure comes from
here, never from the simulator's internals.

The trace is read with residentkv's own reader, so a simulated trace is held to the same schema
as any other; reader problems are kept and make every verdict fail.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from residentkv.errors import IllegalTransition
from residentkv.model.events import IDENTITY_FIELDS
from residentkv.model.lifecycle import ClaimLifecycle, ClaimState
from residentkv.trace.reader import TraceReader

S = ClaimState

#: claim event -> the lifecycle state it enters
EVENT_STATE: dict[str, ClaimState] = {
    "claim_submitted": S.SUBMITTED,
    "claim_accepted": S.ACCEPTED,
    "claim_rejected": S.REJECTED,
    "claim_materialized": S.MATERIALIZED,
    "claim_offloaded": S.OFFLOADED,
    "claim_restore_required": S.RESTORE_REQUIRED,
    "claim_restored": S.RESTORED,
    "claim_reused": S.REUSED,
    "claim_restore_failed": S.FAILED_CLOSED,
    "claim_demoted": S.DEMOTED,
    "claim_expired": S.EXPIRED,
    "claim_released": S.RELEASED,
    "claim_harmed": S.HARMED,
}

#: events that report a claimed block leaving the device
LOSS_EVENTS = frozenset({"block_evicted", "claim_block_lost_after_release"})


@dataclass
class Trace:
    """One trace as a list of JSON objects in ``seq`` order, plus the reader's problems."""

    path: Path
    events: list[dict[str, Any]]
    problems: list[str] = field(default_factory=list)

    def select(
        self,
        event: str | None = None,
        *,
        claim_id: str | None = None,
        request_id: str | None = None,
        **fields: Any,
    ) -> list[dict[str, Any]]:
        """Events matching every given criterion."""
        out = []
        for e in self.events:
            if event is not None and e["event"] != event:
                continue
            if claim_id is not None and e["claim_id"] != claim_id:
                continue
            if request_id is not None and e["request_id"] != request_id:
                continue
            if any(e.get(k) != v for k, v in fields.items()):
                continue
            out.append(e)
        return out

    def first(self, event: str, **criteria: Any) -> dict[str, Any] | None:
        """The first matching event, or None."""
        found = self.select(event, **criteria)
        return found[0] if found else None

    def claim_ids(self) -> list[str]:
        """Claims that have a ``claim_submitted`` or ``claim_accepted`` event, in order."""
        seen: dict[str, None] = {}
        for e in self.events:
            if e["event"] in ("claim_submitted", "claim_accepted") and e["claim_id"]:
                seen.setdefault(e["claim_id"], None)
        return list(seen)

    def states(self, claim_id: str) -> Iterator[tuple[int, ClaimState | None]]:
        """``(seq, state after that event)`` for every event of the stream, replaying the claim's
        lifecycle through the contract's state machine (IllegalTransition propagates)."""
        life = ClaimLifecycle(claim_id)
        for e in self.events:
            if e["claim_id"] == claim_id and e["event"] in EVENT_STATE:
                life.advance(EVENT_STATE[e["event"]])
            yield e["seq"], life.state

    def state_before(self, claim_id: str, seq: int) -> ClaimState | None:
        """The claim's lifecycle state just before event *seq*."""
        state: ClaimState | None = None
        for s, after in self.states(claim_id):
            if s >= seq:
                break
            state = after
        return state

    def losses(self, claim_id: str) -> list[dict[str, Any]]:
        """``block_evicted`` events naming the claim: its blocks that left the device."""
        return self.select("block_evicted", claim_id=claim_id)

    def identity_values(self, claim_id: str) -> dict[str, set[Any]]:
        """Each identity field -> the set of values it took on the claim's events."""
        out: dict[str, set[Any]] = {f: set() for f in IDENTITY_FIELDS}
        for e in self.events:
            if e["claim_id"] == claim_id and e["event"].startswith("claim_"):
                for f in IDENTITY_FIELDS:
                    out[f].add(e.get(f))
        return out

    def lifecycle_legal(self, claim_id: str) -> bool:
        """Whether the claim's events follow the contract's state machine."""
        try:
            for _ in self.states(claim_id):
                pass
        except IllegalTransition:
            return False
        return True


def read_trace(path: str | Path) -> Trace:
    """Read a v1 trace with residentkv's reader."""
    reader = TraceReader(path)
    events = [e.model_dump(mode="json", by_alias=True) for _, e in reader]
    problems = [p.render() for p in reader.problems]
    return Trace(Path(path), events, problems)
