"""What one worker may hold at once: limits, byte budgets, and the connections of each port.

Everything here is used from the event loop's thread only, so none of it locks.

* :class:`Limits` — every bound and deadline of the server, with its default.
* :class:`ByteBudget` — bytes held across all connections (request bytes as
  received, framing included; reply bytes not yet taken by the kernel).
* :class:`Port` — the connections of one listening port, counted from accept.
  At its limit a new connection evicts the port's oldest never-used
  connection, else its oldest idle one, else it is closed at once: a flood of
  connections that send nothing (or nothing more) cannot lock a working
  client out. Each port has its own limit, so the plain probe port can never
  take what the verb port needs.
* :func:`descriptor_limits` — raise the soft open-files limit to the hard one
  and fit the ports' limits below it, so the process never runs out of
  descriptors (``accept`` failing with ``EMFILE``) before a port reaches its limit.
"""

from __future__ import annotations

import resource
from collections import OrderedDict
from dataclasses import dataclass, replace

NEW, HANDSHAKE, IDLE, BUSY = "new", "handshake", "idle", "busy"  # a connection's state, for eviction


@dataclass(frozen=True)
class Limits:
    connections: int = 1024  # open connections on the verb port (kube-scheduler keeps a handful)
    probe_connections: int = 128  # open connections on the plain probe port
    handshakes: int = 64  # TLS handshakes in progress at once; more evict the oldest
    header_bytes: int = 64 * 1024  # a request's line and headers (431 beyond)
    body_bytes: int = 64 * 2**20  # one request's body as sent, framing included (413 beyond)
    inflight_bytes: int = 96 * 2**20  # request bytes held at once, all connections (503 beyond)
    reply_bytes: int = 48 * 2**20  # reply bytes waiting for slow readers, all connections
    small_pieces: int = 1024  # body pieces a request may send before they must average piece_bytes
    piece_bytes: int = 256
    first_byte_seconds: float = 10.0  # a new connection, until its first byte (or its TLS handshake)
    header_seconds: float = 10.0  # from a request's first byte to the end of its head
    body_seconds: float = 30.0  # from the end of the head to the end of the body
    idle_seconds: float = 75.0  # a keep-alive connection between requests
    write_seconds: float = 30.0  # a reply waiting for its reader, from when the kernel would take no more
    linger_seconds: float = 2.0  # after a refusal, what the client still sends is read and dropped
    inline_body_bytes: int = 2**20  # largest filter/prioritize body answered in the loop's thread

    def for_body(self, body_bytes: int) -> "Limits":
        """These limits with ``body_bytes`` (``--max-body-bytes``); the in-flight budget keeps room for one such body."""
        return replace(self, body_bytes=body_bytes, inflight_bytes=max(self.inflight_bytes, body_bytes + self.header_bytes))


class ByteBudget:
    """Bytes held across connections, against a limit."""

    __slots__ = ("limit", "used")

    def __init__(self, limit: int):
        self.limit, self.used = limit, 0

    def take(self, n: int) -> bool:
        """Take ``n`` bytes; False (nothing taken) when that would pass the limit."""
        if self.used + n > self.limit:
            return False
        self.used += n
        return True

    def force(self, n: int) -> None:
        """Count ``n`` bytes that are held already, whatever the limit."""
        self.used += n

    def give(self, n: int) -> None:
        self.used -= n

    @property
    def over(self) -> bool:
        return self.used > self.limit


class Port:
    """The connections of one listening port, oldest first within each state.

    A connection is any object with ``evict()``; the port only orders and counts them.
    """

    def __init__(self, name: str, limit: int):
        self.name, self.limit = name, limit
        self._by_state = {state: OrderedDict() for state in (NEW, HANDSHAKE, IDLE, BUSY)}
        self._state: dict = {}
        self.evicted = 0  # connections closed to make room, since start
        self.refused = 0  # connections closed at accept: the port was full of busy ones

    def __len__(self) -> int:
        return len(self._state)

    def count(self, state: str) -> int:
        return len(self._by_state[state])

    def admit(self, connection, state: str = NEW) -> bool:
        """Count a connection just accepted, evicting another if the port is full; False: close it."""
        if len(self._state) >= self.limit and not self._evict_one():
            self.refused += 1
            return False
        self._set(connection, state)
        return True

    def make_room(self, state: str, limit: int) -> bool:
        """Keep at most ``limit - 1`` connections in ``state`` (evicting the oldest); False if none may go."""
        group = self._by_state[state]
        while len(group) >= limit:
            oldest = next(iter(group))
            self.forget(oldest)
            self.evicted += 1
            oldest.evict()
        return True

    def mark(self, connection, state: str) -> None:
        if connection in self._state:
            self._set(connection, state)

    def forget(self, connection) -> None:
        state = self._state.pop(connection, None)
        if state is not None:
            del self._by_state[state][connection]

    def connections(self, *states: str) -> list:
        return [c for state in states for c in self._by_state[state]]

    def _set(self, connection, state: str) -> None:
        old = self._state.get(connection)
        if old is not None:
            del self._by_state[old][connection]
        self._state[connection] = state
        self._by_state[state][connection] = None

    def _evict_one(self) -> bool:
        for state in (NEW, HANDSHAKE, IDLE):  # never-used first, then handshakes in progress, then idle
            group = self._by_state[state]
            if group:
                oldest = next(iter(group))
                self.forget(oldest)
                self.evicted += 1
                oldest.evict()
                return True
        return False


ACCEPT_BATCH = 64  # connections asyncio accepts in a row before any is admitted (each holds a descriptor)
RESERVED_DESCRIPTORS = 128 + 2 * ACCEPT_BATCH  # what is not an admitted client: a batch per port being
# accepted, API connections, watches, files, pipes


def descriptor_limits(limits: Limits) -> tuple[Limits, int]:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit, and the ports' limits fitted below it.

    Returns the limits to serve with (the verb port's, then the probe port's
    limit lowered if the descriptors cannot hold both) and the soft limit now
    in force.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    room = max(soft - RESERVED_DESCRIPTORS, 2)
    probe = min(limits.probe_connections, max(room // 8, 1))
    verb = min(limits.connections, max(room - probe, 1))
    return replace(limits, connections=verb, probe_connections=probe), soft
