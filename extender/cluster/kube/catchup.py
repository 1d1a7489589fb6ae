"""A new leader's catch-up: answer no verb until the view holds every bind the previous leader made.

The previous leader's Bindings reached the API server before its lease could
expire (it stops writing at its renew deadline, shorter than the lease
duration the new leader waited). So once the lease is this replica's:

1. wait for the first sync, if it is not done yet;
2. read the API's current resourceVersion ``X`` with a consistent LIST
   (:meth:`~extender.cluster.kube.backend.KubernetesCluster.resource_version_now`:
   pods, ``limit=1``, no resourceVersion): every write completed before
   the read — the old leader's last Binding included — is at or below ``X``;
3. wait until the pods reflector's resourceVersion is at least ``X`` (it is
   set only after every event up to it has reached the ledger). In a busy
   cluster pod events carry it past ``X`` within moments; but ``X`` counts
   writes to every kind (the Lease this replica just wrote, for one), and
   in a quiet cluster the pods watch may see no event and no bookmark
   (kube-apiserver sends one about once a minute) for a long time. So after
   ``watch_wait`` seconds the reflector is made to list again
   (:meth:`~extender.cluster.kube.reflector.Reflector.relist`): a consistent list
   taken after ``X`` was read;
4. then :meth:`~extender.cluster.leadership.Leadership.caught_up` for this term
   only: a catch-up whose term ended (the lease lost meanwhile) leads to
   nothing, and the next term catches up anew.

resourceVersions are compared as integers (kube-apiserver's are etcd
revisions); where one is not an integer only the relist can finish the
catch-up.

Imports: :mod:`extender.cluster.base`, :mod:`extender.cluster.leadership`, :mod:`extender.logs`.
"""

from __future__ import annotations

import threading

from extender.cluster.base import ClusterError
from extender.cluster.leadership import Leadership, clock
from extender.logs import fields, get_logger

WATCH_WAIT = 1.0  # seconds the pods watch gets to pass X before the pods are listed again
POLL = 0.02  # seconds between looks at the reflector's resourceVersion
RETRY = 0.5  # seconds between tries to read X


def at_least(version, target) -> bool:
    """``version >= target`` as resourceVersions (integers); False when either is not one."""
    try:
        return int(version) >= int(target)
    except (TypeError, ValueError):
        return False


class CatchUp:
    def __init__(self, cluster, leadership: Leadership, watch_wait: float = WATCH_WAIT, poll: float = POLL,
                 clock=clock):
        self.cluster = cluster
        self.leadership = leadership
        self.watch_wait = watch_wait
        self.poll = poll
        self._clock = clock
        self._stop = threading.Event()
        self.log = get_logger()

    def start(self, term: int) -> None:
        """Catch ``term`` up in a thread of its own (the election thread goes on renewing)."""
        threading.Thread(target=self._run, args=(term,), name=f"catch-up-{term}", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self, term: int) -> None:
        try:
            self.run(term)
        except Exception as exc:  # noqa: BLE001 - logged; the replica stays catching-up until the term ends
            self.log.error("catch-up failed", exc_info=exc, extra=fields(term=term))

    def _current(self, term: int) -> bool:
        return not self._stop.is_set() and self.leadership.term == term and self.leadership.holding()

    def run(self, term: int) -> bool:
        """Steps 1-4 of the module doc; True when this term now leads."""
        started = self._clock()
        while not self.cluster.ready():
            if not self._current(term):
                return False
            self._stop.wait(self.poll)
        target, failures = None, 0
        while target is None:
            if not self._current(term):
                return False
            try:
                target = self.cluster.resource_version_now()
            except ClusterError as exc:
                failures += 1
                if failures == 1:  # once per term: the lease loop logs the API's state too
                    self.log.warning("catch-up: cannot read the current resourceVersion; retrying",
                                     extra=fields(term=term, error=str(exc)))
                self._stop.wait(RETRY)
        pods = self.cluster.pods
        relist_at, ticket = self._clock() + self.watch_wait, None
        while True:
            if not self._current(term):
                return False
            if at_least(pods.resource_version, target) or (ticket is not None and pods.listed_since(ticket)):
                break
            if ticket is None and self._clock() >= relist_at:
                ticket = pods.relist()
                self.log.info("catch-up: the pods watch has not reached the current resourceVersion; "
                              "listing the pods again", extra=fields(term=term, resource_version=target,
                                                                     watch_resource_version=pods.resource_version))
            self._stop.wait(self.poll)
        return self.leadership.caught_up(term, resource_version=target, via="watch" if ticket is None else "list",
                                         catch_up_seconds=round(self._clock() - started, 3))
