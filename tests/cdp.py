"""A small Chrome DevTools Protocol client for the browser tests: start headless Chromium,
open a page, collect console errors, evaluate expressions, take screenshots and PDFs."""

from __future__ import annotations

import base64
import itertools
import json
import re
import shutil
import subprocess
import tempfile
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0")
_LISTENING = re.compile(r"DevTools listening on (ws://\S+)")


def find_browser() -> str | None:
    """The path of an installed Chromium, if any."""
    return next((p for p in map(shutil.which, BROWSERS) if p), None)


class Page:
    """One page target; ``events`` keeps every protocol event received."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one command and wait for its answer (events meanwhile are kept)."""
        msg_id = next(self.ids)
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv(timeout=60))
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                result: dict[str, Any] = msg.get("result", {})
                return result
            self.events.append(msg)

    def wait_for(self, method: str) -> dict[str, Any]:
        """Wait for the next event *method* (one already received counts)."""
        for ev in self.events:
            if ev.get("method") == method:
                return ev
        while True:
            msg = json.loads(self.ws.recv(timeout=60))
            self.events.append(msg)
            if msg.get("method") == method:
                return msg

    def evaluate(self, expression: str) -> Any:
        res = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expression}: {res['exceptionDetails']}")
        return res["result"].get("value")

    def console_errors(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries (CSP violations,
        failed loads) seen so far."""
        out = []
        for ev in self.events:
            m, p = ev.get("method"), ev.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description"))) for a in p["args"]))
            elif m == "Runtime.exceptionThrown":
                out.append(str(p["exceptionDetails"].get("text")))
            elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
                out.append(f"{p['entry'].get('source')}: {p['entry'].get('text')}")
        return out

    def screenshot(self, path: Path, *, full_page: bool = False) -> None:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
            size = self.call("Page.getLayoutMetrics")["cssContentSize"]
            params["clip"] = {"x": 0, "y": 0, "width": size["width"],
                              "height": size["height"], "scale": 1}
        data = self.call("Page.captureScreenshot", **params)["data"]
        path.write_bytes(base64.b64decode(data))

    def pdf(self) -> bytes:
        return base64.b64decode(self.call("Page.printToPDF")["data"])


@contextmanager
def open_page(url: str, *, width: int = 1280, height: int = 900) -> Iterator[Page]:
    """Start headless Chromium (its own profile, no network services), open *url*."""
    browser = find_browser()
    if browser is None:
        raise RuntimeError("no Chromium installed")
    with tempfile.TemporaryDirectory(prefix="rkv-chromium-") as profile:
        proc = subprocess.Popen([browser, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            with connect(_page_ws(proc), max_size=2**28) as ws:
                page = Page(ws)
                for domain in ("Runtime.enable", "Log.enable", "Page.enable"):
                    page.call(domain)
                page.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                          deviceScaleFactor=1, mobile=False)
                page.call("Page.navigate", url=url)
                page.wait_for("Page.loadEventFired")
                yield page
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _page_ws(proc: subprocess.Popen[str]) -> str:
    """The DevTools websocket URL of the browser's first page."""
    assert proc.stderr is not None
    browser_ws = None
    for line in proc.stderr:
        m = _LISTENING.search(line)
        if m:
            browser_ws = m.group(1)
            break
    if browser_ws is None:
        raise RuntimeError("Chromium did not start its DevTools endpoint")
    # keep draining stderr so a chatty browser never blocks on a full pipe
    threading.Thread(target=lambda: [None for _ in proc.stderr or ()], daemon=True).start()
    port = browser_ws.split(":")[2].split("/")[0]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as resp:
        targets = json.load(resp)
    target = next(t for t in targets if t["type"] == "page")
    return str(target["webSocketDebuggerUrl"])
