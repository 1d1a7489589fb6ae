"""gunicorn's HTTP/1.1 protocol, bounded: deadlines per phase, budgets, eviction, refusals that reach the client.

:class:`ExtenderProtocol` is gunicorn's :class:`~gunicorn.asgi.protocol.ASGIProtocol`
(parsing, framing, keep-alive, pipelining, ``Expect: 100-continue`` stay
gunicorn's) with what a scheduler component needs on top:

* **one deadline per phase** (:class:`~extender.serving.budgets.Limits`): a new
  connection until its first byte, a request's head from its first byte, its
  body from the end of the head, an idle keep-alive connection, a reply its
  reader does not take; a connection past its deadline is closed. While a
  request is answered no deadline runs (the handler's time is not the
  client's fault);
* **counted from accept**, per port (:class:`~extender.serving.budgets.Port`),
  TLS connections while their handshake runs too (:class:`TLSConnection`, a
  TLS layer with a 32 KiB read buffer instead of asyncio's 256 KiB: a pending
  handshake costs ~81 KiB instead of ~305; ``benchmarks.hostile per-connection``);
* **request bytes as received**, framing included, taken from the worker's
  in-flight budget until the request is answered (503 beyond), a request over
  the body limit refused 413 (from ``Content-Length`` before its body is read),
  and a body sent in many tiny pieces (1-byte chunks) refused 400 before it
  costs more than ~1,000 parser calls;
* **reply bytes** the kernel has not taken counted in the worker's reply
  budget; past it, the connection that has waited longest for its reader is
  closed. asyncio's transport (3.11) copies what the kernel does not take at
  once: twelve readers of one cached 17 MB metrics page held twelve copies
  (``benchmarks.hostile get-flood``). A large page the application marks as
  shared (``shared_reply``: the operators' cached reads) is handed to the
  transport ``SLICE_BYTES`` at a time as the reader takes it, from the one
  body all readers hold, which the budget counts once, whole, while anyone
  reads it (:meth:`ExtenderWorker.hold_shared`). A verb's reply, which no one
  else holds, is written whole: the transport's copy of the remainder is then
  all that is held;
* a refusal's reply reaches its client: the server half-closes and reads and
  drops what the client still sends (up to the body limit, for
  ``linger_seconds``) before closing, since closing with unread bytes resets
  the connection and a reset can discard the reply (plain HTTP; TLS closes).

Used from the event loop's thread only.
"""

from __future__ import annotations

from asyncio import sslproto

import orjson
from gunicorn.asgi.protocol import ASGIProtocol

from extender.serving.budgets import BUSY, HANDSHAKE, IDLE, NEW

REFUSAL_HEAD = b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
READ_BYTES = 64 * 1024  # one read: all a connection holds uncounted (a pipelined tail; see _on_message_complete)
NEVER_PAUSE = 1 << 62
PUMP_BYTES = 1 << 20  # a reply body at least this large is handed over a slice at a time
SLICE_BYTES = 256 * 1024
REASONS = {400: b"Bad Request", 403: b"Forbidden", 404: b"Not Found", 413: b"Content Too Large",
           414: b"URI Too Long", 431: b"Request Header Fields Too Large", 500: b"Internal Server Error",
           501: b"Not Implemented", 503: b"Service Unavailable"}


def refusal(status: int, message: str) -> bytes:
    """A whole ``Connection: close`` reply carrying ``{"Error": message}``."""
    body = orjson.dumps({"Error": message})
    return REFUSAL_HEAD % (status, REASONS.get(status, b"Error"), len(body)) + body


