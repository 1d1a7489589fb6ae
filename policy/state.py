"""The cluster as numpy arrays: one row per node, one column per GPU slot.

:class:`ClusterState` owns the arrays and the name → row index. Rows are
reused after a node is removed; columns grow when a node with more GPUs than
any before it arrives. GPU slots beyond a node's ``gpu_count`` have zero
capacity and are never healthy.

Besides capacity and usage, each GPU slot carries values derived from them
and kept up to date on every write, so that a filter pass reads them instead
of recomputing them: free memory and compute, ``usable`` (healthy and below
the node's pod limit) and ``full`` (see :func:`fullness_of`).

Readers call :meth:`ClusterState.view` to gather the rows they need into a
:class:`NodesView` (a copy taken under the writers' lock, so every row is read
whole), or :meth:`ClusterState.view_live` to read every row in place when they
need most of them (no copy: a row being written at the same moment may be read
half-updated). A reader in place notes :meth:`~ClusterState.mark` first and
asks :meth:`~ClusterState.settled_since` afterwards: when a write began or
ended meanwhile, what it computed may mix two states of a row (a GPU choice that
no longer fits, a fit with no GPU to take) and must be redone from a copy
(:meth:`~ClusterState.view_whole`, or :meth:`view` of the changed rows).
Writers serialise on the state's lock; callers that must check and then write
atomically (bind) hold their own per-node lock around both.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from policy.names import BINPACK, MODE_CORE, MODE_NONE
from policy.node import NodeSpec, model_code


@dataclass
class NodesView:
    """Gathered rows for one evaluation; ``known`` is False for unknown names."""

    known: np.ndarray  # (n,) bool
    row: np.ndarray  # (n,) the state's row, -1 for an unknown name
    mode: np.ndarray  # (n,) int8
    placement: np.ndarray  # (n,) int8
    max_pod: np.ndarray  # (n,) int64
    gpu_count: np.ndarray  # (n,) int64
    memory_pods: np.ndarray  # (n,) memory-only pods bound to the node
    core_pods: np.ndarray  # (n,) memory+compute pods bound to the node
    mem_total: np.ndarray  # (n, G) int64, GiB per GPU
    mem_used: np.ndarray  # (n, G)
    core_total: np.ndarray  # (n, G)
    core_used: np.ndarray  # (n, G)
    pods: np.ndarray  # (n, G) pods holding a share of the GPU
    healthy: np.ndarray  # (n, G) bool: the GPU exists and is not unhealthy
    mem_free: np.ndarray  # (n, G) mem_total - mem_used
    core_free: np.ndarray  # (n, G) core_total - core_used
    usable: np.ndarray  # (n, G) bool: healthy and below the node's pod limit
    full: np.ndarray  # (n, G) float: fullness_of(...) of the GPU
    cpu_total: np.ndarray  # (n,) allocatable millicores, 0 = not known
    cpu_used: np.ndarray  # (n,) millicores requested by the pods counted on the node
    host_mem_total: np.ndarray  # (n,) allocatable bytes, 0 = not known
    host_mem_used: np.ndarray  # (n,) bytes requested by the pods counted on the node
    model: np.ndarray  # (n,) model_code of the node's GPU model, 0 = not labelled
    version: np.ndarray  # (n,) changes whenever anything in the row changes (for caches keyed by row)

    def __len__(self) -> int:
        return len(self.known)

    def take(self, index: np.ndarray) -> "RowSubset":
        """The rows ``index`` of this view; each field is gathered when first read."""
        return RowSubset(self, index)


VIEW_FIELDS = tuple(NodesView.__dataclass_fields__)


class RowSubset:
    """Some rows of a :class:`NodesView`, read like one; a field is copied out of the
    base view only when something reads it, so a scoring strategy pays for the
    fields it uses and no others."""

    def __init__(self, base: NodesView, index: np.ndarray):
        self._base = base
        self._index = index

    def __getattr__(self, name: str):
        value = getattr(self._base, name).take(self._index, axis=0)
        setattr(self, name, value)
        return value

    def __len__(self) -> int:
        return len(self._index)

    def take(self, index: np.ndarray) -> "RowSubset":
        return RowSubset(self._base, self._index[index])


_ROW_FIELDS = ("mode", "placement", "max_pod", "gpu_count", "memory_pods", "core_pods",
               "cpu_total", "cpu_used", "host_mem_total", "host_mem_used", "model", "version")
_BASE_GPU_FIELDS = ("mem_total", "mem_used", "core_total", "core_used", "pods", "healthy")
_DERIVED_FIELDS = ("mem_free", "core_free", "usable", "full")
_GPU_FIELDS = _BASE_GPU_FIELDS + _DERIVED_FIELDS
_DTYPES = {"mode": np.int8, "placement": np.int8, "healthy": bool, "usable": bool, "full": np.float64,
           "live": bool, **{f: np.int32 for f in ("mem_total", "mem_used", "core_total", "core_used", "pods",
                                                  "mem_free", "core_free")}}
WRITING = -1  # a row's version while a writer changes it
GPU_SLOT_MULTIPLE = 8  # rows of 8 booleans read as one uint64 (policy.placement.count_per_row)


def fullness_of(mem_used, mem_total, core_used, core_total, core_mode) -> np.ndarray:
    """How full GPUs are: ``mem_used / mem_total``, averaged with ``core_used /
    core_total`` where ``core_mode`` (core_mem nodes); 0 where there is no capacity."""
    mem = np.divide(mem_used, mem_total, out=np.zeros(np.shape(mem_used)), where=mem_total > 0)
    core = np.divide(core_used, core_total, out=np.zeros(np.shape(core_used)), where=core_total > 0)
    return np.where(core_mode, (mem + core) / 2, mem)


def with_usage(view: NodesView, mem_used, core_used, pods, memory_pods, core_pods) -> NodesView:
    """``view`` with these usage arrays in place of its own and what derives from them
    recomputed, as :meth:`ClusterState._derive` does for a row of the state."""
    fields = {f: getattr(view, f) for f in NodesView.__dataclass_fields__}
    fields.update(
        mem_used=mem_used, core_used=core_used, pods=pods, memory_pods=memory_pods, core_pods=core_pods,
        mem_free=view.mem_total - mem_used, core_free=view.core_total - core_used,
        usable=view.healthy & (pods < view.max_pod[:, None]),
        full=fullness_of(mem_used, view.mem_total, core_used, view.core_total, (view.mode == MODE_CORE)[:, None]))
    return NodesView(**fields)


class RowIndex(dict):
    """name → row; an unknown name maps to -1 without a Python-level branch."""

    def __missing__(self, key):
        return -1


class Mark(NamedTuple):
    """A :class:`ClusterState`'s generation and row layout at one moment (:meth:`ClusterState.mark`)."""
    generation: int
    layout: int
    rows: int
    slots: int


