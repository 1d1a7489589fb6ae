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
from policy.state import NodesView


def fill(used: np.ndarray, total: np.ndarray) -> np.ndarray:
    """``used / total`` elementwise, 0 where there is no capacity."""
    return np.divide(used, total, out=np.zeros(np.shape(used)), where=total > 0)


def fullness(view: NodesView, extra_mem=0, extra_core=0) -> np.ndarray:
    """Fullness of every GPU slot (n, G), after adding ``extra_*`` to each."""
    mem = fill(view.mem_used + extra_mem, view.mem_total)
    core = fill(view.core_used + extra_core, view.core_total)
    return np.where((view.mode == MODE_CORE)[:, None], (mem + core) / 2, mem)


@dataclass
class Candidates:
    """What a scoring strategy sees: the fitting GPUs and the default choice."""

    view: NodesView
    request: GPURequest
    fit: np.ndarray  # (n, G) GPUs that can take the pod's per-GPU share
    feasible: np.ndarray  # (n,)
    gpus: np.ndarray  # (n, N) chosen GPU indices, -1 on infeasible nodes
    notes: dict = field(default_factory=dict)  # what a strategy's choose() leaves for its score()

    def chosen(self, per_gpu: np.ndarray) -> np.ndarray:
        """``per_gpu`` (n, G) values at the chosen GPUs, (n, N); 0 where infeasible."""
        taken = np.take_along_axis(per_gpu, np.maximum(self.gpus, 0), axis=1)
        return np.where(self.gpus >= 0, taken, 0)

    def node_fill(self) -> np.ndarray:
        """Mean fullness of the node's healthy GPUs before the pod, (n,); 0 on a node without any."""
        healthy = self.view.healthy
        total = np.where(healthy, fullness(self.view), 0.0).sum(axis=1)
        return fill(total, healthy.sum(axis=1))

    def fill_after(self) -> np.ndarray:
        """Mean fullness of the chosen GPUs once the pod is on them, (n,).

        For a pod that takes no GPU: the mean fullness of the node's healthy
        GPUs (0 on a node without any).
        """
        if self.gpus.shape[1] == 0:
            return self.node_fill()
        after = fullness(self.view, self.request.memory_per_gpu, self.request.core_per_gpu)
        return self.chosen(after).mean(axis=1)


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


def gpu_fit(view: NodesView, request: GPURequest) -> tuple[np.ndarray, np.ndarray]:
    """``(fit, reason)``: which GPUs can take the pod's share, and per node why not."""
    n_gpus = request.gpu_count
    if n_gpus == 0:
        fit = np.zeros(view.healthy.shape, dtype=bool)
        return fit, np.where(view.known, R.FITS, R.UNKNOWN_NODE).astype(np.int8)
    mem, core = request.memory_per_gpu, request.core_per_gpu
    wants_core = request.wants_core

    healthy = view.healthy
    mem_ok = view.mem_total - view.mem_used >= mem
    core_ok = view.core_total - view.core_used >= core if core else np.ones_like(healthy)
    slot_ok = view.pods < view.max_pod[:, None]
    fit = healthy & mem_ok & core_ok & slot_ok
    size_mem, size_core = view.mem_total[:, 0], view.core_total[:, 0]
    if request.whole_device:
        untouched = (view.mem_used == 0) & (view.core_used == 0) & (view.pods == 0)
        fit &= untouched
        wrong_size = (size_mem != mem) | ((size_core != core) if wants_core else False)
        few_untouched = (healthy & untouched).sum(axis=1) < n_gpus
    else:
        wrong_size = few_untouched = np.zeros(len(view), dtype=bool)

    mode = view.mode
    conditions = [
        ~view.known,
        mode == MODE_NONE,
        (mode == MODE_MEMORY) & wants_core,
        (mode == MODE_CORE) & (not wants_core),
        view.gpu_count < n_gpus,
        size_mem < mem,
        size_core < core,
        wrong_size,
        (view.memory_pods if wants_core else view.core_pods) > 0,
        healthy.sum(axis=1) < n_gpus,
        few_untouched,
        (healthy & mem_ok).sum(axis=1) < n_gpus,
        (healthy & core_ok).sum(axis=1) < n_gpus,
        (healthy & slot_ok).sum(axis=1) < n_gpus,
        fit.sum(axis=1) < n_gpus,
    ]
    codes = [
        R.UNKNOWN_NODE, R.NOT_SHARING, R.NEEDS_CORE_NODE, R.NEEDS_MEMORY_NODE, R.TOO_FEW_GPUS,
        R.MEMORY_TOO_BIG, R.CORE_TOO_BIG, R.WHOLE_SIZE_MISMATCH, R.OTHER_MODE_PODS, R.NO_HEALTHY_GPU,
        R.NO_FREE_GPU, R.NO_MEMORY, R.NO_CORE, R.NO_POD_SLOT, R.NO_SINGLE_GPU,
    ]
    reason = np.select(conditions, codes, default=R.FITS).astype(np.int8)
    return fit, reason


def choose_by_placement(view: NodesView, fit: np.ndarray, feasible: np.ndarray, n_gpus: int) -> np.ndarray:
    """The node label's choice: binpack = N fullest fitting GPUs, spread = N emptiest.

    Ties go to the lowest GPU index. Returns (n, N) indices in ascending order,
    -1 on infeasible nodes.
    """
    full = fullness(view)
    key = np.where((view.placement == SPREAD)[:, None], -full, full)
    key = np.where(fit, key, -np.inf)
    if n_gpus == 1:
        gpus = np.argmax(key, axis=1)[:, None]
    else:
        gpus = np.sort(np.argsort(-key, axis=1, kind="stable")[:, :n_gpus], axis=1)
    return np.where(feasible[:, None], gpus, -1)


def evaluate(view: NodesView, request: GPURequest, strategy, score: bool = True) -> Evaluation:
    """Place ``request`` on every node of ``view`` at once (see module doc).

    With ``score=False`` the strategy only chooses GPUs (bind needs no score)
    and ``raw`` is 0 on feasible nodes.
    """
    fit, reason = gpu_fit(view, request)
    feasible = reason == R.FITS
    gpus = choose_by_placement(view, fit, feasible, request.gpu_count)
    candidates = Candidates(view, request, fit, feasible, gpus)
    choose = getattr(strategy, "choose", None)
    if choose is not None:
        candidates.gpus = np.where(feasible[:, None], choose(candidates), -1)
    raw = np.where(feasible, strategy.score(candidates) if score else 0.0, -np.inf)
    return Evaluation(reason, candidates.gpus, raw)
