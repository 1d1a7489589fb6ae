"""HTTP/1.1 requests read from bytes as they arrive: strict, bounded, no I/O.

:class:`RequestParser` is fed what a connection receives (:meth:`~RequestParser.feed`)
and gives back whole :class:`Request` objects, one at a time, or raises
:class:`BadRequest` with the status to answer and why; after a request it reads
on (keep-alive, pipelining) from the bytes it kept. It reads what RFC 9112 asks
a server to read, and refuses what smuggling or a careless client could make
ambiguous rather than guess:

* request line ``METHOD SP target SP HTTP/1.x``; another HTTP version is 505,
  anything else 400; empty lines before it are skipped;
* header fields ``name: value`` (a token name, a value without control
  characters), each line ending CRLF; a folded line is 400; HTTP/1.1 needs one
  ``Host``;
* the head is at most ``header_bytes`` (431);
* a body by ``Content-Length`` (digits; repeated only with one value, else
  400; above ``body_bytes`` 413 before any of it is read) or
  ``Transfer-Encoding: chunked`` (hex sizes, extensions and trailers skipped;
  413 as soon as the chunks pass ``body_bytes``); another transfer coding is
  501, both framings at once 400; neither means no body.

Header names are given lower case, values as sent with outer blanks removed.
It replaced h11 in the server for cost: one request's parse and reply through
h11 took ~100 µs of CPU on a 2-core VM, a fifth of a small request's cost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_TARGET = re.compile(rb"[\x21-\x7e\x80-\xff]+")
_VERSION = re.compile(rb"HTTP/([0-9])\.([0-9])")
_CONTROL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
_DIGITS = re.compile(rb"[0-9]+")
CHUNK_LINE_BYTES = 4096  # a chunk-size line with its extensions


class BadRequest(Exception):
    """What cannot be read as a request: answer ``status`` with ``message``, then close."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


@dataclass
class Request:
    method: bytes
    target: bytes
    version: bytes  # b"1.1" or b"1.0"
    headers: list = field(default_factory=list)  # [(lower-case name, value)], in order
    body: bytes = b""
    keep_alive: bool = True  # HTTP/1.1 without "Connection: close"
    expects_continue: bool = False  # "Expect: 100-continue"

    @property
    def path(self) -> bytes:
        return self.target.partition(b"?")[0]


