"""Task shapes and their popularity, as the fragmentation measure needs them.

:class:`Shapes` holds S shapes — per-GPU memory and compute, GPU count,
whole-device, CPU, host memory, allowed GPU models — with a popularity each,
and the tables :mod:`policy.fragmentation` looks them up in: the distinct
per-GPU classes and, per model group and class, a 2-D prefix table over CPU
and memory demands. :class:`ShapeMix` learns a popularity online from the
pods observed and keeps those tables up to date in place of rebuilding them.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from policy.node import model_code
from policy.request import GPURequest
from policy.state import NodesView


@dataclass(frozen=True)
class Shapes:
    """Task shapes and their popularity; arrays of length S."""

    memory: np.ndarray  # per GPU
    core: np.ndarray  # per GPU, 0 = memory only
    count: np.ndarray  # GPUs, 0 = a task that asks for no GPU
    whole: np.ndarray  # bool, require-whole-device
    cpu: np.ndarray  # millicores
    host_memory: np.ndarray  # bytes
    models: tuple  # per shape: frozenset of GPU model names it may use, or None for any
    weight: np.ndarray  # popularity, in any positive scale
    pressure: np.ndarray | None = None  # per model group (model_groups()): factor on its shapes' popularity

    @classmethod
    def of(cls, requests: list, weights) -> "Shapes":
        """Shapes of ``requests`` with popularity proportional to ``weights``."""
        return cls.from_rows([shape_row(r) for r in requests], weights)

    @classmethod
    def from_rows(cls, rows: list, weights) -> "Shapes":
        """Shapes from :func:`shape_row` tuples."""
        numbers = np.array([row[:6] for row in rows], dtype=np.int64).reshape(-1, 6)
        return cls(numbers[:, 0], numbers[:, 1], numbers[:, 2], numbers[:, 3].astype(bool), numbers[:, 4],
                   numbers[:, 5], tuple(row[6] for row in rows), np.asarray(weights, dtype=np.float64))

    def __len__(self) -> int:
        return len(self.weight)

    def _derive(self, **changes) -> "Shapes":
        new = dataclasses.replace(self, **changes)
        for cached in ("_classes", "_groups", "_group_sets", "host_table"):
            if cached in self.__dict__:
                new.__dict__[cached] = self.__dict__[cached]
        return new

    def model_groups(self) -> list:
        """The distinct model sets of the shapes, as arrays of model codes (None = any model)."""
        return self._groups[0]

    def under_pressure(self, pressure: np.ndarray) -> "Shapes":
        """The same shapes with each model group's popularity scaled by ``pressure``."""
        pressure = np.asarray(pressure, dtype=np.float64)
        if self.pressure is None and (pressure == 1).all():
            return self
        self.host_table  # built once here, shared by every derived copy  # noqa: B018
        return self._derive(pressure=pressure)

    def plus(self, i: int, weight: float) -> "Shapes":
        """The same shapes with ``weight`` more popularity for shape i.

        The host table is updated in place, not copied (it can be large): it is
        shared with this object and every copy derived from it, and a reader in
        another thread may see the update half applied. Popularity is a
        heuristic weight; the measure reads its normalisation from the table
        itself, so it stays consistent with what it reads.
        """
        weights = self.weight.copy()
        weights[i] += weight
        new = self._derive(weight=weights)
        if "host_table" in self.__dict__:
            self._add_to_table(i, weight)
        return new

    def _add_to_table(self, i: int, weight: float) -> None:
        """Shape i's popularity in the host table (in place) grown by ``weight``: every cell of its group
        and class whose CPU and memory cover shape i's."""
        cpu, memory, table = self.host_table
        table[self._groups[1][i], np.searchsorted(cpu, self.cpu[i]) + 1:,
              np.searchsorted(memory, self.host_memory[i]) + 1:, self._classes[1][i]] += weight

    def appended(self, row: tuple) -> "Shapes | None":
        """These shapes and one more, ``row`` (:func:`shape_row`), with no popularity yet — sharing
        this object's host table (which a zero popularity leaves as it is) when the table's axes
        stay what a rebuild would make them; None when they would not, or when the table was
        never built (then a rebuild costs what a copy would)."""
        if "host_table" not in self.__dict__ or self.pressure is not None:
            return None
        return self._sharing_table(self._with_row(len(self), row))

    def replaced(self, i: int, row: tuple) -> "Shapes | None":
        """These shapes with shape i replaced by ``row`` (:func:`shape_row`), with no popularity yet,
        sharing this object's host table with shape i's popularity taken out of it — when that
        leaves the table exactly as a rebuild would make it: whole-number popularities (the
        subtraction is exact) and the same axes. Else None."""
        if "host_table" not in self.__dict__ or self.pressure is not None \
                or not (self.weight == np.round(self.weight)).all():
            return None
        new = self._sharing_table(self._with_row(i, row))
        if new is not None:
            self._add_to_table(i, -self.weight[i])
        return new

    def _with_row(self, i: int, row: tuple) -> "Shapes":
        """These shapes with ``row`` at position i (i = len: one more), of no popularity."""
        values = (row[0], row[1], row[2], bool(row[3]), row[4], row[5])
        arrays = [np.concatenate([a[:i], np.array([v], dtype=a.dtype), a[i + 1:]]) for a, v in
                  zip((self.memory, self.core, self.count, self.whole, self.cpu, self.host_memory), values)]
        return Shapes(*arrays, self.models[:i] + (row[6],) + self.models[i + 1:],
                      np.concatenate([self.weight[:i], [0.0], self.weight[i + 1:]]))

    def _sharing_table(self, new: "Shapes") -> "Shapes | None":
        """``new`` with this object's host table, if its classes, model groups (in order of first use),
        CPU and memory values are this table's axes; else None."""
        cpu, memory, _ = self.host_table
        if not np.array_equal(new._classes[0], self._classes[0]) \
                or list(dict.fromkeys(new.models)) != list(dict.fromkeys(self.models)) \
                or not np.array_equal(np.unique(new.cpu), cpu) or not np.array_equal(np.unique(new.host_memory), memory):
            return None
        new.__dict__["host_table"] = self.host_table
        return new

    @cached_property
    def classes(self) -> tuple:
        """``(memory, core, whole, count)``: arrays of the U distinct per-GPU demands and GPU counts."""
        return tuple(self._classes[0].T)

    @cached_property
    def _classes(self) -> tuple:
        keys = np.stack([self.memory, self.core, self.whole, self.count], axis=1)
        unique, index = np.unique(keys, axis=0, return_inverse=True)
        return unique, index.reshape(-1)

    @cached_property
    def _groups(self) -> tuple:
        """The distinct model sets (as model codes, None = any) and each shape's."""
        groups: dict = {}
        index = np.array([groups.setdefault(m, len(groups)) for m in self.models], dtype=np.int64)
        codes = [None if m is None else np.array(sorted(model_code(x) for x in m), dtype=np.int64) for m in groups]
        return codes, index

    def model_rows(self, view: NodesView) -> list:
        """Per model group: the rows of ``view`` whose GPU model it may use (None: every row)."""
        groups = self._groups[0]
        if all(codes is None for codes in groups):
            return [None] * len(groups)
        return self._by_model(view)[0]

    def model_members(self, view: NodesView) -> tuple:
        """``(member, index)``: ``member`` (K, groups) bool, model group g may use the k-th distinct GPU model
        of ``view``; ``index`` (n,) each row's k."""
        return self._by_model(view)[1]

    def _by_model(self, view: NodesView) -> tuple:
        key = view.model.tobytes()  # a decision asks 3-4 times about the same nodes: worked out once
        last = self.__dict__.get("_last_by_model")
        if last is not None and last[0] == key:
            return last[1]
        result = self._model_rows(view.model)
        self.__dict__["_last_by_model"] = (key, result)  # one assignment: another thread sees the old pair or this one
        return result

    def _model_rows(self, model: np.ndarray) -> tuple:
        sets = self._group_sets
        models, index = np.unique(model, return_inverse=True)
        index = index.reshape(-1)
        member = np.array([[codes is None or m in codes for codes in sets] for m in models.tolist()],
                          dtype=bool).reshape(len(models), len(sets))
        group, row = np.nonzero(member[index].T)  # by group, then by row
        bounds = np.searchsorted(group, np.arange(len(sets) + 1))
        rows = [None if codes is None else row[bounds[g]:bounds[g + 1]] for g, codes in enumerate(sets)]
        return rows, (member, index)

    @cached_property
    def _group_sets(self) -> list:
        """The model groups as sets of model codes (None = any)."""
        return [None if codes is None else frozenset(codes.tolist()) for codes in self._groups[0]]

    @cached_property
    def host_table(self) -> tuple:
        """``(cpu, memory, table)``: sorted distinct CPU and memory demands and the (groups, C+1, M+1, U) table

        ``table[g, i, j, u]`` = popularity of the shapes of model group g and
        class u needing at most the i smallest CPU and the j smallest memory
        values, so the popularity of the shapes a node lets run is a lookup.
        The classes are the last axis, so one lookup reads a node's U values
        together (half the time of a class-first layout at 1,213 nodes × 30 classes).
        """
        cpu, cpu_rank = np.unique(self.cpu, return_inverse=True)
        memory, memory_rank = np.unique(self.host_memory, return_inverse=True)
        table = np.zeros((len(self._groups[0]), len(cpu) + 1, len(memory) + 1, len(self._classes[0])))
        np.add.at(table, (self._groups[1], cpu_rank.reshape(-1) + 1, memory_rank.reshape(-1) + 1, self._classes[1]),
                  self.weight)
        return cpu, memory, table.cumsum(axis=1).cumsum(axis=2)


