"""A tiny local Llama and an in-process vLLM engine running ResidentClaimConnector.

No weights or tokenizer are downloaded: ``config.json`` is written at run time, weights are
vLLM's dummy initialization (deterministic under a fixed seed), prompts are token ids.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["TINY_LLAMA", "make_engine", "write_tiny_model"]

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


def write_tiny_model(directory: str | Path) -> Path:
    """Write the tiny model's ``config.json`` into *directory* and return the directory."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(TINY_LLAMA, indent=2), encoding="utf-8")
    return path


SERVED_MODEL_NAME = "tiny-llama"


def make_engine(
    model_dir: str | Path,
    *,
    event_sink: str | Path,
    policy: str = "fail",
    host_tier_bytes: int = 64 << 20,
    extra: dict[str, Any] | None = None,
    use_plugin: bool = False,
) -> Any:
    """Start an in-process ``vllm.LLM`` with the connector loaded by unpatched vLLM.

    ``use_plugin`` loads the connector by its registered name (the ``vllm.general_plugins``
    entry point) instead of ``kv_connector_module_path``.
    """
    # The witness needs scheduler and worker in one process: one stream, one seq counter.
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from vllm import LLM
    from vllm.config import KVTransferConfig

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
    return LLM(
        model=str(model_dir),
        # a stable name, so cache identities in traces do not carry a temporary path
        served_model_name=SERVED_MODEL_NAME,
        load_format="dummy",
        skip_tokenizer_init=True,
        enforce_eager=True,
        enable_prefix_caching=True,
        max_model_len=2048,
        seed=0,
        dtype="float32",
        kv_transfer_config=KVTransferConfig(**transfer),
    )
