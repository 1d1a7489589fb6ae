"""List, then watch, one kind of Kubernetes object, and keep doing it.

A :class:`Reflector` runs in its own thread. Contract:

* it lists the objects in pages of ``page_size`` (one consistent read at
  the first page's resourceVersion; an expired continue token lists again),
  hands every listed object to ``on_upsert`` page by page, and hands
  ``on_delete`` every key it held before that the list no longer has; only
  then is it ``synced`` (and it stays synced: a later outage leaves the view
  stale, not empty);
* it keeps, per key, only ``keep(obj)`` (by default the whole object): a
  cluster of 100,000 pods must not be held twice in memory;
* it then watches from the list's resourceVersion, applying ``ADDED`` and
  ``MODIFIED`` through ``on_upsert`` and ``DELETED`` through ``on_delete``,
  remembering the resourceVersion of every event (``BOOKMARK`` too);
* a watch that ends is resumed from the last resourceVersion; ``410 Gone``
  (as a status or as an ``ERROR`` event) starts over with a list; any other
  failure (connection refused, stream cut mid-event, 5xx) waits an
  exponential backoff with jitter and retries;
* callbacks run on this thread, one at a time, in the order of the events;
  a callback that raises is logged and counted (``handler_errors``) and the
  object skipped, so one odd object cannot stall the stream;
* ``resource_version`` is set only after every event up to it (or the whole
  list at it) has been handed on: another thread that reads it knows the
  callbacks have seen at least that much;
* :meth:`relist` (any thread) ends the current watch and lists again at
  once; :meth:`listed_since` tells when a list started after that call has
  completed (a new leader's catch-up: extender.cluster.kube.catchup).
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass

import orjson

from extender.logs import fields, get_logger

GONE = 410


class Gone(Exception):
    """The resourceVersion to watch from is no longer available: list again."""


@dataclass
class Backoff:
    initial: float = 0.5  # seconds before the first retry
    maximum: float = 30.0
    factor: float = 2.0
    jitter: float = 0.2  # each delay is stretched by up to this fraction

    def delays(self):
        delay = self.initial
        while True:
            yield delay * (1 + random.random() * self.jitter)
            delay = min(delay * self.factor, self.maximum)


def iter_lines(response):
    """Complete lines of a streamed HTTP body; a trailing partial line is not a line."""
    buffer = b""
    for chunk in response.stream(amt=None, decode_content=False):
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        yield from (line for line in lines if line.strip())


def api_status(exc) -> int | None:
    """The HTTP status of a client ``ApiException``; None for other errors."""
    value = getattr(exc, "status", None)
    return value if isinstance(value, int) and value > 0 else None


class Reflector:
    def __init__(self, name: str, lister, key, on_upsert, on_delete, *, backoff: Backoff | None = None,
                 watch_timeout: int = 300, connect_timeout: float = 5.0, before_list=None, transform=None,
                 keep=None, page_size: int = 500):
        """``lister(**kwargs)`` is a generated list call (e.g. ``CoreV1Api.list_node``);
        ``key(obj)`` names an object; ``before_list()`` may return extra keys the
        caller holds, which count as "held before" when the next list completes;
        ``transform(obj)`` trims an object before it is handed on; ``keep(obj)``
        is what the store holds for it."""
        self.name = name
        self._lister = lister
        self._key = key
        self._on_upsert = on_upsert
        self._on_delete = on_delete
        self._before_list = before_list
        self._transform = transform or (lambda obj: obj)
        self._keep = keep or (lambda obj: obj)
        self.page_size = page_size
        self.backoff = backoff or Backoff()
        self.watch_timeout = watch_timeout
        self.connect_timeout = connect_timeout
        self.store: dict = {}
        self.resource_version: str | None = None
        self.synced = threading.Event()
        self.stats = {"lists": 0, "watches": 0, "events": 0, "gone": 0, "errors": 0, "handler_errors": 0}
        self._stop = threading.Event()
        self._relist = threading.Event()
        self._lists_started = 0  # lists begun; the number of the last completed one is _listed
        self._listed = 0
        self._response = None
        self._thread: threading.Thread | None = None
        self.log = get_logger()

    # -- lifecycle ----------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name=f"reflector-{self.name}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._interrupt()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def relist(self) -> int:
        """End the current watch and list again now; returns a ticket for :meth:`listed_since`."""
        ticket = self._lists_started + 1  # the list the flag below starts is this one or a later one
        self._relist.set()
        self._interrupt()
        return ticket

    def listed_since(self, ticket: int) -> bool:
        """True once the list of :meth:`relist`'s ``ticket`` (or a later one) has completed."""
        return self._listed >= ticket

    def _interrupt(self) -> None:
        """Close the open watch's response, if any (its read then fails or ends)."""
        response = self._response
        if response is not None:
            shutdown = getattr(response, "shutdown", None)  # urllib3 >= 2.3 interrupts a blocked read
            try:
                (shutdown or response.close)()
            except Exception:  # noqa: BLE001 - best effort: the watch ends by itself at its timeout
                pass

    # -- the loop -------------------------------------------------------------------
    def run(self) -> None:
        delays = self.backoff.delays()
        must_list = True
        while not self._stop.is_set():
            try:
                if self._relist.is_set():
                    self._relist.clear()
                    must_list = True  # kept until a list completes: a failed one is retried
                if must_list:
                    self._list()
                    must_list = False
                    delays = self.backoff.delays()
                if self._watch():
                    delays = self.backoff.delays()  # the watch delivered: the API is healthy
            except Gone:
                self.stats["gone"] += 1
                self.log.info("watch expired; listing again", extra=fields(resource=self.name))
                must_list = True
            except Exception as exc:  # noqa: BLE001 - every failure is retried; the reason is logged
                if self._stop.is_set():
                    break
                if self._relist.is_set():
                    continue  # relist() cut the watch: list now
                if api_status(exc) == GONE:
                    self.stats["gone"] += 1
                    must_list = True
                    continue
                self.stats["errors"] += 1
                delay = next(delays)
                self.log.warning("list/watch failed; retrying", extra=fields(
                    resource=self.name, error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}",
                    retry_in=round(delay, 3), synced=self.synced.is_set()))
                self._stop.wait(delay)

    def _list(self) -> None:
        self._lists_started += 1
        number = self._lists_started
        held = set(self._before_list()) if self._before_list else set()
        fresh = {}
        token = None
        while True:
            options = {"limit": self.page_size, "_preload_content": False,
                       "_request_timeout": (self.connect_timeout, 60)}
            if token:
                options["_continue"] = token
            response = self._lister(**options)
            try:
                body = orjson.loads(response.data)
            finally:
                response.release_conn()
            for obj in body.get("items") or []:
                obj = self._transform(obj)
                fresh[self._key(obj)] = self._keep(obj)
                self._handle(self._on_upsert, obj)
            meta = body.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                break
        for key in (set(self.store) | held) - set(fresh):
            self._handle(self._on_delete, key, self.store.get(key))
        self.store = fresh
        self.resource_version = meta.get("resourceVersion")
        self._listed = number
        self.stats["lists"] += 1
        if not self.synced.is_set():
            self.log.info("synced", extra=fields(resource=self.name, objects=len(fresh),
                                                 resource_version=self.resource_version))
        self.synced.set()

    def _watch(self) -> bool:
        """One watch request, to its end; True if it delivered anything."""
        self.stats["watches"] += 1
        response = self._lister(
            watch=True, resource_version=self.resource_version, allow_watch_bookmarks=True,
            timeout_seconds=self.watch_timeout, _preload_content=False,
            _request_timeout=(self.connect_timeout, self.watch_timeout + 30))
        self._response = response
        delivered = False
        try:
            if self._stop.is_set() or self._relist.is_set():  # stop() or relist() ran while it was being made
                return False
            for line in iter_lines(response):
                if self._stop.is_set() or self._relist.is_set():
                    break
                self._apply(orjson.loads(line))
                delivered = True
        finally:
            self._response = None
            response.release_conn()
        return delivered

    def _handle(self, callback, *args) -> None:
        try:
            callback(*args)
        except Exception as exc:  # noqa: BLE001 - see module doc
            self.stats["handler_errors"] += 1
            obj = args[-1] if isinstance(args[-1], dict) else {}
            self.log.error("could not apply an object", exc_info=exc, extra=fields(
                resource=self.name, object=(obj.get("metadata") or {}).get("name")))

    def _apply(self, event: dict) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            obj = self._transform(obj)
        if kind == "ERROR":
            if obj.get("code") == GONE:
                raise Gone(obj.get("message", ""))
            raise RuntimeError(f"watch error {obj.get('code')}: {obj.get('message')}")
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if kind in ("ADDED", "MODIFIED"):
            self.store[self._key(obj)] = self._keep(obj)
            self._handle(self._on_upsert, obj)
        elif kind == "DELETED":
            key = self._key(obj)
            self.store.pop(key, None)
            self._handle(self._on_delete, key, obj)
        elif kind != "BOOKMARK":
            return
        self.stats["events"] += 1
        if version:
            self.resource_version = version
