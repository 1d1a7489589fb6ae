"""Why a plan gives a pending pod no room: the first of a list of reasons that holds.

Each reason is a relaxation that needs no search: would the pod fit if these
pods were simply gone (their replacements placed nowhere)? Fit only gets
better as usage goes, so when it would not fit even then, no plan that moves
only those pods can help. In order:

1. it fits on its own now (so the pods the plan put before it took the room);
2. no node is allowed to it (selector, affinity, tolerations);
3. it would fit no node even with every GPU empty (too large, wrong mode,
   unhealthy GPUs) — the most common filter message is given;
4. it would not fit with every known pod gone: GPU use no pod accounts for
   is in its way (unaccounted pods);
5. ... with every movable pod gone: the pods in its way may not move (the
   commonest reasons are given);
6. ... with every movable pod of its priority or lower gone;
7. ... with those gone whose PodDisruptionBudgets allow a disruption;
8. else: it needs more moves than the plan allows (exact search), or the
   heuristic found no way within the moves left.

:class:`Relaxed` answers "would it fit with these pods gone" over the whole
cluster with a few numpy operations, and the answers are kept per request,
allowed nodes and priority, so a plan with many alike pending pods pays once.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np

from policy import reasons as R
from policy.defrag.board import NO_HOST_ROOM, NOT_ALLOWED, fit_on, padded
from policy.state import ClusterState, with_usage

MESSAGES = {**R.MESSAGES, NOT_ALLOWED: "its nodeSelector, node affinity or tolerations keep it off the node",
            NO_HOST_ROOM: "the node lacks the CPU or memory it requests"}


class Relaxed:
    """The cluster with any chosen set of residents taken off, as a view to fit requests on."""

    def __init__(self, state: ClusterState, residents: list):
        self.view = state.view_whole()
        self.rows = len(self.view)
        self.residents = residents
        owner, rows, gpus, memory, core = [], [], [], [], []
        for i, r in enumerate(residents):
            row = state.index[r.node]
            for g in r.gpus:
                owner.append(i)
                rows.append(row)
                gpus.append(g)
                memory.append(r.memory.get(g, 0))
                core.append(r.core.get(g, 0))
        self._owner = np.array(owner, dtype=np.int64)
        self._rows = np.array(rows, dtype=np.int64)
        self._gpus = np.array(gpus, dtype=np.int64)
        self._memory = np.array(memory, dtype=np.int64)
        self._core = np.array(core, dtype=np.int64)
        self._row_of = np.array([state.index[r.node] for r in residents], dtype=np.int64)
        self._core_kind = np.array([r.request.wants_core for r in residents], dtype=bool)
        self._cpu = np.array([r.request.cpu for r in residents], dtype=np.int64)
        self._host_memory = np.array([r.request.host_memory for r in residents], dtype=np.int64)

    def fits_without(self, request, allowed, gone: np.ndarray) -> bool:
        """True when ``request`` fits some allowed node once the residents where ``gone`` is True are off."""
        view = self.view
        take = gone[self._owner] if len(self._owner) else np.zeros(0, dtype=bool)
        at = (self._rows[take], self._gpus[take])
        mem, core, pods = view.mem_used.astype(np.int64), view.core_used.astype(np.int64), view.pods.astype(np.int64)
        np.subtract.at(mem, at, self._memory[take])
        np.subtract.at(core, at, self._core[take])
        np.subtract.at(pods, at, 1)
        n = self.rows
        rows_gone = self._row_of[gone]
        memory_pods = view.memory_pods - np.bincount(rows_gone[~self._core_kind[gone]], minlength=n)[:n]
        core_pods = view.core_pods - np.bincount(rows_gone[self._core_kind[gone]], minlength=n)[:n]
        relaxed = with_usage(view, mem, core, pods, memory_pods, core_pods)
        relaxed = replace(relaxed, cpu_used=view.cpu_used - np.bincount(rows_gone, self._cpu[gone], n)[:n].astype(
            np.int64), host_mem_used=view.host_mem_used - np.bincount(rows_gone, self._host_memory[gone], n)[:n]
            .astype(np.int64))
        return bool((fit_on(relaxed, request, padded(allowed, n))[1] == R.FITS).any())

    def mask(self, keep) -> np.ndarray:
        return np.array([bool(keep(r)) for r in self.residents], dtype=bool)


def why_not(relaxed: Relaxed, waiting, allowances: dict, max_moves: int, search: str, cache: dict) -> str:
    """Why ``waiting`` gets no room (see module doc); ``cache`` keeps answers between alike pods."""
    key = (waiting.request.placement_key, id(waiting.allowed), waiting.priority)
    if key not in cache:
        cache[key] = _why_not(relaxed, waiting, allowances, max_moves, search)
    return cache[key]


def _why_not(relaxed: Relaxed, waiting, allowances: dict, max_moves: int, search: str) -> str:
    request, allowed, view = waiting.request, waiting.allowed, relaxed.view
    if relaxed.fits_without(request, allowed, relaxed.mask(lambda r: False)):
        return "fits on its own, but not together with the pods the plan puts before it"
    if not (padded(allowed, relaxed.rows) & view.known).any():
        return "no node its nodeSelector, node affinity and tolerations allow"
    zeros = np.zeros_like(view.mem_used)
    empty = with_usage(view, zeros, zeros, zeros, np.zeros_like(view.memory_pods), np.zeros_like(view.core_pods))
    reason = fit_on(empty, request, padded(allowed, relaxed.rows))[1]
    if not (reason == R.FITS).any():
        code = Counter(int(c) for c in reason[view.known]).most_common(1)[0][0]
        return f"fits no node even with every GPU empty: {MESSAGES[code]}"
    if not relaxed.fits_without(request, allowed, relaxed.mask(lambda r: True)):
        return "moves cannot help: GPU use in its way belongs to no pod the plan could move (e.g. unaccounted pods)"
    if not relaxed.fits_without(request, allowed, relaxed.mask(lambda r: r.movable)):
        stuck = Counter(r.why_not or "not movable" for r in relaxed.residents if not r.movable)
        return "the pods in its way may not move: " + ", ".join(f"{n} {why}" for why, n in stuck.most_common(3))
    lower = lambda r: r.movable and r.priority <= waiting.priority  # noqa: E731
    if not relaxed.fits_without(request, allowed, relaxed.mask(lower)):
        return "the pods in its way have a higher priority than it"
    if not relaxed.fits_without(request, allowed, relaxed.mask(
            lambda r: lower(r) and all(allowances.get(b, 0) > 0 for b in r.budgets))):
        return "PodDisruptionBudgets allow none of the evictions it needs"
    if search == "exact":
        return (f"no plan of at most {max_moves} moves (within the PodDisruptionBudgets) gives it room together "
                "with the pods the plan puts before it")
    return f"the heuristic found no way to give it room within the moves left (at most {max_moves} in all)"
