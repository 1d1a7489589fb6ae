"""Which replica answers the verbs: the leadership state one election thread writes and every request reads.

With leader election (``serve --leader-elect``, :mod:`extender.cluster.kube.election`;
or ``--leader-elect-follow``, :mod:`extender.cluster.kube.follow`) every replica keeps
its ledger synced from the watch, and only the one holding the lease answers
filter, prioritize, preempt and bind. :class:`Leadership` is that replica's
view of its own role. Contract:

* roles: ``standby`` (another replica holds the lease, or none does),
  ``catching-up`` (this replica holds the lease but its view may still miss
  binds the previous leader made: :mod:`extender.cluster.kube.catchup`), ``leader``;
* the election thread extends the lease's hold to ``until``, a time on
  :func:`clock` (the send time of the last successful renewal plus the renew
  deadline): the replica serves only while ``leader`` and ``clock() < until``,
  read at every call, so it stops on time even when the election thread
  itself is stalled (a hung request, a paused process);
* :meth:`check` is called right before a write that allocates (the
  Binding, an annotation patch) and raises :class:`~extender.cluster.base.NotLeading`
  when the replica may not write; :meth:`writing` also counts writes in
  flight, so that a leader releasing its lease first waits for them;
* every change of role is logged (one JSON line) and counted per new role;
  the state is read under one lock (the request threads and the election
  thread share it).

Imports: :mod:`extender.cluster.base` (the error type) and :mod:`extender.logs` only.
"""

from __future__ import annotations

import math
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass

from extender.cluster.base import NotLeading
from extender.logs import fields, get_logger

STANDBY, CATCHING_UP, LEADER = "standby", "catching-up", "leader"
ROLES = (STANDBY, CATCHING_UP, LEADER)

_BOOTTIME = getattr(time, "CLOCK_BOOTTIME", None)


def clock() -> float:
    """Seconds on a clock that never goes back and, on Linux, keeps counting while the machine is
    suspended (``CLOCK_BOOTTIME``; ``CLOCK_MONOTONIC`` stops then, and a node resumed from a
    suspension would think its lease younger than it is). Elsewhere :func:`time.monotonic`."""
    return time.clock_gettime(_BOOTTIME) if _BOOTTIME is not None else time.monotonic()


@dataclass(frozen=True)
class ElectionSettings:
    """``serve --leader-elect*``: kube-scheduler's flags and meanings (seconds here)."""

    lease_duration: float = 15.0  # a candidate waits this long after the lease last changed
    renew_deadline: float = 10.0  # a leader stops this long after it sent its last successful renewal
    retry_period: float = 2.0  # between tries (renewals, takeover attempts, follow-mode reads)
    name: str = "cgpu-extender"  # the Lease
    namespace: str = "kube-system"
    identity: str = ""  # this replica's holderIdentity (<pod name>_<uuid>)
    follow: bool = False  # do not campaign: follow the named Lease (kube-scheduler's)

    @property
    def lease(self) -> str:
        return f"{self.namespace}/{self.name}"

    def lease_seconds(self) -> int:
        """``spec.leaseDurationSeconds`` written on the Lease (whole seconds, never shorter than ours)."""
        return max(1, math.ceil(self.lease_duration))


