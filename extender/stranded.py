"""The GPU share the cluster strands for its workload, for the metrics and the GPU map.

For the shape mix learned from the pods filter has seen (the ``fragmentation``
strategy's own mix, else one the service keeps):

* per node, ``Frag(node)`` of :func:`policy.fragmentation.fragmentation`
  (FGD's measure: the expected GPU share, in GPUs, that the next pod of the
  mix cannot use there);
* per GPU, ``stranded``: it has idle share, yet no shape of the mix that may
  run on its node (mode, model, the node's free CPU and memory) fits it;
* per node, the idle (unallocated, healthy) share, in GPUs.

It is cheap enough for every scrape: the result is kept while the cluster
state's generation and the mix are those it was computed for, and a
recompute reuses the parts of every unchanged row (:class:`PartsCache`), so
it costs O(changed nodes × GPUs × shape classes) plus O(nodes × classes).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from policy.fragmentation import PartsCache, allowed, fragmentation, gpu_takes, idle
from policy.shapes import ShapeMix
from policy.state import ClusterState, NodesView


@dataclass(frozen=True)
class Stranded:
    """Rows are the state's live nodes in row order (``names``)."""

    names: list
    per_node: np.ndarray  # (n,) GPUs stranded for the mix
    per_gpu: np.ndarray  # (n, G) bool: an idle share no shape of the mix fits
    idle: np.ndarray  # (n,) GPUs unallocated


def measure(view: NodesView, shapes, cache: PartsCache | None = None) -> tuple:
    """``(per_node, per_gpu, idle)`` of every row of ``view`` for ``shapes`` (see module doc)."""
    share = idle(view)
    takes = gpu_takes(view, shapes.classes, view.mem_used, view.core_used, view.pods)
    runs = allowed(view, shapes, view.cpu_used, view.host_mem_used, view.memory_pods, view.core_pods) > 0
    per_gpu = (share > 0) & ~(takes & runs[:, None, :]).any(axis=2)
    return fragmentation(view, shapes, cache), per_gpu, share.sum(axis=1)


class StrandedMeter:
    """:func:`measure` of a cluster state for a learned mix, kept per state generation and mix."""

    def __init__(self, state: ClusterState, mix: ShapeMix):
        self.state = state
        self.mix = mix
        self._cache = PartsCache()
        self._lock = threading.Lock()
        self._key = None  # (generation, layout) measured
        self._shapes = None  # and for these shapes (compared by identity: a new mix is a new object)
        self._last: Stranded | None = None

    def current(self) -> Stranded | None:
        """The measure now; None before the mix has any shape (no pod seen yet)."""
        shapes = self.mix.shapes()
        if shapes is None:
            return None
        with self._lock:
            key = (self.state.generation, self.state.layout)
            if key != self._key or shapes is not self._shapes:
                names, view = self.state.view_all()
                per_node, per_gpu, share = measure(view, shapes, self._cache)
                self._last, self._key, self._shapes = Stranded(names, per_node, per_gpu, share), key, shapes
            return self._last


def annotate(report: dict, measured: Stranded | None) -> None:
    """Add the measure to an inspect ``report``: ``stranded`` (GPUs) per node and (bool) per GPU, and a
    ``stranded`` summary; ``None`` values before the mix has any shape."""
    rows = {name: i for i, name in enumerate(measured.names)} if measured is not None else {}
    for node in report["nodes"]:
        i = rows.get(node["name"])
        node["stranded"] = None if i is None else round(float(measured.per_node[i]), 4)
        for gpu in node["gpus"]:
            gpu["stranded"] = None if i is None else bool(measured.per_gpu[i, gpu["index"]])
    report["stranded"] = None if measured is None else {
        "gpus": round(float(measured.per_node.sum()), 4), "unallocatedGpus": round(float(measured.idle.sum()), 4)}
