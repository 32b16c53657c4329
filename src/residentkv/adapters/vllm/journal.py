"""What an engine's own event sink says about its claims, read back when a new stream opens.

The sink is the journal of decisions (SPEC §9.1): every claim id a stream of the sink accepted
or rejected (naming it) stays decided, across incarnations, and a claim an earlier incarnation
accepted and never ended was left open by a process that stopped without closing its stream (a
crash, SIGKILL, ``--shutdown-timeout 0``). A new incarnation ends each such claim at the head of
its own stream, before anything else, and answers every later request naming a decided id with
that decision or the loss.

:class:`Journal` is the pure tracker (it is fed event dicts in file order); :func:`read_journal`
does the reading (:func:`~residentkv.trace.writer.sink_events` decodes only the lines of the
kinds below).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from residentkv.adapters.vllm.rules import Decision, Decisions, loss_fields, stop_ending
from residentkv.trace.writer import sink_events

__all__ = ["ENGINE_RESTARTED", "Journal", "OpenClaim", "read_journal"]

#: ``claim_harmed.cause`` (and ``claim_released.reason``) of a claim a previous incarnation
#: left open, written at the head of the next incarnation's stream
ENGINE_RESTARTED = "engine_restarted"

_IDENTITY = ("object_id", "cache_identity", "request_token_map_id", "predicate_id")
#: event -> the word for how it ends a claim
_ENDS = {"claim_released": "released", "claim_expired": "expired", "claim_demoted": "demoted",
         "claim_harmed": "harmed", "claim_restore_failed": "failed closed"}
KINDS = frozenset({"stream_started", "stream_closed", "claim_accepted", "claim_rejected",
                   "claim_materialized", "claim_restore_required", "claim_restored", *_ENDS})


@dataclass
class OpenClaim:
    """A claim accepted in the sink and not ended there."""

    claim_id: str
    identity: dict[str, Any]
    footprint: int
    materialized: tuple[int, int, int, bool] | None = None
    cycle_open: bool = False

    def ending(self, cause: str) -> tuple[str, dict[str, Any]]:
        """The event (and its fields) that ends this claim when its engine is gone: harm when
        a materialization held (its host tier died with the engine), else a release."""
        event = stop_ending(held_materialized=self.materialized is not None
                            and self.materialized[3], cycle_open=self.cycle_open, lost=True)
        fields: dict[str, Any] = {"claim_id": self.claim_id, **self.identity}
        if event == "claim_harmed":
            fields |= {"cause": cause, **loss_fields(self.materialized, self.footprint)}
        else:
            fields["reason"] = f"{cause}: the claim was never materialized"
        return event, fields


@dataclass
class Journal:
    """The decisions and the open claims of a sink, from its events in file order."""

    decisions: Decisions = field(default_factory=Decisions)
    open: dict[str, OpenClaim] = field(default_factory=dict)
    streams: int = 0
    #: whether the last stream ended with its closing event
    closed: bool = False
    #: the incarnation the last stream named
    incarnation: str | None = None

    def feed(self, e: dict[str, Any]) -> None:
        """Take one event of :data:`KINDS` into account."""
        kind, cid = e.get("event"), e.get("claim_id")
        if kind == "stream_started":
            self.streams += 1
            self.closed = False
            inc = e.get("incarnation")
            self.incarnation = inc if isinstance(inc, str) else None
            return
        if kind == "stream_closed":
            self.closed = True
            return
        if not isinstance(cid, str):
            return
        if kind == "claim_accepted":
            self._accepted(cid, e)
        elif kind == "claim_rejected":
            self.decisions.record(cid, Decision(False, str(e.get("reason"))))
        elif kind in _ENDS:
            self._ended(cid, str(kind), e)
        elif (found := self.open.get(cid)) is not None:
            self._progress(found, str(kind), e)

    def _accepted(self, cid: str, e: dict[str, Any]) -> None:
        if cid in self.open:
            return  # an identical repeat changes nothing
        self.decisions.record(cid, Decision(True))
        footprint = e.get("footprint_blocks")
        self.open[cid] = OpenClaim(
            cid, {k: e[k] for k in _IDENTITY if isinstance(e.get(k), str)},
            footprint if isinstance(footprint, int) else 0)

    def _ended(self, cid: str, kind: str, e: dict[str, Any]) -> None:
        if kind == "claim_restore_failed" and cid not in self.open:
            return
        self.open.pop(cid, None)
        why = e.get("cause") if kind == "claim_harmed" else e.get("reason")
        word = _ENDS[kind]
        self.decisions.record(cid, Decision(True, f"{word} ({why})" if why else word))

    @staticmethod
    def _progress(found: OpenClaim, kind: str, e: dict[str, Any]) -> None:
        if kind == "claim_materialized":
            surviving, leading, required, holds = (
                e.get(k) for k in ("surviving", "leading", "required", "holds"))
            if isinstance(surviving, int) and isinstance(leading, int) \
                    and isinstance(required, int) and isinstance(holds, bool):
                found.materialized = (surviving, leading, required, holds)
        elif kind == "claim_restore_required":
            found.cycle_open = True
        elif kind == "claim_restored":
            found.cycle_open = False


    def close_open(self, cause: str) -> list[tuple[str, dict[str, Any]]]:
        """End every open claim (see :meth:`OpenClaim.ending`): the events to write, in the
        order the claims were accepted; the journal then counts them as ended."""
        endings = [claim.ending(cause) for claim in self.open.values()]
        for event, fields in endings:
            self._ended(fields["claim_id"], event, fields)
        return endings


def read_journal(sink: str | Path) -> Journal:
    """The journal of the sink at *sink* (empty when the file does not exist yet)."""
    journal = Journal()
    for event in sink_events(sink, KINDS):
        journal.feed(event)
    return journal
