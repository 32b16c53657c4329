"""The operator state of one engine: the single event writer, injection rules, outcomes.

It lives in the process of the connector's scheduler role (vLLM's EngineCore process, or the
caller's process for an in-process engine) and is the only writer of the engine's stream: worker
ranks send their facts to the scheduler side, which writes them here. Every scheduler-side hook
runs under :attr:`Operator.lock` and ends with :meth:`Operator.end_step`, which writes the hook's
events through to the file -- a collector tailing the stream sees them when the hook returns, and
a process killed afterwards (``--shutdown-timeout 0``, SIGKILL) loses nothing it wrote.

The operator reaches this state from its own process with :func:`operator`, or while a server
runs through the control socket (:mod:`residentkv.adapters.vllm.control_socket`). Nothing in a
request can reach it.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from residentkv.adapters.vllm.config import ConnectorConfig, InjectionRule
from residentkv.adapters.vllm.release import installed_vllm
from residentkv.trace.writer import EventWriter, Provenance

__all__ = ["SCHEDULER", "ClaimHolder", "Operator", "install", "operator", "runtime_identity"]

SCHEDULER = "residentkv.vllm.scheduler"
EMITTER = "residentkv.vllm"
#: finished requests whose claim outcome stays available for lookup
OUTCOMES_KEPT = 10_000
# Events reach the file at the end of each scheduler hook, never by buffer size.
_NEVER_BY_SIZE = 1 << 30


class ClaimHolder(Protocol):
    """What the operator reads and asks of the engine's scheduler-side connector role, which
    registers itself as :attr:`Operator.scheduler` when vLLM constructs it."""

    @property
    def claims(self) -> Mapping[str, object]:
        """The live claims, by id."""
        ...

    def live_outcome(self, match: Callable[[str], bool]) -> dict[str, Any] | None:
        """The current claim outcome of the last running request whose id *match* accepts."""
        ...

    def release_claim(self, claim_id: str, reason: str) -> bool:
        """End a live claim (``claim_released``); whether it was live."""
        ...


def runtime_identity() -> tuple[str, str]:
    """(runtime name, version) of the installed vLLM (see
    :func:`~residentkv.adapters.vllm.release.installed_vllm`)."""
    return installed_vllm() or ("vllm", "unknown")


def open_stream(sink: str | Path, replica: str | None = None) -> EventWriter:
    """A writer for a new stream of this engine: ``seq`` restarts at 0 with its provenance
    (``stream_started``: emitter, runtime release, a fresh stream id, the replica's name)."""
    from residentkv import __version__

    name, ver = runtime_identity()
    prov = Provenance(emitter_name=EMITTER, emitter_version=__version__, runtime_name=name,
                      runtime_version=ver, stream_id=uuid.uuid4().hex, replica=replica)
    return EventWriter(sink, source=SCHEDULER, buffer_lines=_NEVER_BY_SIZE, provenance=prov)


class Operator:
    """Live configuration and the single event writer of one engine's scheduler process."""

    def __init__(self, config: ConnectorConfig) -> None:
        self.base_config = config
        #: held by every scheduler-side hook and every operator action: vLLM's scheduler loop
        #: and the control socket never interleave inside one step's bookkeeping.
        self.lock = threading.RLock()
        self.offload_unclaimed = config.offload_unclaimed
        self.verify_content = config.verify_content
        self._rules: list[InjectionRule] = list(config.failure_injection)
        self._spent: set[int] = set()
        self.injections_fired = 0
        self.writer = open_stream(config.event_sink, config.replica)
        self.sink = str(config.event_sink)
        #: request_id -> the claim outcome returned to the caller (kept because vLLM 0.32
        #: drops kv_transfer_params on FINISHED_ERROR outputs); the newest OUTCOMES_KEPT only,
        #: so a long-running server does not grow without bound.
        self.outcomes: OrderedDict[str, dict[str, Any]] = OrderedDict()
        #: the scheduler-side connector role, set when vLLM constructs it
        self.scheduler: ClaimHolder | None = None
        #: the outcome channel a server front end announced (its claim outcome middleware);
        #: None: claims arriving through vLLM's OpenAI server are refused intake
        self.outcome_channel: str | None = None
        atexit.register(self.flush)

    def emit(self, event: str, **fields: Any) -> dict[str, Any]:
        """Append one event to the current stream (on disk at the end of the step)."""
        return self.writer.emit(event, **fields)

    def end_step(self) -> None:
        """Write this hook's events through to the file."""
        self.writer.flush()

    def configure(
        self,
        *,
        event_sink: str | Path | None = None,
        failure_injection: list[InjectionRule] | tuple[InjectionRule, ...] | None = None,
        offload_unclaimed: bool | None = None,
        verify_content: bool | None = None,
    ) -> None:
        """Swap the sink (a new stream), the injection rules, the unclaimed-offload switch or
        content verification (which applies to stores planned from now on)."""
        with self.lock:
            if event_sink is not None:
                self.writer.close()
                self.writer = open_stream(event_sink, self.base_config.replica)
                self.sink = str(event_sink)
                self.outcomes.clear()
            if failure_injection is not None:
                self._rules = list(failure_injection)
                self._spent.clear()
            if offload_unclaimed is not None:
                self.offload_unclaimed = offload_unclaimed
            if verify_content is not None:
                self.verify_content = verify_content

    def take_injection(self, claim_id: str | None, owner_scope: str | None) -> InjectionRule | None:
        """The rule that fails this load, if any; a ``once`` rule is spent by its first match."""
        with self.lock:
            for i, rule in enumerate(self._rules):
                if i in self._spent or not rule.matches(claim_id, owner_scope):
                    continue
                if rule.single_use:
                    self._spent.add(i)
                self.injections_fired += 1
                return rule
        return None

    def record_outcome(self, request_id: str, outcome: dict[str, Any]) -> None:
        """Keep a finished request's claim outcome for later lookup (bounded)."""
        self.outcomes[request_id] = outcome
        while len(self.outcomes) > OUTCOMES_KEPT:
            self.outcomes.popitem(last=False)

    def outcome_for(self, request_id: str, *, contains: bool = False) -> dict[str, Any] | None:
        """The claim outcome of a request -- final if it finished, current if it still runs.

        *request_id* is vLLM's internal id or the caller's id (vLLM appends ``-<suffix>``);
        with ``contains`` it is a unique ticket found anywhere in the internal id (the server
        middleware's ``X-Request-Id``)."""

        def match(rid: str) -> bool:
            return rid == request_id or rid.startswith(request_id + "-") or (
                contains and request_id in rid)

        with self.lock:
            found = [v for k, v in self.outcomes.items() if match(k)]
            if found:
                return found[-1]
            if self.scheduler is not None:
                return self.scheduler.live_outcome(match)
            return None

    def announce_outcome_channel(self, channel: str) -> None:
        """A server front end says its claim outcomes reach the clients (the middleware)."""
        with self.lock:
            self.outcome_channel = channel

    def release_claims(self, claim_ids: list[str], reason: str = "operator release") -> int:
        """End live claims (emits ``claim_released``, frees their slots); returns how many."""
        with self.lock:
            if self.scheduler is None:
                return 0
            n = sum(self.scheduler.release_claim(c, reason) for c in claim_ids)
            self.end_step()
            return n

    def status(self) -> dict[str, Any]:
        """What an operator may read: sink, events written, injections fired, live claims."""
        with self.lock:
            claims = sorted(self.scheduler.claims) if self.scheduler is not None else []
            return {"sink": self.sink, "events": self.writer.count,
                    "written_sha256": self.writer.written_sha256(),
                    "injections_fired": self.injections_fired, "claims": claims,
                    "verify_content": self.verify_content,
                    "rules": [r.model_dump(mode="json") for r in self._rules],
                    "outcome_channel": self.outcome_channel}

    def flush(self) -> None:
        """Write buffered events through to the sink."""
        with contextlib.suppress(ValueError):  # the writer was already closed
            self.writer.flush()


_OPERATOR: Operator | None = None
_INSTALL_LOCK = threading.Lock()


def install(config: ConnectorConfig) -> Operator:
    """The operator for *config* in this process, replaced when a new engine starts with a
    different configuration."""
    global _OPERATOR
    with _INSTALL_LOCK:
        if _OPERATOR is None or _OPERATOR.base_config != config:
            if _OPERATOR is not None:
                _OPERATOR.writer.close()
            _OPERATOR = Operator(config)
        return _OPERATOR


def operator() -> Operator:
    """The operator of the engine whose scheduler runs in this process."""
    if _OPERATOR is None:
        raise RuntimeError("no ResidentClaimConnector scheduler has been started in this process")
    return _OPERATOR
