"""The exact search: the fewest moves after which a set of pending pods fits together.

A plan of k moves moves k distinct pods (a pod moves at most once, and never
to exactly the GPUs it left), one after another: each replacement must fit
where it goes at the moment it goes there, with the pods evicted so far gone
and the rest still in place. After the last move the goal pods must fit
together (:func:`joint`: each in turn, on a node it may use).

:func:`fewest_moves` tries every set E of k movable pods for k = 0, 1, …,
max_moves, and for each one every order and every place of their
replacements (:func:`_arrange`). It returns the first plan it finds, so no
plan with fewer moves exists. What it prunes cannot hold a plan, because
fit only gets worse as usage grows (every rule of the filter is monotone in
memory, compute, pods per GPU and pods of the other mode on the node):

* a set E is tried only if the goal fits with all of E gone and none of its
  replacements placed (placing them can only take room), and if then, with
  the goal placed, the healthy GPUs of each sharing mode have in sum the free
  memory, compute and pod slots E's pods of that mode ask for;
* while E's replacements are placed one by one, a partial placement is
  kept only if the goal still fits with the unplaced rest of E gone;
* of a node's GPUs, those with equal capacity, equal usage and the same
  pods of E still on them are interchangeable: one of each kind is tried.

Every step (a set, a place, a joint placement tried) is counted in a
:class:`~policy.defrag.board.Steps`, which raises
:class:`~policy.defrag.board.Exhausted` past its bound.
"""

from __future__ import annotations

import itertools

import numpy as np

from policy.defrag.board import Board, Steps
from policy.defrag.movable import within_budgets
from policy.names import MODE_CORE, MODE_MEMORY


def joint(board: Board, goal: list, steps: Steps) -> list | None:
    """``[(row, gpus), ...]`` placing every pod of ``goal`` in turn on the board as it is now,
    or None when no such placement exists (found by backtracking)."""
    if not goal:
        return []
    steps.tick()
    first, rest = goal[0], goal[1:]
    for row, gpus in board.places(first.request, first.allowed):
        steps.tick()
        if not rest:
            return [(row, gpus)]
        board.place(first.request, row, gpus)
        try:
            after = joint(board, rest, steps)
        finally:
            board.place(first.request, row, gpus, -1)
        if after is not None:
            return [(row, gpus)] + after
    return None


def fewest_moves(board: Board, goal: list, movers: list, max_moves: int, allowances: dict, steps: Steps,
                 start: int = 0) -> tuple | None:
    """``(moves, placements)`` with the fewest moves (at least ``start``) that let ``goal`` fit
    together, or None when no plan of at most ``max_moves`` moves does. ``moves``:
    ``[(resident, row, gpus), ...]`` in order; ``placements``: the goal's, as :func:`joint`."""
    for k in range(start, max_moves + 1):
        for chosen in itertools.combinations(movers, k):
            if not within_budgets(chosen, allowances):
                continue
            steps.tick()
            for resident in chosen:
                board.remove(resident)
            try:
                spots = joint(board, goal, steps)
                found = _arrange(board, list(chosen), goal, steps, []) \
                    if spots is not None and _room_enough(board, chosen, goal, spots) else None
            finally:
                for resident in chosen:
                    board.restore(resident)
            if found is not None:
                return found
    return None


def _arrange(board: Board, unmoved: list, goal: list, steps: Steps, done: list) -> tuple | None:
    """Place the replacements of ``unmoved`` (all taken off the board) in some order; the plan
    ``(done + theirs, goal placements)``, or None. The board comes back as it was given."""
    if not unmoved:
        placements = joint(board, goal, steps)
        return (list(done), placements) if placements is not None else None
    for i, resident in enumerate(unmoved):
        others = unmoved[:i] + unmoved[i + 1:]
        steps.tick()
        for other in others:  # the moment this pod moves, the rest are still where they were
            board.restore(other)
        try:
            places = list(board.places(resident.request, resident.allowed, _marks(board, others)))
        finally:
            for other in others:
                board.remove(other)
        source = (board.state.index[resident.node], resident.gpus)
        for row, gpus in places:
            if (row, tuple(gpus)) == source:
                continue
            steps.tick()
            board.place(resident.request, row, gpus)
            try:
                found = _arrange(board, others, goal, steps, done + [(resident, row, tuple(gpus))]) \
                    if joint(board, goal, steps) is not None else None
            finally:
                board.place(resident.request, row, gpus, -1)
            if found is not None:
                return found
    return None


def _room_enough(board: Board, chosen, goal: list, spots: list) -> bool:
    """False when, with the goal placed, the free memory (and compute, and pod slots) of healthy
    GPUs on the nodes of each sharing mode is less than the chosen pods of that mode ask for:
    their replacements could then not all be placed, wherever the goal goes (a sum that does not
    depend on where)."""
    if not chosen:
        return True
    for w, (row, gpus) in zip(goal, spots):
        board.place(w.request, row, gpus)
    try:
        view = board.view()
        usable = view.healthy & view.known[:, None]
        for mode in (MODE_MEMORY, MODE_CORE):
            pods = [r for r in chosen if r.request.wants_core == (mode == MODE_CORE)]
            if not pods:
                continue
            on = usable & (view.mode == mode)[:, None]
            memory = np.clip(view.mem_total - view.mem_used, 0, None)[on].sum()
            core = np.clip(view.core_total - view.core_used, 0, None)[on].sum()
            slots = np.clip(view.max_pod[:, None] - view.pods, 0, None)[on].sum()
            if memory < sum(r.request.memory for r in pods) or core < sum(r.request.core for r in pods) \
                    or slots < sum(r.request.gpu_count for r in pods):
                return False
        return True
    finally:
        for w, (row, gpus) in zip(goal, spots):
            board.place(w.request, row, gpus, -1)


def _marks(board: Board, residents: list):
    """``row → {gpu: keys of these residents on it}``, for telling GPUs apart in :meth:`Board.gpu_sets`."""
    by_row: dict = {}
    for r in residents:
        for g in r.gpus:
            by_row.setdefault(board.state.index[r.node], {}).setdefault(g, set()).add(r.key)
    return lambda row: by_row.get(row, {})
