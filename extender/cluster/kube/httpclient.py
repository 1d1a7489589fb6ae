"""A keep-alive HTTP/1.1 client for bind's writes: one connection per thread.

The ``kubernetes`` client's transport (urllib3 over ``http.client``) spends
about 0.5 ms of CPU per request in ``benchmarks.load_kube`` (py-spy: the pool
manager's URL parsing and proxy look-up, header parsing through the ``email``
package, the auth hook re-reading settings). Bind sends one or two requests per
pod, so :class:`KeepAliveClient` sends them over a connection each thread keeps
open, with a parser that reads only what a reply needs. Contract:

* ``request(method, path, headers, body)`` → ``(status, reason, data)``;
  ``gate``, where given, is called right before the request is sent (a
  leader's last check that it still holds its lease: extender.cluster.leadership);
  a transport failure raises :class:`OSError` (``ssl.SSLError`` and
  :class:`ReplyError` for a reply it cannot read are ``OSError`` too);
  ``pipeline(requests)`` sends several at once and answers each with its
  reply or its error (for writes that may wait and go together: Events);
* a request is sent once, never retried: a write that may have reached the
  server is the caller's to judge. A kept connection is reused only if it is
  quiet (a zero-timeout poll finds nothing to read: a peer that closed it, or
  sent anything unasked, gets a new connection before the request is sent);
* a reply is a status line, headers (at most 64 KiB in all) and a body by
  ``Content-Length`` or chunked (at most 16 MiB); the connection is closed
  after a reply that says ``Connection: close``, an HTTP/1.0 reply, or any
  failure;
* ``timeout`` bounds connecting and each read and write.
"""

from __future__ import annotations

import select
import socket
import ssl
import threading
import time

MAX_HEAD = 64 * 1024
MAX_BODY = 16 * 1024 * 1024


class ReplyError(OSError):
    """A reply that is not well-formed HTTP/1.1 (or too large)."""


