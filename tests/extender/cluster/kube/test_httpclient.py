"""The keep-alive client bind's writes go through: replies read exactly, bad ones refused,
kept connections reused only when quiet, TLS as the kubernetes client configures it."""

import socket
import ssl
import threading
import time

import pytest
from kubernetes import client

from extender.cluster.kube.api import direct_client
from extender.cluster.kube.httpclient import KeepAliveClient, ReplyError
from pki import make_pki

OK = b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"a\": true}"


class Scripted:
    """A server that answers each request with the next scripted bytes (a callable may
    also close the connection), counting connections and keeping the requests."""

    def __init__(self, replies, tls=None):
        self.replies = list(replies)
        self.requests, self.connections = [], 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.tls = tls
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._connection, args=(sock,), daemon=True).start()

    def _connection(self, sock):
        try:
            if self.tls is not None:
                sock = self.tls.wrap_socket(sock, server_side=True)
            reader = sock.makefile("rb")
            while self.replies:
                head = b""
                while not head.endswith(b"\r\n\r\n"):
                    line = reader.readline()
                    if not line:
                        return
                    head += line
                length = int(next((h.split(b":")[1] for h in head.split(b"\r\n")
                                   if h.lower().startswith(b"content-length")), b"0"))
                self.requests.append((head, reader.read(length)))
                reply = self.replies.pop(0)
                if callable(reply):
                    reply(sock)
                    return
                sock.sendall(reply)
        except (OSError, ssl.SSLError):
            pass
        finally:
            sock.close()

    def close(self):
        self.listener.close()


def close_now(sock):
    sock.close()


@pytest.fixture
def scripted():
    servers = []

    def make(*replies, tls=None):
        servers.append(Scripted(replies, tls))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


