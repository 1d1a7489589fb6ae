"""What the verbs answered, counted: the nodes filter refused, by reason, binds, by result, and
the verbs' errors, by verb and reason.

Counting sits on the request path, so it costs one ``bincount`` and an add
under a lock per filter, one add per bind; the metrics collector reads copies
at scrape time. Reasons are the placement codes of :mod:`policy.reasons`
(their :data:`~policy.reasons.NAMES`) plus ``invalid_request``: every node
refused because the pod's request breaks a rule.

Bind results:

* ``bound``: the pod is bound (a repeated bind to the same node included);
* ``refused``: the pod no longer fits, or is bound elsewhere, or the node is unknown;
* ``failed``: the cluster did not take the binding (or could not tell);
* ``invalid``: the body, the pod or its request is not one the extender can bind;
* ``not_ready``: the cluster view was not yet synced;
* ``not_leader``: this replica does not hold the leader lease (a standby, a
  leader still catching up, or one whose lease lapsed): nothing was written.

Verb errors (filter, prioritize, preempt, bind): replies that are no placement answer at all,
whatever the pod —

* ``bad_request``: the body is not the verb's arguments;
* ``not_ready``: the cluster view was not yet synced (filter, preempt and bind answer ``Error``,
  prioritize zero scores);
* ``internal``: the handler failed (a 500: a bug).
"""

from __future__ import annotations

import threading

import numpy as np

from policy.reasons import FITS, NAMES

INVALID_REQUEST = len(NAMES)
REASONS = tuple(NAMES[code] for code in range(len(NAMES))) + ("invalid_request",)
BIND_RESULTS = ("bound", "refused", "failed", "invalid", "not_ready", "not_leader")
ERROR_VERBS = ("filter", "prioritize", "preempt", "bind")
ERROR_REASONS = ("bad_request", "not_ready", "internal")


class Outcomes:
    """Counters of filter rejections and bind results (thread-safe; see module doc)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._rejections = np.zeros(len(REASONS), dtype=np.int64)
        self._binds = dict.fromkeys(BIND_RESULTS, 0)
        self._errors = dict.fromkeys(((verb, reason) for verb in ERROR_VERBS for reason in ERROR_REASONS), 0)

    def filtered(self, codes: np.ndarray) -> None:
        """One filter reply's reason code per node asked about (``FITS`` for a node that passed)."""
        counts = np.bincount(codes, minlength=len(REASONS))
        with self._lock:
            self._rejections += counts

    def refused_invalid(self, nodes: int) -> None:
        """One filter reply that refused all ``nodes`` for an invalid request."""
        with self._lock:
            self._rejections[INVALID_REQUEST] += nodes

    def bound(self, result: str) -> None:
        with self._lock:
            self._binds[result] += 1

    def errored(self, verb: str, reason: str) -> None:
        """One reply of ``verb`` that is an error of ``reason`` (see module doc)."""
        with self._lock:
            self._errors[verb, reason] += 1

    def rejections(self) -> dict:
        """reason → nodes refused for it so far (every reason, 0 included; never ``fits``)."""
        with self._lock:
            counts = self._rejections.tolist()
        return {reason: n for code, (reason, n) in enumerate(zip(REASONS, counts)) if code != FITS}

    def binds(self) -> dict:
        """result → binds answered with it so far (every result, 0 included)."""
        with self._lock:
            return dict(self._binds)

    def errors(self) -> dict:
        """(verb, reason) → replies so far (every pair, 0 included)."""
        with self._lock:
            return dict(self._errors)
