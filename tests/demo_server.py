"""``cgpu-extender serve --demo`` as a real server on a free port, for tests that talk to it over HTTP."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import time
import urllib.request

PREFIX = "/cgpu-scheduler"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving_demo(*options: str):
    """Yield the base URL (``http://127.0.0.1:PORT/cgpu-scheduler``) of a demo server, ready; stop it after."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "extender", "serve", "--demo", "--port", str(port), *options],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}{PREFIX}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{url}/readyz", timeout=2):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("cgpu-extender serve --demo did not start") from None
                time.sleep(0.1)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
