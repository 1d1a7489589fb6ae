"""``cgpu-extender serve`` as a gunicorn application: its settings, its sockets, its logs.

:class:`ExtenderApplication` is a :class:`gunicorn.app.base.BaseApplication`
configured in code (no gunicorn configuration file or command line is read):
one worker of :class:`~extender.serving.worker.ExtenderWorker` (one ledger),
TLS from gunicorn's own settings (``certfile``, ``keyfile``, ``ca_certs``,
``cert_reqs``; TLS 1.2 at least), HTTP/1.1 only, no access log, no control
socket, every log line JSON.

The worker runs in the ``serve`` process itself (:meth:`ExtenderApplication.run`),
not under gunicorn's arbiter: one process is the replica. A signal to it
(SIGTERM, SIGKILL, SIGSTOP) is a signal to the ledger's holder, which leader
election's fencing relies on (a SIGSTOPped arbiter would leave its worker
leading); a process that dies is restarted by Kubernetes, as the arbiter
would have restarted its worker, and rebuilds the ledger from the cluster.

The listening sockets are bound before gunicorn starts (:func:`listen`) and
handed to it as ``fd://`` addresses, so a port in use is one line and exit 2
instead of gunicorn's five retries and a traceback. The application itself
(Flask app, ledger, cluster backend, :class:`~extender.serving.asgi.ExtenderASGI`)
is built when the worker loads it.
"""

from __future__ import annotations

import os
import socket
import ssl
import threading
from dataclasses import dataclass

from gunicorn.app.base import BaseApplication
from gunicorn.glogging import Logger
from gunicorn.sock import create_sockets

from extender.logs import JsonFormatter, configure, fields, get_logger
from extender.serving.app import create_app
from extender.serving.budgets import Limits, descriptor_limits
from extender.serving.config import Config
from extender.serving.heap import freeze_after_sync

WORKER_CLASS = "extender.serving.worker.ExtenderWorker"
BACKLOG = 2048


@dataclass
class Listening:
    """Where to serve: host, the verb port, the optional plain probe port, TLS files."""

    host: str
    port: int
    probe_port: int | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    client_ca: str | None = None
    threads: int = 8


class ListenError(Exception):
    """A port could not be listened on."""


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: any free one); ListenError with the reason."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        return socket.create_server((host, port), family=family, backlog=BACKLOG)
    except OSError as exc:
        raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def minimum_tls(config, default_context_factory) -> ssl.SSLContext:
    """gunicorn's ``ssl_context`` hook: its context from our settings, TLS 1.2 at least."""
    context = default_context_factory()
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


class JSONLogger(Logger):
    """gunicorn's logger with every line as the extender's: one JSON object per line on stderr."""

    def setup(self, cfg):
        super().setup(cfg)
        for handler in self.error_log.handlers:
            handler.setFormatter(JsonFormatter())


class ExtenderApplication(BaseApplication):
    def __init__(self, config: Config, where: Listening, limits: Limits | None = None, factory=create_app,
                 sockets: list | None = None):
        self.config, self.where, self.factory = config, where, factory
        self.limits, self.open_files = descriptor_limits(limits or Limits().for_body(config.max_body_bytes))
        self.sockets = sockets if sockets is not None else self._listen()
        self.port = self.sockets[0].getsockname()[1]
        self.probe_port = self.sockets[1].getsockname()[1] if len(self.sockets) > 1 else None
        self._asgi = None
        self._stopped = threading.Event()
        super().__init__()

    def _listen(self) -> list:
        sockets = [listen(self.where.host, self.where.port)]
        if self.where.probe_port is not None:
            try:
                sockets.append(listen(self.where.host, self.where.probe_port))
            except ListenError:
                sockets[0].close()
                raise
        return sockets

    # -- gunicorn's calls ------------------------------------------------------------------
    def load_config(self):
        where, limits = self.where, self.limits
        settings = {
            "bind": [f"fd://{s.fileno()}" for s in self.sockets],
            "workers": 1,
            "backlog": BACKLOG,
            "worker_class": WORKER_CLASS,
            "threads": where.threads,
            "worker_connections": limits.connections + limits.probe_connections,
            "keepalive": int(limits.idle_seconds),
            "max_requests": 0,
            "limit_request_line": 8190,
            "limit_request_fields": 100,
            "limit_request_field_size": 16384,
            "asgi_lifespan": "off",
            "asgi_loop": "asyncio",
            "http_parser": "python",  # gunicorn's own parser, whether or not its optional C one is installed
            "http_protocols": "h1",
            "logger_class": JSONLogger,
            "loglevel": self.config.log_level,
            "errorlog": "-",
            "accesslog": None,
            "control_socket_disable": True,
            "proc_name": "cgpu-extender",
        }
        if where.tls_cert:
            settings.update(certfile=where.tls_cert, keyfile=where.tls_key, ssl_context=minimum_tls)
            if where.client_ca:
                settings.update(ca_certs=where.client_ca, cert_reqs=ssl.CERT_REQUIRED)
        for name, value in settings.items():
            self.cfg.set(name, value)

    def run(self):
        """Serve until stopped (SIGTERM, SIGINT): gunicorn's worker, in this process."""
        cfg = self.cfg
        log = cfg.logger_class(cfg)
        worker = cfg.worker_class(1, os.getppid(), create_sockets(cfg, log), self, cfg.timeout, cfg, log)
        worker.pid = os.getpid()
        try:
            worker.init_process()
        finally:
            worker.tmp.close()

    def load(self):
        """The application, built when the worker loads it."""
        configure(self.config.log_level)
        app = self.factory(self.config)
        self._asgi = self.asgi(app)
        extender = app.extensions.get("cgpu")
        if extender is not None:
            freeze_after_sync(extender.ready, self._stopped)
        return self._asgi

    def asgi(self, app):
        """The ASGI application in front of the Flask ``app`` (a benchmark's floor adds routes to it)."""
        from extender.serving.asgi import ExtenderASGI

        return ExtenderASGI(app, self.config.normalised_prefix(), threads=self.where.threads,
                            inline_body_bytes=self.limits.inline_body_bytes)

    # -- the worker's calls ----------------------------------------------------------------
    def serving(self, worker) -> None:
        where, limits = self.where, self.limits
        get_logger().info("serving", extra=fields(
            host=where.host, port=self.port, probe_port=self.probe_port, tls=bool(where.tls_cert),
            client_certificates=bool(where.tls_cert and where.client_ca), server="gunicorn",
            worker=type(worker).__name__, pid=os.getpid(), threads=where.threads, connections=limits.connections,
            probe_connections=limits.probe_connections, open_files=self.open_files,
            mmap_threshold_fixed=getattr(worker, "mmap_threshold_fixed", False)))

    def stopped(self) -> None:
        """The worker has stopped serving: stop the pools, then the cluster backend."""
        self._stopped.set()
        if self._asgi is None:
            return
        self._asgi.close()
        extender = self._asgi.extender
        stop = getattr(getattr(extender, "cluster", None), "stop", None)
        if stop is not None:
            stop()
