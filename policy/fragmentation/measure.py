"""GPU fragmentation of nodes for a mix of task shapes (FGD, Weng et al., USENIX ATC 2023).

For a node and a task shape m, the GPU share the node strands for m is

    F(node, m) = Σ_g idle(g)                   if m cannot run on the node at all
                 Σ_g idle(g) · [g cannot take m]   otherwise

where ``idle(g)`` is the unallocated share of healthy GPU g (1 = a whole
idle GPU; the smaller of the memory and compute shares on core_mem nodes).
m *cannot run* when the node's mode does not take its kind, its GPU model is
not one m may use, its CPU or host memory would not fit (checked only where the node's allocatable is known),
or fewer than k of its GPUs can take m's per-GPU share (a GPU takes it when
it is healthy, has the memory, compute and a pod slot free, and — for
require-whole-device shapes — is untouched and exactly that size). A shape
that asks for no GPU strands nothing on a node where it runs.

The node's fragmentation for a popularity ``p`` over shapes is
``Frag(node) = Σ_m p(m) · F(node, m)``; FGD places a task where it increases
Frag least. Everything is vectorised over nodes × GPUs × shape classes:
shapes with the same per-GPU demand and GPU count form one class u, and with
``A(node, u) = Σ_{m in u} p(m) · [node's mode, model, CPU and memory let m run]``

    Frag(node) = idle(node) − Σ_u A(node, u) · [≥ k_u GPUs take u] · (idle(node) − small(node, u))

where ``idle(node)`` is the node's total idle share and ``small(node, u)``
the idle share of its GPUs that cannot take u.

``stranded=True`` adds the idle share the node's CPU and memory strand for
good (the strategy's doc says why):

    Stranded(node) = Σ_g idle(g) · [g takes some class in could(node), none in can(node)]

where ``could`` holds the GPU classes (k ≥ 1) with a shape whose mode and
model let it run on the node, whatever its CPU and memory, and that find k
GPUs taking them, and ``can`` those of them with a shape the node's CPU and
memory let run too (A(node, u) > 0). It does not depend on the popularity,
only on which shapes were seen, and is worked out only on nodes where
``could`` and ``can`` differ.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from policy.fragmentation.shapes import Shapes
from policy.names import MODE_CORE, MODE_MEMORY
from policy.placement import fill
from policy.request import GPURequest
from policy.state import NodesView


def idle(view: NodesView, mem_used=None, core_used=None) -> np.ndarray:
    """Unallocated share of every healthy GPU (n, G): 1 = idle, 0 = full, absent or unhealthy."""
    mem_used = view.mem_used if mem_used is None else mem_used
    core_used = view.core_used if core_used is None else core_used
    share = fill(view.mem_total - mem_used, view.mem_total)
    core_mem = view.mode == MODE_CORE
    if core_mem.any():
        core = fill(view.core_total - core_used, view.core_total)
        share = np.where(core_mem[:, None], np.minimum(share, core), share)
    return np.where(view.healthy, share, 0.0)


def gpu_takes(view: NodesView, classes: tuple, mem_used, core_used, pods) -> np.ndarray:
    """(n, G, U): GPU g, with the given usage, can take the per-GPU demand of class u."""
    memory, core, whole, count = classes
    fits = (view.healthy & (pods < view.max_pod[:, None]))[..., None]
    fits = fits & ((view.mem_total - mem_used)[..., None] >= memory)
    if core.any():
        fits &= (view.core_total - core_used)[..., None] >= core
    if whole.any():
        untouched = ((mem_used == 0) & (core_used == 0) & (pods == 0))[..., None]
        size = (view.mem_total[..., None] == memory) & ((core == 0) | (view.core_total[..., None] == core))
        fits &= (whole == 0) | (untouched & size)
    return fits | (count == 0)


def allowed(view: NodesView, shapes: Shapes, cpu_used, host_used, memory_pods, core_pods, mode_ok=None) -> np.ndarray:
    """(n, U): A(node, u), the popularity of class u's shapes whose mode, model, CPU and memory the node lets run
    (``mode_ok``: :func:`_mode_ok` for these pod counts, when the caller has it)."""
    if mode_ok is None:
        mode_ok = _mode_ok(view, shapes, memory_pods, core_pods)
    return mode_ok * _popularity(view, shapes, cpu_used, host_used)


def _popularity(view: NodesView, shapes: Shapes, cpu_used, host_used) -> np.ndarray:
    """(n, U): the share of all popularity held by class u's shapes whose model, CPU and memory the node lets run."""
    cpu, memory, table = shapes.host_table
    i = np.where(view.cpu_total == 0, len(cpu), np.searchsorted(cpu, view.cpu_total - cpu_used, side="right"))
    j = np.where(view.host_mem_total == 0, len(memory),
                 np.searchsorted(memory, view.host_mem_total - host_used, side="right"))
    pressure = np.ones(len(table)) if shapes.pressure is None else shapes.pressure
    weight = (table[:, -1, -1, :] * pressure[:, None]).sum()  # all the popularity
    flat, lookup = i * table.shape[2] + j, table.reshape(len(table), -1, table.shape[-1])  # take: 2.5× faster
    if all(codes is None for codes in shapes.model_groups()):  # one group, any model: every node looks it up
        return pressure[0] * lookup[0].take(flat, axis=0) / weight
    popular = np.zeros((len(view), table.shape[-1]))
    for group, rows in enumerate(shapes.model_rows(view)):  # each group only on the nodes it may use
        if rows is None:
            part = lookup[group].take(flat, axis=0)
            part *= pressure[group]
            popular += part
        elif len(rows):  # in place, with take: 1.5× faster than fancy indexing at 15 groups
            part = lookup[group].take(flat.take(rows), axis=0)
            part *= pressure[group]
            part += popular.take(rows, axis=0)
            popular[rows] = part
    return popular / weight


