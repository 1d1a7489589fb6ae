"""The extender's HTTP/1.1 server: connections read in one event loop, requests run in threads.

Why not a stock WSGI server: gunicorn's ``gthread`` worker (what we shipped
before) reads a request inside one of its worker threads with no read
timeout, so 8 sockets that send half a request and wait hold all 8 threads,
and no filter, bind or healthz is answered for as long as they wait. Here:

* every connection is an asyncio protocol of one event loop, its bytes parsed
  as they arrive (:mod:`extender.httpparse`); a connection costs a little
  memory, never a thread, however slowly its client writes, and however long
  it sits idle between requests. (Streams and h11 cost ~350 µs of CPU per
  small request on a 2-core VM, this ~175 µs; the floor of any asyncio
  protocol there, with a trivial parse, is ~150 – 180 µs);
* each phase has a deadline: the request head :data:`Limits.header_seconds`
  from its first byte, the body :data:`Limits.body_seconds`, an idle
  keep-alive connection :data:`Limits.idle_seconds` (kube-scheduler keeps its
  connections open and reuses them), a reply's write :data:`Limits.write_seconds`;
  a connection past its deadline is closed, and so is one whose reply's
  handler set ``Connection: close``;
* only complete requests reach the WSGI app (or a ``direct`` handler: bytes in,
  bytes out, for an exact method and path, skipping WSGI), in a pool of ``threads`` handler
  threads (binds run while a filter is being served, as before), so stalled
  clients never delay a verb; requests the ``inline`` predicate names (short,
  CPU-bound, never waiting on I/O: filter, prioritize, probes) with a body of
  at most :data:`Limits.inline_body_bytes` run in the loop's own thread
  instead: handing a request to a thread and back costs ~250 – 400 µs of CPU
  on a 2-core VM (a thread's wake-up and the loop's), more
  than the rest of a small request's cost, and under the GIL a CPU-bound
  handler gains nothing from a thread;
* bounded: head size, body size (413 from ``Content-Length`` before any of
  the body is read, or as soon as a chunked body passes the limit), bodies
  being read at once (:data:`Limits.inflight_bytes`, else 503), connections
  (:data:`Limits.connections`, beyond it new ones are closed at once); a
  connection is not read while its request is being answered in a thread or
  while its replies back up past the transport's high-water mark, so a client
  that pipelines requests without reading the replies holds one request's
  bytes, not all it sent; pipelined requests are answered one after another;
* a refused request's reply reaches its client: the server half-closes and
  reads and drops what the client still sends (up to the body limit, for
  :data:`Limits.linger_seconds`) before it closes, since closing a socket
  with unread bytes resets the connection, and a reset can discard the
  reply unread (plain HTTP; TLS has no half-close and closes at once);
* one process, so one ledger: a second process would keep a second,
  disagreeing ledger and double-allocate GPUs;
* optional TLS, with client certificates verified against a CA when one is
  given (kube-scheduler's extender ``tlsConfig``), and then optionally a second,
  plain-HTTP port (``probe_port``) that answers only ``GET`` of ``healthz``,
  ``readyz`` and ``metrics`` — for the kubelet's probes and Prometheus, which
  carry no client certificate; everything else there is 404.

The slow-client figures are in ``benchmarks/RESULTS.md`` (``benchmarks.slowclients``).
"""

from __future__ import annotations

import asyncio
import functools
import http
import io
import signal
import ssl
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes

from extender.httpparse import BadRequest, Request, RequestParser
from extender.logs import fields, get_logger

SERVER = b"cgpu-extender"
PROBE_PATHS = (b"/healthz", b"/readyz", b"/metrics")  # what the plain probe port serves (path endings)


@dataclass(frozen=True)
class Limits:
    header_bytes: int = 64 * 1024  # request line and headers
    body_bytes: int = 64 * 2**20  # one request's body (413 beyond)
    inflight_bytes: int = 256 * 2**20  # bodies being read at once, all connections (503 beyond)
    connections: int = 4096  # open connections; new ones beyond are closed at once
    header_seconds: float = 10.0  # from a request's first byte to the end of its head
    body_seconds: float = 30.0  # to read a body
    idle_seconds: float = 75.0  # an open connection between requests
    write_seconds: float = 30.0  # to write a reply
    handshake_seconds: float = 10.0  # TLS
    linger_seconds: float = 2.0  # after refusing a request: what the client still sends is read and dropped
    inline_body_bytes: int = 2**20  # largest body of a request run in the loop's thread (see module doc)


