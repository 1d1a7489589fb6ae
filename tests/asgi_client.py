"""Call an ASGI application in-process: one request, its whole reply (for unit tests of extender.serving.asgi)."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit


def asgi_call(app, method: str, target: str, body: bytes = b"", headers: dict | None = None) -> tuple:
    """``(status, {header name: value}, body)`` of ``app``'s reply, names lower case, all bytes."""
    url = urlsplit(target)
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
             "scheme": "http", "path": url.path, "raw_path": url.path.encode(), "query_string": url.query.encode(),
             "root_path": "", "server": ("127.0.0.1", 32766), "client": ("127.0.0.1", 40000),
             "headers": [(k.lower().encode("latin-1"), v.encode("latin-1"))
                         for k, v in {"Content-Length": str(len(body)), **(headers or {})}.items()]}
    sent = {"status": None, "headers": {}, "body": b""}
    pieces = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive():
        if pieces:
            return pieces.pop()
        await asyncio.sleep(3600)

    async def send(message):
        if message["type"] == "http.response.start":
            sent["status"] = message["status"]
            sent["headers"] = {bytes(k).lower(): bytes(v) for k, v in message.get("headers", [])}
        elif message["type"] == "http.response.body":
            sent["body"] += message.get("body", b"")

    asyncio.run(app(scope, receive, send))
    return sent["status"], sent["headers"], sent["body"]
