"""fragmentation: place a pod where it strands the least GPU for the pods to come.

    raw(node)      = −Δ(node) + tie(u(node), h(node))                             (ties)
    Δ(node)        = min over the GPUs g the pod may take of M(node with the pod on g) − M(node),
                     rounded to 2⁻²⁰ GPU (≈ 10⁻⁶)
    M(node)        = Frag(node) + Stranded(node) + Starved(node)
    Frag(node)     = Σ_m p(m) · F(node, m)                   (measure)
    Stranded(node) = Σ_g idle(g) · [some GPU shape would fit g but for the node's CPU and memory, none does]
    Starved(node)  = max(0, idle(node) − min(cpu_free / c̄', host_free / h̄'))  (starvation)
    c̄'             = c̄ + k · r,  h̄' = h̄ + k_h · r_h                               (spillover)
    p(m)          ∝ w(m) · π(m)

(the names in brackets are modules of :mod:`policy.fragmentation`).

FGD (Weng et al., USENIX ATC 2023: place where the node's fragmentation grows
least) with the shape popularity learned online instead of read from the
whole trace in advance:

* ``w(m)``: ``observe`` adds every new pod the extender sees to its shape
  (per-GPU memory and compute, GPU count, whole-device, CPU, host memory,
  allowed GPU models), weighted by the GPUs it asks for (at least 1;
  ``weighting="pods"`` counts pods as FGD did); see
  :class:`policy.fragmentation.shapes.ShapeMix` for ``max_shapes`` and ``half_life``.
  Before any pod was seen the pod itself is the only shape.
* ``π(m)``: a shape that may use only some GPU models weighs by how scarce
  their idle capacity is in the cluster: idle share of all nodes / of those
  it may use (:class:`policy.fragmentation.pressure.ModelPressure`; 1 for a shape that
  may use any model).
* ``Stranded(node)``: Frag is the GPU the *next* pod is expected to find
  unusable, so a GPU whose node no longer has the CPU or memory of any GPU
  shape that fits it counts there only with the popularity of those shapes
  (about 0.2 of a half-free GPU when half-GPU pods are a fifth of the mix).
  Until pods on the node end, its CPU and memory only fill up, so such a GPU
  is lost to every pod to come, not only to the next: Stranded counts it once
  more, in full (a weight of 1, in Frag's unit, not a tuned factor: 0.5 and 2
  gave the same within noise). It is 0 on a node
  whose CPU and memory let run every GPU shape class it could otherwise run;
  a GPU no shape fits anyway (e.g. 0.19 left by an 810 pod when nothing
  smaller was seen) is packing, not stranding, and stays Frag's alone.
  ``stranded=False`` leaves it out (FGD's measure).
* ``Starved(node)``: Frag and Stranded see which shapes could still run
  after this pod; neither sees the CPU and host memory the node's idle GPUs
  will need over the pods to come. With ``c̄`` the CPU a GPU of demand comes
  with in the learned mix (``h̄`` the host memory), idle GPU beyond what the
  node's free CPU and memory can feed at that rate counts in full, in GPUs
  like Frag. It steers CPU-only pods, which change no shape's fit while CPU is
  plentiful, away from nodes whose idle GPUs will need that CPU, and
  CPU-hungry GPU pods towards nodes with CPU to spare. Not a tuned weight: 1,
  the unit of Frag. ``starved=False`` leaves it out.
  When the cluster's free CPU cannot hold both the idle GPUs' pods and the
  CPU-only pods that come with them, a share k of those CPU-only pods will
  eat CPU beside idle GPUs; an idle GPU then needs c̄ + k · r, r being the
  CPU-only pods' CPU per GPU of demand (:mod:`policy.fragmentation.spillover`; k = 0
  where CPU is ample, as on most mixes; host memory alike).
* ``u(node)``: mean fullness of the node's healthy GPUs before the pod
  (``Candidates.node_fill``), then ``h(node)``, the mean fullness of its
  CPU and memory with the pod (``Candidates.host_fill_after``); they only
  break ties in Δ (lexicographic: Δ is rounded first), towards the fuller
  node, which keeps idle nodes whole for big pods and CPU whole where GPUs
  will need it. Ties are common (four decisions in ten in a cpu25 replay, ~100
  nodes each); left to kube-scheduler, its LeastAllocated breaks them the
  other way (cpu25: 7.10 % against 6.82 % unallocated, broken at random).
  h counts only with Starved (else 0), which keeps on each node the CPU its
  idle GPUs need: without it, packing the host strands GPUs.

GPU choice (``choose``): a single-GPU pod goes to the GPU with the least
Δ (ties: fullest, then lowest index); a multi-GPU pod to the GPUs of the
node's placement label (any k idle GPUs strand alike).

Δ and the GPU choice depend on the node's row and on what all rows share
(the mix, its model pressure), so they are worked out once per distinct node
state (:mod:`policy.fragmentation.alike`) and given to every node in it.
"""

