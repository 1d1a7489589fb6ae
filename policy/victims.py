"""Which pods to evict from one node so that a preemptor fits its GPUs.

kube-scheduler's own preemption reasons about a node's total
``aliyun.com/gpu-mem``; a shared-GPU pod needs room on single GPUs. Given the
node's row, the pods holding a share of its GPUs and the preemptor's request,
:func:`select` returns the victims that make the pod fit by the same rules as
filter (mode, no mixing, memory and compute per GPU, pods per GPU, unhealthy
GPUs, whole device, several GPUs) — :func:`policy.placement.gpu_fit` on the row
with the victims' shares taken out.

Only pods of strictly lower priority than the preemptor are candidates. Among
the victim sets that make room, the first by this order is returned:

1. fewest PodDisruptionBudget violations,
2. lowest highest priority among the victims,
3. fewest victims,
4. lowest sum of the victims' priorities,
5. youngest: the latest start of the oldest victim first,
6. lowest GPU index touched, then the pods' UIDs (determinism).

Since room only grows as pods go, a set that makes room has no strict subset
that does (1–3 prefer any such subset). Up to :data:`EXHAUSTIVE` sets (twelve
candidates) every set is tried, all at once: each set is one row of a view
(vectorised over sets × GPUs). With more candidates a greedy pass adds pods in
that order until the pod fits, then drops every victim it can spare.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from policy.placement import gpu_fit
from policy.reasons import FITS
from policy.request import GPURequest
from policy.state import NodesView, with_usage

EXHAUSTIVE = 4096  # victim sets tried at once; 2^12


@dataclass(frozen=True)
class Resident:
    """A pod holding a share of the node's GPUs, as preemption sees it."""

    uid: str
    priority: int
    start: str  # RFC 3339 (creation or start time): later is younger
    memory: dict  # GPU index → GiB
    core: dict  # GPU index → compute
    wants_core: bool
    disrupts_budget: bool = False  # evicting it violates a PodDisruptionBudget


@dataclass(frozen=True)
class Shares:
    """What each resident holds of the node's GPUs, as arrays (residents × GPUs), built once per node."""

    memory: np.ndarray
    core: np.ndarray
    holds: np.ndarray
    memory_only: np.ndarray  # (residents,) 1 for a pod that shares memory only
    wants_core: np.ndarray

    @classmethod
    def of(cls, residents: list, gpus: int) -> "Shares":
        memory = np.zeros((len(residents), gpus), dtype=np.int64)
        core = np.zeros((len(residents), gpus), dtype=np.int64)
        holds = np.zeros((len(residents), gpus), dtype=np.int64)
        for i, pod in enumerate(residents):
            for g in set(pod.memory) | set(pod.core):
                if g < gpus:
                    memory[i, g], core[i, g], holds[i, g] = pod.memory.get(g, 0), pod.core.get(g, 0), 1
        wants = np.array([p.wants_core for p in residents], dtype=bool)
        return cls(memory, core, holds, (~wants).astype(np.int64), wants.astype(np.int64))


def room_after(row: NodesView, residents: list | Shares, chosen: np.ndarray) -> NodesView:
    """The node's row once per set: ``chosen`` is (sets × residents) bool, the row of
    set ``k`` has the shares of the residents chosen in ``k`` taken out."""
    shares = residents if isinstance(residents, Shares) else Shares.of(residents, row.mem_total.shape[1])
    taken = chosen.astype(np.int64)
    return _without(row, taken @ shares.memory, taken @ shares.core, taken @ shares.holds,
                    taken @ shares.memory_only, taken @ shares.wants_core)


def _without(row: NodesView, memory, core, holds, memory_pods, core_pods) -> NodesView:
    """The node's row once per set, set ``k`` without the shares given at index ``k`` of each array."""
    k = len(memory)
    sets = NodesView(**{f: np.repeat(getattr(row, f), k, axis=0) for f in NodesView.__dataclass_fields__})
    return with_usage(sets, sets.mem_used - memory, sets.core_used - core, sets.pods - holds,
                      sets.memory_pods - memory_pods, sets.core_pods - core_pods)


def _totals(shares: Shares, cumulative: bool) -> tuple:
    """What each prefix of the residents holds (cumulative), or each resident alone."""
    arrays = (shares.memory, shares.core, shares.holds, shares.memory_only, shares.wants_core)
    return tuple(np.cumsum(a, axis=0) for a in arrays) if cumulative else arrays


