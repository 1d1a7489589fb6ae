"""Defragmentation: the fewest moves that turn stranded GPU fragments into room for pending pods.

Pure: numpy arrays and plain values in, a plan out; no Kubernetes objects, no
clock, no global state. The public API (stable; other code builds on it)::

    from policy.defrag import plan, Resident, Waiting, Limits, DEFAULT_MAX_MOVES

    result = plan(state, residents, pending, max_moves=5, budgets={"ns/pdb": 1}, limits=Limits(), explain=True)
    result.moves             # (Move, ...) in order: pod, from_node/from_row/from_gpus, to_node/to_row/gpus,
                             #   serves (the pending pod it is for), priority
    result.unblocks          # ("ns/name", ...) pending pods that get room only through the moves
    result.whole_gpus_freed  # int: healthy GPUs holding no pod after the moves, less those before
    result.reasons           # dict, JSON-ready: "search" ("exact" | "heuristic" | "none"), "bound",
                             #   "maxMoves", "summary", "movable" (pods by why they may or may not move),
                             #   "pending" (per pending pod: how it gets room, or why not), "exactAbandoned"
    result.placements        # {"ns/name": Placement(node, row, gpus)} every pending pod the plan places
    result.exact             # True when the moves are proven fewest

Inputs:

* ``state`` — a :class:`~policy.state.ClusterState` as the extender keeps
  it, every resident's share counted in it (the plan works on a copy);
* ``residents`` — :class:`~policy.defrag.model.Resident` for each bound pod
  holding GPU shares that the plan should know about (keys unique; one on a
  node the state does not know is ignored); GPU use counted in
  ``state`` but held by no resident (unaccounted pods, other holds) never
  moves. A resident names its node, the GiB and compute counted per GPU,
  its replacement's :class:`~policy.request.GPURequest`, its priority,
  whether it may move (:mod:`policy.defrag.movable` has the rules), the
  PodDisruptionBudgets selecting it and the nodes its replacement may use;
* ``pending`` — :class:`~policy.defrag.model.Waiting` pods, oldest first:
  the plan takes them by priority (highest first), then in the order given;
* ``max_moves`` — most moves in the plan;
* ``budgets`` — PodDisruptionBudget key → ``status.disruptionsAllowed``;
  each move uses one of every budget selecting the moved pod, counted
  across the whole plan;
* ``explain`` — False skips working out why each pod left out gets no room
  (its reason then only says so): for callers that read the moves alone.

The rules. A move evicts one resident and places its replacement on named
GPUs of a named node; a pod moves at most once, never back onto exactly the
GPUs it left, and its replacement must fit where it goes when it goes
(the moves before it made, the ones after not yet). Fit is the filter's:
:func:`policy.placement.gpu_fit` (mode, no mixing, memory and compute per
GPU, pods per GPU, unhealthy GPUs, whole device, several GPUs on one node),
plus the pod's allowed nodes and, where known, the node's allocatable CPU and
memory (:mod:`policy.defrag.board`). Only residents with ``movable`` set,
budgets left and a priority no higher than the pending pods they are moved
for ever move. After the moves, every pod of ``placements`` fits where it is
put, in the plan's order. Nothing is ever placed past a GPU's capacity; a
plan is checked step by step on a fresh copy before it is returned.

Which pods, and how many moves. Pending pods are taken in order; a pod is
kept when it and the pods kept before it can all have room within
``max_moves`` moves, else left out with its reason. ``unblocks`` are the
kept pods that the same rule with no moves would not keep.

The bound (also in ``reasons["bound"]``, with the figures in force):

* **exact** when at most ``Limits.exact_movers`` (16) pods could move,
  ``Limits.exact_pending`` (8) pods wait, the cluster has at most
  ``Limits.exact_nodes`` (64) nodes, and the search ends within
  ``Limits.exact_steps`` (5,000) steps (a step: a set of pods, a joint
  placement or a place tried, a pod's places listed; on the 2-core test VM
  a bound that ends the search within about a second): for the kept set, no
  plan with fewer moves exists (:mod:`policy.defrag.exact` says why its
  pruning loses none). Then every move has a priority no higher than every
  pod in ``unblocks``, and ``serves`` names the last of them. When no pod
  may move at all, the plan is no move, and exact too;
* **heuristic** beyond: pods in order, each given room on one node by
  evicting few pods from it, those placed directly elsewhere, no chains;
  per pending pod at most ``Limits.candidate_nodes`` (8) nodes simulated out
  of 4 × that many ranked (:mod:`policy.defrag.greedy`). Each move has a
  priority no higher than the pod it ``serves``;
* at most ``Limits.pending`` (256) pending pods per plan.

An empty plan says why in ``reasons["summary"]`` and per pod in
``reasons["pending"]``: no node would take it even empty, moves cannot help,
the pods in its way may not move (and why), have a higher priority, or
their budgets allow no disruption, or it needs more moves than allowed.
"""

from policy.defrag.model import DEFAULT_MAX_MOVES, DefragPlan, Limits, Move, Placement, Resident, Waiting
from policy.defrag.planner import plan

__all__ = ["plan", "DefragPlan", "Move", "Placement", "Resident", "Waiting", "Limits", "DEFAULT_MAX_MOVES"]
