"""The plan: which pending pods get room, by which moves, and why the others do not.

See :mod:`policy.defrag` for the contract; this module orders the pending
pods, picks the exact search or the heuristic, and explains the outcome.
"""

from __future__ import annotations

from collections import Counter

from policy import reasons as R
from policy.defrag import exact, greedy
from policy.defrag.board import NO_HOST_ROOM, NOT_ALLOWED, Board, Exhausted, Steps, padded
from policy.defrag.model import DEFAULT_MAX_MOVES, DefragPlan, Limits, Move, Placement
from policy.defrag.movable import budget_use
from policy.state import ClusterState

MESSAGES = {**R.MESSAGES, NOT_ALLOWED: "its nodeSelector, node affinity or tolerations keep it off the node",
            NO_HOST_ROOM: "the node lacks the CPU or memory it requests"}


INTERNAL = "internal check failed: the plan was dropped (please report it)"


def bound_text(limits: Limits) -> str:
    return (f"exact (fewest moves proven) when at most {limits.exact_movers} pods could move and the search "
            f"ends within {limits.exact_steps} steps; beyond that a heuristic: per pending pod the "
            f"{limits.candidate_nodes} nodes needing fewest evictions, the evicted pods placed directly "
            f"(no chains); at most {limits.pending} pending pods per plan")


def plan(state: ClusterState, residents, pending, max_moves: int = DEFAULT_MAX_MOVES, *,
         budgets: dict | None = None, limits: Limits = Limits()) -> DefragPlan:
    """The fewest moves that let the ``pending`` pods fit (see :mod:`policy.defrag`)."""
    allowances = dict(budgets or {})
    max_moves = max(int(max_moves), 0)
    reasons: dict = {"maxMoves": max_moves, "bound": bound_text(limits)}
    known = [r for r in residents if r.node in state.index]
    order = sorted(range(len(pending)), key=lambda i: -pending[i].priority)  # stable: age order within a priority
    ordered = [pending[i] for i in order]
    considered, later = ordered[:limits.pending], ordered[limits.pending:]
    why: dict = {w.key: f"beyond the {limits.pending} pending pods a plan considers" for w in later}
    reasons["movable"] = dict(sorted(Counter("movable" if r.movable else (r.why_not or "not movable")
                                             for r in known).items()))
    if not considered:
        reasons.update(search="none", summary="no pending shared-GPU pods", pending=why)
        return DefragPlan((), (), 0, reasons)
    top = max(w.priority for w in considered)
    movers = [r for r in known if r.movable and r.priority <= top
              and all(allowances.get(b, 0) > 0 for b in r.budgets)]
    board = Board(state)
    before = board.idle_gpus()
    outcome = None
    if len(movers) <= limits.exact_movers:
        try:
            outcome = _exact(board, considered, movers, max_moves, allowances, Steps(limits.exact_steps))
            reasons["search"] = "exact"
        except Exhausted:
            board = Board(state)
            reasons["exactAbandoned"] = f"the exact search passed {limits.exact_steps} steps"
    else:
        reasons["exactAbandoned"] = f"{len(movers)} pods could move (exact search: at most {limits.exact_movers})"
    if outcome is None:
        outcome = _heuristic(board, considered, movers, max_moves, allowances, limits)
        reasons["search"] = "heuristic"
    moves, placements, unblocks = outcome
    idle = _checked(state, moves, placements, {r.key: r for r in known}, {w.key: w for w in considered})
    if idle is None:
        reasons["summary"] = INTERNAL
        reasons["pending"] = {**why, **{w.key: INTERNAL for w in considered}}
        return DefragPlan((), (), 0, reasons, exact=False)
    freed = idle - before
    for w in considered:
        if w.key in unblocks:
            served = sum(m.serves == w.key for m in moves)
            why[w.key] = f"gets room through {served} move{'s' if served != 1 else ''}" if served \
                else "gets room freed by the moves"
        elif w.key in placements:
            why[w.key] = "fits without moves"
        else:
            why[w.key] = _why_not(state, w, known, allowances, max_moves, reasons["search"])
    reasons["pending"] = why
    if not moves:
        reasons["summary"] = ("no pending pod needs moves" if all(w.key in placements for w in considered)
                              else "no moves help: see pending")
    else:
        reasons["summary"] = (f"{len(moves)} move{'s' if len(moves) != 1 else ''} let{'s' if len(moves) == 1 else ''} "
                              f"{len(unblocks)} pending pod{'s' if len(unblocks) != 1 else ''} in")
    return DefragPlan(tuple(moves), tuple(k for k in (w.key for w in considered) if k in unblocks), freed, reasons,
                      placements, exact=reasons["search"] == "exact")


def _move(board: Board, resident, row: int, gpus: tuple, serves: str) -> Move:
    return Move(resident.key, resident.node, int(board.state.index[resident.node]), resident.gpus,
                board.names[row], int(row), tuple(int(g) for g in gpus), serves, resident.priority)


def _placement(board: Board, row: int, gpus) -> Placement:
    return Placement(board.names[row], int(row), tuple(int(g) for g in gpus))


