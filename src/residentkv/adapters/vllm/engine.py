"""A tiny local Llama, and vLLM running ResidentClaimConnector in each deployment shape.

No weights or tokenizer are downloaded: ``config.json`` and ``model.safetensors`` are written at
run time, prompts are token ids. The weights are made here from a fixed seed, scaled like a
trained model's (unit embeddings and norms, linear layers 1/sqrt(fan-in)), because vLLM's dummy
initialization (uniform in +-1e-3) leaves attention's share of the output far below the greedy
margin: with it the output does not depend on the prompt's prefix at all, so "restored output
equals a cold run" (or "another tenant's output equals a cold run") would hold whatever KV the
prefix had. With these weights a different prefix, or a corrupted restore, changes the tokens.

Shapes: ``inproc`` (``LLM`` with ``VLLM_ENABLE_V1_MULTIPROCESSING=0``: scheduler and worker in
the caller's process), ``mp`` (``LLM`` with vLLM's default multiprocessing: EngineCore and Worker
processes), ``tp2`` (``mp`` with tensor parallelism 2 on CPU), ``server`` (vLLM's OpenAI server,
``python -m vllm.entrypoints.openai.api_server``, with default multiprocessing).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

__all__ = [
    "SERVED_MODEL_NAME",
    "SHAPES",
    "TINY_LLAMA",
    "ServerProcess",
    "engine_args",
    "make_engine",
    "transfer_config",
    "write_tiny_model",
]

TINY_LLAMA: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1024,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
    "bos_token_id": 1,
    "eos_token_id": 2,
}

SERVED_MODEL_NAME = "tiny-llama"
SHAPES: tuple[str, ...] = ("inproc", "mp", "server", "tp2")


#: seed of the tiny model's weights (the same model in every run and process)
WEIGHT_SEED = 0


def _tiny_weights() -> dict[str, Any]:
    import torch

    gen = torch.Generator().manual_seed(WEIGHT_SEED)
    c = TINY_LLAMA
    hidden, inter = int(c["hidden_size"]), int(c["intermediate_size"])
    kv = int(c["num_key_value_heads"]) * hidden // int(c["num_attention_heads"])

    def linear(out: int, fan_in: int) -> Any:
        return torch.randn(out, fan_in, generator=gen) / fan_in ** 0.5

    weights = {"model.embed_tokens.weight": torch.randn(int(c["vocab_size"]), hidden,
                                                        generator=gen),
               "model.norm.weight": torch.ones(hidden),
               "lm_head.weight": linear(int(c["vocab_size"]), hidden)}
    for layer in range(int(c["num_hidden_layers"])):
        pre = f"model.layers.{layer}."
        weights |= {
            pre + "self_attn.q_proj.weight": linear(hidden, hidden),
            pre + "self_attn.k_proj.weight": linear(kv, hidden),
            pre + "self_attn.v_proj.weight": linear(kv, hidden),
            pre + "self_attn.o_proj.weight": linear(hidden, hidden),
            pre + "mlp.gate_proj.weight": linear(inter, hidden),
            pre + "mlp.up_proj.weight": linear(inter, hidden),
            pre + "mlp.down_proj.weight": linear(hidden, inter),
            pre + "input_layernorm.weight": torch.ones(hidden),
            pre + "post_attention_layernorm.weight": torch.ones(hidden),
        }
    return weights


def write_tiny_model(directory: str | Path) -> Path:
    """Write the tiny model (``config.json`` and seeded ``model.safetensors``, about 1.5 MB)
    into *directory* and return the directory."""
    from safetensors.torch import save_file  # a dependency of vLLM, like torch

    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(TINY_LLAMA, indent=2), encoding="utf-8")
    save_file(_tiny_weights(), str(path / "model.safetensors"))
    return path


def transfer_config(*, event_sink: str | Path, policy: str = "fail",
                    host_tier_bytes: int = 64 << 20, extra: dict[str, Any] | None = None,
                    use_plugin: bool = False) -> dict[str, Any]:
    """The ``KVTransferConfig`` fields that load the connector."""
    config: dict[str, Any] = {"host_tier_bytes": host_tier_bytes, "event_sink": str(event_sink)}
    config.update(extra or {})
    transfer: dict[str, Any] = {
        "kv_connector": "ResidentClaimConnector",
        "kv_role": "kv_both",
        "kv_load_failure_policy": policy,
        "kv_connector_extra_config": config,
    }
    if not use_plugin:
        transfer["kv_connector_module_path"] = "residentkv.adapters.vllm"
    return transfer


def _shape_env(shape: str) -> dict[str, str]:
    env = {"VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"),
           "VLLM_ENABLE_V1_MULTIPROCESSING": "0" if shape == "inproc" else "1"}
    if shape == "tp2":
        env["VLLM_CPU_OMP_THREADS_BIND"] = os.environ.get("VLLM_CPU_OMP_THREADS_BIND", "0|1")
    return env


def engine_args(shape: str) -> dict[str, Any]:
    """The engine arguments every shape shares (tiny model, dummy weights, token ids)."""
    args: dict[str, Any] = {
        # a stable name, so cache identities in traces do not carry a temporary path
        "served_model_name": SERVED_MODEL_NAME,
        "load_format": "safetensors",
        "skip_tokenizer_init": True,
        "enforce_eager": True,
        "enable_prefix_caching": True,
        "max_model_len": 2048,
        "seed": 0,
        "dtype": "float32",
    }
    if shape == "tp2":
        args.update(tensor_parallel_size=2, distributed_executor_backend="mp")
    return args


def make_engine(model_dir: str | Path, *, event_sink: str | Path, policy: str = "fail",
                host_tier_bytes: int = 64 << 20, extra: dict[str, Any] | None = None,
                use_plugin: bool = False, shape: str = "inproc") -> Any:
    """Start a ``vllm.LLM`` in *shape* (``inproc``, ``mp`` or ``tp2``) with the connector
    loaded by unpatched vLLM; ``use_plugin`` loads it by its registered name."""
    if shape not in ("inproc", "mp", "tp2"):
        raise ValueError(f"make_engine runs shapes inproc, mp, tp2 (got {shape!r})")
    os.environ.update(_shape_env(shape))
    from vllm import LLM
    from vllm.config import KVTransferConfig

    transfer = transfer_config(event_sink=event_sink, policy=policy,
                               host_tier_bytes=host_tier_bytes, extra=extra,
                               use_plugin=use_plugin)
    return LLM(model=str(model_dir), kv_transfer_config=KVTransferConfig(**transfer),
               **engine_args(shape))


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """vLLM's OpenAI server on 127.0.0.1: with the connector and the claim middleware, or
    either left out.

    Started in its own process group; :meth:`stop` ends the whole group (API server,
    EngineCore, workers) so no engine process outlives a failed test.
    """

    def __init__(self, model_dir: str | Path, transfer: dict[str, Any] | None, *,
                 log: str | Path, port: int | None = None, tensor_parallel: int = 1,
                 extra_args: list[str] | None = None, middleware: bool = True) -> None:
        self.port = port or free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        shape = "tp2" if tensor_parallel == 2 else "server"
        cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server",
               "--model", str(model_dir), "--host", "127.0.0.1", "--port", str(self.port),
               "--enable-prompt-tokens-details"]
        # transfer None: plain vLLM, no connector (what an observer of the runtime's own
        # events watches); middleware False: the claim outcomes have no channel to clients
        if transfer is not None:
            cmd += ["--kv-transfer-config", json.dumps(transfer)]
        if middleware:
            cmd += ["--middleware", "residentkv.adapters.vllm.server.ClaimOutcomeMiddleware"]
        for key, value in engine_args(shape).items():
            flag = "--" + key.replace("_", "-")
            if value is True:
                cmd.append(flag)
            else:
                cmd += [flag, str(value)]
        cmd += extra_args or []
        env = dict(os.environ, **_shape_env(shape), VLLM_SERVER_DEV_MODE="1")
        self.log_path = Path(log)
        self._log = self.log_path.open("w", encoding="utf-8")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)

    def wait_ready(self, timeout: float = 300.0) -> None:
        """Wait until ``/health`` answers; raise with the log's tail if the server died."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vLLM server exited with {self.proc.returncode}:\n"
                                   + self.tail())
            with contextlib.suppress(OSError), urllib.request.urlopen(
                    self.base_url + "/health", timeout=2) as r:
                if r.status == 200:
                    return
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"vLLM server not ready after {timeout:.0f}s:\n" + self.tail())

    def post(self, path: str) -> int:
        """POST to an admin route of the dev server (e.g. ``/reset_prefix_cache``)."""
        req = urllib.request.Request(self.base_url + path, data=b"", method="POST")
        with urllib.request.urlopen(req, timeout=60) as r:
            return int(r.status)

    def tail(self, lines: int = 25) -> str:
        """The last lines of the server's log."""
        self._log.flush()
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int | None:
        """Send *sig* to the server's process group; SIGKILL it if it does not end."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        # children (EngineCore, workers) may outlive the API server: end the group for good
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self._log.close()
        return self.proc.returncode

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
