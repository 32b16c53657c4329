"""The ``vllm.general_plugins`` entry point: registers ``ResidentClaimConnector`` by name.

vLLM may load general plugins several times (once per process, and again in some code paths),
so :func:`register` is idempotent. Registration is lazy: vLLM imports the connector module only
when an engine is configured with ``kv_connector="ResidentClaimConnector"``.
"""

from __future__ import annotations

from residentkv.adapters.vllm import CONNECTOR_NAME

__all__ = ["register"]

MODULE_PATH = "residentkv.adapters.vllm.connector"


def register() -> None:
    """Register the connector with vLLM's connector factory (safe to call repeatedly)."""
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory

    # The factory raises on a second registration of a name; checking first makes repeated
    # plugin loads harmless.
    if CONNECTOR_NAME in KVConnectorFactory._registry:
        return
    KVConnectorFactory.register_connector(CONNECTOR_NAME, MODULE_PATH, CONNECTOR_NAME)
