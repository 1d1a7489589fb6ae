"""Results over every node, kept per request between calls and refreshed only where nodes changed.

kube-scheduler asks about one pod after another, mostly of a few shapes (the
replicas of a Job or Deployment ask alike), and between two questions a bind
or an informer event changes a node or two. :class:`RowCache` keeps, per key,
the arrays a ``compute(view)`` function returned for every row of a
:class:`~policy.state.ClusterState`, with the state's mark (its ``generation``
and layout) they are current for. On the next call for the key it recomputes
only the rows whose ``version`` is newer (every row after a change of layout or
GPU slots; :meth:`~policy.state.ClusterState.changed_since`):

    changed = { r : version[r] > generation_then }
    result[changed] = compute(view(changed))

``compute`` must give each row a result that depends on that row and the key
alone, never on which other rows are in the view — the contract of every
placement pass in :mod:`policy.placement` and of the strategies that declare
``row_local`` (:mod:`policy.scoring`).

A full refresh reads every row in place (:meth:`~policy.state.ClusterState.view_live`);
when a write overlapped it (:meth:`~policy.state.ClusterState.settled_since`),
the rows written since are computed again from a gathered copy, which is read
whole, so no result mixes two states of a row. Those rows carry a newer version
than the entry's mark and are computed once more on the next call.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Hashable

import numpy as np

from policy.state import ClusterState

REFRESH_ALL = 4  # recompute everything when more than 1/REFRESH_ALL of the rows changed


class _Entry:
    __slots__ = ("mark", "arrays")


class RowCache:
    """Per-key arrays over every row of one state (see module doc)."""

    def __init__(self, state: ClusterState, size: int = 64):
        self._state = state
        self._size = size
        self._entries: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def take(self, key: Hashable, compute: Callable, rows: np.ndarray, first: int | None = None) -> tuple:
        """``compute``'s arrays for ``key`` (only the ``first`` few if given), current, at
        ``rows`` (-1: row 0's values; the caller masks unknown rows)."""
        safe = np.maximum(rows, 0)
        with self._lock:
            arrays = self._current(key, compute)[:first]
            if not len(arrays[0]):  # no row yet: every row asked for is unknown
                return tuple(np.zeros((len(rows),) + a.shape[1:], dtype=a.dtype) for a in arrays)
            return tuple(a.take(safe, axis=0) for a in arrays)

    def _current(self, key: Hashable, compute: Callable) -> tuple:
        state = self._state
        mark = state.mark()
        entry = self._entries.get(key)
        changed = state.changed_since(entry.mark, mark) if entry is not None else None
        if changed is None:
            entry = _Entry()
            entry.arrays = self._refresh(compute, mark)
            self._entries[key] = entry
            if len(self._entries) > self._size:
                self._entries.popitem(last=False)
        else:
            if REFRESH_ALL * len(changed) > mark.rows:
                entry.arrays = self._refresh(compute, mark)
            elif len(changed):
                for array, part in zip(entry.arrays, compute(state.view(changed))):
                    array[changed] = part
            self._entries.move_to_end(key)
        entry.mark = mark
        return entry.arrays

    def _refresh(self, compute: Callable, mark) -> tuple:
        """``compute`` over every row, read in place, with the rows a write tore read again whole."""
        state = self._state
        arrays = tuple(np.array(a) for a in compute(state.view_live()))
        if state.settled_since(mark):
            return arrays
        changed = state.changed_since(mark, state.mark())
        if changed is None:  # rows were added, freed or widened meanwhile
            return tuple(np.array(a) for a in compute(state.view_whole()))
        torn = changed[changed < len(arrays[0])]
        for array, part in zip(arrays, compute(state.view(torn))):
            array[torn] = part
        return arrays

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