def _order(residents: list, chosen: np.ndarray | None = None) -> np.ndarray:
    """Indices of the sets (rows of ``chosen``) in the module doc's order; ``None``: each resident
    alone (set ``i`` = resident ``i``)."""
    priority = np.array([p.priority for p in residents], dtype=np.int64)
    budget = np.array([p.disrupts_budget for p in residents], dtype=np.int64)
    ranks = {s: r for r, s in enumerate(sorted({p.start for p in residents}))}
    start = np.array([ranks[p.start] for p in residents], dtype=np.int64)
    first_gpu = np.array([min(set(p.memory) | set(p.core), default=0) for p in residents], dtype=np.int64)
    uid = np.array([p.uid for p in residents])
    if chosen is None:
        return np.lexsort((uid, first_gpu, -start, priority, priority, budget))
    taken = chosen.astype(np.int64)
    big = np.iinfo(np.int64).max
    highest = np.where(chosen, priority, np.iinfo(np.int64).min).max(axis=1)
    oldest = np.where(chosen, start, big).min(axis=1)
    lowest_gpu = np.where(chosen, first_gpu, big).min(axis=1)
    uids = np.array(["\0".join(uid[row]) for row in chosen])
    return np.lexsort((uids, lowest_gpu, -oldest, taken @ priority, taken.sum(axis=1), highest, taken @ budget))


def _fits(view: NodesView, request: GPURequest) -> np.ndarray:
    return gpu_fit(view, request)[1] == FITS


def select(row: NodesView, request: GPURequest, preemptor_priority: int, residents: list) -> tuple | None:
    """The victims' UIDs, in the order above's set, that make ``request`` fit the node of the
    one-row ``row``; ``()`` when it fits as it is; None when no set of lower-priority pods does."""
    if _fits(row, request)[0]:
        return ()
    candidates = [p for p in residents if p.priority < preemptor_priority]
    if not candidates:
        return None
    n = len(candidates)
    if 2 ** n <= EXHAUSTIVE:
        sets = (np.arange(1, 2 ** n)[:, None] >> np.arange(n)) & 1
        chosen = sets.astype(bool)
        fits = _fits(room_after(row, candidates, chosen), request)
        if not fits.any():
            return None
        order = _order(candidates, chosen)
        best = order[fits[order]][0]
        return tuple(p.uid for p, c in zip(candidates, chosen[best]) if c)
    return _greedy(row, request, candidates)


def keep_proposal(row: NodesView, request: GPURequest, residents: list, proposed: list) -> tuple | None:
    """``proposed`` (kube-scheduler's victims) as a tuple when taking them out makes ``request``
    fit the node's GPUs, else None. Proposed UIDs that hold no GPU share free none."""
    wanted = set(proposed)
    chosen = np.array([[r.uid in wanted for r in residents]], dtype=bool)
    return tuple(proposed) if _fits(room_after(row, residents, chosen), request)[0] else None


def _greedy(row: NodesView, request: GPURequest, candidates: list) -> tuple | None:
    """Pods added in the set order until the pod fits, then every victim it can spare dropped,
    last added first. Both steps are batched: every prefix is tried at once (its shares are
    cumulative sums); then each round tries dropping each remaining victim below the last one
    dropped, and drops the highest that can go — what dropping them one at a time from the top
    decides, in one round per victim dropped (plus one) instead of one per victim."""
    ranked = [candidates[i] for i in _order(candidates)]  # each pod alone, in the set order
    shares = Shares.of(ranked, row.mem_total.shape[1])
    prefix = _totals(shares, cumulative=True)
    fits = _fits(_without(row, *prefix), request)
    if not fits.any():
        return None
    last = int(np.argmax(fits))
    chosen = np.arange(len(ranked)) <= last
    held = [total[last] for total in prefix]  # what the chosen victims hold
    alone = _totals(shares, cumulative=False)
    below = last + 1  # victims at this index or above have been tried against the current set
    while True:
        tries = np.flatnonzero(chosen[:below])
        if not len(tries):
            break
        spared = tries[_fits(_without(row, *(h[None] - a[tries] for h, a in zip(held, alone))), request)]
        if not len(spared):
            break
        below = int(spared[-1])
        chosen[below] = False
        held = [h - a[below] for h, a in zip(held, alone)]
    return tuple(p.uid for p, c in zip(ranked, chosen) if c)