from __future__ import annotations

import numpy as np

from policy.fragmentation.alike import NodeStates
from policy.fragmentation.cache import PartsCache
from policy.fragmentation.growth import growth_on, growth_per_gpu
from policy.fragmentation.measure import idle, node_parts, subview
from policy.fragmentation.pressure import ModelPressure
from policy.fragmentation.shapes import Shapes, ShapeMix
from policy.fragmentation.spillover import Spillover
from policy.fragmentation.starvation import appetite, rates
from policy.fragmentation.ties import tie
from policy.placement import Candidates, fullness
from policy.request import GPURequest

# GPUs (≈ 1e-6): growths that round alike are equal. A power of two, so the rounding itself is exact and its
# half-points (odd multiples of 2^-21) are not where sums of decimal shares land: two forms of the measure
# that differ by float noise (~1e-16) round alike. With 1e-6, values such as 0.3809375 sat on a half-point
# and the noise decided the tie.
RESOLUTION = 2.0 ** -20
# Views of at least this many nodes keep each node's parts with the pod between decisions (PartsCache.after,
# PartsCache.chosen). A kept row is worked out for all its GPUs and pays off only over many nodes: measured,
# keeping them took a decision at 1,700–2,500 of benchmarks.load's 5,000 nodes from 2.9 to 2.0 ms, while on
# the replay's views of 2–28 node states (one pod shape after another) it made decisions 8 % slower.
KEEP_FROM = 64


