"""One pod's decision: kube-scheduler's part around the extender's own path, as the service drives it.

:meth:`Placer.place`: kube-scheduler's filters (:mod:`benchmarks.kube`), then
``strategy.observe(request)`` for a pod the extender has not seen before,
``Ledger.lookup`` + ``Ledger.check_rows`` (filter, the passed rows
remembered), ``Ledger.evaluate_rows(...).scores()`` (prioritize, integers
0..10), kube-scheduler's choice among the top totals, and ``Ledger.reserve``
(bind: GPU choice and allocation). A CPU-only pod is bound by the cluster,
which the ledger learns as from its informer (``Ledger.observe_pod``). Only
JSON is skipped. :meth:`Placer.remove` is the pod's deletion, as the informer
reports it and as kube-scheduler's cache drops it.

Used by the paper's protocol (:mod:`benchmarks.replay`) and the replay with
churn (:mod:`benchmarks.churn`).
"""

from __future__ import annotations

import time
from itertools import compress

import numpy as np

from benchmarks.kube import KubeScheduler, all_pods_through_extender
from extender.ledger.ledger import Ledger
from extender.ledger.records import PodRef
from policy.reasons import FITS
from policy.request import GPURequest

NOWHERE = -1


class Placer:
    """Places pods on the ledger's nodes (see module doc); ``names`` are the trace's node names in row order
    of ``kube``."""

    def __init__(self, ledger: Ledger, kube: KubeScheduler, names: np.ndarray):
        self.ledger = ledger
        self.kube = kube
        self.names = names
        self.every_pod = all_pods_through_extender(kube.setting)
        self.observe = getattr(ledger.strategy, "observe", None)

    def place(self, request: GPURequest, cpu: int, mib: int, spec: str, pod: PodRef, assume_ns: int,
              new: bool = True, only: int | None = None, priority: int = 0, start: str = "") -> tuple[int, int | None]:
        """``(node index or NOWHERE, ns spent on the ledger path or None when the extender was not asked)``.

        ``new``: the extender sees the pod for the first time (a learning
        strategy observes it once). ``only``: kube-scheduler considers that
        node alone (a retry where room was freed; every other node is known
        not to fit). ``priority`` and ``start`` (RFC 3339) are the pod's, as bind records them.
        """
        kube, ledger, names = self.kube, self.ledger, self.names
        if only is None:
            candidates = kube.filter(cpu, mib, spec)
        else:
            candidates = np.array([only] if kube.fits_on(only, cpu, mib, spec) else [], dtype=np.int64)
        asks_gpu = request.gpu_count > 0
        asked = asks_gpu or self.every_pod
        extender, elapsed = None, None
        if asked:
            start = time.perf_counter_ns()
            if new and self.observe is not None:
                self.observe(request)
            if asks_gpu and len(candidates):
                candidates = _filter(ledger, request, names[candidates].tolist(), candidates)
            if len(candidates):
                rows, _ = ledger.lookup(names[candidates].tolist())
                extender = ledger.evaluate_rows(request, rows).scores()
            elapsed = time.perf_counter_ns() - start
        if not len(candidates):
            return NOWHERE, elapsed
        node = kube.pick(candidates, kube.total_scores(candidates, extender, cpu, mib))
        if asks_gpu:
            start = time.perf_counter_ns()
            ledger.reserve(pod, request, names[node], assume_ns, priority, start)
            elapsed += time.perf_counter_ns() - start
        else:
            ledger.observe_pod(bound_pod(pod, names[node], cpu, mib, priority=priority, start=start))
        kube.bind(node, cpu, mib)
        return node, elapsed

    def remove(self, uid: str, node: int, cpu: int, mib: int) -> None:
        """The pod placed on ``node`` is deleted: the ledger forgets it, kube-scheduler's cache drops it."""
        self.ledger.forget_pod(uid)
        self.kube.unbind(node, cpu, mib)


def _filter(ledger: Ledger, request, asked: list, candidates: np.ndarray) -> np.ndarray:
    """The extender's filter as the service runs it: rows by name, check, and the passed rows remembered."""
    rows, layout = ledger.lookup(asked)
    passed = ledger.check_rows(request, rows) == FITS
    ledger.state.remember(list(compress(asked, passed)), rows[passed], layout)
    return candidates[passed]


def bound_pod(pod: PodRef, node: str, cpu: int, mib: int, annotations: dict | None = None, priority: int = 0,
              start: str = "") -> dict:
    """A pod as the informer reports it once bound to ``node`` (a CPU-only pod, or one whose GPU
    allocation ``annotations`` carry)."""
    meta = {"uid": pod.uid, "name": pod.name, "namespace": pod.namespace}
    if annotations:
        meta["annotations"] = annotations
    spec = {"nodeName": node, "containers": [
        {"name": "main", "resources": {"requests": {"cpu": f"{cpu}m", "memory": f"{mib}Mi"}}}]}
    if priority:
        spec["priority"] = priority
    status = {"phase": "Running"}
    if start:
        status["startTime"] = start
    return {"metadata": meta, "spec": spec, "status": status}
