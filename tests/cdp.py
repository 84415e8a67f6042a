"""A headless Chromium driven over the Chrome DevTools Protocol, for the browser tests.

The distribution's Chromium (Debian: ``apt-get install chromium``; ``.ci/run`` installs it) and
aiohttp's WebSocket client (locked: Ray needs it) are enough: no browser download, no WebDriver.
``Browser.open(url)`` loads a page, ``text()`` is what a reader sees (``document.body.innerText``),
``evaluate(js)`` runs an expression, ``wait_for_text`` polls until strings are on the page, and
``screenshot(path)`` saves a PNG.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

#: the flags the machine's notes give for a headless Chromium as root on a closed network
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1400,1000", "--remote-debugging-port=0"]


def chromium() -> str | None:
    """The Chromium executable on PATH, if any."""
    return next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)


class Browser:
    def __init__(self, executable: str):
        self.profile = Path(tempfile.mkdtemp(prefix="cdpbench-chromium-"))
        self.proc = subprocess.Popen([executable, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and len(port_file.read_text().split()) == 2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"Chromium did not open its DevTools port (exit {self.proc.returncode})")
            time.sleep(0.1)
        port, path = port_file.read_text().split()
        self.url = f"ws://127.0.0.1:{port}{path}"
        self.loop = asyncio.new_event_loop()
        self.ids = itertools.count(1)
        self.session_id = None
        self.loop.run_until_complete(self._connect())

    async def _connect(self):
        import aiohttp

        self.http = aiohttp.ClientSession()
        self.ws = await self.http.ws_connect(self.url, max_msg_size=0)
        target = await self._send("Target.createTarget", {"url": "about:blank"})
        attached = await self._send("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True})
        self.session_id = attached["sessionId"]
        await self._send("Page.enable")
        await self._send("Runtime.enable")

    async def _send(self, method: str, params: dict | None = None) -> dict:
        msg_id = next(self.ids)
        msg = {"id": msg_id, "method": method, "params": params or {}}
        if self.session_id:
            msg["sessionId"] = self.session_id
        await self.ws.send_str(json.dumps(msg))
        while True:
            reply = json.loads((await self.ws.receive(timeout=60)).data)
            if reply.get("id") == msg_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def send(self, method: str, params: dict | None = None) -> dict:
        return self.loop.run_until_complete(self._send(method, params))

    def open(self, url: str) -> None:
        self.send("Page.navigate", {"url": url})
        self.wait_for(lambda: self.evaluate("document.readyState") == "complete", what=f"{url} to load")

    def evaluate(self, expression: str):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def text(self) -> str:
        return self.evaluate("document.body ? document.body.innerText : ''") or ""

    def wait_for(self, condition, what: str, timeout: float = 60):
        deadline = time.monotonic() + timeout
        while True:
            value = condition()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; the page shows:\n{self.text()[:3000]}")
            time.sleep(0.25)

    def wait_for_text(self, *needles: str, timeout: float = 60) -> str:
        def found():
            text = self.text()
            return text if all(n in text for n in needles) else None

        return self.wait_for(found, what=", ".join(map(repr, needles)), timeout=timeout)

    def screenshot(self, path: Path) -> Path:
        import base64

        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"})["data"]))
        return path

    def close(self):
        try:
            if getattr(self, "loop", None):
                async def _close():
                    await self.ws.close()
                    await self.http.close()

                self.loop.run_until_complete(_close())
                self.loop.close()
        except Exception:
            pass
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            shutil.rmtree(self.profile, ignore_errors=True)