class Fragmentation:
    name = "fragmentation"

    def __init__(self, max_shapes: int = 256, half_life: float = 0.0, weighting: str = "gpus",
                 host_aware: bool = True, stranded: bool = True, starved: bool = True):
        self.mix = ShapeMix(max_shapes, half_life, weighting, host_aware)
        self.stranded = stranded
        self.starved = starved and host_aware
        self._cache = PartsCache()
        self._pressure = ModelPressure()
        self._memories = np.zeros(0)  # GPU memory sizes seen (_gpu_memories)
        self._states = NodeStates()
        self._spillover = Spillover()
        self._shortfall = (0.0, 0.0)  # k for CPU and host memory, as of the spill-over's last look

    def observe(self, request: GPURequest) -> None:
        self.mix.observe(request)

    def forget_row(self, row: int) -> None:
        """The node at state row ``row`` left the cluster: what is remembered of it goes."""
        self._pressure.forget(row)
        self._spillover.forget(row)

    def shapes(self, candidates: Candidates, alike: tuple | None = None) -> Shapes:
        """p(m) for this decision: the learned mix under the candidates' model pressure
        (``alike``: the candidates' node states, :meth:`policy.fragmentation.alike.NodeStates.alike`)."""
        shapes = self.mix.shapes() or self.mix.alone(candidates.request)
        if all(codes is None for codes in shapes.model_groups()):
            return shapes
        self._pressure_from(candidates.view, alike)
        return shapes.under_pressure(self._pressure.of(shapes))

    def _pressure_from(self, view, alike: tuple | None = None) -> None:
        shapes = self.mix.shapes()
        if shapes is not None and any(codes is not None for codes in shapes.model_groups()):
            free = None
            if alike is not None:  # each node's idle share, worked out once per node state
                first, group = alike
                free = idle(subview(view, first)).sum(axis=1)[group]
            self._pressure.see(view, free)

    def choose(self, candidates: Candidates) -> np.ndarray:
        if self.starved and self._spillover.see(candidates.view):
            self._look(candidates.view)
        return self._choose_feasible(candidates)

    def _look(self, view) -> None:
        """k for the learned mix, from the spill-over's sums; kept until its next look (k moves by
        thousandths a decision, and working it out at every decision cost ~60 µs, about as much
        again as Starved's appetite)."""
        shapes = self.mix.shapes()
        if shapes is None or not view.mem_total.shape[1]:
            return
        memory, _ = self._gpu_memories(view.mem_total[:, 0])
        self._shortfall = self._spillover.shortfall(memory, *rates(shapes, self._pods_per_weight(shapes), memory))

    def _choose_feasible(self, candidates: Candidates) -> np.ndarray:
        feasible = candidates.feasible
        if not feasible.all():  # the ledger may evaluate every node in place: work on the feasible ones only
            index = np.flatnonzero(feasible)
            part = Candidates(subview(candidates.view, index), candidates.request, candidates.fit[index],
                              feasible[index])
            self._pressure_from(candidates.view)
            gpus = np.full((len(feasible), candidates.request.gpu_count), -1)
            gpus[index] = self._choose_feasible(part)
            growth = np.full(len(feasible), np.inf)
            growth[index] = part.notes["growth"]
            candidates.notes["growth"] = growth
            return gpus
        first, group = self._states.alike(candidates.view)
        shapes = self.shapes(candidates, (first, group))  # from every node: model pressure remembers them
        if len(first) < len(group):  # the measure is row-local: worked out once per node state
            part = Candidates(subview(candidates.view, first), candidates.request, candidates.fit[first],
                              feasible[first])
            gpus = self._choose(part, shapes)[group]
            candidates.notes["growth"] = part.notes["growth"][group]
            return gpus
        return self._choose(candidates, shapes)

    def _choose(self, candidates: Candidates, shapes: Shapes) -> np.ndarray:
        view, request = candidates.view, candidates.request
        hunger = self._appetite(view)
        parts = node_parts(view, shapes.classes, self._cache)
        kept = self._cache if len(view) >= KEEP_FROM else None
        if request.gpu_count != 1:
            growth = growth_on(view, shapes, request, candidates.gpus, parts, self.stranded, hunger, kept)
            candidates.notes["growth"] = np.round(growth / RESOLUTION) * RESOLUTION
            return candidates.gpus
        options = candidates.fit & candidates.feasible[:, None] & parts.distinct
        growth = growth_per_gpu(view, shapes, request, options, parts, self.stranded, hunger, kept)
        growth = np.round(growth / RESOLUTION) * RESOLUTION
        least = np.ascontiguousarray(growth.T).min(axis=0)  # = growth.min(axis=1), 7× faster at 2,462 × 8
        gpu = np.argmax(np.where(growth == least[:, None], fullness(view), -np.inf), axis=1)
        candidates.notes["growth"] = least
        return gpu[:, None]

    def _appetite(self, view) -> tuple[np.ndarray, np.ndarray] | None:
        """(c̄, h̄) of the learned mix for each node of ``view`` (by its GPU memory: a node's GPUs are
        alike) for Starved; None when it is off or no pod was seen yet."""
        shapes = self.mix.shapes()
        if not self.starved or shapes is None or not view.mem_total.shape[1]:
            return None
        memory, node = self._gpu_memories(view.mem_total[:, 0])
        k_cpu, k_host = self._shortfall
        if not (k_cpu or k_host):
            cpu, host = appetite(shapes, self._pods_per_weight(shapes), memory)
            return cpu[node], host[node]
        cpu, host, cpu_rate, host_rate = rates(shapes, self._pods_per_weight(shapes), memory)
        return (cpu + k_cpu * cpu_rate)[node], (host + k_host * host_rate)[node]

    def _pods_per_weight(self, shapes: Shapes) -> np.ndarray:
        return 1.0 / np.maximum(shapes.count, 1) if self.mix.weighting == "gpus" else np.ones(len(shapes))

    def _gpu_memories(self, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The GPU memory sizes seen so far (sorted) and the index of each of ``sizes`` in them.

        A cluster has a few GPU sizes: looking them up in the ones seen costs a
        tenth of finding the distinct sizes of every node each decision."""
        known = self._memories
        at = np.searchsorted(known, sizes)
        if not (at < len(known)).all() or (known[at] != sizes).any():
            known = self._memories = np.union1d(known, sizes)  # replaced whole: readers keep the old one
            at = np.searchsorted(known, sizes)
        return known, at

    def score(self, candidates: Candidates) -> np.ndarray:
        if "growth" not in candidates.notes:
            self.choose(candidates)
        # the host orders ties only where Starved keeps the CPU idle GPUs need: without it, packing the host
        # strands GPUs (share100 without Starved: 14.64 → 21.54 % unallocated with the host in the tie-break)
        host = candidates.host_fill_after() if self.starved else 0.0
        raw = -candidates.notes["growth"] + tie(candidates.node_fill(), host)
        return np.where(candidates.feasible, raw, -np.inf)
