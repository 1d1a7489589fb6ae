"""Serving the app with gunicorn, the way the README and manifests deploy it.

One worker process, several threads (``gthread``): the allocation ledger
lives in the worker's memory, so a second worker would keep a second,
disagreeing ledger and double-allocate GPUs. Threads let binds (which
kube-scheduler sends concurrently) and probes run while a filter is served;
the ledger's per-node locks make that safe. The app is built inside the
worker (no preload) so the cluster backend's threads live where requests run.
"""

from __future__ import annotations

from gunicorn.app.base import BaseApplication
from gunicorn.glogging import Logger

from extender.app import create_app
from extender.config import Config
from extender.logs import JsonFormatter, configure


class JsonGunicornLogger(Logger):
    """gunicorn's own messages (start, worker boot, crashes) as JSON lines too."""

    def setup(self, cfg) -> None:
        super().setup(cfg)
        for handler in self.error_log.handlers + self.access_log.handlers:
            handler.setFormatter(JsonFormatter())


class ExtenderServer(BaseApplication):
    def __init__(self, config: Config, host: str, port: int, threads: int = 8, factory=create_app):
        self._config = config
        self._factory = factory
        self._options = {
            "bind": f"[{host}]:{port}" if ":" in host else f"{host}:{port}",
            "workers": 1,
            "worker_class": "gthread",
            "threads": threads,
            "timeout": 60,
            "graceful_timeout": 10,
            "keepalive": 75,  # kube-scheduler keeps its connections open
            "accesslog": None,
            "errorlog": "-",
            "loglevel": config.log_level,
            "preload_app": False,
            "logger_class": "extender.server.JsonGunicornLogger",
        }
        if "control_socket_disable" in self._known_settings():
            self._options["control_socket_disable"] = True  # no writes to $HOME (read-only root filesystem)
        super().__init__()

    @staticmethod
    def _known_settings() -> set:
        from gunicorn.config import KNOWN_SETTINGS

        return {setting.name for setting in KNOWN_SETTINGS}

    def load_config(self) -> None:
        for key, value in self._options.items():
            self.cfg.set(key, value)

    def load(self):
        configure(self._config.log_level)
        return self._factory(self._config)
