"""Serving the app the way the README and manifests deploy it: one process, one ledger.

The allocation ledger lives in this process's memory, so a second process
would keep a second, disagreeing ledger and double-allocate GPUs. The
connections are read by :mod:`extender.httpserver` (an event loop: slow and
idle clients hold no thread) and complete requests run in ``threads`` handler
threads, so binds (which kube-scheduler sends concurrently, each waiting on the
API server) run while a filter is served; the ledger's per-node locks make that
safe. Filter, prioritize and the probes, which only compute, run in the loop's
thread (:func:`inline`).
"""

from __future__ import annotations

import threading

from extender.app import create_app
from extender.config import Config
from extender.heap import freeze_after_sync
from extender.httpserver import HTTPServer, Limits, tls_context
from extender.logs import configure


INLINE = ((b"POST", (b"/filter", b"/prioritize")), (b"GET", (b"/healthz", b"/readyz")))


def inline(method: bytes, path: bytes) -> bool:
    """Requests served in the event loop's thread: CPU-bound and short, never waiting on the
    API server (bind, preempt) nor long (metrics, inspect at 10,000 nodes)."""
    return any(method == m and path.endswith(ends) for m, ends in INLINE)


def direct_routes(app) -> dict:
    """The scheduler verbs answered without WSGI and Flask (:mod:`extender.verbs`), when the app has them."""
    verbs = app.extensions.get("cgpu_verbs")
    return verbs.direct() if verbs is not None else {}


class ExtenderServer:
    def __init__(self, config: Config, host: str, port: int, threads: int = 8, factory=create_app,
                 tls_cert: str | None = None, tls_key: str | None = None, client_ca: str | None = None,
                 probe_port: int | None = None):
        self._config = config
        self._factory = factory
        self._host, self._port, self._threads = host, port, threads
        self._tls = (tls_cert, tls_key, client_ca) if tls_cert else None
        self._probe_port = probe_port
        self.http: HTTPServer | None = None

    def run(self) -> None:
        configure(self._config.log_level)
        context = tls_context(*self._tls) if self._tls else None
        app = self._factory(self._config)
        self.http = HTTPServer(app, self._host, self._port, threads=self._threads,
                               limits=Limits(body_bytes=self._config.max_body_bytes), ssl_context=context,
                               probe_port=self._probe_port, inline=inline, direct=direct_routes(app))
        extender = app.extensions.get("cgpu")
        stopped = threading.Event()
        if extender is not None:
            freeze_after_sync(extender.ready, stopped)
        try:
            self.http.run()
        finally:
            stopped.set()
            stop = getattr(getattr(extender, "cluster", None), "stop", None)
            if stop is not None:
                stop()
