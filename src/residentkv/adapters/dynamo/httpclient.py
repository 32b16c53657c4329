"""The harness's HTTP: one kept-alive connection to the frontend, one-off posts elsewhere.

A client of a router keeps its connection open; opening one per request (``urllib``) put a TCP
handshake and urllib's per-request set-up on every routed request and none on the direct path
(Dynamo's request plane keeps its connections): ≈ 0.9 ms of a ≈ 19 ms claimed reuse, measured
side by side (docs/fleet.md). Requests are sent one at a time; a connection the server closed
while idle is noticed before a request is written (its socket reads as closed) and replaced.
A request that fails once written is reported, never sent again: a POST may have arrived.
"""

from __future__ import annotations

import http.client
import json
import select
import threading
import urllib.error
import urllib.request
from typing import Any

__all__ = ["KeepAlive", "post_json"]

JSON = {"Content-Type": "application/json"}


def post_json(url: str, body: dict[str, Any], headers: dict[str, str],
              timeout: float) -> tuple[int, str]:
    """(status, body) of one POST on a connection of its own; status 0 when nothing answered."""
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={**JSON, **headers})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return int(r.status), r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")
    except (OSError, ValueError) as exc:
        return 0, f"{type(exc).__name__}: {exc}"


class KeepAlive:
    """POSTs to one HTTP/1.1 server over a connection kept open between requests."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.connections = 0  # how many were opened (1 when keep-alive held throughout)
        self._conn: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()

    def post_json(self, path: str, body: dict[str, Any], headers: dict[str, str],
                  timeout: float) -> tuple[int, str]:
        """(status, body) of one POST; status 0 with the error when it failed."""
        data = json.dumps(body).encode()
        with self._lock:
            conn = self._connection(timeout)
            try:
                conn.request("POST", path, body=data, headers={**JSON, **headers})
                r = conn.getresponse()
                text = r.read().decode("utf-8", "replace")
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                return 0, f"{type(exc).__name__}: {exc}"
            if r.will_close:
                self.close()
            return int(r.status), text

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._conn is not None and _closed_by_peer(self._conn):
            self.close()
        if self._conn is None:
            self._conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
            self.connections += 1
        elif self._conn.sock is not None:
            self._conn.sock.settimeout(timeout)
        return self._conn


def _closed_by_peer(conn: http.client.HTTPConnection) -> bool:
    """An idle kept-alive socket that reads as ready has been closed (or spoken to) by the
    server: it cannot carry the next request."""
    sock = conn.sock
    if sock is None:
        return False
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable)
