"""How scarce the idle capacity of the GPU models a shape may use is: the weight π(m) of its popularity."""

from __future__ import annotations

import threading

import numpy as np

from policy.fragmentation.measure import idle
from policy.fragmentation.shapes import Shapes
from policy.state import NodesView


class ModelPressure:
    """Idle GPU share per node (by state row) and its GPU model, over every node seen in a view.

    ``of(shapes)`` gives each model group of ``shapes`` the factor
    (idle share of all nodes) / (idle share of the nodes whose model it may
    use): a shape confined to a few models weighs by how scarce their idle
    capacity is in the cluster (1 for a group that may use any model, or when
    none of its models is idle). Rows are remembered from views, so the
    factor does not depend on which nodes one decision is asked about.
    Thread-safe.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._model = np.zeros(0, dtype=np.int64)
        self._idle = np.zeros(0)
        self._models = None  # np.unique(self._model, return_inverse=True), until a row's model changes

    def see(self, view: NodesView, free: np.ndarray | None = None) -> None:
        """Remember the rows of ``view``: their model and idle share (``free``: each row's, when the
        caller has it)."""
        known = view.row >= 0
        rows = view.row[known]
        if not len(rows):
            return
        free = (idle(view).sum(axis=1) if free is None else free)[known]
        models = view.model[known]
        with self._lock:
            if rows.max() >= len(self._idle):
                grow = int(rows.max()) + 1 - len(self._idle)
                self._model = np.concatenate([self._model, np.zeros(grow, dtype=np.int64)])
                self._idle = np.concatenate([self._idle, np.zeros(grow)])
                self._models = None
            if self._models is not None and (self._model[rows] != models).any():
                self._models = None
            self._model[rows] = models
            self._idle[rows] = free

    def forget(self, row: int) -> None:
        """Drop ``row`` (its node left the cluster): no idle share, no model."""
        with self._lock:
            if 0 <= row < len(self._idle):
                self._idle[row] = 0.0
                if self._model[row]:
                    self._model[row] = 0
                    self._models = None

    def of(self, shapes: Shapes) -> np.ndarray:
        groups = shapes.model_groups()
        if all(codes is None for codes in groups):
            return np.ones(len(groups))
        with self._lock:
            if self._models is None:
                models, index = np.unique(self._model, return_inverse=True)
                self._models = models, index.reshape(-1)
            models, index = self._models
            free = np.bincount(index, weights=self._idle, minlength=len(models))
        total = free.sum()
        by_model = dict(zip(models.tolist(), free.tolist()))
        usable = np.array([total if codes is None else sum(by_model.get(c, 0.0) for c in codes.tolist())
                           for codes in groups])
        return np.where(usable > 0, total / np.maximum(usable, 1e-12), 1.0)
