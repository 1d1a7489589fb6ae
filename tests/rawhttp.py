"""HTTP/1.1 by hand on a socket, for tests that need what a client library hides: pipelining,
partial writes, slow reading."""

from __future__ import annotations

import socket
import time


def raw_request(method: str, target: str, body: bytes = b"", extra: bytes = b"") -> bytes:
    """A whole request with a JSON ``body``; ``extra``: more header lines, each ending in CRLF."""
    return (b"%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n"
            % (method.encode(), target.encode(), len(body), extra)) + body


def replies(sock: socket.socket, count: int, piece: int = 65536, pause: float = 0.0) -> list:
    """``count`` replies read off ``sock``, ``piece`` bytes a read, ``pause`` seconds after each:
    ``[(status, headers dict, body)]``; fewer if the server closes first."""
    data, out = b"", []
    while len(out) < count:
        head_end = data.find(b"\r\n\r\n")
        if head_end >= 0:
            lines = data[:head_end].split(b"\r\n")
            headers = {name.lower(): value for name, value in (line.split(b": ", 1) for line in lines[1:])}
            length = int(headers.get(b"content-length", b"0"))
            if len(data) >= head_end + 4 + length:
                out.append((int(lines[0].split()[1]), headers, data[head_end + 4:head_end + 4 + length]))
                data = data[head_end + 4 + length:]
                continue
        chunk = sock.recv(piece)
        if not chunk:
            break
        data += chunk
        time.sleep(pause)
    return out
