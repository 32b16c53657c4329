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

**A deployment's life** (SPEC §9.1). One operator is one engine incarnation: its streams name
it (``stream_started.incarnation``). Opening a stream on a sink first reads the sink back
(:mod:`~residentkv.adapters.vllm.journal`): every claim an earlier incarnation left open ends at
the head of the new stream (``claim_harmed``, cause ``engine_restarted``), and every claim id the
sink decided stays decided. A graceful stop (:meth:`Operator.close`, from vLLM's connector
shutdown) ends the live claims (``claim_harmed``, cause ``shutdown``) and closes the stream
(``stream_closed``); swapping the sink closes the old stream the same way (its claims are
released). Claims with a duration expire on a clock thread (``claim_expired``, then the host
slots are freed).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from residentkv.adapters.vllm.config import ConnectorConfig, InjectionRule
from residentkv.adapters.vllm.journal import ENGINE_RESTARTED, read_journal
from residentkv.adapters.vllm.release import installed_vllm
from residentkv.adapters.vllm.rules import Budgets, Decisions
from residentkv.trace.writer import EventWriter, Provenance

__all__ = ["SCHEDULER", "SHUTDOWN", "SINK_SWAPPED", "ClaimHolder", "Operator", "install",
           "operator", "runtime_identity"]

logger = logging.getLogger(__name__)

#: why a stream closes (``stream_closed.reason``; ``claim_harmed.cause`` of a graceful stop)
SHUTDOWN = "shutdown"
SINK_SWAPPED = "sink_swapped"
ENGINE_REPLACED = "engine_replaced"

SCHEDULER = "residentkv.vllm.scheduler"
EMITTER = "residentkv.vllm"
#: finished requests whose claim outcome stays available for lookup
OUTCOMES_KEPT = 10_000
#: the closed streams whose digests are kept (the newest only)
CLOSED_STREAMS_KEPT = 1_000
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

    def expire_due(self, now_ns: int) -> int | None:
        """Expire the claims whose duration has passed; the next deadline, if any."""
        ...

    def close_stream(self, reason: str, *, lost: bool) -> None:
        """End every live claim (and running request) before the stream closes."""
        ...


def runtime_identity() -> tuple[str, str]:
    """(runtime name, version) of the installed vLLM (see
    :func:`~residentkv.adapters.vllm.release.installed_vllm`)."""
    return installed_vllm() or ("vllm", "unknown")


