"""The harness's kept-alive HTTP client against a real local HTTP/1.1 server: one connection
for many requests, a connection the server closed while idle replaced before the next request,
and a request that failed once written reported, never sent twice."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from residentkv.adapters.dynamo.httpclient import KeepAlive


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    received: list[dict[str, object]]
    mode: str  # "keep", "close" (answer, then close the connection), "drop" (no answer)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.received.append({"body": body, "session": self.headers.get("x-session")})
        if self.server.mode == "drop":
            self.close_connection = True
            return
        out = json.dumps({"n": len(self.server.received)}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        if self.server.mode == "close":
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[_Server]:
    srv = _Server(("127.0.0.1", 0), _Handler)
    srv.received, srv.mode = [], "keep"
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_requests_share_one_connection(server: _Server) -> None:
    client = KeepAlive("127.0.0.1", server.server_address[1])
    answers = [client.post_json("/g", {"i": i}, {"x-session": "s"}, 5.0) for i in range(3)]
    assert [a[0] for a in answers] == [200, 200, 200]
    assert [json.loads(a[1])["n"] for a in answers] == [1, 2, 3]
    assert [r["body"] for r in server.received] == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert {r["session"] for r in server.received} == {"s"}
    assert client.connections == 1
    client.close()


def test_a_connection_the_server_closed_is_replaced_before_the_next_request(
        server: _Server) -> None:
    client = KeepAlive("127.0.0.1", server.server_address[1])
    server.mode = "close"
    assert client.post_json("/g", {"i": 0}, {}, 5.0)[0] == 200
    server.mode = "keep"
    assert client.post_json("/g", {"i": 1}, {}, 5.0)[0] == 200
    assert client.connections == 2
    assert len(server.received) == 2
    client.close()


def test_a_request_without_an_answer_is_reported_not_resent(server: _Server) -> None:
    client = KeepAlive("127.0.0.1", server.server_address[1])
    server.mode = "drop"
    status, text = client.post_json("/g", {"i": 0}, {}, 5.0)
    assert status == 0 and text  # the error, named
    assert len(server.received) == 1  # sent once
    server.mode = "keep"
    assert client.post_json("/g", {"i": 1}, {}, 5.0)[0] == 200  # a fresh connection
    assert client.connections == 2
    client.close()
