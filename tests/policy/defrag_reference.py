"""A brute-force reference for the defragmentation planner, in plain Python.

The cluster is dictionaries; the fit rules are restated one GPU at a time
(:func:`fits_at`), not taken from :mod:`policy.placement`; every sequence of
moves up to a length is tried (:func:`fewest_moves`), with no pruning. Slow,
and only for clusters of a few nodes and pods.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field

from policy.names import MODE_CORE, MODE_NONE


@dataclass
class RefNode:
    name: str
    mode: int
    gpus: int
    memory: int  # GiB per GPU
    core: int  # compute per GPU
    max_pod: int
    unhealthy: frozenset = frozenset()
    used_mem: list = field(default_factory=list)
    used_core: list = field(default_factory=list)
    pods: list = field(default_factory=list)
    memory_pods: int = 0
    core_pods: int = 0

    def __post_init__(self):
        self.used_mem = self.used_mem or [0] * self.gpus
        self.used_core = self.used_core or [0] * self.gpus
        self.pods = self.pods or [0] * self.gpus


def fits_at(nodes: list, request, node: int, gpus, allowed=None) -> bool:
    """The filter's rules for ``request`` on exactly ``gpus`` of ``nodes[node]``."""
    n = nodes[node]
    if allowed is not None and not (node < len(allowed) and allowed[node]):
        return False
    if n.mode == MODE_NONE or request.wants_core != (n.mode == MODE_CORE):
        return False
    if (n.memory_pods if request.wants_core else n.core_pods) > 0:
        return False
    m, c, count = request.memory_per_gpu, request.core_per_gpu, request.gpu_count
    if len(set(gpus)) != count or any(g >= n.gpus for g in gpus):
        return False
    if request.whole_device and (n.memory != m or (c and n.core != c)):
        return False
    for g in gpus:
        if g in n.unhealthy or n.pods[g] >= n.max_pod:
            return False
        if n.memory - n.used_mem[g] < m or (c and n.core - n.used_core[g] < c):
            return False
        if request.whole_device and (n.used_mem[g] or n.used_core[g] or n.pods[g]):
            return False
    return True


def count(nodes: list, node: int, memory: dict, core: dict, wants_core: bool, sign: int) -> None:
    n = nodes[node]
    for g in set(memory) | set(core):
        n.used_mem[g] += sign * memory.get(g, 0)
        n.used_core[g] += sign * core.get(g, 0)
        n.pods[g] += sign
    if wants_core:
        n.core_pods += sign
    else:
        n.memory_pods += sign


def shares(request, gpus) -> tuple[dict, dict]:
    per_mem = request.memory // len(gpus)
    per_core = request.core // len(gpus)
    return {g: per_mem for g in gpus}, ({g: per_core for g in gpus} if request.wants_core else {})


def place(nodes: list, request, node: int, gpus, sign: int = 1) -> None:
    memory, core = shares(request, gpus)
    count(nodes, node, memory, core, request.wants_core, sign)


def places(nodes: list, request, allowed=None):
    for node, n in enumerate(nodes):
        for gpus in itertools.combinations(range(n.gpus), max(request.gpu_count, 0)):
            if fits_at(nodes, request, node, gpus, allowed):
                yield node, gpus


def within_capacity(nodes: list) -> bool:
    return all(n.used_mem[g] <= n.memory and (n.mode != MODE_CORE or n.used_core[g] <= n.core)
               and n.pods[g] <= n.max_pod for n in nodes for g in range(n.gpus))


def joint(nodes: list, goal: list) -> bool:
    """Every goal pod ``(request, allowed)`` placed in turn, by trying every place."""
    if not goal:
        return True
    (request, allowed), rest = goal[0], goal[1:]
    for node, gpus in list(places(nodes, request, allowed)):
        place(nodes, request, node, gpus)
        ok = joint(nodes, rest)
        place(nodes, request, node, gpus, -1)
        if ok:
            return True
    return False


@dataclass
class RefResident:
    key: str
    node: int
    memory: dict
    core: dict
    request: object
    allowed: object = None
    budgets: tuple = ()


def fewest_moves(nodes: list, movers: list, goal: list, max_moves: int, allowances: dict) -> int | None:
    """The fewest moves (each a distinct mover, to a place it fits that is not exactly where it
    was) after which ``goal`` fits together; None if more than ``max_moves`` are needed."""
    nodes = copy.deepcopy(nodes)
    for k in range(max_moves + 1):
        if _search(nodes, movers, goal, k, allowances, frozenset()):
            return k
    return None


def _search(nodes, movers, goal, left, allowances, moved) -> bool:
    if left == 0:
        return joint(nodes, goal)
    for r in movers:
        if r.key in moved:
            continue
        use = {}
        for m in movers:
            if m.key in moved or m is r:
                for b in m.budgets:
                    use[b] = use.get(b, 0) + 1
        if any(n > allowances.get(b, 0) for b, n in use.items()):
            continue
        count(nodes, r.node, r.memory, r.core, r.request.wants_core, -1)
        source = (r.node, tuple(sorted(set(r.memory) | set(r.core))))
        for node, gpus in list(places(nodes, r.request, r.allowed)):
            if (node, tuple(gpus)) == source:
                continue
            place(nodes, r.request, node, gpus)
            ok = _search(nodes, movers, goal, left - 1, allowances, moved | {r.key})
            place(nodes, r.request, node, gpus, -1)
            if ok:
                count(nodes, r.node, r.memory, r.core, r.request.wants_core, 1)
                return True
        count(nodes, r.node, r.memory, r.core, r.request.wants_core, 1)
    return False
