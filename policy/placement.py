"""One vectorised pass that places one pod against many nodes.

:func:`evaluate` takes a :class:`~policy.state.NodesView` (n nodes × G GPU
slots), a :class:`~policy.request.GPURequest` and a scoring strategy, and
returns an :class:`Evaluation`: for every node a reason code (``FITS`` or why
not), the GPU(s) bind would use there, and the strategy's raw score. No loop
over nodes.

Per GPU, with ``m``/``c`` the pod's memory/compute per GPU:

    fits = healthy ∧ free_mem ≥ m ∧ free_core ≥ c ∧ pods < max_pod
           (∧ completely unused, for require-whole-device)

A node is feasible when its mode matches the pod's kind (memory-only pods on
cgpu/share/mps, memory+compute pods on core_mem), it hosts no pod of the other
kind, and at least N = gpu-count of its GPUs fit. A request for no GPU
(N = 0) fits every known node and chooses no GPU.

GPU choice: by default the node's ``ack.node.gpu.placement``: binpack takes the
N fullest fitting GPUs, spread the N emptiest; ties go to the lowest index.
Fullness of a GPU is ``mem_used / mem_total`` on memory-only nodes and the mean
of that and ``core_used / core_total`` on core_mem nodes. A strategy may choose
GPUs itself (its ``choose`` method).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from policy import reasons as R
from policy.names import MODE_CORE, MODE_MEMORY, MODE_NONE, SPREAD
from policy.request import GPURequest
from policy.scores import extender_scores
from policy.state import NodesView, fullness_of


_BYTE_SUM = np.uint64(0x0101010101010101)
_TOP_BYTE = np.uint64(56)


def count_per_row(mask: np.ndarray) -> np.ndarray:
    """The number of True values in each row of a boolean (n, G) mask.

    A reduction along a short axis is slow in numpy, so when G is a multiple
    of 8 each run of 8 booleans is read as one uint64 whose bytes (each 0 or 1)
    one multiplication by 0x0101010101010101 sums into its top byte.
    """
    n, g = mask.shape
    if g % 8 or mask.dtype != bool or not mask.flags.c_contiguous:
        return np.count_nonzero(mask, axis=1)
    sums = (mask.view(np.uint64) * _BYTE_SUM) >> _TOP_BYTE
    return (sums[:, 0] if g == 8 else sums.sum(axis=1)).astype(np.int64)


def fill(used: np.ndarray, total: np.ndarray) -> np.ndarray:
    """``used / total`` elementwise, 0 where there is no capacity."""
    return np.divide(used, total, out=np.zeros(np.shape(used)), where=total > 0)


def fullness(view: NodesView, extra_mem=0, extra_core=0) -> np.ndarray:
    """Fullness of every GPU slot (n, G), after adding ``extra_*`` to each."""
    if not (extra_mem or extra_core):
        return view.full
    return fullness_of(view.mem_used + extra_mem, view.mem_total, view.core_used + extra_core, view.core_total,
                       (view.mode == MODE_CORE)[:, None])


@dataclass
class Candidates:
    """What a scoring strategy sees: the fitting GPUs and the default choice."""

    view: NodesView
    request: GPURequest
    fit: np.ndarray  # (n, G) GPUs that can take the pod's per-GPU share
    feasible: np.ndarray  # (n,)
    _gpus: np.ndarray | None = None  # ``gpus``; None until asked for: the node label's choice
    notes: dict = field(default_factory=dict)  # what a strategy's choose() leaves for its score()

    @property
    def gpus(self) -> np.ndarray:
        """(n, N) chosen GPU indices, -1 on infeasible nodes; the node label's choice
        (:func:`choose_by_placement`) unless set, worked out when first read (a strategy that
        chooses GPUs itself need not pay for it: ~0.3 ms at 5,000 nodes)."""
        if self._gpus is None:
            self._gpus = choose_by_placement(self.view, self.fit, self.feasible, self.request.gpu_count)
        return self._gpus

    @gpus.setter
    def gpus(self, value: np.ndarray) -> None:
        self._gpus = value

    def chosen(self, per_gpu: np.ndarray) -> np.ndarray:
        """``per_gpu`` (n, G) values at the chosen GPUs, (n, N); 0 where infeasible."""
        flat = np.arange(len(self.gpus))[:, None] * per_gpu.shape[1] + np.maximum(self.gpus, 0)
        return np.where(self.gpus >= 0, per_gpu.ravel().take(flat), 0)

    def node_fill(self) -> np.ndarray:
        """Mean fullness of the node's healthy GPUs before the pod, (n,); 0 on a node without any."""
        healthy = self.view.healthy
        return fill(np.where(healthy, self.view.full, 0.0).sum(axis=1), healthy.sum(axis=1))

    def host_fill_after(self) -> np.ndarray:
        """Mean fullness of the node's CPU and host memory once the pod is on it, (n,), as
        kube-scheduler's MostAllocated weighs the two (a resource whose allocatable is not known
        counts as empty)."""
        view, request = self.view, self.request
        return (fill(view.cpu_used + request.cpu, view.cpu_total)
                + fill(view.host_mem_used + request.host_memory, view.host_mem_total)) / 2

    def fill_after(self) -> np.ndarray:
        """Mean fullness of the chosen GPUs once the pod is on them, (n,).

        For a pod that takes no GPU: the mean fullness of the node's healthy
        GPUs (:meth:`node_fill`).
        """
        if self.gpus.shape[1] == 0:
            return self.node_fill()
        after = self.chosen(fullness(self.view, self.request.memory_per_gpu, self.request.core_per_gpu))
        return np.where(self.gpus >= 0, after, 0.0).sum(axis=1) / self.gpus.shape[1]


