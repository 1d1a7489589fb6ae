"""The TLS files ``serve`` is given, checked before gunicorn starts (a clear line, not a worker that fails to boot)."""

from __future__ import annotations

import ssl


def check_tls_files(cert: str, key: str, client_ca: str | None = None) -> None:
    """Load the certificate, its key and the client CA as the server will; OSError or ValueError if unusable."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    if client_ca:
        context.load_verify_locations(client_ca)
