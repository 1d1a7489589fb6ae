"""``serve --leader-elect-follow``: the sidecar extender answers only while its own kube-scheduler leads.

In the sidecar variant every kube-scheduler pod carries an extender on
loopback, and only the leading scheduler calls its extender. The extender
does not campaign: it reads the scheduler's Lease (``kube-system/kube-scheduler``
as the sidecar manifests pass it) every retry period — ``get`` on that one
Lease is all the RBAC it needs; no watch — and is active only while

* the Lease's ``holderIdentity`` is this host's scheduler: kube-scheduler's
  identity is ``<hostname>_<uuid>`` and the static pod shares the host's
  network and name, so the part before the first ``_`` is compared with
  :func:`this_host`; and
* by this process's clock (:func:`extender.cluster.leadership.clock`), the
  ``renewTime`` last *changed* at most a renew deadline ago. The change is
  dated by the send time of the read that first showed it (the renewal
  happened before that read was answered). At start the first read shows no
  change: a Lease left by a scheduler that died does not make the extender
  active.

How a standby sidecar is made safe when its scheduler becomes the leader:
kube-scheduler waits out the old leader's lease before it takes over, and the
old leader's extender stops answering within its own renew deadline (the old
scheduler, unable to renew, also exits). When this extender sees its scheduler
hold the Lease it is ``catching-up`` — every verb answered 503 — until its view
holds every bind made before (:mod:`extender.cluster.kube.catchup`: a consistent read of
the current resourceVersion, then the pods watch, or a new list, at or past it);
only then does it answer. kube-scheduler treats the 503s as a failed scheduling
attempt and retries the pods with backoff.

Imports: :mod:`extender.cluster.base`, :mod:`extender.cluster.leadership`, :mod:`extender.logs`,
:mod:`extender.cluster.kube.lease`, :mod:`extender.cluster.kube.catchup`.
"""

from __future__ import annotations

import math
import socket
import threading

from extender.cluster.base import ClusterError
from extender.cluster.kube.catchup import CatchUp
from extender.cluster.kube.lease import LeaseClient, holder_of, spec_of
from extender.cluster.leadership import ElectionSettings, Leadership, clock
from extender.logs import fields, get_logger

ERROR_LOG_SECONDS = 30.0


def this_host() -> str:
    """This host's name, as kube-scheduler's ``os.Hostname()`` gives it (the first part of its identity)."""
    return socket.gethostname()


def host_of(identity: str) -> str:
    """The host part of a kube-scheduler identity ``<hostname>_<uuid>``."""
    return identity.split("_", 1)[0]


class Follower:
    """The follow loop, in a thread of its own (see module doc)."""

    def __init__(self, leases: LeaseClient, leadership: Leadership, settings: ElectionSettings,
                 catch_up: CatchUp, host: str | None = None, clock=clock):
        self.leases = leases
        self.leadership = leadership
        self.settings = settings
        self.catch_up = catch_up
        self.host = host if host is not None else this_host()
        self._clock = clock
        self._mark: tuple | None = None  # (holderIdentity, renewTime) last read
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_error: tuple = ("", -math.inf)
        self.log = get_logger()

    def start(self) -> None:
        self.log.info("leader election: following", extra=fields(
            lease=self.settings.lease, host=self.host, renew_deadline=self.settings.renew_deadline,
            retry_period=self.settings.retry_period))
        self._thread = threading.Thread(target=self._run, name="leader-follow", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.catch_up.stop()
        self.leadership.lost("shutting down")
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(self.settings.renew_deadline)

    def _run(self) -> None:
        while not self._stop.is_set():
            began = self._clock()
            try:
                self.step()
            except Exception as exc:  # noqa: BLE001 - the loop must outlive any one bad round
                self.log.error("leader follow round failed", exc_info=exc)
            self._stop.wait(max(0.0, self.settings.retry_period - (self._clock() - began)))

    def step(self) -> None:
        """One read of the Lease and what it means for this replica."""
        sent = self._clock()
        try:
            lease = self.leases.get()
        except ClusterError as exc:
            self._failed(exc)
        else:
            self._judge(lease, sent)
        if self.leadership.lapsed():
            self.leadership.lost("the scheduler's lease renewal was not seen within the renew deadline",
                                 leader=self._mark[0] if self._mark else "")

    def _judge(self, lease: dict | None, sent: float) -> None:
        holder = holder_of(lease)
        mark = (holder, str(spec_of(lease).get("renewTime")))
        changed = self._mark is not None and mark != self._mark
        self._mark = mark
        if not holder or host_of(holder) != self.host:
            if self.leadership.holding():
                self.leadership.lost("the scheduler on this host no longer holds the lease", leader=holder)
            self.leadership.observe(holder)
            return
        if not changed:
            return  # not renewed since the last read: the hold runs out by itself
        until = sent + self.settings.renew_deadline
        if self.leadership.holding():
            self.leadership.extend(until)
        else:
            self.catch_up.start(self.leadership.acquired(until, leader=holder))

    def _failed(self, exc: ClusterError) -> None:
        message, logged = self._last_error
        now = self._clock()
        if str(exc) != message or now - logged >= ERROR_LOG_SECONDS:
            self._last_error = (str(exc), now)
            self.log.warning("leader election: cannot read the followed lease", extra=fields(
                lease=self.settings.lease, error=str(exc)))
