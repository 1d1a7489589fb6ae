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
    with serving("--demo", *options) as url:
        yield url


@contextlib.contextmanager
def serving(*options: str, start_seconds: float = 30):
    """Yield the base URL of ``cgpu-extender serve OPTIONS`` on a free port, ready; stop it after."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "extender", "serve", "--port", str(port), *options],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}{PREFIX}"
    try:
        deadline = time.monotonic() + start_seconds
        while True:
            try:
                with urllib.request.urlopen(f"{url}/readyz", timeout=2):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"cgpu-extender serve {' '.join(options)} did not start") from None
                time.sleep(0.1)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
