"""Structured logs: one JSON object per line on stderr.

Use ``log.info("bind", extra=fields(pod="ns/name", node="n1"))``; the message
becomes ``"msg"`` and every field a key of its own.
"""

from __future__ import annotations

import logging
import sys
import time

import orjson

LOGGER_NAME = "cgpu_extender"
_FIELDS = "_cgpu_fields"


def fields(**values) -> dict:
    """``extra=`` for a log call carrying structured fields."""
    return {_FIELDS: values}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update(getattr(record, _FIELDS, {}))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


def get_logger() -> logging.Logger:
    return logging.getLogger(LOGGER_NAME)


def configure(level: str = "info", stream=None) -> None:
    """Send this project's logs to ``stream`` (stderr) as JSON lines."""
    logger = get_logger()
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    logger.handlers[:] = [handler]
    logger.setLevel(level.upper())
    logger.propagate = False
