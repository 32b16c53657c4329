"""A ResidentClaim through vLLM's OpenAI server, seen by the official ``openai`` client.

Start the server of docs/vllm-adapter.md (*Serving*) first, then, from the same folder:

    python docs/examples/claim_client.py --server http://127.0.0.1:8000 --socket engine.sock

1. registers claim ``c-1`` on a 300-token prompt (its first 2 blocks of 128 tokens): the
   connector copies them to its host tier when the request finishes;
2. empties vLLM's own prefix cache (``POST /reset_prefix_cache``), so the reuse can only be
   served from the host tier, and reuses the claim by reference: the outcome is ``restored``;
3. as the operator, fails the claim's next restore through the engine's control socket, and
   reuses it again: the engine refuses the request in the claim's name, and the client gets
   HTTP 409 (``openai.ConflictError``), which it does not retry.
"""

from __future__ import annotations

import argparse
import urllib.request
from typing import Any

from openai import ConflictError, OpenAI

from residentkv.adapters.vllm.control_socket import ControlClient

MODEL = "tiny-llama"  # the server's --served-model-name
OWNER = "tenant:a/session:7"
#: token ids: the tiny model has no tokenizer (a real model: the server's /tokenize gives them)
PROMPT = [(7 * i) % 1000 + 3 for i in range(300)]
CLAIM = {  # `residentkv schema claim` describes every field
    "claim_id": "c-1",
    "owner_scope": OWNER,
    "object_id": "system-prompt",
    "cache_identity": {"model_id": MODEL, "tokenizer_id": "token-ids",
                       "cache_key_domain": "vllm-prefix", "salt_namespace": "none",
                       "block_size": 128, "kv_format": "vllm-cpu-float32"},
    "request_token_map_id": "system-prompt/tokens",
    "predicate": {"id": "leading-2", "kind": "leading_prefix_at_least", "blocks": 2},
    "footprint_blocks": 2,
    "protection_mode": "offloadable",  # the one mode this connector lowers
    "registration": "pre_registered",
}
REFERENCE = {"claim_id": "c-1", "owner_scope": OWNER}


def complete(client: OpenAI, params: dict[str, Any]) -> dict[str, Any]:
    """One completion carrying *params* as kv_transfer_params; the claim's outcome."""
    r = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=8, temperature=0.0,
                                  extra_body={"kv_transfer_params": params})
    outcome: dict[str, Any] = r.kv_transfer_params["resident_claim"]  # type: ignore[attr-defined]
    return outcome


def reset_prefix_cache(server: str) -> None:
    """Empty vLLM's prefix cache (a route of VLLM_SERVER_DEV_MODE=1)."""
    req = urllib.request.Request(server + "/reset_prefix_cache", data=b"", method="POST")
    urllib.request.urlopen(req, timeout=60).close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="http://127.0.0.1:8000")
    parser.add_argument("--socket", default="engine.sock",
                        help="the control_socket of the server's kv_connector_extra_config")
    args = parser.parse_args()
    client = OpenAI(base_url=args.server + "/v1", api_key="none")  # default retries

    print("register:", complete(client, {"resident_claim": CLAIM})["outcome"])
    reset_prefix_cache(args.server)
    print("reuse:", complete(client, {"resident_claim_ref": REFERENCE})["outcome"])

    ControlClient(args.socket).configure(failure_injection=[{"claim_id": "c-1",
                                                             "mode": "once"}])
    reset_prefix_cache(args.server)
    try:
        complete(client, {"resident_claim_ref": REFERENCE})
    except ConflictError as e:  # HTTP 409 with x-should-retry: false: not retried
        refusal = e.body["resident_claim"]  # type: ignore[index]
        print(f"reuse: HTTP {e.status_code} {refusal['outcome']}: {refusal['reason']}")


if __name__ == "__main__":
    main()
