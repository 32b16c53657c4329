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

import msgspec

from residentkv.adapters.vllm.rules import Decision, Decisions, loss_fields, stop_ending
from residentkv.trace.writer import sink_events

__all__ = ["ENGINE_RESTARTED", "Journal", "Line", "OpenClaim", "read_journal"]

#: ``claim_harmed.cause`` (and ``claim_released.reason``) of a claim a previous incarnation
#: left open, written at the head of the next incarnation's stream
ENGINE_RESTARTED = "engine_restarted"

_IDENTITY = ("object_id", "cache_identity", "request_token_map_id", "predicate_id")
#: event -> the word for how it ends a claim
_ENDS = {"claim_released": "released", "claim_expired": "expired", "claim_demoted": "demoted",
         "claim_harmed": "harmed", "claim_restore_failed": "failed closed"}
KINDS = frozenset({"stream_started", "stream_closed", "claim_accepted", "claim_rejected",
                   "claim_materialized", "claim_restore_required", "claim_restored", *_ENDS})


class Line(msgspec.Struct):
    """The fields of a sink line the journal reads (the others are skipped undecoded)."""

    event: str
    claim_id: str | None = None
    reason: str | None = None
    cause: str | None = None
    incarnation: str | None = None
    footprint_blocks: int | None = None
    surviving: int | None = None
    leading: int | None = None
    required: int | None = None
    holds: bool | None = None
    object_id: str | None = None
    cache_identity: str | None = None
    request_token_map_id: str | None = None
    predicate_id: str | None = None

    def identity(self) -> dict[str, str]:
        return {k: v for k in _IDENTITY if isinstance(v := getattr(self, k), str)}


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
    #: every incarnation a stream of the sink named (a new stream must name another)
    incarnations: set[str] = field(default_factory=set)

    def feed(self, e: Line) -> None:
        """Take one line of :data:`KINDS` into account."""
        kind, cid = e.event, e.claim_id
        if kind == "stream_started":
            self.streams += 1
            self.closed = False
            self.incarnation = e.incarnation
            if e.incarnation is not None:
                self.incarnations.add(e.incarnation)
            return
        if kind == "stream_closed":
            self.closed = True
            return
        if cid is None:
            return
        if kind == "claim_accepted":
            if cid not in self.open:  # an identical repeat changes nothing
                self.decisions.record(cid, Decision(True))
                self.open[cid] = OpenClaim(cid, e.identity(), e.footprint_blocks or 0)
        elif kind == "claim_rejected":
            self.decisions.record(cid, Decision(False, e.reason))
        elif kind in _ENDS:
            if kind != "claim_restore_failed" or cid in self.open:
                self._ended(cid, kind, e.cause if kind == "claim_harmed" else e.reason)
        elif (found := self.open.get(cid)) is not None:
            if kind == "claim_materialized":
                if e.surviving is not None and e.leading is not None \
                        and e.required is not None and e.holds is not None:
                    found.materialized = (e.surviving, e.leading, e.required, e.holds)
            else:  # a restore cycle opens (restore required) or settles (restored)
                found.cycle_open = kind == "claim_restore_required"

    def _ended(self, cid: str, kind: str, why: str | None) -> None:
        self.open.pop(cid, None)
        word = _ENDS[kind]
        self.decisions.record(cid, Decision(True, f"{word} ({why})" if why else word))

    def close_open(self, cause: str) -> list[tuple[str, dict[str, Any]]]:
        """End every open claim (see :meth:`OpenClaim.ending`): the events to write, in the
        order the claims were accepted; the journal then counts them as ended."""
        endings = [claim.ending(cause) for claim in self.open.values()]
        for event, fields in endings:
            self._ended(fields["claim_id"], event, fields.get("cause") or fields.get("reason"))
        return endings


    def fresh_incarnation(self, incarnation: str) -> str:
        """*incarnation*, or -- when a stream of the sink already named it (an engine that
        swapped its sink away and back) -- ``<incarnation>.<n>``: one stream per incarnation."""
        name, n = incarnation, 0
        while name in self.incarnations:
            n += 1
            name = f"{incarnation}.{n}"
        return name


def read_journal(sink: str | Path) -> Journal:
    """The journal of the sink at *sink* (empty when the file does not exist yet)."""
    journal = Journal()
    for line in sink_events(sink, KINDS, Line):
        journal.feed(line)
    return journal