class KeepAliveClient:
    def __init__(self, host: str, port: int, timeout: float, tls: ssl.SSLContext | None = None,
                 server_hostname: str | None = None):
        self._address = (host, port)
        self._timeout = timeout
        self._tls = tls
        self._server_hostname = server_hostname or host
        self._host_header = f"Host: {host if ':' not in host else f'[{host}]'}:{port}\r\n".encode()
        self._local = threading.local()

    def request(self, method: str, path: str, headers: dict, body: bytes, gate=None) -> tuple[int, str, bytes]:
        (reply,) = self.pipeline([(method, path, headers, body)], gate=gate)
        if isinstance(reply, OSError):
            raise reply
        return reply

    def pipeline(self, requests: list[tuple[str, str, dict, bytes]], settle: float = 0.0, gate=None) -> list:
        """Send every ``(method, path, headers, body)`` at once on one connection (HTTP/1.1
        pipelining: one write and one wake-up for many requests), then read the replies in
        order, ``settle`` seconds later if given and there are several (the server writes them
        one by one: read together, they cost one wake-up, not one each). Per request, ``(status, reason,
        data)``, or the :class:`OSError` that cut it off (a failure ends the connection: that
        request and every later one get it; a reply that closes the connection leaves the
        later ones unanswered, never sent again). ``gate()``, if given, is called last before the
        bytes are sent, the connection made: what it raises is raised, nothing sent."""
        conn = self._connection()
        data = b"".join(self._request_bytes(*request) for request in requests)
        replies: list = []
        if gate is not None:
            gate()
        try:
            conn.sock.sendall(data)
            if settle > 0 and len(requests) > 1:  # one reply has nothing to be read together with
                time.sleep(settle)
            for method, *_ in requests:
                status, reason, body, keep = _read_reply(conn.reader, method)
                replies.append((status, reason, body))
                if not keep:
                    self._drop()
                    break
        except OSError as exc:
            self._drop()
            return replies + [exc] * (len(requests) - len(replies))
        except BaseException:
            self._drop()
            raise
        unanswered = ReplyError("the server closed the connection before answering this request")
        return replies + [unanswered] * (len(requests) - len(replies))

    def _request_bytes(self, method: str, path: str, headers: dict, body: bytes) -> bytes:
        """One request as sent: request line, Host, the headers, Content-Length, the body."""
        head = [f"{method} {path} HTTP/1.1\r\n".encode("latin-1"), self._host_header]
        head += [f"{k}: {v}\r\n".encode("latin-1") for k, v in headers.items()]
        head.append(f"Content-Length: {len(body)}\r\n\r\n".encode())
        return b"".join(head) + body

    def _connection(self) -> "_Conn":
        conn = getattr(self._local, "conn", None)
        if conn is not None and _quiet(conn.sock):
            return conn
        self._drop()
        sock = socket.create_connection(self._address, timeout=self._timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._tls is not None:
                sock = self._tls.wrap_socket(sock, server_hostname=self._server_hostname)
        except BaseException:
            sock.close()
            raise
        self._local.conn = conn = _Conn(sock)
        return conn

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()


class _Conn:
    __slots__ = ("sock", "reader")

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.reader = sock.makefile("rb")

    def close(self) -> None:
        for closable in (self.reader, self.sock):
            try:
                closable.close()
            except OSError:
                pass


def _quiet(sock: socket.socket) -> bool:
    """Nothing to read on an idle kept connection (else the peer closed it or broke protocol)."""
    if isinstance(sock, ssl.SSLSocket) and sock.pending():
        return False
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable


def _read_reply(reader, method: str) -> tuple[int, str, bytes, bool]:
    """``(status, reason, body, keep the connection)`` of one reply."""
    budget = MAX_HEAD
    while True:  # 1xx replies (100 Continue) come before the real one
        line = _line(reader, budget)
        budget -= len(line)
        version, _, rest = line.decode("latin-1").rstrip("\r\n").partition(" ")
        code, _, reason = rest.partition(" ")
        if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isascii() or not code.isdigit():
            raise ReplyError(f"not an HTTP/1.x status line: {line[:80]!r}")
        status = int(code)
        length, chunked, close = None, False, version == "HTTP/1.0"
        while (line := _line(reader, budget)) not in (b"\r\n", b"\n"):
            budget -= len(line)
            name, colon, value = line.decode("latin-1").partition(":")
            if not colon:
                raise ReplyError(f"malformed header line: {line[:80]!r}")
            name, value = name.strip().lower(), value.strip()
            if name == "content-length":
                if not value.isascii() or not value.isdigit():
                    raise ReplyError(f"bad Content-Length: {value[:40]!r}")
                length = int(value)
            elif name == "transfer-encoding":
                chunked = value.lower().endswith("chunked")
            elif name == "connection":
                close = close or "close" in value.lower()
        if status >= 200 or status == 101:
            break
    if method == "HEAD" or status in (204, 304):
        return status, reason, b"", not close
    if chunked:
        return status, reason, _chunked(reader), not close
    if length is not None:
        if length > MAX_BODY:
            raise ReplyError(f"reply body of {length} bytes is over the limit of {MAX_BODY}")
        return status, reason, _exactly(reader, length), not close
    data = reader.read(MAX_BODY + 1)  # no length: the body ends with the connection
    if len(data) > MAX_BODY:
        raise ReplyError(f"reply body is over the limit of {MAX_BODY} bytes")
    return status, reason, data, False


def _line(reader, budget: int) -> bytes:
    line = reader.readline(min(budget, MAX_HEAD) + 1)
    if not line:
        raise ReplyError("the connection closed before a complete reply")
    if len(line) > budget or not line.endswith(b"\n"):
        raise ReplyError("reply head over the limit of 64 KiB" if len(line) > budget else
                         "the connection closed inside the reply head")
    return line


def _exactly(reader, n: int) -> bytes:
    data = reader.read(n)
    if len(data) != n:
        raise ReplyError(f"the connection closed after {len(data)} of {n} body bytes")
    return data


def _chunked(reader) -> bytes:
    parts, total = [], 0
    while True:
        size_line = _line(reader, 1024).split(b";", 1)[0].strip()
        if not 0 < len(size_line) <= 8 or size_line.strip(b"0123456789abcdefABCDEF"):
            raise ReplyError(f"bad chunk size: {size_line[:40]!r}")
        size = int(size_line, 16)
        if total + size > MAX_BODY:
            raise ReplyError(f"reply body is over the limit of {MAX_BODY} bytes")
        if size == 0:
            while _line(reader, MAX_HEAD) not in (b"\r\n", b"\n"):  # trailers
                pass
            return b"".join(parts)
        parts.append(_exactly(reader, size))
        total += size
        if _exactly(reader, 2) != b"\r\n":
            raise ReplyError("a chunk not followed by CRLF")