def open_stream(sink: str | Path, replica: str | None = None,
                incarnation: str | None = None) -> EventWriter:
    """A writer for a new stream of this engine: ``seq`` restarts at 0 with its provenance
    (``stream_started``: emitter, runtime release, a fresh stream id, the replica's name, the
    engine incarnation)."""
    from residentkv import __version__

    name, ver = runtime_identity()
    prov = Provenance(emitter_name=EMITTER, emitter_version=__version__, runtime_name=name,
                      runtime_version=ver, stream_id=uuid.uuid4().hex, replica=replica,
                      incarnation=incarnation)
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
        self.budgets = Budgets(config.per_owner_claims, config.per_owner_claim_blocks,
                               config.per_owner_claim_bytes)
        #: this engine incarnation: every stream it opens names it
        self.incarnation = uuid.uuid4().hex
        #: the stream was closed for good (the engine stopped): nothing more is written
        self.closed = False
        #: sink -> sha256 of the last stream written there, taken when it closed
        self.closed_streams: OrderedDict[str, str] = OrderedDict()
        #: called with the reason once the engine's last stream is closed (control socket
        #: watchers: the server middleware learns the engine stopped)
        self.on_close: list[Callable[[str], None]] = []
        self._clock: threading.Thread | None = None
        self._wake = threading.Event()
        self.decisions, self.writer = self._open(config.event_sink)
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

    def _open(self, sink: str | Path) -> tuple[Decisions, EventWriter]:
        """Open a new stream of this incarnation on *sink*: read the sink's journal, write
        ``stream_started``, then end every claim an earlier incarnation left open."""
        journal = read_journal(sink)
        writer = open_stream(sink, self.base_config.replica,
                             journal.fresh_incarnation(self.incarnation))
        for event, fields in journal.close_open(ENGINE_RESTARTED):
            writer.emit(event, **fields)
        writer.flush()
        return journal.decisions, writer

    def emit(self, event: str, **fields: Any) -> dict[str, Any]:
        """Append one event to the current stream (on disk at the end of the step)."""
        if self.closed:
            # vLLM called a hook after its connector shut down: the stream is closed, and an
            # event after stream_closed would belong to no stream.
            logger.error("ResidentClaimConnector: %s after the stream closed, not written", event)
            return {"event": event, "seq": None, **fields}
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
        budgets: Budgets | None = None,
    ) -> None:
        """Swap the sink (the old stream closes, its claims released; a new stream opens), the
        injection rules, the unclaimed-offload switch, content verification (which applies to
        stores planned from now on) or the per-owner budgets."""
        with self.lock:
            if event_sink is not None and not self.closed:
                self._close_stream(SINK_SWAPPED, lost=False)
                self.decisions, self.writer = self._open(event_sink)
                self.sink = str(event_sink)
                self.outcomes.clear()
            if budgets is not None:
                self.budgets = budgets
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
        """What an operator may read: sink, events written, injections fired, live claims,
        budgets, the incarnation."""
        with self.lock:
            claims = sorted(self.scheduler.claims) if self.scheduler is not None else []
            return {"sink": self.sink, "events": self.writer.count,
                    "injections_fired": self.injections_fired, "claims": claims,
                    "verify_content": self.verify_content,
                    "rules": [r.model_dump(mode="json") for r in self._rules],
                    "outcome_channel": self.outcome_channel,
                    "budgets": {"claims": self.budgets.claims, "blocks": self.budgets.blocks,
                                "bytes": self.budgets.bytes},
                    "incarnation": self.incarnation, "closed": self.closed}

    # ------------------------------------------------------------ a deployment's life

    def _close_stream(self, reason: str, *, lost: bool) -> None:
        """End the live claims, then close the current stream (``stream_closed``)."""
        if self.scheduler is not None:
            self.scheduler.close_stream(reason, lost=lost)
        self.writer.emit("stream_closed", reason=reason)
        self.writer.close()
        # what this process wrote to the sink, taken as the stream closed (the live root)
        self.closed_streams[self.sink] = self.writer.written_sha256()
        while len(self.closed_streams) > CLOSED_STREAMS_KEPT:
            self.closed_streams.popitem(last=False)

    def written_sha256(self, sink: str | Path) -> str | None:
        """sha256 of the last stream this engine's writer wrote to *sink* and closed (the
        bytes it wrote, hashed as it wrote them), or ``None`` when none closed there."""
        with self.lock:
            return self.closed_streams.get(str(sink))
    def close(self, reason: str = SHUTDOWN) -> None:
        """The engine stops gracefully: its live claims end (their host tier goes with it),
        the stream closes, and whoever watches the engine is told. Idempotent."""
        with self.lock:
            if self.closed:
                return
            self._close_stream(reason, lost=True)
            self.closed = True
            self._wake.set()
            watchers, self.on_close = self.on_close, []
        for notify in watchers:
            with contextlib.suppress(Exception):
                notify(reason)

    def wake(self) -> None:
        """A claim with a deadline was accepted: (start and) wake the expiry clock."""
        if self._clock is None:
            self._clock = threading.Thread(target=self._expire_loop, name="residentkv-expiry",
                                           daemon=True)
            self._clock.start()
        self._wake.set()

    def _expire_loop(self) -> None:
        """Expire claims at their deadlines (the engine may be idle: no hook would run)."""
        while True:
            self._wake.clear()
            with self.lock:
                if self.closed:
                    return
                nxt = None
                if self.scheduler is not None:
                    nxt = self.scheduler.expire_due(time.monotonic_ns())
                    self.end_step()
            wait = None if nxt is None else max(nxt - time.monotonic_ns(), 0) / 1e9
            self._wake.wait(wait)

    def flush(self) -> None:
        """Write buffered events through to the sink."""
        with contextlib.suppress(ValueError):  # the writer was already closed
            self.writer.flush()


_OPERATOR: Operator | None = None
_INSTALL_LOCK = threading.Lock()


def install(config: ConnectorConfig) -> Operator:
    """The operator for *config* in this process, replaced (a new incarnation) when a new
    engine starts with a different configuration or after the last one stopped."""
    global _OPERATOR
    with _INSTALL_LOCK:
        if _OPERATOR is None or _OPERATOR.closed or _OPERATOR.base_config != config:
            if _OPERATOR is not None:
                _OPERATOR.close(ENGINE_REPLACED)
            _OPERATOR = Operator(config)
        return _OPERATOR


def operator() -> Operator:
    """The operator of the engine whose scheduler runs in this process."""
    if _OPERATOR is None:
        raise RuntimeError("no ResidentClaimConnector scheduler has been started in this process")
    return _OPERATOR