def _mode_ok(view: NodesView, shapes: Shapes, memory_pods, core_pods) -> np.ndarray:
    """(n, U): the node's sharing mode takes class u's kind (and hosts no pod of the other kind)."""
    _, core, _, count = shapes.classes
    wants_core, anywhere = core > 0, count == 0
    core_ok = (view.mode == MODE_CORE) & (memory_pods == 0)
    memory_ok = (view.mode == MODE_MEMORY) & (core_pods == 0)
    # one of three rows per node (neither, core, memory: the two exclude each other): a row lookup is 6×
    # faster than broadcasting (n, 1) against (U,) at 2,462 nodes × 8 classes
    kinds = np.array([anywhere, anywhere | wants_core, anywhere | ~wants_core])
    return kinds.take(core_ok + 2 * memory_ok, axis=0)


def runnable_any_host(view: NodesView, shapes: Shapes, memory_pods, core_pods, mode_ok=None) -> np.ndarray:
    """(n, U) bool: class u has a shape whose mode and model let it run on the node, whatever its CPU and memory."""
    _, _, table = shapes.host_table
    has = table[:, -1, -1] > 0  # (groups, U): the group has a shape of class u
    if all(codes is None for codes in shapes.model_groups()):
        present = np.broadcast_to(has[0], (len(view), table.shape[-1]))
    else:
        member, index = shapes.model_members(view)
        present = (member[:, :, None] & has[None]).any(axis=1)[index]  # per distinct model, then per row
    return present & (_mode_ok(view, shapes, memory_pods, core_pods) if mode_ok is None else mode_ok)


def _gpu_classes(runnable, takers, count) -> np.ndarray:
    """(..., U) bool: the GPU classes (k ≥ 1) that are ``runnable`` on the node and find k GPUs taking them."""
    return runnable & (takers >= count) & (count > 0)


def _stranded(share, takes, could, can) -> np.ndarray:
    """Σ_g share(g) · [some class in ``could`` takes g, none in ``can`` does]; ``takes`` (m, G, U), classes (m, U)."""
    some = (takes & could[:, None, :]).any(axis=2)
    none = ~(takes & can[:, None, :]).any(axis=2)
    return (share * (some & none)).sum(axis=1)


def _stranded_of(share, takes, takers, runnable, allow, count) -> np.ndarray:
    """Stranded of every row from its parts, the classes its mode and model let run, and A(node, u)."""
    could, can = _gpu_classes(runnable, takers, count), _gpu_classes(allow > 0, takers, count)
    return _stranded_where(share, takes, could, can)


def _stranded_where(share, takes, could, can) -> np.ndarray:
    """:func:`_stranded` of every row, worked out only where ``could`` and ``can`` differ (elsewhere it is 0).

    ``takes`` is indexed as ``takes[rows, :]`` (an array or :class:`_RowTakes`).
    """
    value = np.zeros(len(share))
    risky = np.flatnonzero((could != can).any(axis=1))
    if len(risky):
        value[risky] = _stranded(share[risky], takes[risky, :], could[risky], can[risky])
    return value


def _strand(total, takers, small, allow, count) -> np.ndarray:
    """Frag from idle ``total`` (...,), GPUs taking each class and their ``small`` (..., U), ``allow`` (..., U)."""
    runs = np.where(takers >= count, allow, 0.0)
    # total − Σ_u runs·(total − small), without the (…, U) temporary: 1.7× faster at 8,000 × 12
    return total * (1 - runs.sum(axis=-1)) + np.einsum("...u,...u->...", runs, small)