@dataclass
class Evaluation:
    reason: np.ndarray  # (n,) int8, R.FITS where the pod fits
    gpus: np.ndarray  # (n, N) int64 GPU indices bind would use, -1 where it does not fit
    raw: np.ndarray  # (n,) float64, higher is better, -inf where it does not fit

    @property
    def feasible(self) -> np.ndarray:
        return self.reason == R.FITS

    def scores(self) -> np.ndarray:
        """Integer scores 0..10 for prioritize (see :mod:`policy.scores`)."""
        return extender_scores(self.raw, self.feasible)

    def take(self, rows: np.ndarray) -> "Evaluation":
        """The evaluation of the nodes at ``rows`` of the evaluated view (-1: an unknown node)."""
        known = rows >= 0
        safe = np.maximum(rows, 0)
        if not len(self.reason):  # nothing was evaluated: every row asked for is unknown
            return Evaluation(np.full(len(rows), R.UNKNOWN_NODE, dtype=np.int8),
                              np.full((len(rows), self.gpus.shape[1]), -1, dtype=np.int64), np.full(len(rows), -np.inf))
        return Evaluation(np.where(known, np.take(self.reason, safe), R.UNKNOWN_NODE).astype(np.int8),
                          np.where(known[:, None], np.take(self.gpus, safe, axis=0), -1),
                          np.where(known, np.take(self.raw, safe), -np.inf))


def replaced(result, positions, again):
    """``result`` — an :class:`Evaluation`, or filter's reason codes alone — with the node at each
    index of ``positions`` answered anew: ``again(i, codes_only)`` gives its ``(reason, gpus, raw)``
    (``gpus`` and ``raw`` ignored for codes alone). The arrays of ``result`` are not changed."""
    codes_only = isinstance(result, np.ndarray)
    reason = (result if codes_only else result.reason).copy()
    if not codes_only:
        gpus, raw = result.gpus.copy(), result.raw.copy()
    for i in positions:
        reason[i], chosen, score = again(i, codes_only)
        if not codes_only:
            gpus[i], raw[i] = chosen, score
    return reason if codes_only else Evaluation(reason, gpus, raw)


def gpu_fit(view: NodesView, request: GPURequest) -> tuple[np.ndarray, np.ndarray]:
    """``(fit, reason)``: which GPUs can take the pod's share, and per node why not.

    The node-level reasons (mode, sizes, counts, pods of the other kind) are
    one-dimensional; why a node that could take the pod cannot take it *now*
    is worked out only for the nodes where that is the case.
    """
    n_gpus = request.gpu_count
    if n_gpus == 0:
        return np.zeros(view.healthy.shape, dtype=bool), np.where(view.known, R.FITS, R.UNKNOWN_NODE).astype(np.int8)
    mem, core = request.memory_per_gpu, request.core_per_gpu
    wants_core = request.wants_core

    fit = view.usable & (view.mem_free >= mem)
    if core:
        fit &= view.core_free >= core
    size_mem, size_core = view.mem_total[:, 0], view.core_total[:, 0]
    untouched = None
    if request.whole_device:
        untouched = (view.mem_used == 0) & (view.core_used == 0) & (view.pods == 0)
        fit &= untouched

    mode = view.mode
    reason = np.zeros(len(view), dtype=np.int8)
    # lowest priority first: a later (higher) reason overwrites an earlier one
    node_level = [
        ((view.memory_pods if wants_core else view.core_pods) > 0, R.OTHER_MODE_PODS),
        ((size_mem != mem) | ((size_core != core) if wants_core else False)
         if request.whole_device else None, R.WHOLE_SIZE_MISMATCH),
        (size_core < core if core else None, R.CORE_TOO_BIG),
        (size_mem < mem, R.MEMORY_TOO_BIG),
        (view.gpu_count < n_gpus, R.TOO_FEW_GPUS),
        (mode == (MODE_MEMORY if wants_core else MODE_CORE), R.NEEDS_CORE_NODE if wants_core else R.NEEDS_MEMORY_NODE),
        (mode == MODE_NONE, R.NOT_SHARING),
        (~view.known, R.UNKNOWN_NODE),
    ]
    for condition, code in node_level:
        if condition is not None:
            reason[condition] = code
    short = np.flatnonzero((reason == R.FITS) & (count_per_row(fit) < n_gpus))
    if len(short):
        reason[short] = _why_not_now(view, request, short, untouched)
    return fit, reason


