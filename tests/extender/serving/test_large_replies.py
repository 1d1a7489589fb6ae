"""Large replies reach every reader whole, slow or not, and the connection goes on serving after
them: a verb's own reply (written whole) and a shared cached page (ExtenderProtocol's pump hands it
over a slice at a time), plain and TLS."""

import socket
import ssl
import threading

import orjson
import pytest

from benchmarks.synthetic import cluster_objects
from builders import scheduler_pod
from extender.serving.protocol import PUMP_BYTES
from pki import make_pki
from rawhttp import raw_request, replies
from served import PREFIX, served

CLOSED = "the connection closed before the whole reply"


def request(method: str, path: str, body: bytes = b"") -> bytes:
    return raw_request(method, PREFIX + path, body)


def read_reply(sock: socket.socket, **reading) -> tuple[int, bytes] | str:
    """One reply's ``(status, body)`` (``reading``: :func:`rawhttp.replies`' pace), or :data:`CLOSED`."""
    got = replies(sock, 1, **reading)
    return (got[0][0], got[0][2]) if got else CLOSED


def slow_socket(port: int, context: ssl.SSLContext | None = None) -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
    s.connect(("127.0.0.1", port))
    s.settimeout(30)
    return context.wrap_socket(s, server_hostname="127.0.0.1") if context is not None else s


def test_a_large_verb_reply_reaches_slow_readers_whole_and_the_connection_serves_on():
    names = [f"unknown-node-{i:06d}" for i in range(40_000)]
    body = orjson.dumps({"Pod": scheduler_pod(), "Nodes": None, "NodeNames": names})
    with served() as server:
        fast = slow_socket(server.port)
        fast.sendall(request("POST", "/filter", body))
        status, expected = read_reply(fast)
        assert status == 200 and len(expected) > 2 * PUMP_BYTES
        results = {}

        def reader(k):
            s = slow_socket(server.port)
            s.sendall(request("POST", "/filter", body))
            results[k] = read_reply(s, pause=0.002, piece=16384)
            s.sendall(request("GET", "/healthz"))  # the same connection, after the large reply
            results[k, "next"] = read_reply(s)
            s.close()

        threads = [threading.Thread(target=reader, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        for k in range(4):
            assert results[k] == (200, expected)
            assert results[k, "next"] == (200, b'{"status":"ok"}')


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_a_large_shared_page_reaches_concurrent_slow_readers_whole(tmp_path, tls):
    cluster = tmp_path / "cluster.jsonl"
    cluster.write_bytes(b"\n".join(orjson.dumps(o) for o in cluster_objects(1500, 8, seed=0)))
    where, context = None, None
    if tls:
        (tmp_path / "pki").mkdir()
        pki = make_pki(tmp_path / "pki")
        where = dict(tls_cert=str(pki["server"][0]), tls_key=str(pki["server"][1]), client_ca=str(pki["ca"]))
        context = ssl.create_default_context(cafile=pki["ca"])
        context.load_cert_chain(*pki["client"])
    budget = 16 << 20  # less than the six readers' copies would take: the page is counted once
    with served(config={"cluster_file": str(cluster)}, where=where or {}, limits=dict(reply_bytes=budget)) as server:
        s = slow_socket(server.port, context)
        s.sendall(request("GET", "/inspect"))
        status, expected = read_reply(s)
        assert status == 200 and len(expected) > 4 * PUMP_BYTES and 6 * len(expected) > budget
        results = []

        def reader():
            r = slow_socket(server.port, context)
            for _ in range(2):
                r.sendall(request("GET", "/inspect"))
                try:
                    got = read_reply(r, pause=0.002, piece=32768)
                except OSError as exc:  # shed: the connection reset mid-reply
                    got = repr(exc)
                results.append(got)
                if isinstance(got, str):  # shed: no more on this connection
                    break
            r.close()

        threads = [threading.Thread(target=reader) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert results == [(200, expected)] * 12