def _parts(view: NodesView, classes: tuple, mem_used, core_used, pods) -> tuple:
    """Per node: idle total (n,), GPUs taking each class and the idle share of the others (n, U); (share, takes)."""
    share = idle(view, mem_used, core_used)
    takes = gpu_takes(view, classes, mem_used, core_used, pods)
    weights = np.ones((len(share), 2, share.shape[1]))  # (n, 2, G): a GPU, its idle share
    weights[:, 1] = share
    sums = np.matmul(weights, takes.astype(np.float64))  # (n, 2, U): GPUs taking u, their idle share
    total = share.sum(axis=1)
    return total, sums[:, 0], total[:, None] - sums[:, 1], share, takes


class Parts(NamedTuple):
    """The nodes' GPU parts as they are (:func:`_parts`) and which of their GPUs add a choice (:func:`distinct_gpus`)."""

    total: np.ndarray  # (n,) idle share
    takers: np.ndarray  # (n, U) GPUs taking class u
    small: np.ndarray  # (n, U) idle share of the GPUs not taking u
    share: np.ndarray  # (n, G) idle share per GPU
    takes: object  # (n, G, U) GPU g takes class u: an array, or _RowTakes (indexed [rows, gpus])
    distinct: np.ndarray  # (n, G)


def node_parts(view: NodesView, classes: tuple, cache=None) -> Parts:
    """:class:`Parts` of every row of ``view``, from ``cache`` (a :class:`~policy.fragmentation.cache.PartsCache`)
    where its rows are current."""
    if cache is None:
        return _fresh(view, classes)
    return cache.parts(view, classes)


def _fresh(view: NodesView, classes: tuple) -> Parts:
    return Parts(*_parts(view, classes, view.mem_used, view.core_used, view.pods), distinct_gpus(view))


def _allowed_now(view: NodesView, shapes: Shapes, mode_ok=None) -> np.ndarray:
    return allowed(view, shapes, view.cpu_used, view.host_mem_used, view.memory_pods, view.core_pods, mode_ok)


def _allowed_with(view: NodesView, shapes: Shapes, request: GPURequest, mode: np.ndarray) -> np.ndarray:
    """A(node, u) with the pod's CPU and host memory on each node, for nodes that take the pod's kind (any, for
    a pod without GPU): with the pod their mode (``mode``, :func:`_mode_ok` now) lets the same classes run."""
    return mode * _popularity(view, shapes, view.cpu_used + request.cpu, view.host_mem_used + request.host_memory)


def distinct_gpus(view: NodesView) -> np.ndarray:
    """(n, G): GPU g is the lowest-index GPU of its node in its exact state (the others add no choice)."""
    fields = (view.mem_used, view.core_used, view.pods, view.healthy)
    state = view.mem_used.astype(np.float64)
    for usage in fields[1:]:  # one number per distinct state
        state = state * (float(usage.max(initial=0)) + 1) + usage
    exact = state.max(initial=0) < 2**52  # else compare field by field
    seen = np.zeros(state.shape, dtype=bool)  # an earlier GPU of the node is in the same state
    for shift in range(1, state.shape[1]):  # G−1 shifted comparisons: 3× faster than an (n, G, G) one
        if exact:
            same = state[:, shift:] == state[:, :-shift]
        else:
            same = np.logical_and.reduce([usage[:, shift:] == usage[:, :-shift] for usage in fields])
        seen[:, shift:] |= same
    return ~seen


def fragmentation(view: NodesView, shapes: Shapes, cache=None,
                  stranded: bool = False) -> np.ndarray:
    """Frag of every node of ``view`` (n,), in GPUs (see module doc); Frag + Stranded with ``stranded``."""
    return _measure(view, shapes, node_parts(view, shapes.classes, cache), stranded)


def _measure(view: NodesView, shapes: Shapes, parts: Parts, stranded: bool, mode=None, runnable=None) -> np.ndarray:
    """:func:`fragmentation` from the node's parts as they are (``mode``, ``runnable``: :func:`_mode_ok` and
    :func:`runnable_any_host` of the nodes now, when the caller has them)."""
    total, takers, small, share, takes, _ = parts
    count = shapes.classes[3]
    allow = _allowed_now(view, shapes, mode)
    frag = _strand(total, takers, small, allow, count)
    if stranded:
        if runnable is None:
            runnable = runnable_any_host(view, shapes, view.memory_pods, view.core_pods, mode)
        frag = frag + _stranded_of(share, takes, takers, runnable, allow, count)
    return frag


def subview(view: NodesView, index: np.ndarray) -> NodesView:
    """The rows ``index`` of ``view`` (a full view or a row subset of one)."""
    return view.take(index)
