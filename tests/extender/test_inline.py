"""Which requests run in the event loop's thread and which in the handler threads."""

import http.client
import threading

import pytest

from builders import ServedInThread
from extender.httpserver import HTTPServer, Limits
from extender.server import inline


@pytest.mark.parametrize("method, path, expected", [
    (b"POST", b"/cgpu-scheduler/filter", True),
    (b"POST", b"/cgpu-scheduler/prioritize", True),
    (b"GET", b"/cgpu-scheduler/healthz", True),
    (b"GET", b"/readyz", True),
    (b"POST", b"/cgpu-scheduler/bind", False),  # waits on the API server
    (b"POST", b"/cgpu-scheduler/preempt", False),  # reads PodDisruptionBudgets
    (b"GET", b"/cgpu-scheduler/metrics", False),  # seconds of CPU at 10,000 nodes
    (b"GET", b"/cgpu-scheduler/inspect", False),
    (b"GET", b"/cgpu-scheduler/filter", False),
    (b"POST", b"/cgpu-scheduler/filter/x", False),
])
def test_only_short_compute_only_requests_run_inline(method, path, expected):
    assert inline(method, path) is expected


def where(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [threading.current_thread().name.encode()]


def test_inline_requests_run_in_the_loops_thread_and_large_bodies_go_to_the_pool():
    server = HTTPServer(where, "127.0.0.1", 0, threads=2, limits=Limits(inline_body_bytes=100),
                        inline=lambda method, path: path == b"/fast")
    with ServedInThread(server):
        c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)

        def ask(path, body=b""):
            c.request("POST", path, body=body)
            return c.getresponse().read().decode()

        loop_thread = ask("/fast")
        assert not loop_thread.startswith("request")
        assert ask("/fast?x=1") == loop_thread
        assert ask("/slow").startswith("request")
        assert ask("/fast", b"x" * 101).startswith("request")  # over inline_body_bytes