def _exact(board: Board, ordered: list, movers: list, max_moves: int, allowances: dict, steps: Steps):
    """Pods in order, each kept if it and those kept before fit together within ``max_moves``; the
    fewest moves for the final set (:mod:`policy.defrag.exact`)."""
    without = []  # the pods that fit together without a move, in order (what the cluster gives anyway)
    for w in ordered:
        if exact.joint(board, without + [w], steps) is not None:
            without.append(w)
    kept, best = [], ([], [])
    for w in ordered:
        goal = kept + [w]
        floor = min(p.priority for p in goal)
        found = exact.fewest_moves(board, goal, [r for r in movers if r.priority <= floor], max_moves, allowances,
                                   steps, start=len(best[0]))
        if found is not None:
            kept, best = goal, found
    moves, spots = best
    plain = {w.key for w in without}
    unblocks = [w.key for w in kept if w.key not in plain]
    serves = unblocks[-1] if unblocks else ""
    return ([_move(board, r, row, gpus, serves) for r, row, gpus in moves],
            {w.key: _placement(board, row, gpus) for w, (row, gpus) in zip(kept, spots)}, set(unblocks))


def _heuristic(board: Board, ordered: list, movers: list, max_moves: int, allowances: dict, limits: Limits):
    """Pods in order on one board: placed where they fit, else given room by :func:`greedy.unblock`."""
    plain = set()
    alone = Board(board.state)
    for w in ordered:
        spot = alone.best(w.request, w.allowed)
        if spot is not None:
            alone.place(w.request, *spot)
            plain.add(w.key)
    moves, placements, unblocks, used = [], {}, set(), Counter()
    moved: set = set()
    failed: dict = {}  # (request, allowed, priority) → board generation when no room could be made
    for w in ordered:
        spot = board.best(w.request, w.allowed)
        if spot is not None:
            board.place(w.request, *spot)
            placements[w.key] = _placement(board, *spot)
            if w.key not in plain:
                unblocks.add(w.key)
            continue
        key = (w.request.fit_key, id(w.allowed), w.priority)
        if failed.get(key) == board.state.generation:
            continue
        by_row: dict = {}
        for r in movers:
            if r.key not in moved and r.priority <= w.priority:
                by_row.setdefault(board.state.index[r.node], []).append(r)
        found = greedy.unblock(board, w, by_row, max_moves - len(moves), allowances, used, limits.candidate_nodes)
        if found is None:
            failed[key] = board.state.generation
            continue
        steps, (row, gpus) = found
        for r, to_row, gpus_to in steps:
            moves.append(_move(board, r, to_row, gpus_to, w.key))
            moved.add(r.key)
        used.update(budget_use([r for r, _, _ in steps]))
        placements[w.key] = _placement(board, row, gpus)
        unblocks.add(w.key)
    return moves, placements, unblocks


def _checked(state: ClusterState, moves: list, placements: dict, residents: dict, pending: dict) -> int | None:
    """Replay the plan on a fresh copy: every replacement fits where it goes when it goes, and
    then every placed pending pod fits where the plan puts it. The idle GPUs the moves leave
    (before the pending pods), or None if any step does not hold (never expected: a plan
    that fails here is dropped, not given)."""
    board = Board(state)
    for m in moves:
        r = residents[m.pod]
        board.remove(r)
        if not board.fits_at(r.request, r.allowed, m.to_row, m.gpus):
            return None
        board.place(r.request, m.to_row, m.gpus)
    idle = board.idle_gpus()
    for key, spot in placements.items():
        w = pending[key]
        if not board.fits_at(w.request, w.allowed, spot.row, spot.gpus):
            return None
        board.place(w.request, spot.row, spot.gpus)
    return idle


def _why_not(state: ClusterState, w, residents: list, allowances: dict, max_moves: int, search: str) -> str:
    """Why the plan gives ``w`` no room, from the first of these that holds."""
    board = Board(state)
    request = w.request
    fit, reason = board.fit(request, w.allowed)
    if (reason == R.FITS).any():
        return "fits on its own, but not together with the pods the plan puts before it"
    known = board.view().known
    if not (padded(w.allowed, board.rows) & known).any():
        return "no node its nodeSelector, node affinity and tolerations allow"
    empty = board.fit_empty(request, w.allowed)
    if not (empty == R.FITS).any():
        codes = Counter(int(c) for c in empty[known])
        return f"fits no node even with every GPU empty: {MESSAGES[codes.most_common(1)[0][0]]}"

    def room_without(chosen) -> bool:
        for r in chosen:
            board.remove(r)
        try:
            return bool((board.fit(request, w.allowed)[1] == R.FITS).any())
        finally:
            for r in chosen:
                board.restore(r)

    if not room_without(residents):
        return "moves cannot help: GPU use in its way belongs to no pod the plan could move (e.g. unaccounted pods)"
    movable = [r for r in residents if r.movable]
    if not room_without(movable):
        stuck = Counter(r.why_not or "not movable" for r in residents if not r.movable)
        return "the pods in its way may not move: " + ", ".join(f"{n} {why}" for why, n in stuck.most_common(3))
    lower = [r for r in movable if r.priority <= w.priority]
    if not room_without(lower):
        return "the pods in its way have a higher priority than it"
    if not room_without([r for r in lower if all(allowances.get(b, 0) > 0 for b in r.budgets)]):
        return "PodDisruptionBudgets allow none of the evictions it needs"
    if search == "exact":
        return (f"no plan of at most {max_moves} moves (within the PodDisruptionBudgets) gives it room together "
                "with the pods the plan puts before it")
    return f"the heuristic found no way to give it room within the moves left (at most {max_moves} in all)"
