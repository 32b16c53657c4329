"""No shutdown path loses a written event: the engine dying under the OpenAI server (the
EngineCore process killed, as an engine error or the OOM killer would end it) and then SIGINT
to the server (Ctrl-C). SIGTERM under the default ``--shutdown-timeout 0`` is tested with the
shared server in ``test_vllm_server.py``.

The engine's writer writes each scheduler step's events before the step's connector calls
return, so whatever ends the processes afterwards, the file holds every event written, with no
torn line.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vllm")
pytest.importorskip("psutil")

import psutil

from residentkv.adapters.vllm.witness import Witness, make_claim
from residentkv.trace.reader import TraceReader

pytestmark = pytest.mark.vllm


def _events(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _problems(path: Path) -> list[Any]:
    reader = TraceReader(path)
    for _ in reader.events():
        pass
    return reader.problems


def _engine_core(server_pid: int) -> Any:
    """The EngineCore process among the server's descendants (vLLM names its process title)."""
    for child in psutil.Process(server_pid).children(recursive=True):
        try:
            title = " ".join(child.cmdline()) + " " + child.name()
        except psutil.Error:
            continue
        if "EngineCore" in title:
            return child
    raise AssertionError("no EngineCore process under the server")


def test_engine_death_then_sigint_keep_every_written_event(tmp_path: Path) -> None:
    from residentkv.adapters.vllm.engine import SERVED_MODEL_NAME

    w = Witness(tmp_path / "server", policy="fail", shape="server")
    try:
        trace = tmp_path / "engine-death.jsonl"
        w.op.configure(event_sink=trace)
        claim = make_claim("death-1", "tenant:a", SERVED_MODEL_NAME, "obj")
        (out,), _ = w.generate([w.prompt("death", 0)], [claim])
        assert out.claim_outcome is not None and out.claim_outcome["outcome"] == "offloaded"
        live = _events(trace)
        assert "claim_offloaded" in [e["event"] for e in live]

        core = _engine_core(w.backend.server.proc.pid)
        os.kill(core.pid, signal.SIGKILL)  # the engine fails under a running API server
        core.wait(timeout=30)
        assert _events(trace)[: len(live)] == live

        w.backend.server.stop(signal.SIGINT)  # waits for the group to end, then kills it
        after = _events(trace)
        assert after[: len(live)] == live
        assert not _problems(trace)
    finally:
        w.close()
