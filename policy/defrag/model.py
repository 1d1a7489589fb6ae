"""What the defragmentation planner takes and gives: plain frozen values, no Kubernetes objects.

* :class:`Resident` — a bound pod holding a share of GPUs: where it is, the
  amounts counted for it there, what its replacement will ask for, and
  whether it may move at all (:mod:`policy.defrag.movable` decides that from
  the pod; the planner only reads ``movable``, ``priority`` and ``budgets``);
* :class:`Waiting` — a pending pod: its request, priority, and the nodes it
  may go to;
* :class:`Move` — evict one resident and place its replacement on named
  GPUs of a named node;
* :class:`DefragPlan` — the moves in the order they are to be made, the
  pending pods they let in, where every pod the plan places goes, the whole
  GPUs the moves free, and why (``reasons``: JSON-ready);
* :class:`Limits` — the search's bounds (the exact search's size, the
  heuristic's candidates).

Rows are rows of the :class:`~policy.state.ClusterState` given to
:func:`policy.defrag.plan`; an ``allowed`` mask is indexed by those rows
(shorter masks: the rows beyond are not allowed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Mapping

import numpy as np

from policy.request import GPURequest

DEFAULT_MAX_MOVES = 5


@dataclass(frozen=True, eq=False)
class Resident:
    """A pod holding GPU shares that a plan may move (see module doc)."""

    key: str  # "namespace/name": how moves name it
    node: str
    memory: Mapping[int, int]  # GPU index → GiB counted for the pod on that GPU
    core: Mapping[int, int]  # GPU index → compute counted (empty for a memory-only pod)
    request: GPURequest  # what its replacement asks for (GPU count, per-GPU shares, whole device, CPU, memory)
    priority: int = 0
    movable: bool = True
    why_not: str = ""  # why it may not move (movable False), e.g. "not owned by a controller"
    budgets: tuple = ()  # keys of the PodDisruptionBudgets that select it (see plan's ``budgets``)
    allowed: np.ndarray | None = None  # (rows,) bool: nodes its replacement may go to; None = every node

    @cached_property
    def gpus(self) -> tuple:
        """The GPU indices it holds a share of."""
        return tuple(sorted(set(self.memory) | set(self.core)))


@dataclass(frozen=True, eq=False)
class Waiting:
    """A pending pod the plan tries to make room for."""

    key: str  # "namespace/name"
    request: GPURequest
    priority: int = 0
    allowed: np.ndarray | None = None  # (rows,) bool: nodes it may go to; None = every node


@dataclass(frozen=True)
class Move:
    """Evict ``pod`` from ``from_gpus`` of ``from_node``; its replacement goes to ``gpus`` of ``to_node``."""

    pod: str
    from_node: str
    from_row: int
    from_gpus: tuple
    to_node: str
    to_row: int
    gpus: tuple
    serves: str  # the pending pod this move is made for (one of the plan's ``unblocks``)
    priority: int = 0  # the moved pod's


@dataclass(frozen=True)
class Placement:
    """Where the plan puts a pending pod once the moves are made."""

    node: str
    row: int
    gpus: tuple


@dataclass(frozen=True)
class DefragPlan:
    moves: tuple  # (Move, ...) in the order they are to be made
    unblocks: tuple  # keys of the pending pods that get room only through the moves, in the plan's order
    whole_gpus_freed: int  # healthy GPUs holding no pod after the moves, less those before
    reasons: dict  # JSON-ready: search mode and bound, and per pending pod why it is or is not let in
    placements: dict = field(default_factory=dict)  # pending key → Placement, every pod the plan places
    exact: bool = True  # the moves are proven fewest (the exact search finished within its bound)


@dataclass(frozen=True)
class Limits:
    """Bounds of the search (see :mod:`policy.defrag` for what each buys)."""

    exact_movers: int = 16  # exact search only when at most this many pods could move,
    exact_pending: int = 8  # ... at most this many pending pods are considered,
    exact_nodes: int = 64  # ... the cluster has at most this many nodes (a step's cost grows with them),
    exact_steps: int = 5_000  # ... and when it finishes within this many search steps
    candidate_nodes: int = 8  # heuristic: nodes tried per pending pod (the cheapest by eviction estimate)
    pending: int = 256  # pending pods a plan considers (in its order); the rest wait for the next plan
