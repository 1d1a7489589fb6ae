"""The extender as deployed (gunicorn, one worker: extender.serving) plus a *floor* endpoint.

``POST /floor/<verb>`` decodes the JSON body (all of it, with the same
library the extender uses) and answers the bytes the extender answered to the
same body, read from the driver's record (``--replies FILE``, the range named
by the ``X-Floor-Reply: offset:length`` header). It runs in the same worker,
behind the same server (a bare Flask JSON echo on gunicorn), Flask and Server-Timing hooks, and the driver does
the same work with its replies, so the difference between the two is the
extender's own work.

    python -m benchmarks.load_server --cluster FILE --replies FILE --port 32766 [--threads 8]
"""

from __future__ import annotations

import argparse
import os

import orjson
from flask import Blueprint, Response, request

from extender.serving.app import create_app
from extender.serving.config import Config
from extender.serving.application import ExtenderApplication, Listening
from extender.serving.budgets import Limits

FLOOR_PREFIX = "/floor"


def create_floor_app(config: Config, replies: str):
    app = create_app(config)
    floor = Blueprint("floor", __name__, url_prefix=FLOOR_PREFIX)
    recorded = {}

    @floor.post("/<verb>")
    def bare(verb: str):
        orjson.loads(request.get_data())
        if "fd" not in recorded:
            recorded["fd"] = os.open(replies, os.O_RDONLY)
        offset, length = map(int, request.headers["X-Floor-Reply"].split(":"))
        return Response(os.pread(recorded["fd"], length, offset), mimetype="application/json")

    app.register_blueprint(floor)
    return app


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
    ExtenderApplication(config, Listening(args.host, args.port, threads=args.threads),
                        Limits().for_body(config.max_body_bytes),
                        factory=lambda c: create_floor_app(c, args.replies)).run()


if __name__ == "__main__":
    main()
