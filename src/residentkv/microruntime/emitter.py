"""The MicroRuntime's voice: every ``residentkv.event/v1`` event it emits goes through here.

:class:`Emitter` wraps the one :class:`~residentkv.trace.writer.EventWriter` (or none: then
nothing is formatted or validated, which is what the benchmark measures). Claim events carry
the claim's identity fields; transfer jobs (stores and loads) share one numbering.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from residentkv import __version__
from residentkv.model.vocabulary import DEVICE_TIER, HOST_TIER, Arbiter
from residentkv.trace.writer import EventWriter, Provenance

#: the simulator's emitter name: the lowering checker recognises it (exact, normalised) and
#: never lets a simulated trace grant anything
EMITTER = "residentkv.microruntime"


def provenance(stream_id: str | None = None) -> Provenance:
    """The ``stream_started`` provenance of a simulated stream (emitter and "runtime" are the
    simulator itself: no runtime release is ever claimed)."""
    return Provenance(EMITTER, __version__, EMITTER, __version__, stream_id=stream_id)


class Emitter:
    """Formats the runtime's decisions as events; a no-op without a writer.

    :param writer: where events go; ``None`` emits nothing.

    ``on`` is False without a writer: hot paths test it to skip even the call.
    """

    __slots__ = ("_jobs", "_w", "on")

    def __init__(self, writer: EventWriter | None) -> None:
        self._w = writer
        self._jobs = 0
        self.on = writer is not None

    def emit(self, event: str, **fields: Any) -> None:
        """One event, fields as given."""
        if self._w is not None:
            self._w.emit(event, **fields)

    def claim(
        self,
        claim_id: str,
        ident: Mapping[str, str],
        event: str,
        request_id: str | None = None,
        **fields: Any,
    ) -> None:
        """A claim event: the claim id, the request, the claim's identity fields, then *fields*."""
        if self._w is not None:
            self._w.emit(event, claim_id=claim_id, request_id=request_id, **ident, **fields)

    def job(self, kind: str) -> str:
        """The id of the next transfer job (``store-N``, ``load-N``: one numbering)."""
        self._jobs += 1
        return f"{kind}-{self._jobs}"

    def flush(self) -> None:
        """Write out anything buffered."""
        if self._w is not None:
            self._w.flush()

    # --------------------------------------------------------------------- requests

    def request_started(self, request_id: str, tokens: int, owner_scope: str | None) -> None:
        """A request arrived needing *tokens* tokens."""
        if self._w is not None:
            self._w.emit("request_started", request_id=request_id, prompt_tokens=tokens,
                         owner_scope=owner_scope)

    def admitted(self, request_id: str, blocks: int) -> None:
        """A request was admitted with *blocks* blocks."""
        if self._w is not None:
            self._w.emit("active_request_admitted", request_id=request_id, blocks=blocks)

    def served(self, request_id: str) -> None:
        """A request finished and was served."""
        if self._w is not None:
            self._w.emit("request_finished", request_id=request_id, status="served",
                         finish_reason="stop")

    def deferred(self, request_id: str, reason: str, blocking: Sequence[str]) -> None:
        """A request waits, naming the claims it waits for."""
        if self._w is not None:
            self._w.emit("active_request_deferred", request_id=request_id, reason=reason,
                         blocking_claim_ids=list(blocking))

    def refused(
        self,
        request_id: str,
        outcome: str | None,
        blocking: Sequence[str],
        feasibility: str,
        arbiter: Arbiter,
        shortfall: int | None,
    ) -> None:
        """A request is refused (the outcome, attributed) and then finishes refused."""
        w = self._w
        if w is None:
            return
        # the envelope names the outcome claim (SPEC §4.1: they are equal)
        w.emit("active_request_refused", claim_id=outcome, request_id=request_id,
               outcome_claim_id=outcome, blocking_claim_ids=list(blocking),
               feasibility=feasibility, arbiter=arbiter, shortfall=shortfall)
        w.emit("request_finished", request_id=request_id, status="refused",
               finish_reason="refused")

    # --------------------------------------------------------------------- blocks

    def block_evicted(
        self,
        claim_id: str | None,
        request_id: str | None,
        block: int,
        protected: bool,
        reason: str,
        position: int,
    ) -> None:
        """A block's content was lost (evicted, faulted or dropped)."""
        if self._w is not None:
            self._w.emit("block_evicted", claim_id=claim_id, request_id=request_id,
                         block_id=block, protected=protected, reason=reason, position=position)

    # --------------------------------------------------------------------- transfers

    def stored(
        self, claim_id: str, request_id: str, job: str, nbytes: int, generation: int
    ) -> None:
        """A device-to-host store job started and finished."""
        w = self._w
        if w is None:
            return
        stages: tuple[tuple[str, dict[str, Any]], ...] = (
            ("kv_store_started", {}),
            ("kv_store_finished", {"success": True}),
        )
        for event, extra in stages:
            w.emit(event, claim_id=claim_id, request_id=request_id, job_id=job, bytes=nbytes,
                   generation=generation, from_tier=DEVICE_TIER, to_tier=HOST_TIER, **extra)

    def load_started(self, ids: Mapping[str, Any], nbytes: int) -> None:
        """A host-to-device load job started (*ids*: claim, request, job, generation)."""
        if self._w is not None:
            self._w.emit("kv_load_started", **ids, bytes=nbytes, from_tier=HOST_TIER,
                         to_tier=DEVICE_TIER)

    def load_succeeded(self, ids: Mapping[str, Any], nbytes: int) -> None:
        """The load job finished successfully."""
        if self._w is not None:
            self._w.emit("kv_load_finished", **ids, bytes=nbytes, success=True)

    def load_failed(
        self, ids: Mapping[str, Any], nbytes: int, invalid: Sequence[int], block_size: int
    ) -> None:
        """The (injected) load failure: the job, the invalid blocks, the scheduler's policy."""
        w = self._w
        if w is None:
            return
        w.emit("kv_load_finished", **ids, bytes=nbytes, success=False, injected=True)
        w.emit("kv_load_failed", **ids, invalid_block_ids=list(invalid), injected=True)
        w.emit(
            "scheduler_load_failure",
            claim_id=ids["claim_id"],
            request_id=ids["request_id"],
            policy="fail",
            invalid_block_count=len(invalid),
            failed_tokens=len(invalid) * block_size,
            finish_status="FINISHED_ERROR",
        )

    def lookup(self, claim_id: str, request_id: str, tokens: int, generation: int) -> None:
        """The prefix lookup found the claim's tokens on the host tier (an async load)."""
        if self._w is not None:
            self._w.emit("kv_lookup", claim_id=claim_id, request_id=request_id,
                         hit_tokens=tokens, async_load=True, generation=generation)
