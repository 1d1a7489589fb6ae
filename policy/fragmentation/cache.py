"""Each node's fragmentation parts kept per state row between decisions, recomputed only where rows changed."""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from policy.fragmentation.growth import After, _every_gpu, after_parts, chosen_parts
from policy.fragmentation.kept import KeptRows
from policy.fragmentation.measure import Parts, _fresh
from policy.request import GPURequest
from policy.state import NodesView


class PartsCache:
    """Each node's GPU parts, kept per state row: as they are (:class:`Parts`) and, per per-GPU demand
    of a recent pod, with that pod on each GPU (:class:`After`).

    A row is recomputed only when its ``version`` changed or the classes did,
    so a decision costs O(changed nodes × GPUs × classes) plus O(nodes ×
    classes). Views with unknown rows are computed directly. ``after_bytes``
    bounds the kept :class:`After` arrays (the least recently used go first).
    Thread-safe.
    """

    def __init__(self, after_bytes: int = 32 << 20):
        self._lock = threading.Lock()
        self._now: KeptRows | None = None
        self._after: OrderedDict = OrderedDict()
        self._after_bytes = after_bytes

    @property
    def kept_bytes(self) -> int:
        """Bytes of the parts with a pod kept now (at most ``after_bytes``)."""
        with self._lock:
            return sum(e.nbytes for e in self._after.values())

    def _key(self, view: NodesView, classes: tuple) -> tuple:
        key = (view.healthy.shape[1],) + tuple(np.asarray(c).tobytes() for c in classes)
        if self._now is None or self._now.key != key:
            self._now = KeptRows(key)
            self._after.clear()
        return key

    def parts(self, view: NodesView, classes: tuple) -> Parts:
        """:class:`Parts` of the rows of ``view``, as :func:`node_parts` computes them."""
        if not len(view) or (view.row < 0).any():
            return _fresh(view, classes)
        version = view.version.copy()  # before reading usage: a write meanwhile leaves the row stale
        with self._lock:
            self._key(view, classes)
            if not self._now.refresh(view, version, lambda sub, _: _fresh(sub, classes), shared=(4,)):
                return _fresh(view, classes)  # a row read torn: this decision, redone by its caller, works from it
            total, takers, small, share, takes, distinct = self._now.arrays
            rows = view.row
            return Parts(*(a.take(rows, axis=0) for a in (total, takers, small, share)), _RowTakes(takes, rows),
                     distinct.take(rows, axis=0))

    def after(self, view: NodesView, classes: tuple, request: GPURequest, rows: np.ndarray,
              gpus: np.ndarray) -> "After":
        """:func:`after_parts` of ``view`` for ``request`` at ``rows``, ``gpus``, from the kept rows."""
        if not len(view) or (view.row < 0).any():
            return after_parts(view, classes, request, rows, gpus)
        version = view.version.copy()
        with self._lock:
            gpu_count, class_count = view.healthy.shape[1], len(classes[0])
            entry = self._entry(view, classes, ("each", request.memory_per_gpu, request.core_per_gpu),
                                8 * gpu_count * (class_count + 1))
            def compute(sub, index):
                return _every_gpu(sub, classes, request, self._kept(sub, version[index]))

            if entry is None or not entry.refresh(view, version, compute):
                return after_parts(view, classes, request, rows, gpus, self._kept(view, version))
            total, usable = entry.arrays
            at = view.row[rows] * total.shape[1] + gpus  # flat: 5× faster than indexing [rows, gpus]
            return After(total.take(at), usable.reshape(-1, usable.shape[2]).take(at, axis=0))

    def chosen(self, view: NodesView, classes: tuple, request: GPURequest, gpus: np.ndarray) -> tuple:
        """:func:`chosen_parts` of ``view`` for ``request`` on each node's ``gpus``, from the kept rows."""
        if not len(view) or (view.row < 0).any():
            return chosen_parts(view, classes, request, gpus)
        version = view.version.copy()
        with self._lock:
            gpu_count, class_count = view.healthy.shape[1], len(classes[0])
            entry = self._entry(view, classes, ("on",) + request.fit_key,
                                8 * (1 + 2 * class_count + gpu_count + gpus.shape[1]) + gpu_count * class_count)
            if entry is None or not entry.refresh(view, version,
                                                  lambda sub, index: chosen_parts(sub, classes, request, gpus[index]),
                                                  shared=(4,), basis=gpus):
                return chosen_parts(view, classes, request, gpus)
            total, takers, small, share, takes = entry.arrays
            rows = view.row
            return (*(a.take(rows, axis=0) for a in (total, takers, small, share)), _RowTakes(takes, rows))

    def _kept(self, view: NodesView, version: np.ndarray) -> Parts | None:
        """The kept :class:`Parts` of the rows of ``view`` when every one is kept at ``version``, else None."""
        now, rows = self._now, view.row
        if rows.max() >= len(now.version) or (now.version[rows] != version).any():
            return None
        total, takers, small, share, takes, distinct = now.arrays
        return Parts(*(a.take(rows, axis=0) for a in (total, takers, small, share)), _RowTakes(takes, rows),
                     distinct.take(rows, axis=0))

    def _entry(self, view: NodesView, classes: tuple, demand: tuple, row_bytes: int) -> KeptRows | None:
        """The kept rows with a pod of ``demand``, made the most recently used; the least recently used
        others go while all would pass ``after_bytes`` with this one full (``row_bytes`` a row). None when
        this one alone would: the caller works it out without keeping it."""
        key = (self._key(view, classes),) + demand
        size = (int(view.row.max()) + 1) * row_bytes
        if size > self._after_bytes:
            return None
        entry = self._after.pop(key, None) or KeptRows(key)
        while self._after and sum(e.nbytes for e in self._after.values()) + size > self._after_bytes:
            self._after.popitem(last=False)
        self._after[key] = entry
        return entry


class _RowTakes:
    """``takes[i, g]`` of the view's rows without copying the whole (n, G, U) array.

    The array it holds is never written again (PartsCache copies it before
    changing rows), so another decision refreshing a row cannot change what this
    one reads mid-way."""

    def __init__(self, takes: np.ndarray, rows: np.ndarray):
        self._takes, self._rows = takes, rows

    def __getitem__(self, index):
        i, g = index
        return self._takes[self._rows[i], g]
