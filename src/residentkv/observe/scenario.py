"""The observer scenario on real vLLM: claims on a plain, unpatched OpenAI server.

vLLM's OpenAI server runs with prefix caching, priority scheduling, a KV cache of a few blocks
(so other prompts evict) and its ZeroMQ KV event publisher (and its replay endpoint) on ipc
endpoints — no residentkv connector, no middleware. ``residentkv observe --server URL`` finds
the publisher at the server's ``/kv_event_sources`` and watches two claims: a
``soft_priority`` claim on a prefix sent with the highest priority, and an ``offloadable``
claim. The official openai client sends the claimed prompts, then other prompts until both
claims' needed blocks were evicted. The trace shows what the runtime itself published:
materialization on real positions, then the loss of needed blocks with no outcome — which the
gates must refuse. The replay endpoint confirms the stream's tail when the observer stops, so
the trace has no gap.

``late_start=True`` starts the observer only after the claimed prompts were served: without a
replay endpoint (``replay=False``) the stream is incomplete and must never pass; with one, the
publisher's replay buffer supplies the batches the observer missed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from residentkv.adapters.vllm.engine import SERVED_MODEL_NAME, ServerProcess, write_tiny_model
from residentkv.adapters.vllm.release import installed_vllm
from residentkv.adapters.vllm.witness import BLOCK, make_claim
from residentkv.jsontext import write_json

#: the curated rows whose refusal an observed run gives live evidence for
ROWS: tuple[str, ...] = (
    "vllm/prefix-caching/substrate", "vllm/prefix-caching/hard_protected",
    "vllm/priority-scheduling/substrate", "vllm/priority-scheduling/hard_protected",
    "vllm/kv-events/substrate", "vllm/kv-events/offloadable",
)
SOFT, OFFLOADABLE = "c-soft", "c-offload"
#: KV cache blocks of the server: a claimed prompt takes 3 while it runs, 2 stay cached
GPU_BLOCKS = 8
PROMPT_TOKENS = 2 * BLOCK + 40
MAX_FILLERS = 40
#: vLLM: a lower value is served first
HIGH_PRIORITY = -100


@dataclass
class ObservedRun:
    """One observed run: the trace, what drove it, and the rows it speaks to."""

    trace: Path
    rows: tuple[str, ...]
    runtime: str
    claims: tuple[str, ...]
    late_start: bool
    replay: bool = False
    requests: int = 0
    evicted: dict[str, list[int]] = field(default_factory=dict)
    observer_exit: int | None = None
    logs: dict[str, Path] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The run as a JSON-able record (paths as strings)."""
        return {"trace": str(self.trace), "rows": list(self.rows), "runtime": self.runtime,
                "claims": list(self.claims), "late_start": self.late_start,
                "replay": self.replay, "requests": self.requests, "evicted": self.evicted,
                "observer_exit": self.observer_exit,
                "logs": {k: str(v) for k, v in self.logs.items()}}


def runtime_release() -> str:
    """``NAME==VERSION`` of the installed vLLM distribution."""
    found = installed_vllm()
    if found is None:
        raise RuntimeError("vLLM is not installed")
    return "==".join(found)


def _prompt(seed: int) -> list[int]:
    # distinct token ids per seed; 3..1023 is inside the tiny model's vocabulary
    return [3 + (seed * 131 + i * 7) % 1000 for i in range(PROMPT_TOKENS)]


def claims_file(path: Path) -> dict[str, list[int]]:
    """Write the two claims with their prompts; return claim id -> prompt."""
    prompts = {SOFT: _prompt(1), OFFLOADABLE: _prompt(2)}
    claims = []
    for cid, mode in ((SOFT, "soft_priority"), (OFFLOADABLE, "offloadable")):
        claim = make_claim(cid, "tenant:a/session:1", SERVED_MODEL_NAME, f"prefix:{cid}")
        claim["protection_mode"] = mode
        claim["tokens"] = prompts[cid]
        claims.append(claim)
    write_json(path, {"claims": claims}, indent=1)
    return prompts


def _evicted(trace: Path) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    if not trace.exists():
        return out
    for line in trace.read_text(encoding="utf-8").splitlines():
        with contextlib.suppress(ValueError):
            e = json.loads(line)
            if e.get("event") == "block_evicted":
                out.setdefault(e["claim_id"], []).append(e["position"])
    return out