def shape_row(request: GPURequest) -> tuple:
    """What the measure needs of a request: per-GPU memory and compute, GPU count, whole, CPU, host memory, models."""
    return (request.memory_per_gpu, request.core_per_gpu, request.gpu_count, int(request.whole_device),
            request.cpu, request.host_memory, request.models)


class ShapeMix:
    """Shape popularity learned from the pods observed, one at a time (thread-safe).

    Each observed pod adds ``weight(pod) · 2^(t/half_life)`` to its shape (t
    counts the pods; no decay when ``half_life`` is 0). ``weight`` is
    ``max(1, GPUs asked)`` for ``weighting="gpus"`` — a pod counts once per
    GPU it asks for, so a k-GPU pod weighs what k one-GPU pods would — and 1
    for ``weighting="pods"`` (FGD's count). With ``host_aware=False`` shapes
    forget their CPU and memory (an ablation: CPU never strands a GPU then).
    At most ``max_shapes`` shapes are
    kept; a new one replaces the least popular. Popularity updates are applied
    to the current :class:`Shapes` in place of a rebuild.
    """

    WEIGHTINGS = ("gpus", "pods")

    def __init__(self, max_shapes: int = 256, half_life: float = 0.0, weighting: str = "gpus",
                 host_aware: bool = True):
        if max_shapes < 1:
            raise ValueError("max_shapes must be at least 1")
        if half_life < 0:
            raise ValueError("half_life must not be negative")
        if weighting not in self.WEIGHTINGS:
            raise ValueError(f"weighting must be one of {', '.join(self.WEIGHTINGS)}, got {weighting!r}")
        self.max_shapes, self.half_life, self.weighting = max_shapes, half_life, weighting
        self.host_aware = host_aware
        self._lock = threading.Lock()
        self._index: dict = {}  # shape row → position in _rows/_weights
        self._rows: list = []
        self._weights = np.zeros(0)
        self._observed = 0
        self._shapes: Shapes | None = None

    def __len__(self) -> int:
        return len(self._rows)

    def observe(self, request: GPURequest) -> None:
        with self._lock:
            self._observed += 1
            weight = 2.0 ** (self._observed / self.half_life) if self.half_life > 0 else 1.0
            if weight > 1e200:  # rescale, keeping the proportions
                self._weights /= weight
                self._observed, weight, self._shapes = 0, 1.0, None
            if self.weighting == "gpus":
                weight *= max(1, request.gpu_count)
            row = self._row(request)
            position = self._index.get(row)
            if position is None:
                if len(self._rows) >= self.max_shapes:
                    position = int(np.argmin(self._weights))
                    del self._index[self._rows[position]]
                    self._rows[position] = row
                    self._weights[position] = 0.0
                    self._shapes = None if self._shapes is None else self._shapes.replaced(position, row)
                else:  # a new shape on the table's axes joins the table in place (else: rebuilt when asked)
                    position = len(self._rows)
                    self._rows.append(row)
                    self._weights = np.append(self._weights, 0.0)
                    self._shapes = None if self._shapes is None else self._shapes.appended(row)
                self._index[row] = position
            self._weights[position] += weight
            if self._shapes is not None:
                self._shapes = self._shapes.plus(position, weight)

    def _row(self, request: GPURequest) -> tuple:
        row = shape_row(request)
        return row if self.host_aware else row[:4] + (0, 0) + row[6:]

    def alone(self, request: GPURequest) -> Shapes:
        """A mix of the one shape of ``request`` (for a decision before anything was observed)."""
        return Shapes.from_rows([self._row(request)], [1.0])

    def shapes(self) -> Shapes | None:
        """The learned shapes, None before any pod was observed."""
        with self._lock:
            if not self._rows:
                return None
            if self._shapes is None:
                self._shapes = Shapes.from_rows(self._rows, self._weights.copy())
            return self._shapes
