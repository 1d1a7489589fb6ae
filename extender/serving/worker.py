"""The gunicorn worker class the extender runs: gunicorn's asyncio worker, bounded.

:class:`ExtenderWorker` is gunicorn's native asyncio worker
(:class:`gunicorn.workers.gasgi.ASGIWorker`: event loop, signals, heartbeat,
application loading) serving each listening socket with
:class:`~extender.serving.protocol.ExtenderProtocol` — the verb port and the
plain probe port each with a connection limit of its own, TLS through
:class:`~extender.serving.protocol.TLSConnection` so that connections are
counted from accept — and holding the budgets every connection draws on.

It runs in the ``serve`` process itself (no arbiter: see
:mod:`extender.serving.application`). Stopping (SIGTERM): the listeners close, connections between
requests are closed at once, requests being answered finish and their replies
are written (at most ``write_seconds``), then the application's thread pools
and the cluster backend stop. Errors the event loop reports (``accept``
failing for want of descriptors, a handshake cut short) are logged as one
JSON line per kind and interval, with how many there were, never a traceback
per event.
"""

from __future__ import annotations

import asyncio
import os
import time

from gunicorn.workers.gasgi import ASGIWorker

from extender.logs import fields, get_logger
from extender.serving.budgets import ACCEPT_BATCH, HANDSHAKE, IDLE, NEW, ByteBudget, Port
from extender.serving.memory import fix_mmap_threshold
from extender.serving.protocol import ExtenderProtocol, TLSConnection

ERROR_INTERVAL = 10.0  # seconds between two log lines of one kind of loop error
STALLED_INTERVAL = 0.1  # seconds between two readings of the replies waiting for their readers


class LoopErrors:
    """An event loop exception handler: one JSON line per kind and interval, counted."""

    def __init__(self, interval: float = ERROR_INTERVAL, clock=time.monotonic):
        self.interval, self.clock = interval, clock
        self.last: dict = {}
        self.unlogged: dict = {}
        self.log = get_logger()

    def __call__(self, loop, context: dict) -> None:
        error = context.get("exception")
        kind = (context.get("message", "event loop error"), type(error).__name__ if error else "")
        now = self.clock()
        self.unlogged[kind] = self.unlogged.get(kind, 0) + 1
        if now - self.last.get(kind, -self.interval) < self.interval:
            return
        self.last[kind] = now
        count = self.unlogged.pop(kind)
        self.log.warning("event loop error", extra=fields(
            error=kind[0], exception=kind[1] or None, detail=str(error) if error else None,
            errno=getattr(error, "errno", None), count=count, interval_seconds=self.interval))


class ExtenderWorker(ASGIWorker):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.limits = self.app.limits
        self.inflight = ByteBudget(self.limits.inflight_bytes)
        self.replies = ByteBudget(self.limits.reply_bytes)
        self.stalled: set = set()  # connections whose reply waits for its reader
        self.shared: dict = {}  # id(body) → [body, readers]: shared pages being handed over
        self.ports: list[Port] = []
        self._stopping: asyncio.Event | None = None
        self.log_json = get_logger()

    @classmethod
    def check_config(cls, cfg, log):
        """gunicorn's own check warns about ``threads``, which here sizes the verbs' pool."""

    def init_process(self):
        self.mmap_threshold_fixed = fix_mmap_threshold()
        super().init_process()

    def load_wsgi(self):
        self.asgi = self.app.wsgi()

    def handle_exit_signal(self):
        super().handle_exit_signal()
        if self._stopping is not None:
            self._stopping.set()

    def handle_quit_signal(self):
        super().handle_quit_signal()
        if self._stopping is not None:
            self._stopping.set()

    def hold_shared(self, body: bytes) -> None:
        """A connection starts handing over ``body``, a page other readers may hold too: counted in
        the reply budget once, whole, until its last reader is done (:meth:`release_shared`)."""
        entry = self.shared.get(id(body))
        if entry is not None:
            entry[1] += 1
            return
        self.shared[id(body)] = [body, 1]
        self.replies.force(len(body))
        if self.replies.over:
            self.shed_stalled_replies()

    def release_shared(self, body) -> None:
        entry = self.shared[id(body)]
        entry[1] -= 1
        if not entry[1]:
            del self.shared[id(body)]
            self.replies.give(len(body))

    def shed_stalled_replies(self) -> None:
        """Past the reply budget: close the connections that have waited longest for their readers."""
        while self.replies.over and self.stalled:
            oldest = min(self.stalled, key=lambda connection: connection.stalled_at)
            self.stalled.discard(oldest)
            oldest.evict()
            oldest._give_reply()

    async def watch_stalled(self) -> None:
        """Every ``STALLED_INTERVAL``: re-read what the connections with unwritten replies still hold
        (asyncio says nothing when a transport's buffer empties unless it was paused, which ours never is)."""
        while True:
            await asyncio.sleep(STALLED_INTERVAL)
            for connection in list(self.stalled):
                connection._note_buffered()

    async def _serve(self):
        loop = self.loop
        self._stopping = asyncio.Event()
        watcher = loop.create_task(self.watch_stalled())
        loop.set_exception_handler(LoopErrors())
        context = self._get_ssl_context() if self.cfg.is_ssl else None
        limits = self.limits
        probe_port = self.app.probe_port
        for listener in self.sockets:
            probe = probe_port is not None and listener.sock.getsockname()[1] == probe_port
            port = Port("probe" if probe else "verbs", limits.probe_connections if probe else limits.connections)
            app = self.asgi.probes if probe else self.asgi
            if context is not None and not probe:
                def factory(port=port, app=app):
                    return TLSConnection(loop, ExtenderProtocol(self, port, app), context, limits.first_byte_seconds)
            else:
                def factory(port=port, app=app):
                    return ExtenderProtocol(self, port, app)
            # asyncio's backlog is both the kernel's queue (listen) and how many connections it
            # accepts in a row before any is admitted: a small batch (so an eviction's descriptor is
            # freed before the next batch; budgets.RESERVED_DESCRIPTORS), then the kernel's queue
            # set back to gunicorn's backlog (a queue of 64 drops SYNs under a burst: 1 s retries).
            self.servers.append(await loop.create_server(factory, sock=listener.sock, backlog=ACCEPT_BATCH,
                                                         start_serving=True))
            listener.sock.listen(self.cfg.backlog)
            self.ports.append(port)
        self.app.serving(self)
        while self.alive:  # no arbiter watches this worker: no heartbeat, no parent to outlive
            try:
                await asyncio.wait_for(self._stopping.wait(), 1.0)
            except asyncio.TimeoutError:
                pass
        await self._shutdown()
        watcher.cancel()

    async def _shutdown(self):
        loop = self.loop
        for server in self.servers:
            server.close()
        deadline = loop.time() + self.limits.write_seconds
        while not self._quick_shutdown and loop.time() < deadline and any(len(port) for port in self.ports):
            for port in self.ports:
                for connection in port.connections(NEW, HANDSHAKE, IDLE):
                    if not connection.close_if_idle():
                        connection.evict()
            await asyncio.sleep(0.05)
        for port in self.ports:
            for connection in port.connections(NEW, HANDSHAKE, IDLE, "busy"):
                connection.evict()
        await asyncio.sleep(0)
        await loop.run_in_executor(None, self.app.stopped)

    def _cleanup(self):
        super()._cleanup()
        self.log_json.info("stopped serving", extra=fields(pid=os.getpid()))


__all__ = ["ExtenderWorker", "LoopErrors", "ExtenderProtocol"]
