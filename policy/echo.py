"""User strings in messages, cut to a bounded length.

A reason or error that quotes what the client sent (a quantity, a container
name, a label value) quotes at most :data:`LIMIT` characters of it, so a reply
stays a small multiple of the node list however large the strings in the pod.
"""

from __future__ import annotations

LIMIT = 64


def shown(value: object, limit: int = LIMIT) -> str:
    """``repr(value)``, its middle replaced by ``…(N chars)…`` when longer than ``limit``."""
    if isinstance(value, (str, bytes)) and len(value) > limit:
        half = limit // 2
        return f"{value[:half]!r}…({len(value)} chars)…{value[-half // 2:]!r}"
    if isinstance(value, (list, dict, tuple)):
        text = f"a JSON {'object' if isinstance(value, dict) else 'array'} of {len(value)}"
        return text
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}…({len(text)} chars)"
