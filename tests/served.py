"""The extender served for real, as ``cgpu-extender serve`` serves it (gunicorn, one worker), for tests.

``with served(limits={...}, config={...}) as server:`` starts
:class:`extender.serving.application.ExtenderApplication` in a subprocess
(:mod:`benchmarks.limited_server`) on free ports, with the limits and configuration given
(short deadlines for tests), waits until it logs ``serving``, and stops it
with SIGTERM after the block. ``server.log()`` is what it logged (JSON lines).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PREFIX = "/cgpu-scheduler"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    port: int
    probe_port: int | None
    process: subprocess.Popen
    log_path: Path

    def log(self) -> list[dict]:
        lines = []
        for line in self.log_path.read_text().splitlines():
            try:
                lines.append(json.loads(line))
            except ValueError:
                lines.append({"raw": line})
        return lines

    def worker_pid(self) -> int:
        for entry in self.log():
            if entry.get("msg") == "serving":
                return entry["pid"]
        raise AssertionError("no serving line")

    def rss(self) -> int:
        """The worker's resident set, bytes."""
        with open(f"/proc/{self.worker_pid()}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")

    def stop(self, timeout: float = 20) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


@contextlib.contextmanager
def served(limits: dict | None = None, config: dict | None = None, where: dict | None = None,
           probe: bool = False, nofile: int | None = None, startup: float = 60):
    """A served extender (see module doc); ``nofile`` sets its open-files limit (soft and hard)."""
    where = {"host": "127.0.0.1", "port": free_port(), "threads": 2, **(where or {})}
    if probe:
        where["probe_port"] = free_port()
    spec = {"limits": limits or {}, "config": {"cluster_file": None, **(config or {})}, "where": where}
    handle, name = tempfile.mkstemp(prefix="cgpu-served-", suffix=".log")
    os.close(handle)
    log_path = Path(name)

    def limit_files():
        if nofile:
            import resource
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    with open(log_path, "w") as log:
        process = subprocess.Popen([sys.executable, "-m", "benchmarks.limited_server", json.dumps(spec)], stdout=log,
                                   stderr=log, preexec_fn=limit_files, cwd=ROOT)
    server = Server(where["port"], where.get("probe_port"), process, log_path)
    try:
        deadline = time.monotonic() + startup
        while not any(e.get("msg") == "serving" for e in server.log()):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the extender did not start: " + log_path.read_text()[-3000:])
            time.sleep(0.05)
        yield server
    finally:
        server.stop()
        log_path.unlink(missing_ok=True)