def tls_context(cert: str, key: str, client_ca: str | None = None) -> ssl.SSLContext:
    """A server TLS context (TLS 1.2+); with ``client_ca`` every client must show a certificate it signed."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    if client_ca:
        context.load_verify_locations(client_ca)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


class _Budget:
    """Bytes of request bodies held at once, across connections (the loop's thread only)."""

    def __init__(self, limit: int):
        self.limit, self.used = limit, 0

    def take(self, n: int) -> bool:
        if self.used + n > self.limit:
            return False
        self.used += n
        return True

    def give(self, n: int) -> None:
        self.used -= n


class HTTPServer:
    """Serves one WSGI app (see module doc). :meth:`run` blocks until SIGTERM/SIGINT or :meth:`stop`."""

    def __init__(self, app, host: str, port: int, threads: int = 8, limits: Limits = Limits(),
                 ssl_context: ssl.SSLContext | None = None, probe_port: int | None = None,
                 inline=lambda method, path: False, direct: dict | None = None):
        self.app, self.host, self.port, self.probe_port = app, host, port, probe_port
        self.inline = inline  # (method, path as bytes) → run in the loop's thread (see module doc)
        self.direct = direct or {}  # (method, path) → handler(headers, body) answering instead of the app
        self.limits, self.ssl_context = limits, ssl_context
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="request")
        self._budget = _Budget(limits.inflight_bytes)
        self._open = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self.started = threading.Event()
        self.log = get_logger()

    # -- lifecycle -------------------------------------------------------------
    def run(self) -> None:
        asyncio.run(self._main())

    def stop(self) -> None:
        """Stop accepting, finish the requests being handled, return from :meth:`run` (any thread)."""
        if self._loop is not None and self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                self._loop.add_signal_handler(signum, self._stopped.set)
        server = await self._loop.create_server(
            self._connection, self.host, self.port, ssl=self.ssl_context, backlog=1024,
            ssl_handshake_timeout=self.limits.handshake_seconds if self.ssl_context else None)
        self.port = server.sockets[0].getsockname()[1]
        servers = [server]
        if self.probe_port is not None:
            probes = await self._loop.create_server(functools.partial(self._connection, probe_only=True),
                                                    self.host, self.probe_port)
            self.probe_port = probes.sockets[0].getsockname()[1]
            servers.append(probes)
        self.log.info("serving", extra=fields(host=self.host, port=self.port, probe_port=self.probe_port,
                                               tls=self.ssl_context is not None,
                                               client_certificates=bool(self.ssl_context
                                                                        and self.ssl_context.verify_mode
                                                                        == ssl.CERT_REQUIRED)))
        self.started.set()
        await self._stopped.wait()
        for listening in servers:
            listening.close()
        for listening in servers:
            await listening.wait_closed()
        self._pool.shutdown(wait=True)
        self.log.info("stopped serving", extra=fields(port=self.port))

    # -- one connection ---------------------------------------------------------
    def _connection(self, probe_only: bool = False) -> "_Connection":
        return _Connection(self, probe_only)

    # -- the reply (a handler thread, or the loop's for an inline request) ----------
    def _respond(self, request: Request, peer: str) -> tuple:
        """``(status, headers, chunks)`` for a whole request: its ``direct`` handler's, else the app's."""
        try:
            handler = self.direct.get((request.method, request.path))
            if handler is not None:
                return handler(request.headers, request.body)
            return self._call(request, peer)
        except Exception as exc:  # handler and app answer their own faults; this is the last line
            self.log.error("internal error outside the app", exc_info=exc)
            return 500, [(b"content-type", b"application/json")], [b'{"Error":"internal error"}']

    def _call(self, head: Request, peer: str) -> tuple:
        """The WSGI app's reply."""
        body = head.body
        target = head.target
        path, _, query = target.partition(b"?")
        environ = {
            "REQUEST_METHOD": head.method.decode("ascii", "replace"),
            "SCRIPT_NAME": "",
            "PATH_INFO": unquote_to_bytes(path).decode("latin-1"),
            "QUERY_STRING": query.decode("latin-1"),
            "SERVER_NAME": self.host,
            "SERVER_PORT": str(self.port),
            "SERVER_PROTOCOL": "HTTP/" + head.version.decode("ascii"),
            "REMOTE_ADDR": peer,
            "CONTENT_LENGTH": str(len(body)),
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "https" if self.ssl_context else "http",
            "wsgi.input": io.BytesIO(body),
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
        }
        for name, value in head.headers:
            key = name.decode("latin-1").upper().replace("-", "_")
            text = value.decode("latin-1")
            if key == "CONTENT_TYPE":
                environ["CONTENT_TYPE"] = text
            elif key != "CONTENT_LENGTH":
                key = "HTTP_" + key
                environ[key] = f"{environ[key]},{text}" if key in environ else text
        reply = {}

        def start_response(status, headers, exc_info=None):
            reply["status"] = int(status.split(" ", 1)[0])
            reply["headers"] = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]

        result = self.app(environ, start_response)
        try:
            chunks = [bytes(chunk) for chunk in result]
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        return reply["status"], reply["headers"], chunks