class RequestParser:
    """Requests from a byte stream (see module doc). Not thread-safe: one per connection."""

    def __init__(self, header_bytes: int, body_bytes: int):
        self.header_bytes, self.body_bytes = header_bytes, body_bytes
        self._buffer = bytearray()
        self._head: Request | None = None  # read, its body not yet whole
        self._length = 0  # Content-Length of the body being read
        self._chunked = False
        self._chunks: list[bytes] = []
        self._received = 0  # body bytes read so far (chunked: decoded)
        self._chunk_left: int | None = None  # bytes left in the current chunk; None: a size line is next
        self._trailer = False
        self._scanned = 0  # bytes at the buffer's start already searched for the line end sought

    # -- what the connection asks ------------------------------------------------
    def feed(self, data: bytes) -> None:
        self._buffer += data

    @property
    def pending(self) -> int:
        """Bytes received and not yet part of a request given out."""
        return len(self._buffer)

    @property
    def body_buffered(self) -> int:
        """Bytes of the current request's body received so far (0 before its head is whole)."""
        if self._head is None:
            return 0
        if self._chunked:
            return min(self._received + len(self._buffer), self.body_bytes)
        return min(len(self._buffer), self._length)

    @property
    def in_head(self) -> bool:
        """True while no head has been read whole (the next request's head may have begun)."""
        return self._head is None

    @property
    def started(self) -> bool:
        """True once any byte of the next request is here."""
        return self._head is not None or bool(self._buffer)

    def head(self) -> Request | None:
        """The head being read, once whole (its body may not be)."""
        if self._head is None:
            self._read_head()
        return self._head

    def next(self) -> Request | None:
        """The next whole request, or None until more bytes come; :class:`BadRequest` if none can be read."""
        request = self.head()
        if request is None:
            return None
        body = self._read_chunked() if self._chunked else self._read_length()
        if body is None:
            return None
        request.body = body
        self._head = None
        return request

    # -- the head -------------------------------------------------------------------
    def _read_head(self) -> None:
        buffer = self._buffer
        while buffer[:2] == b"\r\n":  # RFC 9112 2.2: blank lines before a request line are ignored
            del buffer[:2]
            self._scanned = 0
        end = self._find(b"\r\n\r\n", self.header_bytes + 4)
        if end < 0:
            if len(buffer) > self.header_bytes:
                raise BadRequest(431, f"request line and headers are longer than the limit "
                                      f"({self.header_bytes} bytes)")
            return
        lines = bytes(buffer[:end]).split(b"\r\n")
        del buffer[:end + 4]
        request = self._request_line(lines[0])
        host = 0
        lengths, codings, connection = set(), [], []
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            if not colon or not _TOKEN.fullmatch(name):
                raise BadRequest(400, "malformed header line" if line[:1] not in (b" ", b"\t")
                                 else "folded header lines are not accepted")
            value = value.strip(b" \t")
            if _CONTROL.search(value):
                raise BadRequest(400, f"header {_shown(name)} has a control character")
            name = name.lower()
            request.headers.append((name, value))
            if name == b"host":
                host += 1
            elif name == b"content-length":
                for part in value.split(b","):
                    if not _DIGITS.fullmatch(part.strip(b" \t")):
                        raise BadRequest(400, "Content-Length is not a number")
                    lengths.add(int(part))
            elif name == b"transfer-encoding":
                codings += [c.strip(b" \t").lower() for c in value.split(b",")]
            elif name == b"connection":
                connection += [c.strip(b" \t").lower() for c in value.split(b",")]
            elif name == b"expect" and value.lower() == b"100-continue":
                request.expects_continue = request.version == b"1.1"
        if request.version == b"1.1" and host != 1:
            raise BadRequest(400, "an HTTP/1.1 request needs exactly one Host header")
        if len(lengths) > 1:
            raise BadRequest(400, "Content-Length given more than once, with different values")
        if codings and lengths:
            raise BadRequest(400, "both Content-Length and Transfer-Encoding: one framing only")
        if codings and codings != [b"chunked"]:
            raise BadRequest(501, "Transfer-Encoding other than chunked is not supported")
        self._chunked = bool(codings)
        self._length = lengths.pop() if lengths else 0
        if self._length > self.body_bytes:
            raise BadRequest(413, f"request body of {self._length} bytes is larger than the limit "
                                  f"({self.body_bytes} bytes)")
        request.keep_alive = request.version == b"1.1" and b"close" not in connection
        self._received, self._chunks, self._chunk_left, self._trailer = 0, [], None, False
        self._head = request

    def _find(self, end: bytes, within: int) -> int:
        """Where ``end`` starts in the buffer's first ``within`` bytes, or -1; bytes searched once
        are not searched again when more arrive (a head sent a byte at a time costs its length,
        not its square). The caller consumes through the end it found."""
        buffer = self._buffer
        at = buffer.find(end, max(0, self._scanned - len(end) + 1), within)
        self._scanned = 0 if at >= 0 else min(len(buffer), within)
        return at

    @staticmethod
    def _request_line(line: bytes) -> Request:
        parts = line.split(b" ")
        if len(parts) != 3:
            raise BadRequest(400, "malformed request line")
        method, target, version = parts
        if not _TOKEN.fullmatch(method) or not _TARGET.fullmatch(target):
            raise BadRequest(400, "malformed request line")
        match = _VERSION.fullmatch(version)
        if match is None:
            raise BadRequest(400, "malformed request line")
        if match.group(1) != b"1":
            raise BadRequest(505, f"HTTP/{version[5:].decode('ascii')} is not served: HTTP/1.1 only")
        return Request(method, target, version[5:])

    # -- the body -------------------------------------------------------------------
    def _read_length(self) -> bytes | None:
        if len(self._buffer) < self._length:
            return None
        body = bytes(self._buffer[:self._length])
        del self._buffer[:self._length]
        return body

    def _read_chunked(self) -> bytes | None:
        buffer = self._buffer
        while True:
            if self._trailer:  # trailer fields, skipped, up to the empty line
                end = self._find(b"\r\n", CHUNK_LINE_BYTES)
                if end < 0:
                    if len(buffer) > CHUNK_LINE_BYTES:
                        raise BadRequest(400, "chunked trailer line is too long")
                    return None
                line = bytes(buffer[:end])
                del buffer[:end + 2]
                if not line:
                    return b"".join(self._chunks)
                continue
            if self._chunk_left is None:  # a chunk-size line
                end = self._find(b"\r\n", CHUNK_LINE_BYTES)
                if end < 0:
                    if len(buffer) > CHUNK_LINE_BYTES:
                        raise BadRequest(400, "chunk size line is too long")
                    return None
                size = bytes(buffer[:end]).partition(b";")[0].strip(b" \t")
                if not _HEX.fullmatch(size):
                    raise BadRequest(400, "bad chunk size")
                del buffer[:end + 2]
                size = int(size, 16)
                if size == 0:
                    self._trailer = True
                    continue
                if self._received + size > self.body_bytes:
                    raise BadRequest(413, f"request body is larger than the limit ({self.body_bytes} bytes)")
                self._chunk_left = size
                continue
            if self._chunk_left:  # the chunk's data
                part = bytes(buffer[:self._chunk_left])
                if not part:
                    return None
                del buffer[:len(part)]
                self._chunks.append(part)
                self._received += len(part)
                self._chunk_left -= len(part)
                continue
            if len(buffer) < 2:  # the CRLF after the data
                return None
            if buffer[:2] != b"\r\n":
                raise BadRequest(400, "chunk data is not followed by CRLF")
            del buffer[:2]
            self._chunk_left = None


def _shown(name: bytes) -> str:
    return name[:64].decode("latin-1")
