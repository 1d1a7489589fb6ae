"""The plan: which pending pods get room, by which moves, and why the others do not.

See :mod:`policy.defrag` for the contract; this module orders the pending
pods, picks the exact search or the heuristic, and explains the outcome.
"""

from __future__ import annotations

from collections import Counter

from policy.defrag import exact, greedy
from policy.defrag.board import Board, Exhausted, Steps
from policy.defrag.explain import Relaxed, why_not
from policy.defrag.model import DEFAULT_MAX_MOVES, DefragPlan, Limits, Move, Placement
from policy.defrag.movable import budget_use
from policy.state import ClusterState



INTERNAL = "internal check failed: the plan was dropped (please report it)"


def bound_text(limits: Limits) -> str:
    return (f"exact (fewest moves proven) when at most {limits.exact_movers} pods could move, "
            f"{limits.exact_pending} pods wait, the cluster has at most {limits.exact_nodes} nodes and the search "
            f"ends within {limits.exact_steps} steps; beyond that a heuristic: per pending pod the "
            f"{limits.candidate_nodes} nodes needing fewest evictions, the evicted pods placed directly "
            f"(no chains); at most {limits.pending} pending pods per plan")


def plan(state: ClusterState, residents, pending, max_moves: int = DEFAULT_MAX_MOVES, *,
         budgets: dict | None = None, limits: Limits = Limits(), explain: bool = True) -> DefragPlan:
    """The fewest moves that let the ``pending`` pods fit (see :mod:`policy.defrag`)."""
    allowances = dict(budgets or {})
    max_moves = max(int(max_moves), 0)
    residents, pending = list(residents), list(pending)
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
    too_big = [f"{n} {what} (exact search: at most {most})" for n, what, most in (
        (len(movers), "pods could move", limits.exact_movers), (len(considered), "pods wait", limits.exact_pending),
        (len(state.specs), "nodes", limits.exact_nodes)) if n > most]
    if not movers:  # no pod may move: no move is the only plan, and the fewest
        outcome = _heuristic(board, considered, movers, max_moves, allowances, limits)
        reasons["search"] = "exact"
    elif not too_big:
        try:
            outcome = _exact(board, considered, movers, max_moves, allowances, Steps(limits.exact_steps))
            reasons["search"] = "exact"
        except Exhausted:
            board = Board(state)
            reasons["exactAbandoned"] = f"the exact search passed {limits.exact_steps} steps"
    else:
        reasons["exactAbandoned"] = "; ".join(too_big)
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
    relaxed, cache = None, {}
    for w in considered:
        if w.key in unblocks:
            served = sum(m.serves == w.key for m in moves)
            why[w.key] = f"gets room through {served} move{'s' if served != 1 else ''}" if served \
                else "gets room freed by the moves"
        elif w.key in placements:
            why[w.key] = "fits without moves"
        elif not explain:
            why[w.key] = "no room within the plan (not explained: explain=False)"
        else:
            relaxed = relaxed or Relaxed(state, known)
            why[w.key] = why_not(relaxed, w, allowances, max_moves, reasons["search"], cache)
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


def _placed_alone(board: Board, ordered: list) -> dict:
    """Each pod in order where it fits now (the extender's choice), its room counted: key → (row, gpus)."""
    placed = {}
    for w in ordered:
        spot = board.best(w.request, w.allowed)
        if spot is not None:
            board.place(w.request, *spot)
            placed[w.key] = spot
    return placed


def _heuristic(board: Board, ordered: list, movers: list, max_moves: int, allowances: dict, limits: Limits):
    """Pods in order on one board: placed where they fit, else given room by :func:`greedy.unblock`."""
    if not movers or max_moves == 0:
        return [], {k: _placement(board, *spot) for k, spot in _placed_alone(board, ordered).items()}, set()
    plain = set(_placed_alone(Board(board.state), ordered))
    moves, placements, unblocks, used = [], {}, set(), Counter()
    moved: set = set()
    failed: dict = {}  # (request, allowed, priority) → (moves, placements) made when no room could be made
    by_row: dict = {}
    for r in movers:
        by_row.setdefault(board.state.index[r.node], []).append(r)
    for w in ordered:
        spot = board.best(w.request, w.allowed)
        if spot is not None:
            board.place(w.request, *spot)
            placements[w.key] = _placement(board, *spot)
            if w.key not in plain:
                unblocks.add(w.key)
            continue
        key = (w.request.fit_key, id(w.allowed), w.priority)
        if failed.get(key) == (len(moves), len(placements)) or len(moves) == max_moves:
            continue  # an alike pod found no room, and nothing was placed since; or no move is left
        found = greedy.unblock(board, w, lambda row: [r for r in by_row.get(row, ()) if r.key not in moved and
                                                     r.priority <= w.priority],  # noqa: B023 - used at once
                               max_moves - len(moves), allowances, used, limits.candidate_nodes)
        if found is None:
            failed[key] = (len(moves), len(placements))
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
