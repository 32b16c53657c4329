"""How the witness talks to vLLM in each shape: ``LLM.generate`` or the OpenAI server.

Both backends return :class:`Out` records -- what the *caller* saw: tokens, finish reason, the
``kv_transfer_params`` vLLM passed back, and for the server the HTTP status and headers. The
operator side (sink, injection, releases, outcome lookups) goes through the engine's control
socket in every shape.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from residentkv.adapters.vllm.config import CLAIM_PARAM, CLAIM_REF_PARAM
from residentkv.adapters.vllm.engine import (
    SERVED_MODEL_NAME,
    ServerProcess,
    make_engine,
    transfer_config,
)

__all__ = ["MAX_TOKENS", "ClaimRef", "LLMBackend", "Out", "ServerBackend", "make_backend",
           "transfer_params"]

MAX_TOKENS = 8


@dataclass(frozen=True)
class ClaimRef:
    """A reuse of an accepted claim by reference (``resident_claim_ref``)."""

    claim_id: str
    owner_scope: str


#: what a request carries: a full claim (dict), a reference to one, or nothing
Claimed = dict[str, Any] | ClaimRef | None


def transfer_params(claim: Claimed) -> dict[str, Any] | None:
    """The request's ``kv_transfer_params`` for *claim*."""
    if claim is None:
        return None
    if isinstance(claim, ClaimRef):
        return {CLAIM_REF_PARAM: {"claim_id": claim.claim_id, "owner_scope": claim.owner_scope}}
    return {CLAIM_PARAM: claim}


@dataclass
class Out:
    """One request's result as its caller saw it."""

    request_id: str
    token_ids: list[int]
    finish_reason: str | None
    kv_transfer_params: dict[str, Any] | None = None
    num_cached_tokens: int = 0
    status: int | None = None  # HTTP status (server shape)
    headers: dict[str, str] = field(default_factory=dict)
    error: dict[str, Any] | None = None  # the server's error object, if any

    @property
    def claim_outcome(self) -> dict[str, Any] | None:
        """The claim outcome delivered with the response (body or refusal), if any."""
        params = self.kv_transfer_params or {}
        found = params.get(CLAIM_PARAM)
        if found is None and self.error is not None:
            found = self.error.get(CLAIM_PARAM)
        return found if isinstance(found, dict) else None


class LLMBackend:
    """``vllm.LLM`` in shape ``inproc``, ``mp`` or ``tp2``."""

    def __init__(self, shape: str, model_dir: Path, transfer: dict[str, Any]) -> None:
        extra = transfer["kv_connector_extra_config"]
        self.llm = make_engine(model_dir, event_sink=extra["event_sink"],
                               policy=transfer["kv_load_failure_policy"],
                               host_tier_bytes=extra["host_tier_bytes"],
                               extra={k: v for k, v in extra.items()
                                      if k not in ("event_sink", "host_tier_bytes")},
                               shape=shape)

    def generate(self, prompts: Sequence[list[int]], claims: Sequence[Claimed],
                 max_tokens: int = MAX_TOKENS) -> list[Out]:
        """Run one batch through ``LLM.generate``."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        params = [
            SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True,
                           extra_args={"kv_transfer_params": transfer_params(c)} if c else None)
            for c in claims
        ]
        outs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params,
                                 use_tqdm=False)
        return [Out(o.request_id, list(o.outputs[0].token_ids), o.outputs[0].finish_reason,
                    o.kv_transfer_params, int(o.num_cached_tokens or 0)) for o in outs]

    def reset(self) -> None:
        """Drop vLLM's device prefix cache."""
        if not self.llm.reset_prefix_cache():
            raise RuntimeError("vLLM refused to reset the prefix cache")

    def close(self) -> None:
        """Shut the engine down (its processes, in the multiprocessing shapes)."""
        shutdown = getattr(getattr(self.llm, "llm_engine", None), "engine_core", None)
        if shutdown is not None and hasattr(shutdown, "shutdown"):
            shutdown.shutdown()