def test_replies_by_length_and_by_chunks_on_one_kept_connection(scripted):
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"b\"\r\n4;x=1\r\n: 1}\r\n0\r\n\r\n"
    server = scripted(OK, chunked,
                      b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n")
    c = KeepAliveClient("127.0.0.1", server.port, timeout=5)
    assert c.request("POST", "/x", {"Authorization": "Bearer t"}, b'{"k": 1}') == (201, "Created", b'{"a": true}')
    assert c.request("GET", "/y", {}, b"") == (200, "OK", b'{"b": 1}')
    assert c.request("DELETE", "/z", {}, b"") == (204, "No Content", b"")
    assert server.connections == 1
    head, body = server.requests[0]
    assert head.startswith(b"POST /x HTTP/1.1\r\n") and b"\r\nAuthorization: Bearer t\r\n" in head
    assert b"\r\nContent-Length: 8\r\n" in head and body == b'{"k": 1}'


def test_a_connection_the_server_closed_is_replaced_before_the_next_request(scripted):
    server = scripted(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}", OK, OK)
    c = KeepAliveClient("127.0.0.1", server.port, timeout=5)
    assert c.request("GET", "/", {}, b"")[0] == 200  # Connection: close → not kept
    assert c.request("GET", "/", {}, b"")[0] == 201
    assert server.connections == 2


def test_an_idle_connection_closed_by_the_peer_is_not_reused(scripted):
    server = scripted(OK, OK)
    c = KeepAliveClient("127.0.0.1", server.port, timeout=5)
    assert c.request("GET", "/", {}, b"")[0] == 201
    c._local.conn.sock.shutdown(socket.SHUT_RD)  # as if the peer's FIN had arrived: readable at EOF
    assert c.request("GET", "/", {}, b"")[0] == 201
    assert server.connections == 2


def test_a_pipeline_sends_every_request_before_it_reads_a_reply():
    """A server that answers only once all three requests have arrived: a client that waited
    for each reply before sending the next would time out here."""
    listener = socket.create_server(("127.0.0.1", 0))
    received = []

    def serve():
        sock, _ = listener.accept()
        data = b""
        with sock:
            while data.count(b"\r\n\r\n") < 3:
                data += sock.recv(65536)
            received.append(data)
            sock.sendall(OK + b"HTTP/1.1 409 Conflict\r\nContent-Length: 2\r\n\r\n{}" + OK)
            sock.recv(1)

    threading.Thread(target=serve, daemon=True).start()
    c = KeepAliveClient("127.0.0.1", listener.getsockname()[1], timeout=2)
    replies = c.pipeline([("POST", f"/e/{i}", {}, b"") for i in range(3)])
    assert replies == [(201, "Created", b'{"a": true}'), (409, "Conflict", b"{}"), (201, "Created", b'{"a": true}')]
    assert [line.split(b" ")[1] for line in received[0].split(b"\r\n") if line.startswith(b"POST")] == \
        [b"/e/0", b"/e/1", b"/e/2"]
    listener.close()


def test_a_pipeline_may_wait_before_reading_replies_the_server_sends_one_by_one(scripted):
    server = scripted(OK, OK, lambda sock: (time.sleep(0.1), sock.sendall(OK)))  # the last one late
    c = KeepAliveClient("127.0.0.1", server.port, timeout=5)
    started = time.monotonic()
    replies = c.pipeline([("POST", "/", {}, b"{}")] * 3, settle=0.2)
    assert time.monotonic() - started >= 0.2  # read after the settle, when all three are there
    assert [r[0] for r in replies] == [201] * 3
    alone = KeepAliveClient("127.0.0.1", scripted(OK).port, timeout=5)
    started = time.monotonic()
    assert alone.pipeline([("POST", "/", {}, b"{}")], settle=5)[0][0] == 201
    assert time.monotonic() - started < 5  # one reply is read at once


def test_a_pipeline_cut_short_fails_the_rest_and_a_closing_reply_leaves_the_rest_unanswered(scripted):
    server = scripted(OK, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}", OK)
    c = KeepAliveClient("127.0.0.1", server.port, timeout=5)
    first, second, third = c.pipeline([("POST", "/", {}, b"{}")] * 3)
    assert first[0] == 201 and second[0] == 200
    assert isinstance(third, ReplyError) and "before answering" in str(third)
    assert c._local.conn is None
    cut = scripted(OK, lambda sock: (sock.sendall(b"HTTP/1.1 20"), sock.close()))
    c = KeepAliveClient("127.0.0.1", cut.port, timeout=5)
    replies = c.pipeline([("POST", "/", {}, b"{}")] * 3)
    assert replies[0][0] == 201 and all(isinstance(r, ReplyError) for r in replies[1:])


@pytest.mark.parametrize("reply, message", [
    (b"SSH-2.0-OpenSSH\r\n\r\n", "not an HTTP/1.x status line"),
    (b"HTTP/1.1 2000 Huh\r\n\r\n", "not an HTTP/1.x status line"),
    (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "malformed header line"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "bad Content-Length"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n", "over the limit"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x10\r\n", "bad chunk size"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}XX", "not followed by CRLF"),
    (b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n", "over the limit of 64 KiB"),
])
def test_a_reply_it_cannot_read_is_an_error_and_drops_the_connection(scripted, reply, message):
    server = scripted(reply, OK)
    c = KeepAliveClient("127.0.0.1", server.port, timeout=5)
    with pytest.raises(ReplyError, match=message):
        c.request("GET", "/", {}, b"")
    assert c._local.conn is None


@pytest.mark.parametrize("reply", [close_now, b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}", b"HTTP/1.1 20"])
def test_a_reply_cut_short_is_an_error_never_a_hang(scripted, reply):
    server = scripted(reply if callable(reply) else lambda sock: (sock.sendall(reply), sock.close()))
    c = KeepAliveClient("127.0.0.1", server.port, timeout=5)
    with pytest.raises(ReplyError, match="closed"):
        c.request("POST", "/", {}, b"{}")


def test_a_silent_server_times_out(scripted):
    server = scripted(lambda sock: threading.Event().wait(3))
    c = KeepAliveClient("127.0.0.1", server.port, timeout=0.3)
    with pytest.raises(OSError):  # socket.timeout is an OSError
        c.request("GET", "/", {}, b"")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def _server_tls(pki, client_ca=None):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*pki["server"])
    if client_ca:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(client_ca)
    return context


def _configuration(port, **settings):
    configuration = client.Configuration(host=f"https://127.0.0.1:{port}")
    for key, value in settings.items():
        setattr(configuration, key, value)
    return configuration


def test_tls_with_the_configurations_ca_and_client_certificate(scripted, pki):
    server = scripted(OK, tls=_server_tls(pki, client_ca=pki["ca"]))
    c = direct_client(_configuration(server.port, ssl_ca_cert=pki["ca"], cert_file=pki["client"][0],
                                     key_file=pki["client"][1]), timeout=5)
    assert c.request("POST", "/api/v1/namespaces/d/events", {}, b"{}")[0] == 201


def test_tls_refuses_a_server_the_configured_ca_did_not_sign(scripted, pki):
    server = scripted(OK, tls=_server_tls(pki))
    c = direct_client(_configuration(server.port, ssl_ca_cert=pki["stranger"][0]), timeout=5)
    with pytest.raises(ssl.SSLError):
        c.request("GET", "/", {}, b"")
    insecure = direct_client(_configuration(server.port, verify_ssl=False), timeout=5)
    assert insecure.request("GET", "/", {}, b"")[0] == 201


def test_a_proxy_leaves_the_writes_to_the_clients_own_transport():
    configuration = client.Configuration(host="https://10.0.0.1:6443")
    configuration.proxy = "http://proxy.example:3128"
    assert direct_client(configuration, timeout=5) is None
    configuration.no_proxy = "10.0.0.1"
    assert direct_client(configuration, timeout=5) is not None


def test_a_transport_failure_without_a_message_is_still_a_cluster_error():
    from extender.cluster.kube.backend import _cluster_error

    error = _cluster_error(ConnectionResetError())
    assert error.status is None and "Kubernetes API unreachable: ConnectionResetError" in str(error)