def _why_not_now(view: NodesView, request: GPURequest, rows: np.ndarray, untouched) -> np.ndarray:
    """Reasons for ``rows``, nodes that could take the pod but have too few fitting GPUs now."""
    n_gpus = request.gpu_count
    healthy = np.take(view.healthy, rows, axis=0)
    mem_ok = np.take(view.mem_free, rows, axis=0) >= request.memory_per_gpu
    core_ok = np.take(view.core_free, rows, axis=0) >= request.core_per_gpu if request.core_per_gpu else True
    slot_ok = np.take(view.pods, rows, axis=0) < np.take(view.max_pod, rows)[:, None]
    few = lambda mask: count_per_row(healthy & mask) < n_gpus  # noqa: E731
    conditions = [
        count_per_row(healthy) < n_gpus,
        few(np.take(untouched, rows, axis=0)) if untouched is not None else np.zeros(len(rows), dtype=bool),
        few(mem_ok),
        few(core_ok),
        few(slot_ok),
    ]
    codes = [R.NO_HEALTHY_GPU, R.NO_FREE_GPU, R.NO_MEMORY, R.NO_CORE, R.NO_POD_SLOT]
    return np.select(conditions, codes, default=R.NO_SINGLE_GPU)


def choose_by_placement(view: NodesView, fit: np.ndarray, feasible: np.ndarray, n_gpus: int) -> np.ndarray:
    """The node label's choice: binpack = N fullest fitting GPUs, spread = N emptiest.

    Ties go to the lowest GPU index. Returns (n, N) indices in ascending order,
    -1 on infeasible nodes.
    """
    full = view.full
    key = np.where((view.placement == SPREAD)[:, None], -full, full)
    key = np.where(fit, key, -np.inf)
    if n_gpus == 1:
        gpus = np.argmax(key, axis=1)[:, None]
    else:
        gpus = np.sort(np.argsort(-key, axis=1, kind="stable")[:, :n_gpus], axis=1)
    return np.where(feasible[:, None], gpus, -1)


def evaluate(view: NodesView, request: GPURequest, strategy, score: bool = True, fitted: tuple | None = None) \
        -> Evaluation:
    """Place ``request`` on every node of ``view`` at once (see module doc).

    With ``score=False`` the strategy only chooses GPUs (bind needs no score)
    and ``raw`` is 0 on feasible nodes. ``fitted``: :func:`gpu_fit`'s answer
    for this view and request, when the caller has it.
    """
    fit, reason = gpu_fit(view, request) if fitted is None else fitted
    feasible = np.flatnonzero(reason == R.FITS)
    gpus = np.full((len(view), request.gpu_count), -1, dtype=np.int64)
    raw = np.full(len(view), -np.inf)
    if len(feasible) == 0:
        return Evaluation(reason, gpus, raw)
    # GPU choice and scores are worked out for the feasible nodes only.
    nodes = view.take(feasible) if len(feasible) < len(view) else view
    fits = np.take(fit, feasible, axis=0)
    every = np.ones(len(feasible), dtype=bool)
    candidates = Candidates(nodes, request, fits, every)
    choose = getattr(strategy, "choose", None)
    if choose is not None:
        candidates.gpus = choose(candidates)
    gpus[feasible] = candidates.gpus
    raw[feasible] = strategy.score(candidates) if score else 0.0
    return Evaluation(reason, gpus, raw)
