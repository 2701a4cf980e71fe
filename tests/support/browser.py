"""Chromium in headless mode, driven over the DevTools protocol on a pipe (tests of the dashboard)."""
from __future__ import annotations

import base64
import itertools
import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading

from tests.support import wait_until

CHROMIUM = os.environ.get("TROUPE_CHROMIUM", "/usr/bin/chromium")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1400,900", "--remote-debugging-pipe")


class Browser:
    """Chromium driven over the DevTools protocol on a pipe: no port, no extra package."""

    def __init__(self):
        if not os.path.exists(CHROMIUM):
            raise AssertionError(f"{CHROMIUM} is missing: .ci/run installs it (apt-get install chromium)")
        self.profile = tempfile.mkdtemp(prefix="troupe-chromium-")
        # --remote-debugging-pipe talks on fds 3 (in) and 4 (out): the shell maps our pipes there.
        self.proc = subprocess.Popen(
            ["sh", "-c", 'exec "$0" "$@" 3<&0 4>&1 0</dev/null 1>/dev/null', CHROMIUM, *FLAGS,
             f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
        self._ids = itertools.count(1)
        self._replies: dict[int, queue.Queue] = {}
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        buf = b""
        while True:
            chunk = self.proc.stdout.read1(65536)
            if not chunk:
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                if "id" in msg:
                    self._box(msg["id"]).put(msg)

    def _box(self, mid: int) -> queue.Queue:
        with self._lock:
            return self._replies.setdefault(mid, queue.Queue())

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 30):
        mid = next(self._ids)
        msg = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.proc.stdin.write(json.dumps(msg).encode() + b"\0")
        self.proc.stdin.flush()
        try:
            reply = self._box(mid).get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"chromium did not answer {method} within {timeout}s") from None
        if "error" in reply:
            raise AssertionError(f"{method}: {reply['error']}")
        return reply["result"]

    def open(self, url: str) -> "Page":
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        page.send("Page.enable")
        page.send("Emulation.setDeviceMetricsOverride",
                  {"width": 1400, "height": 900, "deviceScaleFactor": 1, "mobile": False})
        page.send("Page.navigate", {"url": url})
        wait_until(lambda: page.js("location.href !== 'about:blank' && document.readyState === 'complete'"), 20,
                   interval=0.05, message=f"{url} loaded")
        return page

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=5)
            self.proc.wait(timeout=10)
        except (AssertionError, OSError, subprocess.TimeoutExpired):
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


class Page:
    def __init__(self, browser: Browser, session: str):
        self.browser, self.session = browser, session

    def send(self, method: str, params: dict | None = None, timeout: float = 30):
        return self.browser.send(method, params, self.session, timeout)

    def js(self, expression: str):
        """Evaluate in the page; the value comes back as JSON (promises awaited)."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            raise AssertionError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def rows(self) -> dict:
        """What the servers table shows: name → (state badge, restarts, calls) as text."""
        return {name: tuple(cells) for name, *cells in self.js(
            "[...document.querySelectorAll('#servers tr[data-server]')].map(r => [r.dataset.server,"
            " r.querySelector('.badge').textContent, r.cells[7].textContent, r.cells[6].firstChild.textContent])")
            or []}

    def text(self, selector: str) -> str:
        return self.js(f"(document.querySelector({json.dumps(selector)}) || {{}}).innerText || ''")

    def screenshot(self, path: str) -> None:
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