class ClusterState:
    """Nodes × GPUs capacity and usage (see module doc)."""

    def __init__(self, rows: int = 64, gpus: int = GPU_SLOT_MULTIPLE):
        self._lock = threading.RLock()
        self.index = RowIndex()
        self.names: list[str | None] = []
        self._free_rows: list[int] = []
        self._arrays = self._allocate(rows, gpus)
        self.specs: dict[str, NodeSpec] = {}
        self.generation = 0  # bumped on every write; lets callers cache evaluations
        self.layout = 0  # bumped when a row is given to or taken from a node
        self._lookup_memo: dict = {}  # len(names) → (layout, names, rows) of a recent lookup

    # -- storage -----------------------------------------------------------
    @staticmethod
    def _allocate(rows: int, gpus: int) -> dict:
        gpus = -(-max(gpus, 1) // GPU_SLOT_MULTIPLE) * GPU_SLOT_MULTIPLE
        arrays = {f: np.zeros(rows, dtype=_DTYPES.get(f, np.int64)) for f in _ROW_FIELDS + ("live",)}
        arrays.update({f: np.zeros((rows, gpus), dtype=_DTYPES.get(f, np.int64)) for f in _GPU_FIELDS})
        return arrays

    def _grow(self, rows: int, gpus: int) -> None:
        old = self._arrays
        new = self._allocate(rows, gpus)
        n, g = old["mem_total"].shape
        for f in _ROW_FIELDS + ("live",):
            new[f][:n] = old[f]
        for f in _GPU_FIELDS:
            new[f][:n, :g] = old[f]
        self._arrays = new

    @property
    def lock(self) -> threading.RLock:
        """The writers' lock: holding it keeps every row as it is (see :meth:`copy`)."""
        return self._lock

    def copy(self) -> "ClusterState":
        """An independent copy of every row, names and specs, taken under the writers' lock."""
        with self._lock:
            twin = ClusterState.__new__(ClusterState)
            twin._lock = threading.RLock()
            twin.index = RowIndex(self.index)
            twin.names = list(self.names)
            twin._free_rows = list(self._free_rows)
            twin._arrays = {f: a.copy() for f, a in self._arrays.items()}
            twin.specs = dict(self.specs)
            twin.generation, twin.layout = self.generation, self.layout
            twin._lookup_memo = {}
            return twin

    @property
    def gpu_slots(self) -> int:
        return self._arrays["mem_total"].shape[1]

    def array(self, field: str) -> np.ndarray:
        """The live array of one field, every row (row ``self.index[name]``)."""
        return self._arrays[field]

    def mark(self) -> "Mark":
        """Where the state is now, for a cache to tell later which rows changed since."""
        generation = self.generation  # first: see _bump
        return Mark(generation, self.layout, len(self.names), self.gpu_slots)

    def changed_since(self, then: "Mark", now: "Mark") -> np.ndarray | None:
        """The rows written between mark ``then`` and the later mark ``now``; None when
        rows were given, taken or resized between them (any row may hold another node)."""
        if then[1:] != now[1:]:
            return None
        return np.flatnonzero(self._arrays["version"][:now.rows] > then.generation)

    def _begin(self, row: int) -> None:
        """Mark ``row`` as being written (version :data:`WRITING`) before any of its values
        change: a reader in place that notes a row's version, reads the row, and finds
        the same version afterwards has read it whole (see PartsCache)."""
        self._arrays["version"][row] = WRITING

    def _bump(self, row: int) -> None:
        """Mark ``row`` changed, after its values were written. The row's version is
        set before the generation moves on, so a reader that notes the generation
        and then reads versions cannot miss this change (:meth:`mark`, :meth:`changed_since`)."""
        self._arrays["version"][row] = self.generation + 1
        self.generation += 1

    # -- nodes ---------------------------------------------------------------
    def set_node(self, spec: NodeSpec) -> int:
        """Insert or update a node's capacity; usage already counted is kept."""
        with self._lock:
            row = self.index.get(spec.name, -1)
            if row < 0:
                row = self._free_rows.pop() if self._free_rows else len(self.names)
                if row == len(self.names):
                    self.names.append(None)
                self.index[spec.name] = row
                self.names[row] = spec.name
                self.layout += 1
            rows, gpus = self._arrays["mem_total"].shape
            if row >= rows or spec.gpu_count > gpus:
                self._grow(max(rows * 2 if row >= rows else rows, row + 1), max(gpus, spec.gpu_count))
            a = self._arrays
            self._begin(row)
            a["live"][row] = True
            a["mode"][row] = spec.mode
            a["placement"][row] = spec.placement
            a["max_pod"][row] = spec.max_pod
            a["gpu_count"][row] = spec.gpu_count
            a["cpu_total"][row] = spec.cpu
            a["host_mem_total"][row] = spec.host_memory
            a["model"][row] = model_code(spec.model)
            present = np.arange(self.gpu_slots) < spec.gpu_count
            a["mem_total"][row] = np.where(present, spec.memory_per_gpu, 0)
            a["core_total"][row] = np.where(present, spec.core_per_gpu, 0)
            unhealthy = np.isin(np.arange(self.gpu_slots), list(spec.unhealthy))
            a["healthy"][row] = present & ~unhealthy
            self._derive(row)
            self.specs[spec.name] = spec
            self._bump(row)
            return row

    def _derive(self, row: int) -> None:
        """Recompute the derived values of one row from its capacity and usage."""
        a = self._arrays
        a["mem_free"][row] = a["mem_total"][row] - a["mem_used"][row]
        a["core_free"][row] = a["core_total"][row] - a["core_used"][row]
        a["usable"][row] = a["healthy"][row] & (a["pods"][row] < a["max_pod"][row])
        a["full"][row] = fullness_of(a["mem_used"][row], a["mem_total"][row], a["core_used"][row],
                                     a["core_total"][row], a["mode"][row] == MODE_CORE)

    def remove_node(self, name: str) -> None:
        """Drop a node's row (its usage with it)."""
        with self._lock:
            row = self.index.pop(name, -1)
            if row < 0:
                return
            self._begin(row)
            self.names[row] = None
            self.layout += 1
            self.specs.pop(name, None)
            for f in _ROW_FIELDS + ("live",):
                if f != "version":
                    self._arrays[f][row] = 0
            for f in _GPU_FIELDS:
                self._arrays[f][row] = 0
            self._arrays["mode"][row] = MODE_NONE
            self._arrays["placement"][row] = BINPACK
            self._free_rows.append(row)
            self._bump(row)

    # -- usage ---------------------------------------------------------------
    def add_usage(self, name: str, memory: dict, core: dict, wants_core: bool, sign: int = 1) -> None:
        """Count (``sign=1``) or uncount (``sign=-1``) one pod's use of a node's GPUs.

        ``memory`` and ``core`` map GPU index → amount on that GPU; every GPU in
        either map gains (or loses) one pod.
        """
        with self._lock:
            row = self.index.get(name, -1)
            if row < 0:
                return
            a = self._arrays
            self._begin(row)
            for gpu in set(memory) | set(core):
                if gpu >= self.gpu_slots:
                    self._grow(a["mem_total"].shape[0], gpu + 1)
                    a = self._arrays
                a["mem_used"][row, gpu] += sign * memory.get(gpu, 0)
                a["core_used"][row, gpu] += sign * core.get(gpu, 0)
                a["pods"][row, gpu] += sign
            a["core_pods" if wants_core else "memory_pods"][row] += sign
            self._derive(row)
            self._bump(row)

    def add_host_usage(self, name: str, cpu: int, memory: int, sign: int = 1) -> None:
        """Count (``sign=1``) or uncount (``sign=-1``) one pod's CPU and host memory requests."""
        with self._lock:
            row = self.index.get(name, -1)
            if row < 0:
                return
            self._begin(row)
            self._arrays["cpu_used"][row] += sign * cpu
            self._arrays["host_mem_used"][row] += sign * memory
            self._bump(row)

    # -- reading -------------------------------------------------------------
    def lookup(self, names: list) -> tuple[np.ndarray, int]:
        """``(rows, layout)``: rows of ``names`` in order (-1 for an unknown name)
        and the layout they were read in (read-only array).

        kube-scheduler sends the same node lists for pod after pod (all nodes to
        filter, the feasible ones to prioritize), so recent answers for lists of
        known nodes are kept by list length: comparing two lists of strings
        costs far less than hashing every fresh name again. ``names`` must not be
        changed afterwards.
        """
        memo = self._lookup_memo.get(len(names))
        if memo is not None and memo[0] == self.layout and memo[1] == names:
            return memo[2], memo[0]
        while True:
            layout = self.layout
            rows = np.fromiter(map(self.index.__getitem__, names), dtype=np.int64, count=len(names))
            if layout == self.layout:
                break
        rows.flags.writeable = False
        if len(rows) and rows.min() < 0:  # names no node has: not a list the scheduler repeats, and unbounded
            return rows, layout
        if len(self._lookup_memo) >= 16:
            self._lookup_memo.clear()
        self._lookup_memo[len(names)] = (layout, names, rows)
        return rows, layout

    def remember(self, names: list, rows: np.ndarray, layout: int) -> None:
        """Let a later :meth:`lookup` of a list equal to ``names`` answer ``rows``
        (e.g. the nodes a filter passed, which prioritize will ask about)."""
        if layout == self.layout:
            rows = np.array(rows)
            rows.flags.writeable = False
            if len(self._lookup_memo) >= 16:
                self._lookup_memo.clear()
            self._lookup_memo[len(names)] = (layout, names, rows)

    def rows(self, names) -> np.ndarray:
        """Rows of ``names`` in order, -1 for a name the state does not know."""
        return self.lookup(list(names))[0]

    def view(self, rows: np.ndarray) -> NodesView:
        """Gather ``rows`` (-1 allowed: such a row is marked unknown, all zero), each read whole."""
        known = rows >= 0
        safe = np.where(known, rows, 0)
        with self._lock:
            a = self._arrays
            gathered = {f: a[f].take(safe, axis=0) for f in _ROW_FIELDS + _GPU_FIELDS}
        if not known.all():
            unknown = ~known
            for f in _ROW_FIELDS + _GPU_FIELDS:
                gathered[f][unknown] = 0
        return NodesView(known=known, row=np.where(known, rows, -1), **gathered)

    def view_live(self) -> NodesView:
        """Every row in use, read in place (row i of the view is row i of the state)."""
        a = self._arrays
        n = len(self.names)
        live = a["live"][:n]
        return NodesView(known=live, row=np.where(live, np.arange(n), -1),
                         **{f: a[f][:n] for f in _ROW_FIELDS + _GPU_FIELDS})

    def view_whole(self) -> NodesView:
        """What :meth:`view_live` shows, copied under the writers' lock: no write can tear it."""
        with self._lock:
            a = self._arrays
            n = len(self.names)
            live = a["live"][:n].copy()
            return NodesView(known=live, row=np.where(live, np.arange(n), -1),
                             **{f: a[f][:n].copy() for f in _ROW_FIELDS + _GPU_FIELDS})

    def settled_since(self, then: "Mark") -> bool:
        """True when no write began or ended since mark ``then``: whatever was read in
        place between the two was read whole. (Holding the lock here means no write
        is half done; any write since ``then`` has moved the generation on.)"""
        with self._lock:
            return self.mark() == then

    def view_all(self) -> tuple[list[str], NodesView]:
        """Every live node's name and its row, in row order."""
        with self._lock:
            names = [n for n in self.names if n is not None]
            rows = self.rows(names)
        return names, self.view(rows)
