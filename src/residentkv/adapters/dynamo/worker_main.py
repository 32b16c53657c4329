"""``python -m residentkv.adapters.dynamo.worker_main ARGS``: ``python -m dynamo.vllm ARGS``
with the stand-ins of :mod:`.standins` installed first (in this process and, because vLLM's
spawned children re-import this main module, in theirs)."""

from __future__ import annotations

import sys

from residentkv.adapters.dynamo.standins import install

INSTALLED = install()

if __name__ == "__main__":
    import runpy

    print(f"residentkv fleet: stand-ins installed: {', '.join(INSTALLED) or 'none'}",
          file=sys.stderr, flush=True)
    sys.argv[0] = "dynamo.vllm"
    runpy.run_module("dynamo.vllm", run_name="__main__", alter_sys=True)
