"""Operators' heavy reads rendered once for everyone who asks at the same time.

``metrics``, ``inspect`` and ``plan`` walk every node: at 5,000 nodes a
metrics scrape is ~12 MB and ~0.8 s of CPU. Twelve clients looping on it kept
a core busy and slowed binds past kube-scheduler's timeout. :class:`RenderCache`
makes each such read single-flight (a request arriving while the same view
is being rendered waits for that render instead of starting another) and
keeps the rendered bytes for ``ttl`` seconds while what they show is
unchanged (its ``version``), so however many clients ask, a view of an
unchanged cluster is rendered at most once per ``ttl`` plus its own render
time, and a change is seen at once. Renders of different keys take turns:
each holds its view's objects and pieces while it runs (at 5,000 nodes ~36
MB for metrics, ~53 MB for inspect), and two at once made a flood of
readers of both pages cost their sum.

Keys are a small fixed set chosen by the caller (a route and its negotiated
format), never raw request values. Thread-safe.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Hashable


class _Entry:
    __slots__ = ("done", "value", "error", "at", "version")

    def __init__(self, version):
        self.version = version
        self.done = threading.Event()
        self.value = None
        self.error: BaseException | None = None
        self.at = 0.0


class RenderCache:
    def __init__(self, ttl: float = 1.0, clock: Callable[[], float] = time.monotonic):
        self.ttl, self._clock = ttl, clock
        self._entries: dict[Hashable, _Entry] = {}
        self._lock = threading.Lock()
        self._rendering = threading.Lock()
        self.renders = 0  # renders done, since start (for tests and metrics)

    def get(self, key: Hashable, render: Callable[[], object], version: Hashable = None):
        """The value ``render()`` gave for ``key`` less than ``ttl`` ago at this ``version`` (of what it
        reads: a change since makes it stale at once), or the one being rendered now, or a new one.
        A render that raised is raised to everyone who waited for it, and not kept."""
        with self._lock:
            entry = self._entries.get(key)
            fresh = entry is not None and (not entry.done.is_set()
                                           or (entry.version == version and self._clock() - entry.at < self.ttl))
            if not fresh:
                entry = self._entries[key] = _Entry(version)
                mine = True
            else:
                mine = False
        if not mine:
            entry.done.wait()
            if entry.error is not None:
                raise entry.error
            return entry.value
        try:
            with self._rendering:  # one render at a time, whatever the key (see module doc)
                entry.value = render()
            self.renders += 1
        except BaseException as exc:
            entry.error = exc
            with self._lock:
                if self._entries.get(key) is entry:
                    del self._entries[key]
            raise
        finally:
            entry.at = self._clock()
            entry.done.set()
        return entry.value
