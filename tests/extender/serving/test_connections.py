"""Connections as gunicorn and our bounds handle them: pipelining, 100-continue, half-close,
refusals that reach the client, the request-bytes budget."""

import socket

import orjson
import pytest

from builders import scheduler_pod
from rawhttp import raw_request, replies
from served import PREFIX, served as serving

NODES = ["gpu-core-a", "gpu-core-b"]


@pytest.fixture(scope="module")
def served():
    with serving(limits=dict(header_seconds=2, body_seconds=2, idle_seconds=5, inflight_bytes=96 << 10)) as server:
        yield server


def test_pipelined_requests_are_answered_in_order_on_one_connection(served):
    body = orjson.dumps({"Pod": scheduler_pod(), "NodeNames": NODES})
    stream = (raw_request("POST", f"{PREFIX}/filter", body)
              + b"GET /cgpu-scheduler/healthz HTTP/1.1\r\nHost: x\r\n\r\n"
              + raw_request("POST", f"{PREFIX}/bind", b"{}") + raw_request("POST", f"{PREFIX}/prioritize", body))
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        sock.sendall(stream)
        got = replies(sock, 4)
    assert [status for status, _, _ in got] == [200, 200, 200, 200]
    assert orjson.loads(got[0][2])["NodeNames"] == NODES
    assert orjson.loads(got[1][2]) == {"status": "ok"}
    assert "PodName" in orjson.loads(got[2][2])["Error"]  # bind's specific error for a body without a pod
    assert {entry["Host"] for entry in orjson.loads(got[3][2])} == set(NODES)


def test_a_client_that_expects_100_continue_is_told_to_go_on(served):
    body = orjson.dumps({"Pod": scheduler_pod(), "NodeNames": NODES})
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        sock.sendall(raw_request("POST", f"{PREFIX}/filter", body, b"Expect: 100-continue\r\n")[:-len(body)])
        assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        ((status, _, data),) = replies(sock, 1)
    assert status == 200 and orjson.loads(data)["NodeNames"] == NODES


def test_a_client_that_half_closes_after_its_request_still_gets_the_reply(served):
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        sock.sendall(raw_request("POST", f"{PREFIX}/bind", b"{}"))  # bind runs in a handler thread
        sock.shutdown(socket.SHUT_WR)
        ((status, headers, data),) = replies(sock, 1)
        assert status == 200 and orjson.loads(data)["Error"]
        assert sock.recv(10) == b""  # then the server closes


def test_http_1_0_and_connection_close_get_one_reply_and_a_close(served):
    for request in (b"GET /cgpu-scheduler/healthz HTTP/1.0\r\n\r\n",
                    b"GET /cgpu-scheduler/healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"):
        with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
            sock.sendall(request * 2)
            got = replies(sock, 2)
        assert [status for status, _, _ in got] == [200] and got[0][1][b"connection"] == b"close"


def test_bodies_past_the_servers_budget_are_refused_503_and_the_budget_comes_back(served):
    """Limits.inflight_bytes is 96 KiB here: a body of 100 KB sent whole is refused, and then,
    with nothing held any more, the next requests are answered."""
    body = b"{" + b" " * 100_000 + b"}"
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        sock.sendall(raw_request("POST", f"{PREFIX}/filter", body))
        ((status, _, data),) = replies(sock, 1)
    assert status == 503 and b"too many request bytes" in data
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
            sock.sendall(raw_request("POST", f"{PREFIX}/filter",
                                     orjson.dumps({"Pod": scheduler_pod(), "NodeNames": NODES})))
            ((status, _, _),) = replies(sock, 1)
        assert status == 200


def test_thousands_of_pipelined_requests_in_one_write_are_all_answered(served):
    """Each pipelined request is answered in turn, not by a call nested in the one before."""
    count = 3000
    with socket.create_connection(("127.0.0.1", served.port), timeout=30) as sock:
        sock.sendall(b"GET /cgpu-scheduler/healthz HTTP/1.1\r\nHost: x\r\n\r\n" * count)
        got = replies(sock, count)
    assert len(got) == count and {status for status, _, _ in got} == {200}


def test_a_client_that_pipelines_without_reading_is_not_read_without_bound(served):
    """Replies it does not read fill the socket; the server then stops reading its requests
    (it does not buffer them all), and answers them once the client reads."""
    request = raw_request("POST", f"{PREFIX}/filter", orjson.dumps({"Pod": scheduler_pod(), "NodeNames": NODES}))
    with socket.create_connection(("127.0.0.1", served.port), timeout=30) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        sent = 0
        try:
            for _ in range(20000):  # far more than the kernel's buffers hold, were they all read
                sent += sock.send(request)
        except BlockingIOError:
            pass
        assert sent < 20000 * len(request)  # the server stopped reading: the client's writes block
        sock.setblocking(True)
        got = replies(sock, sent // len(request))
    assert len(got) == sent // len(request) and {status for status, _, _ in got} == {200}


def test_a_client_refused_mid_body_reads_the_refusal_though_it_kept_sending(served):
    # past the server's 96 KiB request-bytes budget the request gets 503 while the client is still sending;
    # closing then would reset the connection and could discard the reply unread
    head = (b"POST /cgpu-scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (1 << 20))
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        sock.sendall(head)
        for _ in range(16):  # all of the body, after the refusal as well
            sock.sendall(b" " * (1 << 16))
        sock.shutdown(socket.SHUT_WR)
        got = replies(sock, 1)
    assert [status for status, _, _ in got] == [503]
    assert b"retry" in got[0][2]


def test_a_refused_client_that_never_stops_sending_is_closed_after_the_linger_time(served):
    import time
    head = (b"POST /cgpu-scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (1 << 40))
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        sock.sendall(head)
        with pytest.raises(OSError):
            while time.monotonic() - started < 8:
                sock.sendall(b" " * (1 << 16))
    assert time.monotonic() - started < 6  # the 2 s linger, then a reset


def test_connections_that_come_and_go_leave_nothing_behind():
    """Each closed connection is freed at once: gunicorn's disconnect grace timer held every one for
    3 s (at ~800 new connections a second, +27 MiB here)."""
    import http.client

    def get(port):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("GET", PREFIX + "/healthz")
        assert connection.getresponse().read() == b'{"status":"ok"}'
        connection.close()

    with serving() as server:
        for _ in range(300):  # warm-up
            get(server.port)
        rest = server.rss()
        for _ in range(4000):
            get(server.port)
        assert server.rss() - rest < 8 * 2**20
