"""The extender's HTTP/1.1 server: connections read in one event loop, requests run in threads.

Why not a stock WSGI server: gunicorn's ``gthread`` worker (what we shipped
before) reads a request inside one of its worker threads with no read
timeout, so 8 sockets that send half a request and wait hold all 8 threads,
and no filter, bind or healthz is answered for as long as they wait. Here:

* every connection is read by an asyncio event loop (:mod:`h11` parses the
  bytes); a connection costs a little memory, never a thread, however slowly
  its client writes, and however long it sits idle between requests;
* each phase has a deadline: the request head :data:`Limits.header_seconds`
  from its first byte, the body :data:`Limits.body_seconds`, an idle
  keep-alive connection :data:`Limits.idle_seconds` (kube-scheduler keeps its
  connections open and reuses them), a reply's write :data:`Limits.write_seconds`;
  a connection past its deadline is closed;
* only complete requests reach the WSGI app (or a ``direct`` handler: bytes in,
  bytes out, for an exact method and path, skipping WSGI), in a pool of ``threads`` handler
  threads (binds run while a filter is being served, as before), so stalled
  clients never delay a verb; requests the ``inline`` predicate names (short,
  CPU-bound, never waiting on I/O: filter, prioritize, probes) with a body of
  at most :data:`Limits.inline_body_bytes` run in the loop's own thread
  instead: handing a request to a thread and back costs ~150 µs of CPU on a
  2-core VM (``run_in_executor`` round trip), the largest part of a small
  request's cost, and under the GIL a CPU-bound handler gains nothing from a
  thread;
* bounded: head size, body size (413 from ``Content-Length`` before any of
  the body is read, or as soon as a chunked body passes the limit), bodies
  being read at once (:data:`Limits.inflight_bytes`, else 503), connections
  (:data:`Limits.connections`, beyond it new ones are closed at once);
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
import io
import signal
import ssl
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes

import h11

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


class _Refused(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


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
        server = await asyncio.start_server(
            self._connection, self.host, self.port, ssl=self.ssl_context, backlog=1024,
            ssl_handshake_timeout=self.limits.handshake_seconds if self.ssl_context else None,
            limit=self.limits.header_bytes)
        self.port = server.sockets[0].getsockname()[1]
        servers = [server]
        if self.probe_port is not None:
            probes = await asyncio.start_server(functools.partial(self._connection, probe_only=True), self.host,
                                                self.probe_port, limit=self.limits.header_bytes)
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
    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                          probe_only: bool = False) -> None:
        if self._open >= self.limits.connections:
            writer.close()
            return
        self._open += 1
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=self.limits.header_bytes)
        try:
            while await self._one_request(conn, reader, writer, probe_only):
                conn.start_next_cycle()
        except (ConnectionError, asyncio.TimeoutError, ssl.SSLError, OSError, h11.ProtocolError):
            pass  # the connection ends; the server goes on
        finally:
            self._open -= 1
            writer.close()

    async def _next_event(self, conn, reader, until: float, on_first_byte=None, most: int | None = None):
        """The next h11 event, reading as needed until the loop time ``until`` and, when
        ``most`` is given, at most that many bytes (else 431: h11 bounds only what it
        buffers, not an event that arrives whole)."""
        loop = asyncio.get_running_loop()
        received = 0
        while True:
            event = conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            left = until - loop.time()
            if left <= 0:
                raise asyncio.TimeoutError
            async with asyncio.timeout(left):
                data = await reader.read(65536)
            if on_first_byte is not None and data:
                until = on_first_byte(until)
                on_first_byte = None
            received += len(data)
            if most is not None and received > most:
                raise _Refused(431, f"request line and headers are longer than the limit ({most} bytes)")
            conn.receive_data(data)  # b"" is the end of the stream

    async def _one_request(self, conn, reader, writer, probe_only: bool = False) -> bool:
        """Serve one request on ``conn``; True when the connection may serve another."""
        loop = asyncio.get_running_loop()
        limits = self.limits
        try:
            head = await self._next_event(conn, reader, loop.time() + limits.idle_seconds,
                                          on_first_byte=lambda _: loop.time() + limits.header_seconds,
                                          most=limits.header_bytes)
            if isinstance(head, h11.ConnectionClosed):
                return False
            if not isinstance(head, h11.Request):
                return False
            if head.http_version not in (b"1.0", b"1.1"):
                raise _Refused(505, f"HTTP/{head.http_version.decode('ascii', 'replace')[:8]} is not served: "
                                    "HTTP/1.1 only")
            if probe_only and (head.method != b"GET" or not head.target.partition(b"?")[0].endswith(PROBE_PATHS)):
                raise _Refused(404, "this port serves only GET healthz, readyz and metrics")
            body = await self._body(conn, reader, head)
        except h11.RemoteProtocolError as exc:
            await self._refuse(conn, writer, exc.error_status_hint, f"malformed HTTP request: {exc}")
            return False
        except _Refused as exc:
            await self._refuse(conn, writer, exc.status, exc.message)
            return False
        try:
            path = head.target.partition(b"?")[0]
            handler = self.direct.get((head.method, path))
            call = (functools.partial(self._direct, handler, head, body) if handler is not None
                    else functools.partial(self._call, head, body, writer))
            if len(body) <= limits.inline_body_bytes and self.inline(head.method, path):
                status, headers, chunks = call()
            else:
                status, headers, chunks = await loop.run_in_executor(self._pool, call)
        finally:
            self._budget.give(len(body))
        await self._send(conn, writer, status, headers, chunks, head=head.method == b"HEAD")
        return conn.our_state is h11.DONE and conn.their_state is h11.DONE

    async def _body(self, conn, reader, head: h11.Request) -> bytes:
        limits = self.limits
        length = next((int(v) for k, v in head.headers if k == b"content-length"), None)  # h11 checked it
        if length is not None and length > limits.body_bytes:
            raise _Refused(413, f"request body of {length} bytes is larger than the limit "
                                f"({limits.body_bytes} bytes)")
        loop = asyncio.get_running_loop()
        until = loop.time() + limits.body_seconds
        parts, size = [], 0
        try:
            while True:
                event = await self._next_event(conn, reader, until)
                if isinstance(event, h11.Data):
                    if size + len(event.data) > limits.body_bytes:
                        raise _Refused(413, f"request body is larger than the limit ({limits.body_bytes} bytes)")
                    if not self._budget.take(len(event.data)):
                        raise _Refused(503, "the server is reading too many request bodies at once; retry")
                    size += len(event.data)
                    parts.append(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    return b"".join(parts)
                else:  # the peer went away mid-body
                    raise ConnectionError("connection closed inside a request body")
        except BaseException:
            self._budget.give(size)
            raise

    async def _refuse(self, conn, writer, status: int, message: str) -> None:
        if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        body = b'{"Error":' + _json_string(message) + b"}"
        headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
        try:
            await self._send(conn, writer, status, headers, [body])
        except h11.LocalProtocolError:
            pass

    async def _send(self, conn, writer, status: int, headers: list, chunks: list, head: bool = False) -> None:
        body = b"".join(chunks)
        if head:  # the app's Content-Length says what a GET would carry; no body goes with it
            body = b""
            headers = [(k, v) for k, v in headers if k.lower() != b"transfer-encoding"]
        else:
            headers = [(k, v) for k, v in headers if k.lower() not in (b"content-length", b"transfer-encoding")]
            headers.append((b"content-length", str(len(body)).encode()))
        headers.append((b"server", SERVER))
        out = conn.send(h11.Response(status_code=status, headers=headers))
        if body:
            out += conn.send(h11.Data(data=body))
        out += conn.send(h11.EndOfMessage())
        writer.write(out)
        if writer.transport.get_write_buffer_size():
            async with asyncio.timeout(self.limits.write_seconds):
                await writer.drain()

    # -- the reply (a handler thread, or the loop's for an inline request) ----------
    def _direct(self, handler, head: h11.Request, body: bytes) -> tuple:
        try:
            return handler(head.headers, body)
        except Exception as exc:  # the handler answers its own faults; this is the last line
            self.log.error("internal error outside the handler", exc_info=exc)
            return 500, [(b"content-type", b"application/json")], [b'{"Error":"internal error"}']

    def _call(self, head: h11.Request, body: bytes, writer) -> tuple:
        target = head.target
        path, _, query = target.partition(b"?")
        environ = {
            "REQUEST_METHOD": head.method.decode("ascii", "replace"),
            "SCRIPT_NAME": "",
            "PATH_INFO": unquote_to_bytes(path).decode("latin-1"),
            "QUERY_STRING": query.decode("latin-1"),
            "SERVER_NAME": self.host,
            "SERVER_PORT": str(self.port),
            "SERVER_PROTOCOL": "HTTP/" + head.http_version.decode("ascii", "replace"),
            "REMOTE_ADDR": (writer.get_extra_info("peername") or ("", 0))[0],
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

        try:
            result = self.app(environ, start_response)
            try:
                chunks = [bytes(chunk) for chunk in result]
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
            return reply["status"], reply["headers"], chunks
        except Exception as exc:  # the app answers its own faults; this is the last line
            self.log.error("internal error outside the app", exc_info=exc)
            return 500, [(b"content-type", b"application/json")], [b'{"Error":"internal error"}']


def _json_string(text: str) -> bytes:
    import orjson

    return orjson.dumps(text)
