"""The GPU share the cluster strands for its workload, for the metrics and the GPU map.

For the shape mix learned from the pods filter has seen (the ``fragmentation``
strategy's own mix, else one the service keeps), :func:`policy.fragmentation.fragments.stranded_share`:

* per GPU, ``stranded``: a partly used GPU whose free share the workload's
  shapes could use on that node were the GPU untouched, and no shape the node
  lets run now (mode, model, its free CPU and memory) fits — a fragment really
  lost. An untouched GPU is never stranded;
* per node, the idle share of its stranded GPUs, in GPUs;
* per node, the idle (unallocated, healthy) share, in GPUs.

Not FGD's fragmentation measure (``policy.fragmentation``, what the
``fragmentation`` strategy minimises): that one also counts every idle GPU of
a node where a popular shape cannot run at all, which says where to place the
next pod, not what is wasted (``policy.fragmentation.fragments`` says why).

It is kept while the cluster state's generation and the mix are those it was
computed for; a recompute is O(nodes × GPUs × shape classes).

May import ``policy``; nothing of the service.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from policy.fragmentation.fragments import stranded_share
from policy.fragmentation.shapes import ShapeMix
from policy.state import ClusterState


@dataclass(frozen=True)
class Stranded:
    """Rows are the state's live nodes in row order (``names``)."""

    names: list
    per_node: np.ndarray  # (n,) GPUs stranded for the mix: the idle share of its stranded GPUs
    per_gpu: np.ndarray  # (n, G) bool: a fragment the mix could use on an untouched GPU and cannot now
    idle: np.ndarray  # (n,) GPUs unallocated


class StrandedMeter:
    """:func:`policy.fragmentation.fragments.stranded_share` of a cluster state for a learned mix, kept per state
    generation and mix."""

    def __init__(self, state: ClusterState, mix: ShapeMix):
        self.state = state
        self.mix = mix
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
                per_node, per_gpu, share = stranded_share(view, shapes)
                self._last, self._key, self._shapes = Stranded(names, per_node, per_gpu, share), key, shapes
            return self._last


def annotate(report: dict, measured: Stranded | None) -> None:
    """Add the measure to an inspect ``report``: ``stranded`` (GPUs) per node and (bool) per GPU, each
    node's as it is taken (``nodes`` becomes an iterator), and the :func:`summary`; ``None`` values
    before the mix has any shape."""
    rows = {name: i for i, name in enumerate(measured.names)} if measured is not None else {}

    def annotated(node: dict) -> dict:
        i = rows.get(node["name"])
        node["stranded"] = None if i is None else round(float(measured.per_node[i]), 4)
        for gpu in node["gpus"]:
            gpu["stranded"] = None if i is None else bool(measured.per_gpu[i, gpu["index"]])
        return node

    report["nodes"] = map(annotated, report["nodes"])
    report["stranded"] = summary(measured)


def summary(measured: Stranded | None) -> dict | None:
    """The inspect report's ``stranded``: the cluster's stranded and unallocated GPUs."""
    return None if measured is None else {
        "gpus": round(float(measured.per_node.sum()), 4), "unallocatedGpus": round(float(measured.idle.sum()), 4)}
