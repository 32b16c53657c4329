"""One chaos run: a deployment, K client threads, the nemesis thread, the history on disk.

1. start the documented server (or attach to one), on 127.0.0.1 only;
2. send the recompute of every session prompt (an unclaimed request under a cache salt of its
   own, so no cached or stored KV can serve it): the reference restored outputs must equal;
3. run the clients' planned requests and the nemesis schedule together, bounded by the plan's
   request count and the run's duration;
4. stop the server gracefully (a managed one), write ``history.json``, and judge it against
   the sink with the history checker.

Every process the run starts is stopped by its own id before :func:`run_chaos` returns.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from residentkv.adapters.vllm.chaos.client import Request, WireClient
from residentkv.adapters.vllm.chaos.deployment import (
    AttachedDeployment,
    Deployment,
    LoadWindow,
    ManagedDeployment,
    ServerShape,
)
from residentkv.adapters.vllm.chaos.generator import (
    Workload,
    claim_body,
    plan_ops,
    session_names,
)
from residentkv.adapters.vllm.chaos.history import check_history
from residentkv.adapters.vllm.chaos.model import (
    Exchange,
    FaultKind,
    FaultRecord,
    History,
    Op,
    OpKind,
    RunSettings,
)
from residentkv.adapters.vllm.chaos.nemesis import Nemesis, plan_faults
from residentkv.adapters.vllm.chaos.sessions import HELD, Sessions, client_outcome
from residentkv.adapters.vllm.config import CLAIM_PARAM
from residentkv.jsontext import write_json

__all__ = ["Attach", "ChaosConfig", "run_chaos"]


@dataclass(frozen=True)
class Attach:
    """A running server to attach to instead of starting one."""

    url: str
    control_socket: str


@dataclass(frozen=True)
class ChaosConfig:
    """A run: the load, the faults, the bounds."""

    workload: Workload
    duration_s: float
    faults: tuple[FaultKind, ...]
    faults_per_kind: int = 1
    pressure_burst: int = 16
    prompt_tokens: int = 297
    max_tokens: int = 8
    block_size: int = 128
    request_timeout_s: float = 60.0

    @property
    def wall_limit_s(self) -> float:
        """The load's wall-clock bound: its serving duration plus room for the restarts of
        two process faults per kind (a restart takes 20-50 s on a shared 2-core machine)."""
        return self.duration_s + 2 * self.faults_per_kind * 120.0 + 60.0


class _Run:
    """The state the client threads and the nemesis share during one run."""

    def __init__(self, config: ChaosConfig, deployment: Deployment) -> None:
        self.config = config
        self.deployment = deployment
        w = config.workload
        self.sessions = Sessions(w.seed, session_names(w.tenants, w.sessions_per_tenant),
                                 model=deployment.model, block_size=config.block_size,
                                 prompt_len=config.prompt_tokens)
        self.plans = plan_ops(w)
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        self._next_id = sum(len(p) for p in self.plans)
        self.wire = WireClient(deployment.base_url, deployment.model,
                               max_tokens=config.max_tokens, timeout=config.request_timeout_s,
                               clock=deployment.now, incarnation=lambda: deployment.incarnation,
                               request_prefix=f"chaos{w.seed}-op")
        self.window: LoadWindow | None = None

    def op_id(self) -> int:
        with self._lock:
            self._next_id += 1
            return self._next_id - 1

    def send(self, req: Request) -> Exchange:
        ex = self.wire.send(req)
        with self._lock:
            self.exchanges.append(ex)
        return ex

    def references(self) -> dict[str, list[int]]:
        """The recompute of every session prompt (the first requests of the run)."""
        salt = f"chaos-reference-{self.config.workload.seed}"
        out = {}
        for name in session_names(self.config.workload.tenants,
                                  self.config.workload.sessions_per_tenant):
            op = Op(op_id=self.op_id(), client=-1, kind=OpKind.REFERENCE, session=None,
                    prompt=name)
            ex = self.send(Request(op, self.sessions.tokens(name), None, None, None, None,
                                   cache_salt=salt))
            if ex.status == 200 and ex.tokens:
                out[name] = ex.tokens
        return out

    def client(self, plan: list[Op], window: LoadWindow) -> None:
        for op in plan:
            time.sleep(max(min(op.think_s, window.wall_left()), 0.0))
            if window.over() or not self.deployment.wait_up(max(window.wall_left(), 0.0)) \
                    or window.over():
                return
            ex = self.send(self.sessions.request(op))
            self.sessions.learn(ex)

    def pressure(self, index: int, n: int) -> list[str]:
        """A burst of *n* registrations by the pressure tenant; the claim ids it holds."""
        held = []
        for j in range(n):
            owner = f"tenant:pressure/session:{index}-{j}"
            cid = f"chaos{self.config.workload.seed}-pressure-{index}-{j}"
            op = Op(op_id=self.op_id(), client=-1, kind=OpKind.PRESSURE, session=owner,
                    prompt=f"p{index}-{j}")
            body = claim_body(cid, owner, op.prompt, model=self.deployment.model,
                              block_size=self.config.block_size)
            ex = self.send(Request(op, self.sessions.tokens(op.prompt), owner, cid, "full",
                                   {CLAIM_PARAM: body}))
            if client_outcome(ex) in HELD:
                held.append(cid)
        return held


def _settings(config: ChaosConfig, deployment: Deployment,
              shape: ServerShape | None) -> RunSettings:
    w = config.workload
    return RunSettings(
        seed=w.seed, clients=w.clients, tenants=w.tenants,
        sessions_per_tenant=w.sessions_per_tenant, ops=w.ops, duration_s=config.duration_s,
        rate_per_client=w.rate_per_client, stream_share=w.stream_share, faults=config.faults,
        prompt_tokens=config.prompt_tokens, max_tokens=config.max_tokens,
        block_size=config.block_size, model=deployment.model, managed=deployment.managed,
        base_url=deployment.base_url, control_socket=deployment.control_socket,
        device_blocks=shape.device_blocks if shape and deployment.managed else None,
        host_tier_bytes=shape.host_tier_bytes if shape and deployment.managed else None,
        shutdown_timeout_s=shape.shutdown_timeout_s if shape and deployment.managed else None)


@dataclass(frozen=True)
class _Driven:
    """What steps 2 and 3 recorded besides the exchanges."""

    references: dict[str, list[int]]
    faults: list[FaultRecord]
    load_start: float
    load_end: float
    served_s: float


def _drive(run: _Run, config: ChaosConfig) -> _Driven:
    """Steps 2 and 3: references, then the clients and the nemesis until the load ends."""
    deployment = run.deployment
    references = run.references()
    window = LoadWindow(deployment, config.duration_s, config.wall_limit_s)
    w = config.workload
    plan = plan_faults(w.seed, config.faults, config.duration_s,
                       session_names(w.tenants, w.sessions_per_tenant),
                       per_kind=config.faults_per_kind, burst=config.pressure_burst)
    nemesis = Nemesis(plan, deployment, current_claim=run.sessions.current_claim,
                      pressure=run.pressure, window=window)
    threads = [threading.Thread(target=run.client, args=(p, window), name=f"chaos-client-{i}",
                                daemon=True) for i, p in enumerate(run.plans)]
    nemesis.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    load_end, served = deployment.now(), window.served()
    nemesis.join()
    return _Driven(references, nemesis.records, window.start, load_end, served)


def run_chaos(config: ChaosConfig, out_dir: str | Path, *, shape: ServerShape | None = None,
              attach: Attach | None = None) -> tuple[History, dict[str, Any]]:
    """Run once and judge it; writes ``history.json`` and ``chaos.json`` into *out_dir*."""
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    deployment: Deployment
    if attach is not None:
        deployment = AttachedDeployment(attach.url, attach.control_socket)
    else:
        deployment = ManagedDeployment(out, shape or ServerShape())
    deployment.set_clock(time.monotonic())
    run: _Run | None = None
    try:
        if isinstance(deployment, ManagedDeployment):
            (out / "trace.jsonl").unlink(missing_ok=True)
            deployment.start()
        sink = deployment.sink()
        run = _Run(config, deployment)
        driven = _drive(run, config)
        deployment.stop_at_end()
    finally:
        if run is not None:
            run.wire.close()
        if isinstance(deployment, ManagedDeployment):
            deployment.close()
    history = History(
        settings=_settings(config, deployment, shape), sink=sink,
        ops=[op for plan in run.plans for op in plan], exchanges=sorted(
            run.exchanges, key=lambda x: (x.sent_at, x.op_id)),
        faults=driven.faults, incarnations=deployment.incarnations,
        reference_tokens=driven.references, load_started_at=round(driven.load_start, 3),
        load_ended_at=round(driven.load_end, 3), load_served_s=round(driven.served_s, 3),
        stopped_at_end=deployment.managed)
    write_json(out / "history.json", history.to_json(), indent=1)
    verdict = check_history(history, sink, str(out / "history.json"))
    write_json(out / "chaos.json", verdict, indent=1)
    return history, verdict
