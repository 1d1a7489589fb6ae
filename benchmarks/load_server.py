"""The extender as deployed (gunicorn, one gthread worker) plus a *floor* endpoint.

``POST /floor/<verb>`` parses the JSON body exactly as the extender's verbs do
and answers a JSON string of ``X-Reply-Bytes`` bytes, the size of the
extender's reply to the same body. It runs in the same process, behind the
same gunicorn, Flask and Server-Timing hooks, so the difference between the
two is the extender's own work.

    python -m benchmarks.load_server --cluster FILE --port 32766 [--threads 8]
"""

from __future__ import annotations

import argparse
import functools

import orjson
from flask import Blueprint, Response, request

from extender.app import create_app
from extender.config import Config
from extender.server import ExtenderServer

FLOOR_PREFIX = "/floor"


@functools.lru_cache(maxsize=64)
def _blob(size: int) -> bytes:
    return b'"' + b"x" * max(size - 2, 0) + b'"'


def create_floor_app(config: Config):
    app = create_app(config)
    floor = Blueprint("floor", __name__, url_prefix=FLOOR_PREFIX)

    @floor.post("/<verb>")
    def bare(verb: str):
        orjson.loads(request.get_data())
        return Response(_blob(int(request.headers.get("X-Reply-Bytes", "2"))), mimetype="application/json")

    app.register_blueprint(floor)
    return app


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=32766)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    config = Config(cluster_file=args.cluster, log_level=args.log_level)
    ExtenderServer(config, args.host, args.port, threads=args.threads, factory=create_floor_app).run()


if __name__ == "__main__":
    main()
