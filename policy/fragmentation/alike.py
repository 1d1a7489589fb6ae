"""Nodes in the same state: a placement worked out once per state serves them all.

A GPU cluster holds many nodes of a few kinds, and a packing policy keeps most
of them idle or full, so the nodes a pod could go to are in far fewer distinct
states than there are nodes (in the openb replay a single-GPU pod's hundreds
of feasible nodes are 2–30 states). A computation that is row-local — each
node's answer depends on that node's row and on values shared by all rows —
gives equal rows equal answers, so it can run on one row per state:

    first, group = states.alike(view)
    answer = compute(view.take(first))[group]

Two rows are alike when every field of the row a placement reads is equal:
the node's mode, placement label, pod limit, GPU count, pod counts by kind,
CPU and host memory (allocatable and requested), GPU model, and per GPU its
memory and compute (total and used), pods and health. The state's row number
and version are not compared. :class:`NodeStates` gives each distinct row
content an id (exact: the content's bytes are the key) and keeps each state
row's id until the row's version changes, so a decision reads the ids of the
rows it asks about and works out only the rows written since.
"""

from __future__ import annotations

import threading

import numpy as np

from policy.fragmentation.kept import KeptRows
from policy.state import NodesView

FIELDS = ("mode", "placement", "max_pod", "gpu_count", "memory_pods", "core_pods", "cpu_total", "cpu_used",
          "host_mem_total", "host_mem_used", "model", "mem_total", "mem_used", "core_total", "core_used", "pods",
          "healthy")

def _contents(view: NodesView) -> np.ndarray:
    """(n, F) int64: the fields of every row of ``view`` that make its state."""
    n = len(view)
    return np.concatenate([np.asarray(getattr(view, f)).reshape(n, -1).astype(np.int64) for f in FIELDS], axis=1)


class NodeStates:
    """An id per distinct node state, kept per state row (see module doc). Thread-safe.

    At most ``limit`` distinct states are remembered; past it every id is
    forgotten and given again as rows are asked about.
    """

    def __init__(self, limit: int = 1 << 14):
        self._limit = limit
        self._lock = threading.Lock()
        self._ids: dict = {}  # row content (bytes) → id
        self._kept = KeptRows()  # each state row's id

    def alike(self, view: NodesView) -> tuple[np.ndarray, np.ndarray]:
        """``(first, group)``: one row of ``view`` per distinct state in it, and each row's index into ``first``."""
        ids = self.ids(view)
        present = np.zeros(ids.max(initial=-1) + 1, dtype=bool)  # ids are small: a table, not a sort (3× faster)
        present[ids] = True
        group = (np.cumsum(present) - 1)[ids]
        first = np.empty(int(present.sum()), dtype=np.int64)
        # the first row of each state stands for it (numpy assigns in order; any row of a state would be
        # right): the same row from one decision to the next, so what is cached per row
        # (policy.fragmentation.cache.PartsCache) stays current for it
        first[group[::-1]] = np.arange(len(ids) - 1, -1, -1)
        return first, group

    def ids(self, view: NodesView) -> np.ndarray:
        """(n,): equal for two rows of ``view`` exactly when their states are equal."""
        with self._lock:
            if not len(view) or (view.row < 0).any():
                self._bound(len(view))
                return self._ids_of(_contents(view))
            version = view.version.copy()  # before the fields are read (view.take reads them afresh)
            stale = self._kept.stale(view, version)
            if self._bound(len(stale)):
                stale = self._kept.stale(view, version)  # every row: the ids kept were forgotten
            if not self._kept.refresh(view, version, lambda rows, _: (self._ids_of(_contents(rows)),), stale=stale):
                return self._ids_of(_contents(view))  # a row read while written: ids of what was read, none kept
            return self._kept.arrays[0][view.row]

    def _bound(self, more: int) -> bool:
        """Forget every id when ``more`` new states could pass the limit; True if it did."""
        if len(self._ids) + more <= self._limit:
            return False
        self._ids.clear()
        self._kept = KeptRows()
        return True

    def _ids_of(self, contents: np.ndarray) -> np.ndarray:
        ids = self._ids
        return np.array([ids.setdefault(row.tobytes(), len(ids)) for row in contents], dtype=np.int64)