def _wait_for(trace: Path, event: str, proc: subprocess.Popen[bytes], what: str) -> None:
    for _ in range(600):
        if proc.poll() is not None:
            raise RuntimeError(f"observer exited with {proc.returncode} before {what}")
        if trace.exists() and f'"event":"{event}"' in trace.read_text(encoding="utf-8"):
            return
        time.sleep(0.1)
    raise RuntimeError(f"observer: no {event} after 60 s")


def _start_observer(run: ObservedRun, claims: Path, server: str,
                    log: Path) -> subprocess.Popen[bytes]:
    # the publisher from the server's /kv_event_sources; the release named as installed (the
    # server's /version says only "0.32.0", and the observer checks that it agrees)
    # --end-wait: a loaded CI machine may answer the tail's replay late; the harness stops
    # the observer with SIGINT and waits, so it can give the answer more than a second
    cmd = [sys.executable, "-m", "residentkv", "observe", "--server", server,
           "--runtime", run.runtime, "--claims", str(claims), "--out", str(run.trace),
           "--no-live", "--end-wait", "10"]
    with log.open("wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT,
                                env=dict(os.environ), start_new_session=True)
    _wait_for(run.trace, "claim_accepted", proc, "its claims were accepted")
    return proc


def _stop_observer(proc: subprocess.Popen[bytes]) -> int:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    return int(proc.returncode)


def run_observed_vllm(out_dir: str | Path, *, late_start: bool = False,
                      replay: bool = True) -> ObservedRun:
    """Run the scenario; the observer's trace is ``out_dir/observed.jsonl``."""
    from openai import OpenAI

    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    model = write_tiny_model(out / "model")
    claims = out / "claims.json"
    prompts = claims_file(claims)
    endpoint = f"ipc://{out}/kv-events.sock"
    replay_ep = f"ipc://{out}/kv-replay.sock" if replay else None
    run = ObservedRun(trace=out / "observed.jsonl", rows=ROWS, runtime=runtime_release(),
                      claims=(SOFT, OFFLOADABLE), late_start=late_start, replay=replay,
                      logs={"server": out / "server.log", "observer": out / "observer.log"})
    run.trace.unlink(missing_ok=True)
    events: dict[str, Any] = {"enable_kv_cache_events": True, "publisher": "zmq",
                              "endpoint": endpoint, "topic": "kv"}
    if replay_ep is not None:
        events["replay_endpoint"] = replay_ep
    extra = ["--scheduling-policy", "priority", "--num-gpu-blocks-override", str(GPU_BLOCKS),
             "--max-model-len", str(4 * BLOCK), "--max-num-seqs", "2",
             "--kv-events-config", json.dumps(events)]
    observer: subprocess.Popen[bytes] | None = None
    with ServerProcess(model, None, log=run.logs["server"], extra_args=extra,
                       middleware=False) as server:
        server.wait_ready()
        if not late_start:
            observer = _start_observer(run, claims, server.base_url, run.logs["observer"])
        client = OpenAI(base_url=server.base_url + "/v1", api_key="none", max_retries=0)

        def send(tokens: list[int], **body: Any) -> None:
            client.completions.create(model=SERVED_MODEL_NAME, prompt=tokens, max_tokens=1,
                                      temperature=0.0, extra_body=body or None)
            run.requests += 1

        send(prompts[SOFT], priority=HIGH_PRIORITY)
        send(prompts[OFFLOADABLE])
        if late_start:
            observer = _start_observer(run, claims, server.base_url, run.logs["observer"])
        for seed in range(100, 100 + MAX_FILLERS):
            send(_prompt(seed))
            run.evicted = _evicted(run.trace)
            if late_start and not replay and run.requests >= 6:
                break  # the claims' stores were missed: they never materialize here
            if all(0 in run.evicted.get(c, ()) for c in run.claims):
                break
        time.sleep(1.0)  # the publisher sends a step's batch from its own thread
        assert observer is not None
        run.observer_exit = _stop_observer(observer)
    run.evicted = _evicted(run.trace)
    return run
