"""Where a server's KV events are, and which runtime release it is (``observe --server URL``).

vLLM's OpenAI server answers ``GET /kv_event_sources`` with its KV event publisher
configuration per data-parallel rank (``{"0": {"endpoint": ..., "replay_endpoint": ...,
"topic": ..., ...}}``; the endpoints already offset per rank) and ``GET /version`` with its
version. A publisher *binds* wildcard, ``ipc://`` and ``inproc://`` endpoints and *connects*
to any other ``tcp://`` address (vLLM's own rule), so the observer connects to the first kind —
a wildcard host replaced by the server's host — and binds the second. ``inproc://`` lives inside
the server's process and cannot be reached.
"""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from residentkv.errors import UserInputError
from residentkv.observe.subscriber import Endpoint

NO_PROVENANCE = "L032"
NO_SOURCES = "T051"
_WILDCARDS = ("*", "0.0.0.0", "[::]", "::")
#: the largest answer read, and how long one answer may take in all (a server that drips its
#: body never holds the observer past it; SIGTERM and --duration end it sooner)
_MAX_ANSWER = 1 << 20
_READ = 1 << 16


@dataclass(frozen=True)
class Runtime:
    """The runtime release the observed stream comes from."""

    name: str
    version: str


def _get(base_url: str, path: str, timeout: float, code: str) -> Any:
    url = base_url.rstrip("/") + path
    end = time.monotonic() + timeout
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            body = bytearray()
            while chunk := r.read1(_READ):
                body += chunk
                if len(body) > _MAX_ANSWER:
                    raise ValueError(f"an answer of more than {_MAX_ANSWER} bytes")
                if time.monotonic() > end:
                    raise TimeoutError(f"no complete answer within {timeout:g} s")
            return json.loads(body)
    except (OSError, ValueError) as e:
        raise UserInputError(f"--server: cannot read {url}: {e}", code=code) from None


def runtime_from_server(base_url: str, timeout: float = 10.0) -> Runtime:
    """Ask a vLLM server's ``/version``; vLLM names no distribution there, so the name is
    ``vllm``."""
    body = _get(base_url, "/version", timeout, NO_PROVENANCE)
    version = body.get("version") if isinstance(body, dict) else None
    if not isinstance(version, str) or not version:
        raise UserInputError(f"--server: {base_url.rstrip('/')}/version names no version",
                             code=NO_PROVENANCE)
    return Runtime("vllm", version)


def endpoints_from_server(base_url: str, timeout: float = 10.0) -> list[Endpoint]:
    """The KV event publishers a vLLM server names at ``/kv_event_sources``, one per rank."""
    body = _get(base_url, "/kv_event_sources", timeout, NO_SOURCES)
    return parse_sources(base_url, body)


def parse_sources(base_url: str, body: Any) -> list[Endpoint]:
    """The endpoints of a ``/kv_event_sources`` answer from the server at *base_url*."""
    url = base_url.rstrip("/") + "/kv_event_sources"
    if not isinstance(body, dict) or not body:
        raise UserInputError(
            f"--server: {url} names no KV event publisher; start the server with "
            """--kv-events-config '{"enable_kv_cache_events": true, "publisher": "zmq", ...}'"""
            " or give --kv-events ENDPOINT", code=NO_SOURCES)
    host = urllib.parse.urlsplit(base_url).hostname or "127.0.0.1"
    out = []
    for rank_text, config in sorted(body.items(), key=lambda kv: str(kv[0])):
        out.append(_endpoint(url, str(rank_text), config, host))
    return out


def _endpoint(url: str, rank_text: str, config: Any, host: str) -> Endpoint:
    where = f"--server: {url}, rank {rank_text}"
    if not isinstance(config, dict) or not rank_text.isdigit():
        raise UserInputError(f"{where}: not a KV event publisher configuration",
                             code=NO_SOURCES)
    if config.get("publisher") != "zmq" or not isinstance(config.get("endpoint"), str):
        raise UserInputError(f"{where}: publisher {config.get('publisher')!r} publishes "
                             "nothing an observer can subscribe to (expected zmq)",
                             code=NO_SOURCES)
    topic = config.get("topic") or ""
    replay = config.get("replay_endpoint")
    pub, bind = _reachable(config["endpoint"], host, where)
    return Endpoint(kv_events=pub, bind=bind, topic=str(topic).encode(),
                    replay=None if not isinstance(replay, str) else _reachable(
                        replay, host, where)[0],
                    rank=int(rank_text))


def _reachable(endpoint: str, host: str, where: str) -> tuple[str, bool]:
    """The address the observer uses for a publisher *endpoint*, and whether it binds it."""
    if endpoint.startswith("inproc://"):
        raise UserInputError(f"{where}: {endpoint} lives inside the server's process; configure "
                             "an ipc:// or tcp:// endpoint", code=NO_SOURCES)
    if endpoint.startswith("ipc://"):
        return endpoint, False
    scheme, _, rest = endpoint.partition("://")
    addr, _, port = rest.rpartition(":")
    if addr in _WILDCARDS:
        shown = f"[{host}]" if ":" in host else host
        return f"{scheme}://{shown}:{port}", False
    return endpoint, True
