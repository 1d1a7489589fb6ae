"""Room held for preemptors: pods kube-scheduler nominated to a node after preempting for them.

From the watch: an unbound pod with ``status.nominatedNodeName`` and a shared-GPU
request holds its share on that node until it binds, is nominated elsewhere or
goes. :meth:`Nominations.hold_back` answers filter, prioritize and bind for
another pod as if the nominees of that pod's priority or higher were placed
(:mod:`policy.holds`); higher-priority pods are not held back, as in
kube-scheduler.
"""

from __future__ import annotations

import threading
from collections import defaultdict

import numpy as np

from extender.podinfo import priority_and_start
from policy.holds import held, rows_held
from policy.placement import Evaluation, evaluate
from policy.request import GPURequest, InvalidRequest, parse_pod_request


class Nominations:
    def __init__(self):
        self._by_uid: dict[str, tuple] = {}  # uid → (node, priority, GPURequest)
        self._lock = threading.Lock()

    def observe(self, uid: str, pod: dict, node) -> None:
        """An unbound pod's nomination (``node``: its ``status.nominatedNodeName``)."""
        request = None
        if isinstance(node, str) and node:
            try:
                request = parse_pod_request(pod)
            except InvalidRequest:
                request = None
        with self._lock:
            if request is None or request.gpu_count == 0:
                self._by_uid.pop(uid, None)
            else:
                self._by_uid[uid] = (node, priority_and_start(pod)[0], request)

    def forget(self, uid: str) -> None:
        """The pod bound, finished or went."""
        with self._lock:
            self._by_uid.pop(uid, None)

    def all(self) -> dict:
        with self._lock:
            return dict(self._by_uid)

    def held_row(self, state, strategy, row: int, priority: int, uid: str | None):
        """The one-row view of ``row`` with the nominees a pod of ``priority`` (not ``uid``) must leave
        room for placed on it (:func:`policy.holds.held`)."""
        view = state.view(np.array([row]))
        nominees = [(p, r) for n_uid, (node, p, r) in self.all().items()
                    if n_uid != uid and p >= priority and state.index.get(node, -1) == row]
        return held(view, nominees, strategy) if nominees else view

    def hold_back(self, state, strategy, request: GPURequest, rows: np.ndarray, result, priority: int,
                  uid: str | None, score: bool = True):
        """``result`` (an :class:`Evaluation`, or filter's reason codes) for a pod of
        ``priority``, with the nodes that hold room for a nominee of that priority or
        higher (not the pod itself) evaluated again with the nominees placed.
        ``result`` itself when no node asked about holds any."""
        if not self._by_uid:
            return result
        by_row = defaultdict(list)
        for n_uid, (node, n_priority, n_request) in self.all().items():
            row = state.index.get(node, -1)
            if row >= 0:
                by_row[row].append((n_uid, n_priority, n_request))
        positions = rows_held(rows, by_row, priority, uid)
        if not positions:
            return result
        codes_only = isinstance(result, np.ndarray)
        reason = (result if codes_only else result.reason).copy()
        if not codes_only:
            gpus, raw = result.gpus.copy(), result.raw.copy()
        for i in positions:
            row = int(rows[i])
            nominees = [(p, r) for u, p, r in by_row[row] if u != uid and p >= priority]
            again = evaluate(held(state.view(np.array([row])), nominees, strategy), request, strategy,
                             score=score and not codes_only)
            reason[i] = again.reason[0]
            if not codes_only:
                gpus[i], raw[i] = again.gpus[0], again.raw[0]
        return reason if codes_only else Evaluation(reason, gpus, raw)
