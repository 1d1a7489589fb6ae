"""The four scheduler verbs as bytes in, bytes out: one reply for Flask's routes and the server's direct path.

kube-scheduler sends each pod through filter, prioritize and bind. Served
through WSGI and Flask (environ, request context, routing, response object)
a verb costs ~100 µs of CPU more than the handler itself on a 2-core VM
in the loop's thread, ~300 µs in a handler thread (``healthz`` through
``app(environ)``: 104 µs; ``Extender.bind`` on a bad body alone: 9 µs). :class:`Verbs`
answers a verb from its raw body and ``Content-Type`` with exactly what the
Flask route answers (the route calls it too): 415 unless the body is JSON,
503 with an ``Error`` and ``Connection: close`` on a replica that is not the
leader (leader election: a kept connection would otherwise keep reaching it),
the extender's reply, a one-line 500 for a handler fault, ``Server-Timing``
and the duration histogram. :class:`extender.serving.asgi.ExtenderASGI`
answers an exact ``POST`` path with it; any other request (another method, a
path spelt otherwise) reaches Flask.
"""

from __future__ import annotations

import time
from typing import Callable

from extender.logs import fields, get_logger
from extender.verbs import wire
from extender.verbs.service import Extender
from extender.views.metrics import Metrics
from policy.echo import shown

JSON = "application/json"
VERBS = ("filter", "prioritize", "preempt", "bind")

Reply = tuple[int, list[tuple[str, str]], bytes]  # status, headers, body


def mimetype(content_type: str | None) -> str:
    """The media type of a ``Content-Type`` value, lower case, without parameters ('' when absent)."""
    return (content_type or "").partition(";")[0].strip().lower()


class Verbs:
    def __init__(self, extender: Extender, metrics: Metrics, prefix: str):
        self._extender = extender
        self._prefix = prefix
        self._metrics = metrics
        self._outcomes = extender.outcomes
        self._handlers: dict[str, Callable[[bytes], tuple[bytes, int]]] = {
            "filter": lambda body: (extender.filter(body), 200),
            "prioritize": lambda body: (extender.prioritize(body), 200),
            "preempt": extender.preempt,
            "bind": lambda body: (extender.bind(body), 200),
        }
        self.log = get_logger()

    def reply(self, verb: str, path: str, content_type: str | None, body: bytes,
              started: float | None = None) -> Reply:
        """The reply to ``POST path`` of ``verb`` with this body; ``started`` (``perf_counter``) is when
        the body had been read, for ``Server-Timing`` (now if not given)."""
        started = time.perf_counter() if started is None else started
        media = mimetype(content_type)
        if media != JSON:
            status, data = 415, wire.encode({"Error": f"415 Unsupported Media Type: {path} takes Content-Type: "
                                                      f"{JSON}, not {shown(media or 'none')}"})
        elif (refusal := self._extender.refusal()) is not None:  # a standby: only the leader answers
            status, data = 503, wire.encode({"Error": refusal})
            if verb == "bind":
                self._extender.outcomes.bound("not_leader")
            seconds = time.perf_counter() - started
            self._metrics.observe(verb, seconds)
            # closed: kube-scheduler's next request opens a new connection, which the Service sends to the leader
            return status, [("Content-Type", JSON), ("Server-Timing", timing(seconds)), ("Connection", "close")], data
        else:
            try:
                data, status = self._handlers[verb](body)
            except Exception as exc:  # the handler's fault: logged whole, answered in one line
                self.log.error("internal error", exc_info=exc, extra=fields(path=path))
                self._outcomes.errored(verb, "internal")
                status, data = 500, wire.encode({"Error": "internal error in the GPU-share extender: "
                                                          f"{type(exc).__name__}"})
        seconds = time.perf_counter() - started
        self._metrics.observe(verb, seconds)
        return status, [("Content-Type", JSON), ("Server-Timing", timing(seconds))], data


def timing(seconds: float) -> str:
    """The ``Server-Timing`` value for a handler that took ``seconds``."""
    return f"app;dur={seconds * 1000:.3f}"

