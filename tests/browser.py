"""Headless Chromium (Debian's ``chromium``) driven over the DevTools protocol on a pipe.

``--remote-debugging-pipe`` makes the browser read protocol messages from
file descriptor 3 and write them to 4, each a JSON object ending in a NUL
byte, so no port is opened and no driver binary is needed. :class:`Browser`
opens one page, evaluates JavaScript in it and takes screenshots.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
         "--remote-debugging-pipe")


def chromium() -> str | None:
    """The Chromium binary, None when it is not installed."""
    return shutil.which("chromium")


class BrowserError(Exception):
    pass


class Browser:
    """One headless Chromium with one page (a context manager)."""

    def __init__(self, width: int = 1280, height: int = 800):
        self._size = (width, height)
        self._ids = itertools.count(1)
        self._replies: dict = {}
        self._cond = threading.Condition()
        self._buffer = b""

    def __enter__(self) -> "Browser":
        self._profile = tempfile.TemporaryDirectory(prefix="cgpu-chromium-")
        to_browser, self._write = os.pipe()
        self._read, from_browser = os.pipe()

        def wire_fds():  # in the child: the protocol's descriptors 3 (it reads) and 4 (it writes)
            os.dup2(to_browser, 3)
            os.dup2(from_browser, 4)

        self._process = subprocess.Popen(
            [chromium(), *FLAGS, f"--user-data-dir={self._profile.name}",
             f"--window-size={self._size[0]},{self._size[1]}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=wire_fds, pass_fds=(3, 4), start_new_session=True)  # its helpers in one group
        os.close(to_browser)
        os.close(from_browser)
        threading.Thread(target=self._reader, daemon=True).start()
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self._session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Emulation.setDeviceMetricsOverride", width=self._size[0], height=self._size[1],
                  deviceScaleFactor=1, mobile=False, session=True)
        return self

    def __exit__(self, *exc) -> None:
        try:
            os.close(self._write)
        except OSError:
            pass
        self._process.terminate()
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        # chromium's helper processes can outlive the browser and still write to the profile
        # (the cleanup then failed with "Directory not empty"): end the whole group first
        try:
            os.killpg(self._process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for attempt in range(20):
            try:
                self._profile.cleanup()
                return
            except OSError:
                if attempt == 19:
                    raise
                time.sleep(0.1)

    def _reader(self) -> None:
        while chunk := os.read(self._read, 1 << 16):
            self._buffer += chunk
            *messages, self._buffer = self._buffer.split(b"\0")
            with self._cond:
                for raw in messages:
                    message = json.loads(raw)
                    if "id" in message:
                        self._replies[message["id"]] = message
                self._cond.notify_all()
        os.close(self._read)

    def call(self, method: str, session: bool = False, timeout: float = 20, **params) -> dict:
        """Send one protocol command (to the page's session with ``session``) and return its result."""
        number = next(self._ids)
        message = {"id": number, "method": method, "params": params}
        if session:
            message["sessionId"] = self._session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        with self._cond:
            if not self._cond.wait_for(lambda: number in self._replies, timeout):
                raise BrowserError(f"no reply to {method} within {timeout} s")
            reply = self._replies.pop(number)
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error']}")
        return reply["result"]

    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url, session=True)

    def record_errors(self) -> None:
        """From the next page opened on, keep its uncaught errors and unhandled rejections (:meth:`errors`)."""
        self.call("Page.enable", session=True)
        self.call("Page.addScriptToEvaluateOnNewDocument", session=True, source=(
            "window.__errors = [];"
            "addEventListener('error', e => __errors.push(String(e.message)));"
            "addEventListener('unhandledrejection', e => __errors.push(String(e.reason && e.reason.stack || e.reason)));"))

    def errors(self) -> list:
        """The page's uncaught errors so far (after :meth:`record_errors`)."""
        return self.evaluate("window.__errors")

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (awaited when it is a promise)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True,
                           session=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression!r} threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 20, what: str = ""):
        """Evaluate ``expression`` until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out waiting for {what or expression}")
            time.sleep(0.05)

    def screenshot(self, path) -> None:
        data = self.call("Page.captureScreenshot", format="png", session=True)["data"]
        with open(path, "wb") as out:
            out.write(base64.b64decode(data))
