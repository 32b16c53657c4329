"""The scheduler role of the connector driven through the hooks vLLM calls, with no engine.

A claim is registered with the full claim object, stored, offloaded, and reused by reference;
each test reads the events the role wrote. The role imports vLLM (its request status and
logger), so tests using :func:`make_engine` skip where vLLM is not installed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from residentkv.adapters.vllm.config import parse_connector_config

OWNER = "tenant:a/session:1"
PROMPT = 297  # two full 128-token blocks restorable, like the witness


class Request:
    """What the scheduler role reads of vLLM's ``Request``."""

    def __init__(self, rid: str, params: dict[str, Any] | None) -> None:
        self.request_id = rid
        self.kv_transfer_params = params
        self.num_prompt_tokens = PROMPT
        self.block_hashes = ["h0", "h1"]
        self.cache_salt = None
        self.status: Any = None

    def get_finished_reason(self) -> Any:
        from vllm.v1.request import RequestStatus

        return RequestStatus.get_finished_reason(self.status)


@dataclass
class Engine:
    side: Any
    sink: Path
    n: int = 0
    #: how many engines wrote this sink before this one
    n_engine: int = 0

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        lines = self.sink.read_text(encoding="utf-8").splitlines()
        found = [json.loads(x) for x in lines]
        return [e for e in found if name is None or e["event"] == name]

    def start(self, params: dict[str, Any] | None) -> Request:
        self.n += 1
        # unique across incarnations on one sink, like vLLM's request ids
        prefix = "" if self.n_engine == 0 else f"i{self.n_engine}-"
        req = Request(f"{prefix}r{self.n}", params)
        self.side.on_new_request(req)
        return req

    def finish(self, req: Request, status: str = "FINISHED_LENGTH_CAPPED") -> Any:
        from vllm.v1.request import RequestStatus

        req.status = RequestStatus[status]
        return self.side.request_finished(req, [])[1]

    def step(self, req: Request, computed: int = 0) -> Any:
        sched_out = SimpleNamespace(
            num_scheduled_tokens={req.request_id: PROMPT - computed},
            scheduled_new_reqs=[SimpleNamespace(req_id=req.request_id,
                                                num_computed_tokens=computed)],
            scheduled_cached_reqs=SimpleNamespace(req_ids=[], num_computed_tokens=[]))
        return self.side.build_connector_meta(sched_out)

    def facts(self, *facts: Any, invalid: tuple[int, ...] = ()) -> None:
        from residentkv.adapters.vllm.messages import ResidentWorkerMetadata

        self.side.update_connector_output(SimpleNamespace(
            kv_connector_worker_meta=ResidentWorkerMetadata(list(facts)),
            invalid_block_ids=set(invalid)))

    def register(self, cid: str, body: dict[str, Any] | None = None) -> None:
        """A resident request with the full claim (*body*, default :func:`claim`): accepted,
        materialized, stored, offloaded, served."""
        from residentkv.adapters.vllm.rules import WorkerFact

        req = self.start({"resident_claim": body or claim(cid)})
        self.side.update_state_after_alloc(req, None, 0)
        (store,) = self.step(req).stores
        self.facts(WorkerFact("store", store.job_id, 0, True, 1, 2, nbytes=1,
                              materialized=(2, 2, 2, True)))
        assert self.finish(req)["resident_claim"]["outcome"] == "offloaded"

    def restoring(self, params: dict[str, Any]) -> Request:
        """A reuse request whose restore is under way (its load planned, not yet done)."""
        req = self.start(params)
        assert self.lookup(req) == (256, True)
        self.alloc(req, 256)
        return req

    def restored(self, req: Request) -> None:
        """The load of *req* succeeded on every rank."""
        from residentkv.adapters.vllm.rules import WorkerFact

        (job,) = [j for j in self.side.jobs.values() if j.request_id == req.request_id]
        self.facts(WorkerFact("load", job.job_id, 0, True, 3, 4, nbytes=1, verified=True))

    def lookup(self, req: Request) -> tuple[int | None, bool]:
        return self.side.get_num_new_matched_tokens(req, 0)

    def alloc(self, req: Request, tokens: int) -> Any:
        blocks = SimpleNamespace(get_block_ids=lambda: ([20, 21, 22],))
        self.side.update_state_after_alloc(req, blocks, tokens)
        return self.step(req, computed=tokens).loads


def claim(cid: str, owner: str = OWNER) -> dict[str, Any]:
    from residentkv.adapters.vllm.witness import make_claim

    return make_claim(cid, owner, "tiny", "prefix-a")


def ref(cid: Any, owner: Any = OWNER) -> dict[str, Any]:
    return {"resident_claim_ref": {"claim_id": cid, "owner_scope": owner}}


def make_engine(tmp_path: Path, *, num_slots: int = 16, sink: Path | None = None,
                **config: Any) -> Engine:
    """A scheduler role on a sink (a fresh one by default; extra *config* keys go to the
    connector config). Close it with ``engine.side.op.close()`` (a graceful stop) or
    ``engine.side.op.writer.close()`` (as if the process died)."""
    pytest.importorskip("vllm")
    from residentkv.adapters.vllm.control import Operator
    from residentkv.adapters.vllm.scheduler import SchedulerSide

    sink = sink or tmp_path / "t.jsonl"
    cfg = parse_connector_config({"host_tier_bytes": 1 << 20, "event_sink": str(sink),
                                  **config})
    op = Operator(cfg)
    side = SchedulerSide(cfg, op, block_size=128, policy="fail", bytes_per_block=1024,
                         num_slots=num_slots, world_size=1, model_names={"tiny"})
    op.scheduler = side
    side.kv_cache_manager = SimpleNamespace(get_block_ids=lambda rid: ([10, 11, 12],))
    before = sum(1 for line in sink.open(encoding="utf-8") if '"stream_started"' in line)
    return Engine(side, sink, n_engine=before - 1)


def rejected_kinds(engine: Engine) -> dict[str, int]:
    """Rejections counted by the metrics, by reason."""
    counters = engine.side.stats.data["counters"]
    return {k.split("|", 1)[1]: v for k, v in counters.items()
            if k.startswith("claims_rejected|")}