class ServerBackend:
    """vLLM's OpenAI server (default multiprocessing) and the official ``openai`` client.

    The client runs with ``max_retries=0`` so the harness records each response as sent; the
    end-to-end tests show separately that the default client does not retry a refusal."""

    def __init__(self, model_dir: Path, transfer: dict[str, Any], log: Path,
                 tensor_parallel: int = 1, server_args: list[str] | None = None) -> None:
        import openai

        self.server = ServerProcess(model_dir, transfer, log=log,
                                    tensor_parallel=tensor_parallel, extra_args=server_args)
        try:
            self.server.wait_ready()
        except BaseException:
            self.server.stop()
            raise
        self.client = openai.OpenAI(base_url=self.server.base_url + "/v1", api_key="none",
                                    max_retries=0, timeout=120)
        self._pool = ThreadPoolExecutor(max_workers=4)

    def _one(self, prompt: list[int], claim: Claimed, max_tokens: int) -> Out:
        import openai

        own_id = "wit-" + uuid.uuid4().hex  # the middleware replaces it on claimed requests
        body: dict[str, Any] = {"ignore_eos": True, "return_token_ids": True}
        if claim is not None:
            body["kv_transfer_params"] = transfer_params(claim)
        try:
            raw = self.client.completions.with_raw_response.create(
                model=SERVED_MODEL_NAME, prompt=prompt, max_tokens=max_tokens, temperature=0.0,
                extra_body=body, extra_headers={"X-Request-Id": own_id})
        except openai.APIStatusError as exc:
            data = exc.response.json() if exc.response.content else {}
            error = data.get("error") if isinstance(data, dict) else None
            error = error if isinstance(error, dict) else {"message": str(data)}
            rid = "cmpl-" + str(error.get("request_id") or own_id)
            return Out(rid, [], "error", None, 0, exc.status_code, dict(exc.response.headers),
                       error)
        resp = raw.parse()
        choice = resp.choices[0]
        extra = resp.model_extra or {}
        details = getattr(resp.usage, "prompt_tokens_details", None) if resp.usage else None
        cached = int(getattr(details, "cached_tokens", 0) or 0)
        tokens = list((choice.model_extra or {}).get("token_ids") or [])
        return Out(resp.id, tokens, choice.finish_reason, extra.get("kv_transfer_params"),
                   cached, raw.http_response.status_code, dict(raw.headers))

    def generate(self, prompts: Sequence[list[int]], claims: Sequence[Claimed],
                 max_tokens: int = MAX_TOKENS) -> list[Out]:
        """Send the prompts as concurrent requests; results in prompt order."""
        if len(prompts) == 1:
            return [self._one(prompts[0], claims[0], max_tokens)]
        futures = [self._pool.submit(self._one, p, c, max_tokens)
                   for p, c in zip(prompts, claims, strict=True)]
        return [f.result() for f in futures]

    def reset(self) -> None:
        """Drop vLLM's device prefix cache (dev-mode admin route)."""
        if self.server.post("/reset_prefix_cache") != 200:
            raise RuntimeError("vLLM refused to reset the prefix cache")

    def close(self) -> None:
        """Stop the server's whole process group."""
        self._pool.shutdown(wait=False)
        self.server.stop()


def make_backend(shape: str, work_dir: Path, model_dir: Path, *, policy: str,
                 host_tier_bytes: int, extra: dict[str, Any],
                 server_args: list[str] | None = None) -> tuple[Any, str]:
    """Start vLLM in *shape* with the connector (*server_args*: more arguments of the OpenAI
    server, in the server shapes); returns (backend, control socket path)."""
    # short and absolute: unix socket paths are limited to 107 bytes
    control = str(Path(tempfile.gettempdir()) / f"rkv-{policy}-{uuid.uuid4().hex[:12]}.sock")
    transfer = transfer_config(event_sink=work_dir / f"engine-{policy}.jsonl", policy=policy,
                               host_tier_bytes=host_tier_bytes,
                               extra={**extra, "control_socket": control})
    if shape in ("inproc", "mp"):
        return LLMBackend(shape, model_dir, transfer), control
    if shape in ("server", "tp2"):
        tp = 2 if shape == "tp2" else 1
        backend = ServerBackend(model_dir, transfer, work_dir / f"server-{policy}.log", tp,
                                server_args)
        return backend, control
    raise ValueError(f"unknown shape {shape!r}")


def timed(fn: Any, *args: Any) -> tuple[Any, float]:
    """Call *fn* and return (result, wall ms)."""
    start = time.perf_counter_ns()
    result = fn(*args)
    return result, (time.perf_counter_ns() - start) / 1e6
