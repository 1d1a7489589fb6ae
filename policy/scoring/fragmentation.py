"""fragmentation: place a pod where it strands the least GPU for the pods to come.

    raw(node) = −min over the GPUs g the pod may take of  ΔFrag(node, g)
    ΔFrag(node, g) = Frag(node with the pod on g) − Frag(node)
    Frag(node)     = Σ_m p(m) · F(node, m)                (policy.fragmentation)

FGD (Weng et al., USENIX ATC 2023) with the popularity ``p`` learned online:
``observe`` counts the shape of every new pod the extender sees (per-GPU
memory and compute, GPU count, whole-device, CPU and host memory), and ``p``
is the share of the ``max_shapes`` most frequent shapes among them (weighted
by ``2^(t/half_life)`` for the t-th pod when ``half_life`` > 0, so the mix can
drift). FGD instead took ``p`` from the whole trace in advance. Until a pod
has been seen, the pod itself is the only shape. A multi-GPU pod goes on the
GPUs of the node's placement label (any k idle GPUs strand alike); a
single-GPU pod on the GPU with the least ΔFrag, ties to the fullest, then the
lowest index (``choose``). Equal ΔFrag (to 1e-9 GPU) is an equal score.
"""

from __future__ import annotations

import threading

import numpy as np

from policy.fragmentation import PartsCache, Shapes, growth_on, growth_per_gpu, shape_row
from policy.placement import Candidates, fullness
from policy.request import GPURequest

RESOLUTION = 1e-9  # GPUs; growths closer than this tie


def first_of_kind(view) -> np.ndarray:
    """(n, G): GPU g is the lowest-index GPU of its node in its exact state (others add no choice)."""
    state = view.mem_used.astype(np.float64)
    for usage in (view.core_used, view.pods, view.healthy):  # one number per distinct state
        state = state * (float(usage.max(initial=0)) + 1) + usage
    if state.max(initial=0) >= 2**52:  # not exact any more: compare field by field
        same = np.ones(state.shape + state.shape[1:], dtype=bool)
        for usage in (view.mem_used, view.core_used, view.pods, view.healthy):
            same &= usage[:, :, None] == usage[:, None, :]
    else:
        same = state[:, :, None] == state[:, None, :]  # (n, G, G)
    earlier = np.tril(np.ones(same.shape[1:], dtype=bool), k=-1)
    return ~(same & earlier).any(axis=2)


class Fragmentation:
    name = "fragmentation"

    def __init__(self, max_shapes: int = 256, half_life: float = 0.0, weighting: str = "pods", tie_break: str = "none"):
        if max_shapes < 1:
            raise ValueError("max_shapes must be at least 1")
        self.weighting = weighting
        self.tie_break = tie_break
        self.max_shapes = max_shapes
        self.half_life = half_life
        self._lock = threading.Lock()
        self._index: dict = {}  # shape row → position in _rows/_weights
        self._rows: list = []
        self._weights = np.zeros(0)
        self._observed = 0
        self._shapes: Shapes | None = None
        self._cache = PartsCache()

    def observe(self, request: GPURequest) -> None:
        with self._lock:
            self._observed += 1
            weight = 2.0 ** (self._observed / self.half_life) if self.half_life > 0 else 1.0
            if weight > 1e200:  # rescale, keeping the proportions
                self._weights /= weight
                self._observed, weight, self._shapes = 0, 1.0, None
            row = shape_row(request)
            if self.weighting == "gpus":
                weight *= request.gpu_count * (request.core_per_gpu / 100 if request.core_per_gpu else min(request.memory_per_gpu / 1000, 1))
            elif self.weighting == "mixed":
                weight *= 1 + request.gpu_count
            position = self._index.get(row)
            if position is None:
                if len(self._rows) >= self.max_shapes:  # forget the least popular shape
                    drop = int(np.argmin(self._weights))
                    del self._index[self._rows[drop]]
                    self._rows[drop] = row
                    self._weights[drop] = 0.0
                    position = drop
                else:
                    position = len(self._rows)
                    self._rows.append(row)
                    self._weights = np.append(self._weights, 0.0)
                self._index[row] = position
                self._shapes = None
            self._weights[position] += weight
            if self._shapes is not None:
                self._shapes = self._shapes.plus(position, weight)

    def shapes(self, request: GPURequest) -> Shapes:
        """The learned popularity (the pod alone before anything was observed)."""
        with self._lock:
            if not self._rows:
                return Shapes.of([request], [1.0])
            if self._shapes is None:
                self._shapes = Shapes.from_rows(np.array(self._rows), self._weights.copy())
            return self._shapes

    def choose(self, candidates: Candidates) -> np.ndarray:
        view, request = candidates.view, candidates.request
        shapes = self.shapes(request)
        if request.gpu_count != 1:
            growth = growth_on(view, shapes, request, candidates.gpus, self._cache)
            candidates.notes["growth"] = np.round(growth / RESOLUTION) * RESOLUTION
            return candidates.gpus
        options = candidates.fit & candidates.feasible[:, None] & first_of_kind(view)
        growth = np.round(growth_per_gpu(view, shapes, request, options, self._cache) / RESOLUTION) * RESOLUTION
        least = growth.min(axis=1)
        ties = growth == least[:, None]
        gpu = np.argmax(np.where(ties, fullness(view), -np.inf), axis=1)
        candidates.notes["growth"] = least
        return gpu[:, None]

    def score(self, candidates: Candidates) -> np.ndarray:
        growth = candidates.notes.get("growth")
        if growth is None:
            self.choose(candidates)
            growth = candidates.notes["growth"]
        raw = -np.round(growth / 1e-6) * 1e-6
        if self.tie_break == "pack":
            raw = raw + 1e-8 * candidates.fill_after()
        elif self.tie_break == "node":
            healthy = candidates.view.healthy
            used = np.where(healthy, fullness(candidates.view), 0).sum(axis=1) / np.maximum(healthy.sum(axis=1), 1)
            raw = raw + 1e-8 * used
        return np.where(candidates.feasible, raw, -np.inf)
