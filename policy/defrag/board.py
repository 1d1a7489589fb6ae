"""The planner's working copy of the cluster: usage that moves and placements change and undo.

:class:`Board` holds a copy of a :class:`~policy.state.ClusterState` and
answers the one question both searches ask — where does a request fit now —
with the filter's own rules: :func:`policy.placement.gpu_fit` on the copy's
rows (mode, no mixing, memory and compute per GPU, pods per GPU, unhealthy
GPUs, whole device, several GPUs on one node). On top of the filter's answer
it keeps a pod off nodes it may not go to (``allowed``: its selector,
affinity and tolerations, worked out by the caller) and off nodes whose
allocatable CPU or host memory, when known, cannot take its requests
(kube-scheduler's NodeResourcesFit would refuse them). GPU choice, where a
search needs one, is :func:`policy.placement.evaluate` with the node's own
placement label (binpack: the fullest GPUs that fit; spread: the emptiest),
and of nodes the one :class:`~policy.scoring.binpack.Binpack` scores highest.

Usage may go past capacity while a search holds a pending pod's room that
moves have not freed yet (a GPU past its capacity takes nothing); a plan is
only accepted once every step and the end fit within capacity.
"""

from __future__ import annotations

import itertools

import numpy as np

from policy import reasons as R
from policy.allocation import per_gpu, split
from policy.placement import count_per_row, evaluate, gpu_fit
from policy.request import GPURequest
from policy.scoring.binpack import Binpack
from policy.state import ClusterState, NodesView, with_usage

NOT_ALLOWED = -1  # reason code of a node the pod may not go to (selector, affinity, taints)
NO_HOST_ROOM = -2  # ... of a node without the CPU or host memory the pod requests
_BINPACK = Binpack()


class Exhausted(Exception):
    """The search passed its bound of steps."""


class Steps:
    """A count of search steps with a bound; :meth:`tick` raises :class:`Exhausted` past it."""

    def __init__(self, bound: int):
        self.bound = bound
        self.taken = 0

    def tick(self, n: int = 1) -> None:
        self.taken += n
        if self.taken > self.bound:
            raise Exhausted()


def padded(mask, rows: int) -> np.ndarray:
    """``mask`` as ``rows`` booleans (None: all True; rows beyond a short mask: False)."""
    if mask is None:
        return np.ones(rows, dtype=bool)
    out = np.zeros(rows, dtype=bool)
    mask = np.asarray(mask, dtype=bool)[:rows]
    out[:len(mask)] = mask
    return out


def fit_on(view: NodesView, request: GPURequest, allowed: np.ndarray) -> tuple:
    """``(fit, reason)`` as :func:`gpu_fit` answers for ``view``, with :data:`NOT_ALLOWED` where
    ``allowed`` (one boolean per row of the view) is False and :data:`NO_HOST_ROOM` where the
    node's allocatable CPU or memory, when known, cannot take the pod's requests."""
    fit, reason = gpu_fit(view, request)
    reason = reason.copy()
    if request.cpu:
        ok_cpu = (view.cpu_total == 0) | (view.cpu_total - view.cpu_used >= request.cpu)
        reason[(reason == R.FITS) & ~ok_cpu] = NO_HOST_ROOM
    if request.host_memory:
        ok_mem = (view.host_mem_total == 0) | (view.host_mem_total - view.host_mem_used >= request.host_memory)
        reason[(reason == R.FITS) & ~ok_mem] = NO_HOST_ROOM
    reason[~allowed & view.known] = NOT_ALLOWED
    return fit, reason