class Leadership:
    """One replica's role (see module doc)."""

    def __init__(self, identity: str, lease: str, clock=clock):
        self.identity = identity
        self.lease = lease
        self._clock = clock
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)  # notified when the last write in flight ends
        self._role = STANDBY
        self._until = -math.inf
        self._term = 0  # counts acquisitions: a catch-up finishes only the term it was started for
        self._leader = ""  # the holder last seen on the lease ("" when none)
        self._writes = 0
        self._transitions = dict.fromkeys(ROLES, 0)
        self.log = get_logger()

    # -- read by every request ---------------------------------------------------------
    def _serving(self) -> bool:
        return self._role == LEADER and self._clock() < self._until

    def serving(self) -> bool:
        """True while this replica may answer the verbs and write bindings."""
        with self._lock:
            return self._serving()

    def refusal(self) -> str | None:
        """None while serving; else the reply's ``Error``: why this replica does not answer."""
        with self._lock:
            if self._serving():
                return None
            return self._why()

    def _why(self) -> str:
        if self._role != STANDBY and self._clock() >= self._until:
            return ("this replica is no longer the leader: it could not renew its lease in time "
                    f"(lease {self.lease}); retry shortly")
        if self._role == CATCHING_UP:
            return ("this replica has just taken the lead and is catching up with the binds made before; "
                    "retry shortly")
        leader = self._leader if self._leader and self._leader != self.identity else "not known yet"
        return f"this replica is a standby; the leader is {leader} (lease {self.lease})"

    def check(self) -> None:
        """Raise :class:`NotLeading` unless this replica may write now (see module doc)."""
        with self._lock:
            if not self._serving():
                raise NotLeading(self._why())

    @contextmanager
    def writing(self):
        """Around a write that allocates: :meth:`check`, and counted while it runs."""
        with self._lock:
            if not self._serving():
                raise NotLeading(self._why())
            self._writes += 1
        try:
            yield
        finally:
            with self._lock:
                self._writes -= 1
                if not self._writes:
                    self._idle.notify_all()

    def status(self) -> dict:
        """What inspect shows: role (as it stands now), identity, leader seen, seconds of hold left."""
        with self._lock:
            role = self._role if self._role == STANDBY or self._clock() < self._until else STANDBY
            left = self._until - self._clock() if role != STANDBY else 0.0
            return {"role": role, "identity": self.identity, "leader": self._leader, "lease": self.lease,
                    "term": self._term, "holdSeconds": round(max(left, 0.0), 3)}

    def transitions(self) -> dict:
        """New role → times this replica changed to it."""
        with self._lock:
            return dict(self._transitions)

    # -- written by the election thread ----------------------------------------------------
    @property
    def term(self) -> int:
        with self._lock:
            return self._term

    def holding(self) -> bool:
        """True while the election thread counts this replica as holding the lease (the hold may
        have lapsed already: :meth:`lapsed`)."""
        with self._lock:
            return self._role != STANDBY

    def lapsed(self) -> bool:
        """Holding by the thread's account, but past ``until``: the thread must call :meth:`lost`."""
        with self._lock:
            return self._role != STANDBY and self._clock() >= self._until

    def acquired(self, until: float, leader: str = "", **detail) -> int:
        """The lease is this replica's now (``leader``: the holder's identity, if not this replica's),
        until ``until``: catching up. Returns the new term."""
        with self._lock:
            self._term += 1
            self._until = until
            self._leader = leader or self.identity
            self._change(CATCHING_UP, "acquired the lease; catching up before answering", detail)
            return self._term

    def extend(self, until: float) -> None:
        """A renewal succeeded: hold until ``until``."""
        with self._lock:
            self._until = max(self._until, until)

    def caught_up(self, term: int, **detail) -> bool:
        """The view of ``term`` holds every earlier bind: lead. False when that term is over."""
        with self._lock:
            if self._term != term or self._role != CATCHING_UP:
                return False
            self._change(LEADER, "caught up; leading", detail)
            return True

    def lost(self, reason: str, leader: str = "", **detail) -> None:
        """Back to standby (``leader``: the holder seen now, if any)."""
        with self._lock:
            self._until = -math.inf
            self._leader = leader
            if self._role != STANDBY:
                self._change(STANDBY, f"stopped leading: {reason}", detail)

    def observe(self, leader: str) -> None:
        """The lease's holder as last read (for a standby's replies); logged when it changes."""
        with self._lock:
            if leader != self._leader and self._role == STANDBY:
                self.log.info("leader observed", extra=fields(
                    lease=self.lease, identity=self.identity, leader=leader or None, previous=self._leader or None))
                self._leader = leader

    def drain(self, timeout: float) -> bool:
        """Wait until no write is in flight (at most ``timeout`` seconds); False if some still are."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._writes:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
            return True

    def _change(self, role: str, message: str, detail: dict) -> None:
        """Lock held."""
        previous, self._role = self._role, role
        self._transitions[role] += 1
        self.log.info(f"leader election: {message}", extra=fields(
            lease=self.lease, identity=self.identity, role=role, previous=previous, term=self._term,
            **detail))
