"""In-process operator state shared by the scheduler side and the worker side of one engine.

With ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` both connector roles live in one process, so both
write to one :class:`~residentkv.trace.writer.EventWriter` -- one stream, one ``seq`` counter --
and both read the same injection rules. (With multiprocessing the worker lives in another
process and would write its own stream; the witness does not support that mode and says so.)

The operator API (:func:`operator`) lets the process that owns the engine swap the event sink and
the injection rules between scenarios without restarting vLLM. It is reachable only from inside
that process; nothing in a request can reach it.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from pathlib import Path
from typing import Any

from residentkv.adapters.vllm.config import ConnectorConfig, InjectionRule
from residentkv.trace.writer import EventWriter

__all__ = ["Operator", "install", "operator"]


class Operator:
    """Live configuration and the shared event writer of the in-process engine."""

    def __init__(self, config: ConnectorConfig) -> None:
        self.base_config = config
        self._lock = threading.Lock()
        self.offload_unclaimed = config.offload_unclaimed
        self._rules: list[InjectionRule] = list(config.failure_injection)
        self._spent: set[int] = set()
        self.injections_fired = 0
        self.writer = EventWriter(config.event_sink, source="residentkv.vllm.scheduler")
        self.sink = str(config.event_sink)
        #: request_id -> the claim outcome returned to the caller (also kept here because vLLM
        #: 0.32 drops kv_transfer_params on FINISHED_ERROR outputs).
        self.outcomes: dict[str, dict[str, Any]] = {}
        #: the scheduler-side connector instance, set when vLLM constructs it
        self.scheduler: Any = None
        #: the worker-side connector instance (in-process engines only)
        self.worker: Any = None
        # Events are buffered for speed; a process that ends without shutting the engine down
        # must still leave a complete trace.
        atexit.register(self.flush)

    def emit(self, event: str, **fields: Any) -> dict[str, Any]:
        """Write one event to the current stream."""
        return self.writer.emit(event, **fields)

    def configure(
        self,
        *,
        event_sink: str | Path | None = None,
        failure_injection: list[InjectionRule] | tuple[InjectionRule, ...] | None = None,
        offload_unclaimed: bool | None = None,
    ) -> None:
        """Swap the sink, the injection rules or the unclaimed-offload switch (between runs)."""
        with self._lock:
            if event_sink is not None:
                self.writer.close()
                self.writer = EventWriter(event_sink, source="residentkv.vllm.scheduler")
                self.sink = str(event_sink)
                self.outcomes.clear()
            if failure_injection is not None:
                self._rules = list(failure_injection)
                self._spent.clear()
            if offload_unclaimed is not None:
                self.offload_unclaimed = offload_unclaimed

    def take_injection(self, claim_id: str | None, owner_scope: str | None) -> InjectionRule | None:
        """The rule that fails this load, if any; a ``once`` rule is spent by its first match."""
        with self._lock:
            for i, rule in enumerate(self._rules):
                if i in self._spent or not rule.matches(claim_id, owner_scope):
                    continue
                if rule.mode == "once":
                    self._spent.add(i)
                self.injections_fired += 1
                return rule
        return None

    def outcome_for(self, request_id: str) -> dict[str, Any] | None:
        """The recorded claim outcome of a request, by vLLM's internal id or the caller's id
        (vLLM appends ``-<8 hex>`` to the caller's id internally)."""
        found = self.outcomes.get(request_id)
        if found is not None:
            return found
        prefix = request_id + "-"
        matches = [v for k, v in self.outcomes.items() if k.startswith(prefix)]
        return matches[-1] if matches else None

    def release_claims(self, claim_ids: list[str], reason: str = "operator release") -> int:
        """End live claims (emits ``claim_released``); only while the engine is idle."""
        if self.scheduler is None:
            return 0
        return sum(self.scheduler.release_claim(c, reason) for c in claim_ids)

    def flush(self) -> None:
        """Write buffered events through to the sink."""
        with contextlib.suppress(ValueError):  # the writer was already closed
            self.writer.flush()


_OPERATOR: Operator | None = None
_INSTALL_LOCK = threading.Lock()


def install(config: ConnectorConfig) -> Operator:
    """The operator for *config*: shared by both connector roles of one engine, replaced when a
    new engine starts with a different configuration."""
    global _OPERATOR
    with _INSTALL_LOCK:
        if _OPERATOR is None or _OPERATOR.base_config != config:
            if _OPERATOR is not None:
                _OPERATOR.writer.close()
            _OPERATOR = Operator(config)
        return _OPERATOR


def operator() -> Operator:
    """The operator of the engine running in this process."""
    if _OPERATOR is None:
        raise RuntimeError("no ResidentClaimConnector has been started in this process")
    return _OPERATOR
