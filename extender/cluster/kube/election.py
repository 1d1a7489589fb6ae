"""``serve --leader-elect``: one Lease, one leader; the others stand by with their view synced.

Our own Lease loop over :class:`~extender.cluster.kube.api.RawApi`, not the
``kubernetes`` client's ``leaderelection`` package. Read in 37.0.2 (the
installed version): it has a ``LeaseLock``, but it times everything with
``time.time()`` (a wall-clock step moves its deadlines); its leader measures
the renew deadline from the start of each renew *attempt*, after sleeping a
retry period, so it keeps leading up to ``retry + renew deadline`` after its
last successful renewal, plus however long a hung request blocks (its Lease
calls pass no timeout); it offers no "am I leading now?" that a request
thread can ask before a write, no release on shutdown, and ``run()`` returns
for good after the first loss (the replica would have to be restarted to
stand by again); ``LeaseLock`` talks through the default global client, not
the one the extender configured. Fencing needs exactly the parts it lacks,
so the loop below keeps client-go's rules (kube-scheduler's) and adds them:

* a candidate reads the Lease every retry period; it takes it (a ``PUT``
  carrying the resourceVersion it read: 409 if anyone wrote since) when no one
  holds it or when its record has not changed for ``max(lease duration,
  spec.leaseDurationSeconds)`` by this process's clock since this process saw
  it change; it creates it (``POST``) when there is none;
* the leader renews every retry period (a ``PUT`` from the Lease it wrote
  last; on 409 it reads and judges again). It holds until the *send* time of
  its last successful write plus the renew deadline, measured on
  :func:`extender.cluster.leadership.clock`; :class:`~extender.cluster.leadership.Leadership`
  compares with that at every request and right before every Binding, so a
  leader that cannot renew — cut off, its thread stalled, the process paused
  — stops before its lease can have expired anywhere else (renew deadline <
  lease duration), however late this thread notices;
* on taking the lease the replica catches up (:mod:`extender.cluster.kube.catchup`)
  before it answers a verb; after losing it, it stands by and catches up
  again the next time;
* :meth:`Elector.stop` (SIGTERM) stops answering first, waits for the writes
  in flight, then releases the Lease as client-go's ``ReleaseOnCancel`` does
  (``holderIdentity`` empty, ``leaseDurationSeconds`` 1), so a standby takes
  over at its next read instead of a lease duration later.

Lease requests time out after half the renew deadline (at least 0.5 s).
Imports: :mod:`extender.cluster.base`, :mod:`extender.cluster.leadership`, :mod:`extender.logs`,
:mod:`extender.cluster.kube.api`, :mod:`extender.cluster.kube.lease`, :mod:`extender.cluster.kube.catchup`,
:mod:`extender.cluster.kube.follow` (the follower it runs instead with ``settings.follow``).
"""

from __future__ import annotations

import math
import threading
import time

from extender.cluster.base import ClusterError
from extender.cluster.kube.api import RawApi
from extender.cluster.kube.catchup import CatchUp
from extender.cluster.kube.lease import LeaseClient, holder_of, micro_time, record_of, spec_of
from extender.cluster.leadership import ElectionSettings, Leadership, clock
from extender.logs import fields, get_logger

ERROR_LOG_SECONDS = 30.0  # the same failure is logged again at most this often


def lease_timeout(settings: ElectionSettings) -> float:
    return max(0.5, settings.renew_deadline / 2)


def start_election(settings: ElectionSettings, cluster) -> Leadership:
    """The :class:`Leadership` of this replica, its fence set on ``cluster``, its loop started
    (an :class:`Elector`, or with ``settings.follow`` a :class:`~extender.cluster.kube.follow.Follower`)
    and stopped with the cluster."""
    raw = RawApi(cluster.api.api_client, lease_timeout(settings))
    leases = LeaseClient(raw, settings.namespace, settings.name)
    if settings.follow:
        from extender.cluster.kube.follow import Follower, this_host

        leadership = Leadership(this_host(), settings.lease)
        loop = Follower(leases, leadership, settings, CatchUp(cluster, leadership))
    else:
        leadership = Leadership(settings.identity, settings.lease)
        loop = Elector(leases, leadership, settings, CatchUp(cluster, leadership))
    cluster.fence = leadership
    cluster.on_stop(loop.stop)
    loop.start()
    return leadership


