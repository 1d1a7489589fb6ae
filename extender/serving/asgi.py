"""The application the worker serves: the scheduler verbs from bytes, everything else Flask.

:class:`ExtenderASGI` answers an exact ``POST <prefix>/<verb>`` itself, with
:class:`extender.serving.http_verbs.Verbs` (the same reply Flask's route gives, without
Flask's request machinery, ~100 µs a request): filter and prioritize, which
only compute, in the event loop's thread when their body is at most
``inline_body_bytes`` (handing a request to a thread and back costs more than
the rest of a small request, and under the GIL a CPU-bound handler gains
nothing from a thread), larger ones one at a time in a thread of their own
(kube-scheduler sends them one at a time anyway; several at once would only
hold several bodies' decoded names at once); bind and preempt, which wait on
the API server, in a pool of ``threads`` threads of their own. A request's
body is read whole before it waits for its turn in a pool (a client that sends
slowly holds no turn; the bytes held are in the request budget), and no more
than ``WAITING`` requests wait for a pool: past that a verb is answered 503 at
once, so a flood of large bodies holds a bounded number of them. A verb request carrying ``Origin``
or ``Sec-Fetch-Site: cross-site`` comes from a browser page (kube-scheduler
sends neither; a DNS-rebinding page can make a browser send one with a
matching ``Host``): it is refused 403.

Every other request goes to the Flask app (:func:`extender.serving.app.create_app`)
through a2wsgi, in one of two pools: the operators' heavy reads (metrics,
inspect, plan, ui, defrag) in ``OPERATOR_THREADS`` threads, everything else
(probes, unknown routes) in ``OTHER_THREADS``: no amount of GETs can take a
thread bind or preempt need, nor hold back the probes. The probe port's
application (:attr:`ExtenderASGI.probes`) serves ``GET`` of healthz, readyz
and metrics and answers everything else 404.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import orjson
from a2wsgi import WSGIMiddleware

from extender.serving.http_verbs import VERBS

INLINE_VERBS = ("filter", "prioritize")
HEAVY_READS = ("/metrics", "/inspect", "/plan", "/ui", "/defrag")  # path endings of the operators' reads
PROBE_PATHS = ("/healthz", "/readyz", "/metrics")  # what the probe port serves
WAITING = {False: 64, True: 8}  # most requests waiting for the verb pool (kube-scheduler binds 16 at once), the large one
OPERATOR_THREADS = 2
OTHER_THREADS = 2


async def reply(send, status: int, body: bytes, headers: tuple = ()) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body)),
                            *headers]})
    await send({"type": "http.response.body", "body": body})


async def read_body(receive) -> bytes | None:
    """The whole request body; None when the client went away first."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def connection_of(scope):
    """The :class:`~extender.serving.protocol.ExtenderProtocol` serving this request (None outside it)."""
    return scope.get("extensions", {}).get("cgpu.connection")


def from_browser(headers) -> bool:
    """Whether a request's headers say a browser page sent it (see module doc)."""
    for name, value in headers:
        if name == b"origin" or (name == b"sec-fetch-site" and value.strip().lower() == b"cross-site"):
            return True
    return False


class ExtenderASGI:
    def __init__(self, flask_app, prefix: str, threads: int = 8, inline_body_bytes: int = 2**20):
        self.flask_app = flask_app
        self.verbs = flask_app.extensions["cgpu_verbs"]
        self.extender = flask_app.extensions.get("cgpu")
        self.inline_body_bytes = inline_body_bytes
        self.by_path = {f"{prefix}/{verb}": verb for verb in VERBS}
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="verb")
        self.large = ThreadPoolExecutor(max_workers=1, thread_name_prefix="large")
        self._turns = {}  # pool → asyncio.Semaphore of its size, made in the loop that serves
        self._waiting = {self.pool: 0, self.large: 0}  # requests of each pool, read or being read, not yet answered
        self.operators = WSGIMiddleware(flask_app, workers=OPERATOR_THREADS)
        self.others = WSGIMiddleware(flask_app, workers=OTHER_THREADS)
        self.probes = ProbeASGI(self)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        path = scope["path"]
        verb = self.by_path.get(path) if scope["method"] == "POST" else None
        if verb is not None:
            await self.verb(verb, path, scope, receive, send)
        elif path.endswith(HEAVY_READS):
            connection = connection_of(scope)
            if connection is not None:  # its reply is a cached page many readers share: pumped, not copied
                connection.shared_reply = True
            await self.operators(scope, receive, send)
        else:
            await self.others(scope, receive, send)

    async def verb(self, verb: str, path: str, scope, receive, send) -> None:
        headers = scope["headers"]
        length = next((v for k, v in headers if k == b"content-length"), None)
        if verb not in INLINE_VERBS:
            pool = self.pool
        elif length is None or int(length) > self.inline_body_bytes:
            pool = self.large
        else:
            pool = None
        if pool is not None:
            if self._waiting[pool] >= WAITING[pool is self.large]:
                await reply(send, 503, b'{"Error":"the GPU-share extender has too many requests waiting; retry"}')
                return
            self._waiting[pool] += 1
        try:
            body = await read_body(receive)  # whole before any turn: a slow client holds no turn
            if body is None:
                return
            if pool is None:
                answer = self.answer(verb, path, headers, body)
            else:
                turn = self._turns.get(pool) or self._turns.setdefault(pool, asyncio.Semaphore(pool._max_workers))
                async with turn:  # released before the reply is written: a reader that stalls holds no turn
                    answer = await asyncio.get_running_loop().run_in_executor(
                        pool, self.answer, verb, path, headers, body)
        finally:
            if pool is not None:
                self._waiting[pool] -= 1
        body = None  # not held while the reply is written
        status, out, data = answer
        answer = None
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-length", b"%d" % len(data)), *out]})
        await send({"type": "http.response.body", "body": data})
        if (b"connection", b"close") in out:  # a standby's 503: the client's next request finds the leader
            connection = connection_of(scope)
            if connection is not None:
                connection.close_after_reply = True

    def answer(self, verb: str, path: str, headers, body: bytes) -> tuple:
        """``(status, headers, body)`` of the verb's reply to ``body`` (see module doc on browsers)."""
        if from_browser(headers):
            return 403, [(b"content-type", b"application/json")], orjson.dumps(
                {"Error": f"{path} refuses requests sent by a browser page (Origin or Sec-Fetch-Site: cross-site)"})
        content_type = next((v.decode("latin-1") for k, v in headers if k == b"content-type"), None)
        status, out, data = self.verbs.reply(verb, path, content_type, body)
        return status, [(k.lower().encode("latin-1"), v.lower().encode("latin-1") if k.lower() == "connection"
                         else v.encode("latin-1")) for k, v in out], data

    def close(self) -> None:
        """Stop the pools (the worker is stopping; what runs is finished first)."""
        for executor in (self.pool, self.large, self.operators.executor, self.others.executor):
            executor.shutdown(wait=True, cancel_futures=True)


class ProbeASGI:
    """The plain probe port: ``GET`` of healthz, readyz and metrics, nothing else."""

    def __init__(self, main: ExtenderASGI):
        self.main = main

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        if scope["method"] != "GET" or not scope["path"].endswith(PROBE_PATHS):
            await reply(send, 404, b'{"Error":"this port serves only GET healthz, readyz and metrics"}')
            return
        await self.main(scope, receive, send)
