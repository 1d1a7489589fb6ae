"""Objects the extender could not read: the latest few, for inspect and the log.

A pod or node with a field of the wrong type, a value out of any node's range
or no name is skipped (or held back, if it is a bound shared-GPU pod) and
noted here, never a reason to stop. At most :data:`MAX_MALFORMED` are kept,
the latest last; noting an object again moves it to the end.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from extender.logs import fields, get_logger

MAX_MALFORMED = 1000


class MalformedObjects:
    def __init__(self, size: int = MAX_MALFORMED):
        self._size = size
        self._items: OrderedDict = OrderedDict()  # (kind, name) → problem
        self._lock = threading.Lock()

    def note(self, kind: str, item, problem: str) -> None:
        meta = item.get("metadata") if isinstance(item, dict) else None
        meta = meta if isinstance(meta, dict) else {}
        name = "/".join(v for v in (meta.get("namespace"), meta.get("name")) if isinstance(v, str)) or "?"
        key = (kind, name[:253])
        with self._lock:
            self._items.pop(key, None)
            self._items[key] = problem
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        get_logger().warning("malformed object skipped", extra=fields(kind=kind, name=key[1], problem=problem))

    def listed(self) -> list:
        """``[{"kind", "name", "problem"}, ...]``, latest last."""
        with self._lock:
            return [{"kind": k, "name": n, "problem": p} for (k, n), p in self._items.items()]
