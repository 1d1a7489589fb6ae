"""Arrays worked out per state row, each row kept with the version it was computed at.

A placement step whose answer for a node depends on that node's row alone
(and on a key: the request's shape, the shape classes) need not be worked out
again until the row changes. :class:`KeptRows` holds such arrays over every
state row and, for a view, recomputes only the rows whose version differs from
the one they were computed at:

    stale = { i : kept_version[view.row[i]] != view.version[i] }

A row noted while being written (version :data:`~policy.state.WRITING`), or
written while it was read, is never kept. Not thread-safe: the owner holds
its lock around it.
"""

from __future__ import annotations

import numpy as np

from policy.state import WRITING, NodesView

NEVER = WRITING - 1  # a kept row's version before it was ever computed (no state row has it)


class KeptRows:
    """Arrays of one key over a state's rows, each row with the version (and basis) it was computed at."""

    def __init__(self, key=None):
        self.key = key
        self.version = np.zeros(0, dtype=np.int64)
        self.basis = None  # (rows, k): per-row values the arrays were computed for, besides the row itself
        self.arrays: list = []

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays)

    def stale(self, view: NodesView, version: np.ndarray, basis=None) -> np.ndarray:
        """Indices into ``view`` of the rows not current for ``version`` (or for ``basis`` (n, k))."""
        rows = view.row
        if rows.max() >= len(self.version):
            grow = int(rows.max()) + 1 - len(self.version)
            self.version = np.concatenate([self.version, np.full(grow, NEVER, dtype=np.int64)])
            self.arrays = [np.concatenate([a, np.zeros((grow,) + a.shape[1:], dtype=a.dtype)]) for a in self.arrays]
            if self.basis is not None:
                self.basis = np.concatenate([self.basis, np.zeros((grow,) + self.basis.shape[1:], self.basis.dtype)])
        stale = self.version[rows] != version
        if basis is not None and self.basis is not None:
            stale |= (self.basis[rows] != basis).any(axis=1)
        return np.flatnonzero(stale)

    def refresh(self, view: NodesView, version: np.ndarray, compute, shared: tuple = (), basis=None,
                stale: np.ndarray | None = None) -> bool:
        """Recompute with ``compute(rows of view, their index in view)`` the rows of ``view`` not current
        for ``version`` (the view's versions noted before its usage was read) or for ``basis`` (n, k)
        (``stale``: :meth:`stale`'s answer, when the caller has it); False, and nothing kept, when a row
        was read torn. The arrays at ``shared`` are copied before a write: readers may hold them."""
        rows = view.row
        if stale is None:
            stale = self.stale(view, version, basis)
        if not len(stale):
            return True
        parts = compute(view.take(stale), stale)
        # kept only for rows read whole: not being written when noted (version WRITING), and
        # the same version after the read (a view read in place may see a write begin)
        if not ((version[stale] != WRITING) & (view.version[stale] == version[stale])).all():
            return False
        if not self.arrays:
            self.arrays = [np.zeros((len(self.version),) + part.shape[1:], dtype=part.dtype) for part in parts]
        if basis is not None and self.basis is None:
            self.basis = np.zeros((len(self.version),) + basis.shape[1:], dtype=basis.dtype)
        for i in shared:  # copy on write
            self.arrays[i] = self.arrays[i].copy()
        target = rows[stale]
        for array, part in zip(self.arrays, parts):
            array[target] = part
        if basis is not None:
            self.basis[target] = basis[stale]
        self.version[target] = version[stale]
        return True
