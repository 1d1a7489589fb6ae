"""The extender as deployed (gunicorn, one worker: extender.serving) plus a *floor* and an *echo*.

``POST /floor/<verb>`` decodes the JSON body (all of it, with the same
library the extender uses) and answers the bytes the extender answered to the
same body, read from the driver's record (``--replies FILE``, the range named
by the ``X-Floor-Reply: offset:length`` header). It is answered on the verbs'
own path (:class:`extender.serving.asgi.ExtenderASGI`: the same worker, body
reading, inline-or-pool choice and ``Server-Timing``), and the driver does the
same work with its replies, so the difference between the two is the
extender's own work. ``POST /echo/<verb>`` does the same in a bare Flask route
(through a2wsgi, as every route but the verbs is served): what a verb would cost
at least if Flask served it.

    python -m benchmarks.load_server --cluster FILE --replies FILE --port 32766 [--threads 8]
"""

from __future__ import annotations

import argparse
import os
import time

import orjson
from flask import Blueprint, Response, request

from extender.serving.app import create_app
from extender.serving.application import ExtenderApplication, Listening
from extender.serving.asgi import ExtenderASGI
from extender.serving.budgets import Limits
from extender.serving.config import Config
from extender.serving.http_verbs import VERBS, timing

FLOOR_PREFIX = "/floor"
ECHO_PREFIX = "/echo"


class Recorded:
    """The driver's record of the extender's replies (opened at the first read: the driver writes it
    during the extender's pass)."""

    def __init__(self, path: str):
        self.path, self.fd = path, None

    def reply(self, body: bytes, where: str) -> bytes:
        """Decode ``body`` (the work the floor and echo keep) and answer the recorded bytes ``where``
        (``X-Floor-Reply``: ``offset:length``) names."""
        orjson.loads(body)
        if self.fd is None:
            self.fd = os.open(self.path, os.O_RDONLY)
        offset, length = map(int, where.split(":"))
        return os.pread(self.fd, length, offset)


def create_echo_app(config: Config, recorded: Recorded):
    """The extender's Flask app with the echo routes added."""
    app = create_app(config)
    echo = Blueprint("echo", __name__, url_prefix=ECHO_PREFIX)

    @echo.post("/<verb>")
    def bare(verb: str):
        return Response(recorded.reply(request.get_data(), request.headers["X-Floor-Reply"]),
                        mimetype="application/json")

    app.register_blueprint(echo)
    return app


class FloorASGI(ExtenderASGI):
    """The extender's ASGI application, with ``POST /floor/<verb>`` answered on the verbs' path."""

    def __init__(self, flask_app, prefix: str, recorded: Recorded, **kwargs):
        super().__init__(flask_app, prefix, **kwargs)
        self.by_path.update({f"{FLOOR_PREFIX}/{verb}": verb for verb in VERBS})
        self.recorded = recorded

    def answer(self, verb: str, path: str, headers, body: bytes) -> tuple:
        if not path.startswith(FLOOR_PREFIX):
            return super().answer(verb, path, headers, body)
        started = time.perf_counter()
        data = self.recorded.reply(body, next(v for k, v in headers if k == b"x-floor-reply").decode("latin-1"))
        return 200, [(b"content-type", b"application/json"),
                     (b"server-timing", timing(time.perf_counter() - started).encode())], data


class FloorApplication(ExtenderApplication):
    def __init__(self, recorded: Recorded, *args, **kwargs):
        self.recorded = recorded
        super().__init__(*args, **kwargs)

    def asgi(self, app):
        return FloorASGI(app, self.config.normalised_prefix(), self.recorded, threads=self.where.threads,
                         inline_body_bytes=self.limits.inline_body_bytes)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--replies", required=True, help="the driver's record of the extender's replies")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=32766)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--log-level", default="warning")
    parser.add_argument("--scoring", default="ack")
    args = parser.parse_args(argv)
    config = Config(cluster_file=args.cluster, log_level=args.log_level, scoring=args.scoring)
    recorded = Recorded(args.replies)  # one record, one descriptor, for the floor and the echo
    FloorApplication(recorded, config, Listening(args.host, args.port, threads=args.threads),
                     Limits().for_body(config.max_body_bytes),
                     factory=lambda c: create_echo_app(c, recorded)).run()


if __name__ == "__main__":
    main()
