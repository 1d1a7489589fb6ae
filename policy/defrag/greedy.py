"""The bounded heuristic: room for one pending pod on one node, its evicted pods placed directly.

For a pending pod that fits nowhere, :func:`unblock`:

1. takes the nodes where moves could help — the pod may go there and the
   filter refuses it only for want of room now (memory, compute, pod slots,
   completely free GPUs, pods of the other mode) — and ranks them by an
   estimate of the evictions they need (per GPU: none if the pod fits it,
   else the pods on it; a node: its cheapest N GPUs, plus its pods of the
   other mode). Of the ``4 × candidate_nodes`` best it works out an eviction
   set (:func:`_evictions`);
2. per node, the set: every pod of the other mode, then per GPU the fewest
   movable pods whose shares make room (largest first, then every pod that
   can be spared is put back), on the N GPUs that need fewest; kept only if
   the pod then fits the node (:meth:`Board.fits_at`);
3. of the ``candidate_nodes`` nodes with the smallest sets, the first whose
   evicted pods can each be placed directly somewhere else (no chain of
   moves), in the order largest first, is taken (:func:`_simulate`). The
   pending pod's room is counted on the board before the replacements are
   placed, so none of them takes it; each replacement goes where the
   extender would put it (the node Binpack scores highest, the node label's
   GPU choice), never back onto exactly the GPUs it left.

So a plan's moves for one pod all free room on one node. The bound per
pending pod: ``4 × candidate_nodes`` eviction sets, ``candidate_nodes``
simulations, each one evaluation over every node per evicted pod.
"""

from __future__ import annotations

import numpy as np

from policy import reasons as R
from policy.defrag.board import Board
from policy.defrag.movable import within_budgets
from policy.names import UNLIMITED_PODS

# why the filter refuses a node that moves could open up
RESOLVABLE = np.array([R.OTHER_MODE_PODS, R.NO_FREE_GPU, R.NO_MEMORY, R.NO_CORE, R.NO_POD_SLOT, R.NO_SINGLE_GPU])
_BIG = 10 ** 6


def unblock(board: Board, waiting, movers_at, moves_left: int, allowances: dict, used: dict,
            candidate_nodes: int) -> tuple | None:
    """``(moves, (row, gpus))`` that make room for ``waiting`` and where it then goes, applied to the
    board; None (the board unchanged) when no candidate works. ``movers_at(row)``: the residents
    there that may move for this pod; ``used``: disruptions the plan has taken from each budget
    so far."""
    request = waiting.request
    fit, reason = board.fit(request, waiting.allowed)
    rows = np.flatnonzero(np.isin(reason, RESOLVABLE))
    if not len(rows) or moves_left <= 0:
        return None
    view = board.view()
    ranked = rows[np.argsort(_estimate(view, rows, request, fit), kind="stable")][:4 * candidate_nodes]
    options = []
    for row in ranked.tolist():
        found = _evictions(board, view, row, waiting, movers_at(row))
        if found is not None and len(found[0]) <= moves_left and within_budgets(found[0], allowances, used):
            options.append((len(found[0]), row, found))
    options.sort(key=lambda option: option[:2])
    for _, row, (evicted, gpus) in options[:candidate_nodes]:
        moves = _simulate(board, waiting, row, gpus, evicted)
        if moves is not None:
            return moves, (row, gpus)
    return None


def _estimate(view, rows: np.ndarray, request, fit: np.ndarray) -> np.ndarray:
    """Per row, a guess of the evictions it needs: pods on its N cheapest GPUs, plus the other mode's pods."""
    pods = np.take(view.pods, rows, axis=0)
    cost = np.where(np.take(fit, rows, axis=0), 0, pods)
    cost = np.where(np.take(view.healthy, rows, axis=0), cost, _BIG)
    n = request.gpu_count
    cheapest = np.sort(cost, axis=1)[:, :n].sum(axis=1)
    other = np.take(view.memory_pods if request.wants_core else view.core_pods, rows)
    return cheapest + other