class Elector:
    """The campaign and renew loop, in a thread of its own (see module doc)."""

    def __init__(self, leases: LeaseClient, leadership: Leadership, settings: ElectionSettings,
                 catch_up: CatchUp, clock=clock, wall=time.time):
        self.leases = leases
        self.leadership = leadership
        self.settings = settings
        self.catch_up = catch_up
        self._clock, self._wall = clock, wall
        self._lease: dict | None = None  # as last read or written: its resourceVersion goes with the next write
        self._record: tuple | None = None  # the election record last seen, and when (our clock)
        self._record_at = -math.inf
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_error: tuple = ("", -math.inf)
        self.log = get_logger()

    # -- lifecycle ------------------------------------------------------------------
    def start(self) -> None:
        self.log.info("leader election: standing by", extra=fields(
            lease=self.settings.lease, identity=self.settings.identity,
            lease_duration=self.settings.lease_duration, renew_deadline=self.settings.renew_deadline,
            retry_period=self.settings.retry_period))
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
        self._thread.start()

    def stop(self, release: bool = True) -> None:
        """Stop answering, stop the loop, let the writes in flight finish, release the Lease."""
        self._stop.set()
        self.catch_up.stop()
        held = self.leadership.holding()
        self.leadership.lost("shutting down")
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(lease_timeout(self.settings) + 1)
        if held and release:
            if not self.leadership.drain(self.settings.renew_deadline):
                self.log.warning("leader election: writes still in flight at release", extra=fields(
                    lease=self.settings.lease))
            self._release()

    # -- the loop ---------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            began = self._clock()
            self._step_down_if_lapsed()
            try:
                if self.leadership.holding():
                    self._renew()
                else:
                    self._campaign()
            except Exception as exc:  # noqa: BLE001 - the loop must outlive any one bad round
                self.log.error("leader election round failed", exc_info=exc)
            self._step_down_if_lapsed()
            self._stop.wait(max(0.0, self.settings.retry_period - (self._clock() - began)))

    def _step_down_if_lapsed(self) -> None:
        """Past the hold (requests were refused from that moment on): stand by, and catch up
        again before leading again."""
        if self.leadership.lapsed():
            self.leadership.lost("the lease was not renewed within the renew deadline",
                                 renew_deadline=self.settings.renew_deadline)

    def _renew(self) -> None:
        if self._lease is None:
            return self._campaign()
        sent = self._clock()
        try:
            lease = self.leases.replace(self._lease, self._spec(spec_of(self._lease), taking=False))
        except ClusterError as exc:
            if exc.status == 409:  # written by someone else since: read it and judge again
                return self._campaign()
            return self._failed("renew", exc)
        self._won(lease, sent)

    def _campaign(self) -> None:
        if self._stop.is_set():
            return  # shutting down: never take the lease again (stop() may have just released it)
        try:
            lease = self.leases.get()
        except ClusterError as exc:
            return self._failed("read", exc)
        now = self._clock()
        if lease is None:
            sent = self._clock()
            try:
                created = self.leases.create(self._spec({}, taking=True))
            except ClusterError as exc:
                return self._failed("create", exc, quiet=exc.status == 409)  # another replica created it first
            return self._won(created, sent)
        self._lease = lease
        if record_of(lease) != self._record:
            self._record, self._record_at = record_of(lease), now
        holder = holder_of(lease)
        if self._stop.is_set():
            return
        if holder != self.settings.identity:
            if self.leadership.holding():
                self.leadership.lost("another replica holds the lease", leader=holder)
            self.leadership.observe(holder)
            wait = max(float(spec_of(lease).get("leaseDurationSeconds") or 0), self.settings.lease_duration)
            if holder and now < self._record_at + wait:
                return  # held, and renewed within the lease duration as far as this process has seen
        sent = self._clock()
        try:
            taken = self.leases.replace(lease, self._spec(spec_of(lease), taking=holder != self.settings.identity))
        except ClusterError as exc:
            return self._failed("take", exc, quiet=exc.status == 409)  # another replica was faster
        self._won(taken, sent)

    def _won(self, lease: dict, sent: float) -> None:
        """A write of ours, sent at ``sent``, succeeded: hold until ``sent`` + renew deadline."""
        self._lease = lease
        self._record, self._record_at = record_of(lease), self._clock()
        until = sent + self.settings.renew_deadline
        if self._stop.is_set():
            return  # a renewal that was on its way when stop() began: stop() releases what it wrote
        if self.leadership.holding():
            self.leadership.extend(until)
        else:
            term = self.leadership.acquired(until, lease_transitions=spec_of(lease).get("leaseTransitions"))
            self.catch_up.start(term)
        self._last_error = ("", -math.inf)

    def _spec(self, current: dict, taking: bool) -> dict:
        now = micro_time(self._wall())
        transitions = int(current.get("leaseTransitions") or 0)
        return {**current, "holderIdentity": self.settings.identity,
                "leaseDurationSeconds": self.settings.lease_seconds(),
                "acquireTime": now if taking or not current.get("acquireTime") else current["acquireTime"],
                "renewTime": now, "leaseTransitions": transitions + 1 if taking and current else transitions}

    def _release(self) -> None:
        """Give the Lease up (see module doc); best effort: if it fails, it expires."""
        for _ in range(2):
            lease = self._lease
            if lease is None or holder_of(lease) != self.settings.identity:
                return
            now = micro_time(self._wall())
            spec = {**spec_of(lease), "holderIdentity": "", "leaseDurationSeconds": 1, "acquireTime": now,
                    "renewTime": now}
            try:
                self._lease = self.leases.replace(lease, spec)
                self.log.info("leader election: released the lease", extra=fields(
                    lease=self.settings.lease, identity=self.settings.identity))
                return
            except ClusterError as exc:
                if exc.status != 409:
                    self.log.warning("leader election: could not release the lease; it will expire",
                                     extra=fields(lease=self.settings.lease, error=str(exc)))
                    return
                try:
                    self._lease = self.leases.get()
                except ClusterError:
                    return

    def _failed(self, action: str, exc: ClusterError, quiet: bool = False) -> None:
        """Log a failed Lease request (the same one at most every ERROR_LOG_SECONDS)."""
        message, logged = self._last_error
        now = self._clock()
        if quiet:
            self.log.debug(f"leader election: lease {action} lost a race", extra=fields(
                lease=self.settings.lease, error=str(exc)))
        elif str(exc) != message or now - logged >= ERROR_LOG_SECONDS:
            self._last_error = (str(exc), now)
            self.log.warning(f"leader election: lease {action} failed", extra=fields(
                lease=self.settings.lease, identity=self.settings.identity, role=self.leadership.status()["role"],
                error=str(exc)))