def _json_string(text: str) -> bytes:
    import orjson

    return orjson.dumps(text)


class _Connection(asyncio.Protocol):
    """One client connection: its bytes parsed as they arrive, one request answered at a time.

    Deadlines (see :class:`Limits`) are one timer, re-armed for each phase:
    idle between requests, the head from its first byte, the body from the end
    of the head, and a reply's write while the transport holds more than its
    high-water mark. While a request is answered, reading pauses, and no timer
    runs (the handler's time is not the client's fault).
    """

    def __init__(self, server: HTTPServer, probe_only: bool):
        self.server, self.probe_only = server, probe_only
        self.limits = server.limits
        self.parser = RequestParser(self.limits.header_bytes, self.limits.body_bytes)
        self.transport: asyncio.Transport | None = None
        self.peer = ""
        self.timer: asyncio.TimerHandle | None = None
        self.phase = ""  # what the timer is for: "idle", "head", "body", "write", "linger"
        self.busy = False  # a request is being answered
        self.held = 0  # body bytes taken from the server's budget
        self.writing_paused = False
        self.keep_alive_after_write: bool | None = None  # a reply waiting for writing to resume
        self.counted = False
        self.eof = False  # the client half-closed while a request was being answered
        self.paused = False  # reading paused: a handler thread answers, or replies back up
        self.lingering = 0  # after a refusal: bytes the client may still send, read and dropped

    # -- asyncio's calls --------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        server = self.server
        if server._open >= self.limits.connections:
            transport.abort()
            return
        server._open += 1
        self.counted = True
        self.peer = (transport.get_extra_info("peername") or ("",))[0]
        self._arm("idle", self.limits.idle_seconds)

    def connection_lost(self, exc) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self._give()
        if self.counted:
            self.server._open -= 1
            self.counted = False

    def data_received(self, data: bytes) -> None:
        if self.lingering:
            self.lingering -= min(len(data), self.lingering)
            if not self.lingering:
                self.transport.close()
            return
        if self.transport.is_closing():
            return
        self.parser.feed(data)
        if not self.busy and self._hold_body():
            self._advance()

    def eof_received(self) -> bool:
        """The client sent all it will: close, unless a reply is still to be written (then after it)."""
        if self.lingering:
            return False
        self.eof = self.busy
        return self.busy

    def pause_writing(self) -> None:
        """The client reads its replies slower than they come: stop reading its requests too."""
        if self.lingering:  # a refusal is written: its linger deadline stands, and reading goes on
            return
        self.writing_paused = True
        self._pause_reading()
        self._arm("write", self.limits.write_seconds)

    def resume_writing(self) -> None:
        self.writing_paused = False
        keep_alive, self.keep_alive_after_write = self.keep_alive_after_write, None
        if keep_alive is not None:
            self._done(keep_alive)
            self._advance()

    # -- requests ---------------------------------------------------------------------
    def _advance(self) -> None:
        """Answer every request the bytes received complete, one after another (an inline reply
        goes on to the next; a handler thread's or a paused write's resumes here when done),
        then arm the deadline of what is still arriving."""
        parser = self.parser
        while not self.busy and not self.transport.is_closing():
            try:
                waiting_head = parser.in_head
                head = parser.head()
                if head is None:
                    if parser.started and self.phase != "head":
                        self._arm("head", self.limits.header_seconds)
                    return
                if waiting_head:
                    self._arm("body", self.limits.body_seconds)
                    if self.probe_only and (head.method != b"GET" or not head.path.endswith(PROBE_PATHS)):
                        raise BadRequest(404, "this port serves only GET healthz, readyz and metrics")
                    if not self._hold_body():  # body bytes that came with the head
                        return
                    if head.expects_continue and parser.pending == 0:
                        self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                request = parser.next()
            except BadRequest as exc:
                self._refuse(exc.status, exc.message)
                return
            if request is None:
                return
            self._answer(request)

    def _answer(self, request: Request) -> None:
        server = self.server
        self.busy = True
        self._disarm()
        call = functools.partial(server._respond, request, self.peer)
        if len(request.body) <= self.limits.inline_body_bytes and server.inline(request.method, request.path):
            self._reply(request, *call())
            return
        self._pause_reading()
        loop = server._loop

        def work():  # in the handler thread: the reply goes straight back to the loop
            try:
                reply = call()
            except BaseException:  # call() answers every Exception; past that, the connection ends
                loop.call_soon_threadsafe(self.transport.abort)
                raise
            loop.call_soon_threadsafe(self._replied, request, reply)

        try:
            server._pool.submit(work)
        except RuntimeError:  # the pool is shutting down: the server is stopping
            self.transport.abort()

    def _replied(self, request: Request, reply: tuple) -> None:
        self._reply(request, *reply)
        self._advance()

    def _reply(self, request: Request, status: int, headers: list, chunks: list) -> None:
        self._give()
        if self.transport.is_closing():
            return
        keep_alive = request.keep_alive and not any(k.lower() == b"connection" and v.lower() == b"close"
                                                    for k, v in headers)  # the handler's say
        self._write(status, headers, b"".join(chunks), head=request.method == b"HEAD", keep_alive=keep_alive)
        if self.writing_paused:
            self.keep_alive_after_write = keep_alive  # resume_writing goes on
        else:
            self._done(keep_alive)

    def _done(self, keep_alive: bool) -> None:
        """The reply is written (or buffered under the transport's high-water mark): close, or
        wait for the next request, reading again."""
        self.busy = False
        if not keep_alive or self.eof:
            self.transport.close()
            return
        self._arm("idle", self.limits.idle_seconds)
        if self.paused:
            self.paused = False
            self.transport.resume_reading()

    def _pause_reading(self) -> None:
        if not self.paused:
            self.paused = True
            self.transport.pause_reading()

    def _refuse(self, status: int, message: str) -> None:
        """Answer a request that cannot be read, then close (the stream's framing is lost).

        A client refused mid-body (413, 503) is often still sending: a socket
        closed with unread bytes makes the kernel reset the connection, and a
        reset can discard the reply before the client reads it. So the server
        half-closes and reads and drops what still comes, up to the body limit
        or ``linger_seconds``, then closes.
        """
        self._give()
        if self.busy or self.transport.is_closing():
            self.transport.close()
            return
        self._write(status, [(b"content-type", b"application/json")],
                    b'{"Error":' + _json_string(message) + b"}", keep_alive=False)
        if not self.transport.can_write_eof():  # TLS: no half-close
            self.transport.close()
            return
        self.transport.write_eof()
        self.lingering = self.limits.body_bytes
        self._arm("linger", self.limits.linger_seconds)
        if self.paused:
            self.paused = False
            self.transport.resume_reading()

    def _write(self, status: int, headers: list, body: bytes, head: bool = False, keep_alive: bool = True) -> None:
        lines = [b"HTTP/1.1 %d %s\r\n" % (status, _REASONS.get(status, b"Unknown"))]
        for name, value in headers:
            lower = name.lower()
            if lower in (b"content-length", b"transfer-encoding", b"connection") and not (head and lower ==
                                                                                            b"content-length"):
                continue
            lines.append(b"%s: %s\r\n" % (name, value))
        if not head:  # a HEAD reply keeps the Content-Length a GET would carry, and no body
            lines.append(b"content-length: %d\r\n" % len(body))
        if not keep_alive:
            lines.append(b"connection: close\r\n")
        lines.append(b"server: " + SERVER + b"\r\n\r\n")
        if not head:
            lines.append(body)
        self.transport.write(b"".join(lines))

    # -- deadlines and the budget ---------------------------------------------------------
    def _arm(self, phase: str, seconds: float) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.phase = phase
        self.timer = self.server._loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.phase = ""

    def _expired(self) -> None:
        self.timer = None
        self.transport.abort()

    def _hold_body(self) -> bool:
        """Take from the server's budget the body bytes received since last asked; refuse 503 (and
        False) when the bodies all connections hold would pass it."""
        more = self.parser.body_buffered - self.held
        if more > 0:
            if not self.server._budget.take(more):
                self._refuse(503, "the server is reading too many request bodies at once; retry")
                return False
            self.held += more
        return True

    def _give(self) -> None:
        if self.held:
            self.server._budget.give(self.held)
            self.held = 0


_REASONS = {status.value: status.phrase.encode("ascii") for status in http.HTTPStatus}
