"""The client side of a fleet run: requests through the router, straight to one worker, and
the operator actions (flush a replica's device prefix cache, kill a replica).

Runs in the fleet venv inside the namespace. What it records about each request is only what it
sent and when (:class:`Sent`); what happened is read from the replicas' traces afterwards.

- *Through the router*: ``POST /inference/v1/generate`` on the Dynamo frontend (the route that
  forwards ``kv_transfer_params``; ``/v1/completions`` does not).
- *Straight to a worker*: Dynamo's own request plane, ``Client.direct(request, instance_id)`` on
  ``dynamo.backend.generate`` with the same native-generate envelope the frontend builds. This
  bypasses the router's choice only; the worker's handler, vLLM and the connector are the same.
- *Flush*: ``POST /engine/flush_cache`` on the worker's system port (vLLM
  ``reset_prefix_cache``: device prefix cache only; the connector's host tier is untouched), so a
  reuse can only be served from the host tier.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from residentkv.adapters.dynamo.httpclient import KeepAlive, post_json
from residentkv.adapters.dynamo.layout import (
    FRONTEND_PORT,
    HOST,
    SERVED_MODEL_NAME,
    FleetLayout,
    Replica,
)
from residentkv.adapters.dynamo.procs import Proc
from residentkv.adapters.vllm.backends import ClaimRef, transfer_params
from residentkv.adapters.vllm.config import CLAIM_PARAM, CLAIM_REF_PARAM

__all__ = ["Driver", "Sent", "claim_ref"]

MAX_TOKENS = 4


@dataclass
class Sent:
    """One request the harness sent: how, carrying what, and where each trace stood before."""

    label: str
    scenario: str
    via: str  # "router" or "direct:<replica>"
    claim_id: str | None
    owner_scope: str | None
    form: str | None  # "claim" (registration body) or "ref"
    session: str | None
    marks: dict[str, int]  # replica -> trace lines before sending
    t_sent_ns: int = 0  # CLOCK_MONOTONIC (as the traces' ts_ns) as the request left
    t_done_ns: int = 0  # ... when its answer (or error) was in
    status: int = 0
    ms: float = 0.0
    outcome: dict[str, Any] | None = None  # what the response body said (informative only)
    error: str | None = None
    frontend_request_id: str | None = None

    def answered(self) -> None:
        """Note that the answer (or the error) is in: ``t_done_ns`` and ``ms``."""
        self.t_done_ns = time.monotonic_ns()
        self.ms = (self.t_done_ns - self.t_sent_ns) / 1e6

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Driver:
    """Sends the fleet's requests; one per call, sequentially."""

    layout: FleetLayout
    workers: dict[str, Proc]
    instances: dict[str, int]
    sent: list[Sent] = field(default_factory=list)
    _client: Any = None
    _runtime: Any = None
    _frontend: KeepAlive = field(default_factory=lambda: KeepAlive(HOST, FRONTEND_PORT))

    async def connect(self) -> None:
        """Join the fleet's Dynamo runtime (file discovery, tcp request plane) as a client."""
        import os

        # the runtime reads its discovery root and namespace from the environment only, and its
        # log level when it is imported; its logs go to stderr, which run() sends to
        # fleet-out/logs/client.log while the scenarios run (DYN_LOG does not reach the
        # per-request span lines: docs/fleet.md)
        os.environ.update(self.layout.base_env())
        os.environ["DYN_LOG"] = "warn"
        from dynamo.runtime import DistributedRuntime  # type: ignore[import-not-found]
        self._runtime = DistributedRuntime(asyncio.get_running_loop(), "file", "tcp",
                                           event_plane="zmq")
        self._client = await self._runtime.endpoint("dynamo.backend.generate").client()
        await asyncio.wait_for(self._client.wait_for_instances(), 60)

    def replica(self, name: str) -> Replica:
        return next(r for r in self.layout.replicas() if r.name == name)

    def marks(self) -> dict[str, int]:
        return {r.name: _lines(r.trace) for r in self.layout.replicas()}

    def _record(self, label: str, scenario: str, via: str, kv: dict[str, Any] | None,
                session: str | None) -> Sent:
        form, body = next(iter((kv or {}).items()), (None, None))
        s = Sent(label=label, scenario=scenario, via=via,
                 claim_id=(body or {}).get("claim_id"), owner_scope=(body or {}).get("owner_scope"),
                 form={CLAIM_PARAM: "claim", CLAIM_REF_PARAM: "ref"}.get(form or ""),
                 session=session, marks=self.marks())
        self.sent.append(s)
        return s

    async def router(self, label: str, scenario: str, prompt: list[int], *,
                     kv: dict[str, Any] | None = None, session: str | None = None,
                     timeout: float = 120.0) -> Sent:
        """One request through the frontend and its KV router."""
        s = self._record(label, scenario, "router", kv, session)
        body: dict[str, Any] = {"model": SERVED_MODEL_NAME, "token_ids": prompt, "stream": False,
                                "sampling_params": _sampling()}
        if kv:
            body["kv_transfer_params"] = kv
        headers = {"x-dynamo-session-id": session} if session else {}
        s.t_sent_ns = time.monotonic_ns()
        s.status, text = await asyncio.to_thread(self._frontend.post_json,
                                                 "/inference/v1/generate", body, headers,
                                                 timeout)
        s.answered()
        try:
            doc = json.loads(text)
            s.outcome = (doc.get("kv_transfer_params") or {}).get(CLAIM_PARAM)
            s.frontend_request_id = doc.get("request_id")
        except (ValueError, AttributeError):
            doc = None
        if s.status != 200 or doc is None:
            s.error = text[:300]
        return s

    async def direct(self, label: str, scenario: str, replica: str, prompt: list[int], *,
                     kv: dict[str, Any] | None = None, timeout: float = 120.0) -> Sent:
        """One request straight to *replica*'s worker over Dynamo's request plane."""
        s = self._record(label, scenario, f"direct:{replica}", kv, None)
        envelope: dict[str, Any] = {"sampling_params": _sampling()}
        if kv:
            envelope["kv_transfer_params"] = kv
        request = {"model": SERVED_MODEL_NAME, "token_ids": prompt,
                   "extra_args": {"vllm_tito": envelope}}
        s.t_sent_ns = time.monotonic_ns()
        try:
            await asyncio.wait_for(self._drain(s, request, self.instances[replica]), timeout)
            s.status = 200
        except Exception as exc:  # the worker's or the transport's error, recorded as sent
            s.status, s.error = 0, f"{type(exc).__name__}: {exc}"[:300]
        s.answered()
        return s

    async def _drain(self, s: Sent, request: dict[str, Any], instance: int) -> None:
        async for chunk in await self._client.direct(request, instance):
            data = chunk.data() if hasattr(chunk, "data") else chunk
            params = ((data or {}).get("engine_data") or {}).get("kv_transfer_params")
            if params:
                s.outcome = params.get(CLAIM_PARAM)

    async def flush(self, replica: str) -> None:
        """Drop *replica*'s device prefix cache (its host tier keeps every claim)."""
        url = f"http://{HOST}:{self.replica(replica).system_port}/engine/flush_cache"
        status, text = await asyncio.to_thread(post_json, url, {}, {}, 60.0)
        if status != 200 or '"ok"' not in text:
            raise RuntimeError(f"flush_cache on replica {replica}: HTTP {status} {text[:200]}")

    async def flush_all(self) -> None:
        for name, proc in self.workers.items():
            if proc.alive():
                await self.flush(name)

    async def inject_load_failure(self, replica: str, claim_id: str) -> None:
        """Make every host-tier load of *claim_id* on *replica* fail (its control socket)."""
        from residentkv.adapters.vllm.config import InjectionRule
        from residentkv.adapters.vllm.control_socket import ControlClient

        client = ControlClient(self.replica(replica).control_socket)
        await asyncio.to_thread(client.configure,
                                failure_injection=[InjectionRule(claim_id=claim_id)])

    def kill(self, replica: str) -> int:
        """SIGKILL every process of *replica*; return the monotonic time of the kill (ns)."""
        t = time.monotonic_ns()
        self.workers[replica].kill_hard()
        return t


def claim_ref(claim: dict[str, Any]) -> dict[str, Any]:
    """The reference form a client behind a router sends to reuse an accepted claim."""
    return transfer_params(ClaimRef(claim["claim_id"], claim["owner_scope"])) or {}


def _sampling() -> dict[str, Any]:
    return {"max_tokens": MAX_TOKENS, "temperature": 0.0, "ignore_eos": True}


def _lines(path: Path) -> int:
    try:
        with path.open("rb") as fh:
            return sum(1 for _ in fh)
    except OSError:
        return 0