def _evictions(board: Board, view, row: int, waiting, movers) -> tuple | None:
    """``(residents to evict, the N GPUs the pod then takes)`` on ``row``, or None (see module doc)."""
    request = waiting.request
    m, c, n = request.memory_per_gpu, request.core_per_gpu, request.gpu_count
    other = [r for r in movers if r.request.wants_core != request.wants_core]
    others_counted = int((view.memory_pods if request.wants_core else view.core_pods)[row])
    if len(other) < others_counted:
        return None  # a pod of the other mode that may not move stays on the node
    required = set(other)
    max_pod = int(view.max_pod[row])
    costs = []
    for g in range(int(view.gpu_count[row])):
        if not view.healthy[row, g]:
            continue
        on_gpu = [r for r in movers if g in r.gpus]
        gone = [r for r in on_gpu if r in required]
        free_mem = int(view.mem_free[row, g]) + sum(r.memory.get(g, 0) for r in gone)
        free_core = int(view.core_free[row, g]) + sum(r.core.get(g, 0) for r in gone)
        pods = int(view.pods[row, g]) - len(gone)
        left = [r for r in on_gpu if r not in required]
        if request.whole_device:
            if len(left) < pods:
                continue  # a pod that may not move stays on the GPU
            chosen = left
        else:
            chosen = _fewest(left, g, m - free_mem, c - free_core if c else 0,
                             pods - (max_pod - 1) if max_pod != UNLIMITED_PODS else 0)
            if chosen is None:
                continue
        costs.append((len(chosen), g, chosen))
    if len(costs) < n:
        return None
    costs.sort(key=lambda item: item[:2])
    evicted = set(required)
    gpus = []
    for _, g, chosen in costs[:n]:
        evicted.update(chosen)
        gpus.append(g)
    evicted = sorted(evicted, key=lambda r: (-sum(r.memory.values()), -sum(r.core.values()), r.key))
    gpus = tuple(sorted(gpus))
    for r in evicted:
        board.remove(r)
    try:
        fits = board.fits_at(request, waiting.allowed, row, gpus)
    finally:
        for r in evicted:
            board.restore(r)
    return (evicted, gpus) if fits else None


def _fewest(residents: list, gpu: int, memory: int, core: int, slots: int) -> list | None:
    """Few residents whose shares on ``gpu`` free ``memory`` GiB, ``core`` compute and ``slots`` pod
    slots: the largest first until enough, then each one that can be spared put back."""
    if memory <= 0 and core <= 0 and slots <= 0:
        return []
    ranked = sorted(residents, key=lambda r: (-r.memory.get(gpu, 0), -r.core.get(gpu, 0), r.key))

    def enough(chosen):
        return (sum(r.memory.get(gpu, 0) for r in chosen) >= memory and sum(r.core.get(gpu, 0) for r in chosen) >= core
                and len(chosen) >= slots)

    chosen = []
    for r in ranked:
        chosen.append(r)
        if enough(chosen):
            break
    else:
        return None
    for r in reversed(list(chosen)):
        rest = [x for x in chosen if x is not r]
        if enough(rest):
            chosen = rest
    return chosen


def _simulate(board: Board, waiting, row: int, gpus: tuple, evicted: list) -> list | None:
    """Hold the pending pod's room, move each evicted pod in turn; the moves ``[(resident, row,
    gpus), ...]`` with the board changed, or None with the board as it was."""
    request = waiting.request
    board.place(request, row, gpus)  # the room it will take: no replacement may land in it
    moves = []
    ok = True
    for resident in evicted:
        board.remove(resident)
        target = board.best(resident.request, resident.allowed, (board.state.index[resident.node], resident.gpus))
        if target is None:
            board.restore(resident)
            ok = False
            break
        board.place(resident.request, *target)
        moves.append((resident, *target))
    if ok:
        touched = [row] + [t[1] for t in moves]
        board.place(request, row, gpus, -1)
        ok = board.within_capacity(touched) and board.fits_at(request, waiting.allowed, row, gpus)
        board.place(request, row, gpus)
    if ok:
        return moves
    for resident, target_row, target_gpus in reversed(moves):
        board.place(resident.request, target_row, target_gpus, -1)
        board.restore(resident)
    board.place(request, row, gpus, -1)
    return None