class ExtenderProtocol(ASGIProtocol):
    """One client connection of one port (see module doc)."""

    def __init__(self, worker, port, app):
        super().__init__(worker)
        self.app = app  # the port's application (the probe port has its own)
        self.port = port
        self.limits = worker.limits
        self.raw_transport = None  # the TCP transport, while a TLS handshake runs
        self.admitted = False
        self.phase = NEW
        self.timer = None
        self.held = 0  # request bytes taken from worker.inflight
        self.request_bytes = 0  # this request's bytes as received, head and framing included
        self.pieces = 0  # body pieces the parser handed over
        self.decoded = 0  # body bytes in them
        self.refusing: tuple | None = None  # (status, message) decided inside a parser callback
        self.lingering = 0
        self.buffered = 0  # reply bytes the kernel has not taken, counted in worker.replies
        self.stalled_at = 0.0  # loop time since which the buffered bytes wait
        self.write_timer = None
        self.eof = False  # the client half-closed while its request was being answered
        self.error_sent = False  # gunicorn wrote a refusal: its close lingers
        self.close_after_reply = False  # the application's reply said Connection: close
        self.pumping: memoryview | None = None  # the part of a large body not yet handed to the transport
        self.pump_body: bytes | None = None  # that body, while it is pumped
        self.shared_reply = False  # the application says this request's reply body is shared (a cached page)
        self.transport_full = False  # the transport asked us to stop writing while we pump

    # -- accept, TLS, eviction -------------------------------------------------------
    def connection_made(self, transport):
        if not self.admitted:  # plain HTTP: admitted here; TLS: by TLSConnection at accept
            if not self.port.admit(self, NEW):
                transport.abort()
                return
            self.admitted = True
        self.raw_transport = None
        self.port.mark(self, NEW)
        super().connection_made(transport)
        transport.max_size = READ_BYTES  # asyncio's selector transport reads 256 KiB at a time otherwise
        self._max_buffer_size = READ_BYTES  # gunicorn's: body bytes held for the app before reading pauses
        # Never "paused": gunicorn would then hold the reply's bytes in its send() until the reader
        # took them, a second copy beside the transport's. What waits is counted in the worker's
        # reply budget and has the write deadline instead (_note_buffered, Worker.watch_stalled).
        transport.set_write_buffer_limits(high=NEVER_PAUSE)
        self._arm(NEW, self.limits.first_byte_seconds)

    def evict(self) -> None:
        """Close at once: the port needs room, or the server is stopping."""
        transport = self.transport or self.raw_transport
        if transport is not None:
            transport.abort()

    def close_if_idle(self) -> bool:
        """On shutdown: close a connection that is between requests (a FIN, not a reset)."""
        if self.phase in (NEW, IDLE) and self.transport is not None:
            self._close_transport()
            return True
        return False

    def connection_lost(self, exc):
        self._disarm()
        if self.write_timer is not None:
            self.write_timer.cancel()
        self._give_request()
        self._give_reply()
        if not self.admitted:
            return
        self.port.forget(self)
        if self.transport is not None:  # connection_made ran: gunicorn's bookkeeping too
            # Between requests no application call runs, yet gunicorn's connection task waits on an
            # event a lost connection never sets, and a 3 s timer (its disconnect grace period) holds
            # the connection until it cancels that task: at ~700 new connections a second ~2,100
            # connections' objects, +35 MiB (a flood of GET healthz at 5,000 nodes). An idle
            # connection's task is woken instead, as gunicorn's keep-alive timeout wakes it, and ends.
            idle, task = self.phase in (NEW, IDLE), self._task
            if idle:
                self._task = None  # no grace timer for it
            super().connection_lost(exc)
            if idle:
                self._task = task
                self._request_ready.set()

    # -- reading -----------------------------------------------------------------------
    def data_received(self, data):
        if self.lingering:
            self.lingering -= min(len(data), self.lingering)
            if not self.lingering:
                self.transport.close()
            return
        if self._closed:
            return
        n = len(data)
        if self.phase in (NEW, IDLE):
            self.phase = "head"
            self.port.mark(self, BUSY)
            self._arm("head", self.limits.header_seconds)
        self.request_bytes += n
        if not self.worker.inflight.take(n):
            self._refuse(503, "the server holds too many request bytes at once; retry")
            return
        self.held += n
        super().data_received(data)
        if self._closed:
            return
        if self.phase == "head" and self.request_bytes > self.limits.header_bytes:
            self._refuse(431, f"request head over {self.limits.header_bytes} bytes")
        elif self.request_bytes > self.limits.header_bytes + self.limits.body_bytes:
            self._refuse(413, f"request body over {self.limits.body_bytes} bytes")

    def _feed_callback_parser(self, data):
        """gunicorn's parse of what arrived (or of a pipelined tail), then any refusal a callback decided."""
        going = super()._feed_callback_parser(data)
        if self.refusing is not None:
            self._refuse(*self.refusing)
            return False
        return going

    def eof_received(self):
        """The client sent all it will: close, unless a whole request is being answered (then after its
        reply; a request whose head or body is still incomplete never will be)."""
        if self.lingering or self.phase != "handler" or self._closed:
            return False
        self.eof = True
        return True

    def _on_headers_complete(self):
        parser = self._callback_parser
        length = getattr(parser, "content_length", None)
        if isinstance(length, int) and length > self.limits.body_bytes:
            self.refusing = (413, f"request body of {length} bytes; the limit is {self.limits.body_bytes}")
            return False
        skip = super()._on_headers_complete()
        self.port.mark(self, BUSY)
        request = self._current_request
        if request.version >= (1, 1) and not any(name == b"host" for name, _ in request.headers_bytes):
            self.refusing = (400, "an HTTP/1.1 request must carry Host (RFC 9112, section 3.2)")
            return skip
        chunked = getattr(parser, "is_chunked", False)
        if chunked or (isinstance(length, int) and length > 0):
            self._arm("body", self.limits.body_seconds)
        else:
            self.phase = "handler"
            self._disarm()
        return skip

    def _on_body(self, chunk):
        if self.refusing is not None:
            return
        self.pieces += 1
        self.decoded += len(chunk)
        limits = self.limits
        if self.pieces > limits.small_pieces and self.decoded < self.pieces * limits.piece_bytes:
            self.refusing = (400, f"request body sent in {self.pieces} pieces averaging under "
                                  f"{limits.piece_bytes} bytes; send it in larger chunks")
            return
        super()._on_body(chunk)

    def _on_message_complete(self):
        """The request is whole: no more is read until it is answered (gunicorn's loop resumes reading),
        so a client that pipelines requests without reading replies holds at most one read of them."""
        super()._on_message_complete()
        if self.refusing is None:
            self.phase = "handler"
            self._disarm()
            self._pause_reading()

    async def _serve_http_request(self, request, sockname, peername):
        keepalive = await super()._serve_http_request(request, sockname, peername)
        self._give_request()
        self.request_bytes = self.pieces = self.decoded = 0
        self.shared_reply = False
        if self.eof or self.close_after_reply:
            self._close_transport()
            return False
        elif not self._closed and not self.lingering:
            self.phase = IDLE
            self.port.mark(self, IDLE)
            self._arm(IDLE, self.limits.idle_seconds)
        return keepalive

    def _build_http_scope(self, request, sockname, peername):
        scope = super()._build_http_scope(request, sockname, peername)
        scope["extensions"] = {**scope.get("extensions", {}), "cgpu.connection": self}
        return scope

    def _arm_keepalive_timer(self):
        """gunicorn's keep-alive timer: the idle deadline armed by :meth:`_serve_http_request` is this one."""

    # -- writing -------------------------------------------------------------------------
    def _safe_write(self, data):
        super()._safe_write(data)
        self._note_buffered()

    def _send_body(self, body, chunked=False, last=False, size=None):
        size = len(body) if size is None else size
        transport = self.transport
        if (not self.shared_reply or chunked or size < PUMP_BYTES or transport is None or transport.is_closing()
                or self.pump_body is not None):
            super()._send_body(body, chunked, last, size)
            self._note_buffered()
            return
        # gunicorn's send() waits (paused) until the pump has handed over the whole body
        view = memoryview(body)[:size]
        super()._send_body(bytes(view[:SLICE_BYTES]), False, last, SLICE_BYTES)
        self.pumping = view[SLICE_BYTES:]
        self.pump_body = body
        super().pause_writing()
        transport.set_write_buffer_limits(high=SLICE_BYTES, low=SLICE_BYTES // 2)
        self.worker.hold_shared(body)  # past the budget, this very connection may be shed (_end_pump)
        self._pump()

    def _pump(self) -> None:
        """Hand the transport slices of the body until it is full (it calls resume_writing when it
        has room again) or the body is all handed over."""
        transport = self.transport
        while self.pump_body is not None and not self.transport_full:
            if transport is None or transport.is_closing():
                self._end_pump()
                return
            piece, rest = self.pumping[:SLICE_BYTES], self.pumping[SLICE_BYTES:]
            self.pumping = rest if len(rest) else None
            try:
                transport.write(piece)
            except (OSError, RuntimeError):
                self.pumping = None
            if self.pumping is None:
                self._end_pump()
        self._note_buffered()

    def _end_pump(self) -> None:
        if self.pump_body is None:
            return
        self.worker.release_shared(self.pump_body)
        self.pump_body = self.pumping = None
        self.transport_full = False
        transport = self.transport
        if transport is not None and not transport.is_closing():
            transport.set_write_buffer_limits(high=NEVER_PAUSE)
        super().resume_writing()  # gunicorn's send() goes on

    def pause_writing(self):
        if self.pump_body is not None:
            self.transport_full = True
        else:
            super().pause_writing()

    def resume_writing(self):
        if self.pump_body is not None:
            self.transport_full = False
            self._pump()
        else:
            super().resume_writing()

    def _note_buffered(self) -> None:
        """Count what the transport holds for the reader in the worker's reply budget; arm the write
        deadline when it starts to hold some, disarm it when it holds none (called after each write,
        and by the worker for connections that hold some)."""
        transport = self.transport
        size = transport.get_write_buffer_size() if transport is not None and not transport.is_closing() else 0
        if size == self.buffered:
            return
        worker = self.worker
        if size and not self.buffered:
            self.stalled_at = worker.loop.time()
            worker.stalled.add(self)
            self.write_timer = worker.loop.call_later(self.limits.write_seconds, self.evict)
        elif not size:
            worker.stalled.discard(self)
            if self.write_timer is not None:
                self.write_timer.cancel()
                self.write_timer = None
        worker.replies.force(size - self.buffered)
        self.buffered = size
        if worker.replies.over:
            worker.shed_stalled_replies()

    def _give_reply(self) -> None:
        self._end_pump()
        if self.buffered:
            self.worker.replies.give(self.buffered)
            self.worker.stalled.discard(self)
            self.buffered = 0

    # -- refusing ------------------------------------------------------------------------
    def _refuse(self, status: int, message: str) -> None:
        """Answer a request that will not be read, then close (see module doc)."""
        self.refusing = None
        self._give_request()
        transport = self.transport
        if self._closed or transport is None or transport.is_closing():
            return
        if self._request_ready is not None:
            self._request_ready.set()  # gunicorn's loop sees _closed and ends
        transport.write(refusal(status, message))
        self._linger()

    def _send_error_response(self, status, message, extra_headers=()):
        """gunicorn's own refusals (what it cannot parse, an app that failed) in our JSON, and lingered on."""
        self._safe_write(refusal(status, f"{status} {REASONS.get(status, b'Error').decode()}: {message}"))
        self.error_sent = True

    def _close_transport(self):
        if self.error_sent and not self._closed and self.transport is not None:
            self._linger()
        else:
            super()._close_transport()

    def _linger(self) -> None:
        """Half-close and drop what the client still sends, so the reply just written is read, not reset."""
        self._closed = True  # gunicorn's loop and app calls end; the transport is ours to close
        if self._body_receiver is not None:  # an application reading the body learns it now
            self._body_receiver.signal_disconnect()
        self._disarm()
        transport = self.transport
        if not transport.can_write_eof():  # TLS: no half-close
            transport.close()
            return
        transport.write_eof()
        self.lingering = self.limits.body_bytes
        self.phase = "linger"
        self._arm("linger", self.limits.linger_seconds)
        if self._reading_paused:
            self._resume_reading()

    # -- deadlines and the request budget ---------------------------------------------------
    def _arm(self, phase: str, seconds: float) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.phase = phase
        self.timer = self.worker.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _expired(self) -> None:
        self.timer = None
        self.evict()

    def _give_request(self) -> None:
        if self.held:
            self.worker.inflight.give(self.held)
            self.held = 0


class TLSConnection(sslproto.SSLProtocol):
    """asyncio's TLS layer over one accepted TCP connection, counted by its port from accept.

    The port admits the connection (as ``handshake``, evicting the oldest
    handshake past :attr:`Limits.handshakes`) before any byte is read; the
    handshake has the first-byte deadline. The read buffer is 32 KiB (a TLS
    record is at most 16 KiB of payload) instead of 256 KiB, which asyncio
    allocates, zeroed, for every connection.
    """

    max_size = 32 * 1024

    def __init__(self, loop, app_protocol: ExtenderProtocol, context, seconds: float):
        super().__init__(loop, app_protocol, context, loop.create_future(), server_side=True,
                         ssl_handshake_timeout=seconds)
        self.app_protocol = app_protocol

    def connection_made(self, transport):
        app = self.app_protocol
        port = app.port
        port.make_room(HANDSHAKE, app.limits.handshakes)
        if not port.admit(app, HANDSHAKE):
            transport.abort()
            return
        app.admitted = True
        app.raw_transport = transport
        super().connection_made(transport)

    def connection_lost(self, exc):
        app = self.app_protocol
        if app.transport is None and app.admitted:  # lost before the handshake completed
            app.port.forget(app)
            app.admitted = False
        super().connection_lost(exc)