class Board:
    """A copy of the cluster's usage that a search changes and undoes (see module doc)."""

    def __init__(self, state: ClusterState):
        self.state = state.copy()
        self.names = self.state.names
        self.rows = len(self.names)
        self.where: dict = {}  # resident key → (row, gpus) where it is now (absent: as given)

    # -- usage ------------------------------------------------------------------------
    def place(self, request: GPURequest, row: int, gpus, sign: int = 1) -> None:
        """Count (``sign=1``) or uncount (-1) ``request`` on ``gpus`` of ``row``, with its CPU and memory."""
        name = self.names[row]
        memory, core = split(request, gpus)
        self.state.add_usage(name, per_gpu(memory), per_gpu(core), request.wants_core, sign)
        if request.cpu or request.host_memory:
            self.state.add_host_usage(name, request.cpu, request.host_memory, sign)

    def remove(self, resident, sign: int = -1) -> None:
        """Take a resident's counted share off its node (``sign=1``: put it back)."""
        request = resident.request
        self.state.add_usage(resident.node, dict(resident.memory), dict(resident.core), request.wants_core, sign)
        if request.cpu or request.host_memory:
            self.state.add_host_usage(resident.node, request.cpu, request.host_memory, sign)

    def restore(self, resident) -> None:
        self.remove(resident, +1)

    # -- fit ------------------------------------------------------------------------------
    def view(self) -> NodesView:
        return self.state.view_live()

    def fit(self, request: GPURequest, allowed=None, rows: np.ndarray | None = None) -> tuple:
        """``(fit, reason)`` over every row (or ``rows``): :func:`fit_on` the board as it is now."""
        if rows is None:
            return fit_on(self.view(), request, padded(allowed, self.rows))
        rows = np.asarray(rows, dtype=np.int64)
        return fit_on(self.state.view(rows), request, padded(allowed, self.rows)[rows])

    def fit_empty(self, request: GPURequest, allowed=None) -> np.ndarray:
        """The reason codes :meth:`fit` would give if no GPU held anything (unhealthy GPUs stay so)."""
        view = self.view()
        zeros = np.zeros_like(view.mem_used)
        empty = with_usage(view, zeros, zeros, zeros, np.zeros_like(view.memory_pods), np.zeros_like(view.core_pods))
        reason = gpu_fit(empty, request)[1].copy()
        reason[~padded(allowed, self.rows) & view.known] = NOT_ALLOWED
        return reason

    def fits_at(self, request: GPURequest, allowed, row: int, gpus) -> bool:
        """True when ``request`` fits ``gpus`` of ``row`` now (and the pod may go there)."""
        fit, reason = self.fit(request, allowed, np.array([row]))
        return reason[0] == R.FITS and len(set(gpus)) == request.gpu_count and bool(fit[0, list(gpus)].all())

    def within_capacity(self, rows) -> bool:
        """No GPU of ``rows`` holds more memory, compute or pods than it has."""
        view = self.state.view(np.asarray(sorted(set(rows)), dtype=np.int64))
        return bool((view.mem_used <= view.mem_total).all() and (view.core_used <= view.core_total).all()
                    and (view.pods <= view.max_pod[:, None]).all())

    def best(self, request: GPURequest, allowed=None, avoid: tuple | None = None) -> tuple | None:
        """``(row, gpus)`` where the extender's GPU choice would put ``request`` on the node Binpack
        scores highest (ties: the lowest row), or None. ``avoid = (row, gpus)``: not those GPUs of
        that row (a pod's own place, which a move must leave)."""
        fit, reason = self.fit(request, allowed)
        if avoid is not None and avoid[0] >= 0 and reason[avoid[0]] == R.FITS:
            row = avoid[0]
            fit = fit.copy()
            fit[row, list(avoid[1])] = False
            if count_per_row(fit[row:row + 1])[0] < request.gpu_count:
                reason[row] = R.NO_SINGLE_GPU
        if not (reason == R.FITS).any():
            return None
        result = evaluate(self.view(), request, _BINPACK, fitted=(fit, reason))
        feasible = np.flatnonzero(result.feasible)
        row = int(feasible[np.argmax(result.raw[feasible])])
        return row, tuple(int(g) for g in result.gpus[row])

    # -- enumerating places ---------------------------------------------------------------
    def gpu_sets(self, row: int, fitting: np.ndarray, n: int, marks: dict | None = None, first: tuple = ()):
        """Every set of ``n`` of the row's ``fitting`` GPUs, ``first`` first, one of each kind:
        GPUs whose capacity and usage are equal (and that carry equal ``marks``: GPU →
        hashable) are interchangeable, so sets that differ only by them are given once."""
        view = self.state.view(np.array([row]))
        gpus = np.flatnonzero(fitting).tolist()
        kind = {g: (int(view.mem_total[0, g]), int(view.mem_used[0, g]), int(view.core_total[0, g]),
                    int(view.core_used[0, g]), int(view.pods[0, g]), bool(view.healthy[0, g]),
                    tuple(sorted((marks or {}).get(g, ())))) for g in gpus}
        seen = set()
        if first:
            seen.add(tuple(sorted(kind[g] for g in first)))
            yield tuple(first)
        for chosen in itertools.combinations(gpus, n):
            key = tuple(sorted(kind[g] for g in chosen))
            if key not in seen:
                seen.add(key)
                yield chosen

    def places(self, request: GPURequest, allowed=None, marks_of=None):
        """Every ``(row, gpus)`` where ``request`` fits now, rows by Binpack's score (best first),
        each row's sets by :meth:`gpu_sets` (``marks_of(row)`` → that row's GPU marks)."""
        fit, reason = self.fit(request, allowed)
        feasible = np.flatnonzero(reason == R.FITS)
        if not len(feasible):
            return
        result = evaluate(self.view(), request, _BINPACK, fitted=(fit, reason))
        for row in feasible[np.argsort(-result.raw[feasible], kind="stable")].tolist():
            first = tuple(int(g) for g in result.gpus[row])
            marks = marks_of(row) if marks_of is not None else None
            for gpus in self.gpu_sets(row, fit[row], request.gpu_count, marks, first):
                yield row, tuple(gpus)

    def idle_gpus(self) -> int:
        """Healthy GPUs that hold no pod."""
        view = self.view()
        return int(np.count_nonzero(view.healthy & (view.pods == 0) & view.known[:, None]))
