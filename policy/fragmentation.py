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

import threading
from typing import NamedTuple

import numpy as np

from policy.names import MODE_CORE, MODE_MEMORY
from policy.placement import fill
from policy.request import GPURequest
from policy.shapes import Shapes
from policy.starvation import starved_growth
from policy.state import VIEW_FIELDS, WRITING, NodesView


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
    if all(codes is None for codes in shapes.model_groups()):  # one group, any model: every node looks it up
        return pressure[0] * table[0][i, j] / weight
    flat, lookup = i * table.shape[2] + j, table.reshape(len(table), -1, table.shape[-1])
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
    wants_core = core > 0
    core_ok = ((view.mode == MODE_CORE) & (memory_pods == 0))[:, None]
    memory_ok = ((view.mode == MODE_MEMORY) & (core_pods == 0))[:, None]
    if not wants_core.any():
        return memory_ok | (count == 0)
    if wants_core.all():
        return core_ok | (count == 0)
    return (count == 0) | np.where(wants_core, core_ok, memory_ok)


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


def node_parts(view: NodesView, classes: tuple, cache: "PartsCache | None" = None) -> Parts:
    """:class:`Parts` of every row of ``view``, from ``cache`` where its rows are current."""
    if cache is None:
        return _fresh(view, classes)
    return cache.parts(view, classes)


def _fresh(view: NodesView, classes: tuple) -> Parts:
    return Parts(*_parts(view, classes, view.mem_used, view.core_used, view.pods), distinct_gpus(view))


def _allowed_now(view: NodesView, shapes: Shapes, mode_ok=None) -> np.ndarray:
    return allowed(view, shapes, view.cpu_used, view.host_mem_used, view.memory_pods, view.core_pods, mode_ok)


def _pods_after(view: NodesView, request: GPURequest) -> tuple:
    """The node's memory-only and memory+compute pod counts once ``request`` is on it."""
    wants_core = request.wants_core and request.gpu_count > 0
    takes_memory = (not request.wants_core) and request.gpu_count > 0
    return view.memory_pods + takes_memory, view.core_pods + wants_core


def _allowed_after(view: NodesView, shapes: Shapes, request: GPURequest) -> np.ndarray:
    return allowed(view, shapes, view.cpu_used + request.cpu, view.host_mem_used + request.host_memory,
                   *_pods_after(view, request))


class ModelPressure:
    """Idle GPU share per node (by state row) and its GPU model, over every node seen in a view.

    ``of(shapes)`` gives each model group of ``shapes`` the factor
    (idle share of all nodes) / (idle share of the nodes whose model it may
    use): a shape confined to a few models weighs by how scarce their idle
    capacity is in the cluster (1 for a group that may use any model, or when
    none of its models is idle). Rows are remembered from views, so the
    factor does not depend on which nodes one decision is asked about.
    Thread-safe.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._model = np.zeros(0, dtype=np.int64)
        self._idle = np.zeros(0)
        self._models = None  # np.unique(self._model, return_inverse=True), until a row's model changes

    def see(self, view: NodesView, free: np.ndarray | None = None) -> None:
        """Remember the rows of ``view``: their model and idle share (``free``: each row's, when the
        caller has it)."""
        known = view.row >= 0
        rows = view.row[known]
        if not len(rows):
            return
        free = (idle(view).sum(axis=1) if free is None else free)[known]
        models = view.model[known]
        with self._lock:
            if rows.max() >= len(self._idle):
                grow = int(rows.max()) + 1 - len(self._idle)
                self._model = np.concatenate([self._model, np.zeros(grow, dtype=np.int64)])
                self._idle = np.concatenate([self._idle, np.zeros(grow)])
                self._models = None
            if self._models is not None and (self._model[rows] != models).any():
                self._models = None
            self._model[rows] = models
            self._idle[rows] = free

    def of(self, shapes: Shapes) -> np.ndarray:
        groups = shapes.model_groups()
        if all(codes is None for codes in groups):
            return np.ones(len(groups))
        with self._lock:
            if self._models is None:
                models, index = np.unique(self._model, return_inverse=True)
                self._models = models, index.reshape(-1)
            models, index = self._models
            free = np.bincount(index, weights=self._idle, minlength=len(models))
        total = free.sum()
        by_model = dict(zip(models.tolist(), free.tolist()))
        usable = np.array([total if codes is None else sum(by_model.get(c, 0.0) for c in codes.tolist())
                           for codes in groups])
        return np.where(usable > 0, total / np.maximum(usable, 1e-12), 1.0)


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


_NEVER = WRITING - 1  # a cached row's version before it was ever computed (no state row has it)


class PartsCache:
    """Each node's GPU parts (idle shares, which GPUs take each class), kept per state row.

    A row is recomputed only when its ``version`` changed or the classes did,
    so a decision costs O(changed nodes × GPUs × classes) plus O(nodes ×
    classes). Views with unknown rows are computed directly. Thread-safe.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._key = None
        self._arrays: dict = {}

    def _reset(self, key, rows: int, gpus: int, classes: int) -> None:
        self._key = key
        self._arrays = {"version": np.full(rows, _NEVER, dtype=np.int64), "total": np.zeros(rows),
                        "takers": np.zeros((rows, classes)), "small": np.zeros((rows, classes)),
                        "share": np.zeros((rows, gpus)), "takes": np.zeros((rows, gpus, classes), dtype=bool),
                        "distinct": np.zeros((rows, gpus), dtype=bool)}

    def parts(self, view: NodesView, classes: tuple) -> Parts:
        """:class:`Parts` of the rows of ``view``, as :func:`node_parts` computes them."""
        if not len(view) or (view.row < 0).any():
            return _fresh(view, classes)
        key = (view.healthy.shape[1],) + tuple(np.asarray(c).tobytes() for c in classes)
        rows = view.row
        version = view.version.copy()  # before reading usage: a write meanwhile leaves the row stale
        with self._lock:
            a = self._arrays
            if key != self._key:
                self._reset(key, int(rows.max()) + 1, view.healthy.shape[1], len(classes[0]))
            elif rows.max() >= len(a["version"]):
                grow = int(rows.max()) + 1 - len(a["version"])
                for name, array in a.items():
                    pad = np.full((grow,) + array.shape[1:], _NEVER if name == "version" else 0, dtype=array.dtype)
                    a[name] = np.concatenate([array, pad])
            a = self._arrays
            stale = np.flatnonzero(a["version"][rows] != version)
            if len(stale):
                sub = subview(view, stale)
                total, takers, small, share, takes, distinct = _fresh(sub, classes)
                # kept only for rows read whole: not being written when noted (version WRITING), and
                # the same version after the read (a view read in place may see a write begin)
                whole = (version[stale] != WRITING) & (view.version[stale] == version[stale])
                if not whole.all():  # a row read torn: nothing kept; this decision, redone by its caller, works
                    return _fresh(view, classes)  # from what it read
                target = rows[stale]
                a["total"][target], a["takers"][target], a["small"][target] = total, takers, small
                # copy on write: a decision still reading the old rows through _RowTakes keeps them
                a["takes"] = a["takes"].copy()
                a["share"][target], a["takes"][target], a["distinct"][target] = share, takes, distinct
                a["version"][target] = version[stale]
            return Parts(a["total"][rows], a["takers"][rows], a["small"][rows], a["share"][rows],
                         _RowTakes(a["takes"], rows), a["distinct"][rows])


class _RowTakes:
    """``takes[i, g]`` of the view's rows without copying the whole (n, G, U) array.

    The array it holds is never written again (PartsCache copies it before
    changing rows), so another decision refreshing a row cannot change what this
    one reads mid-way."""

    def __init__(self, takes: np.ndarray, rows: np.ndarray):
        self._takes, self._rows = takes, rows

    def __getitem__(self, index):
        i, g = index
        return self._takes[self._rows[i], g]


def fragmentation(view: NodesView, shapes: Shapes, cache: PartsCache | None = None,
                  stranded: bool = False) -> np.ndarray:
    """Frag of every node of ``view`` (n,), in GPUs (see module doc); Frag + Stranded with ``stranded``."""
    return _measure(view, shapes, node_parts(view, shapes.classes, cache), stranded)


def _measure(view: NodesView, shapes: Shapes, parts: Parts, stranded: bool) -> np.ndarray:
    """:func:`fragmentation` from the node's parts as they are."""
    total, takers, small, share, takes, _ = parts
    count = shapes.classes[3]
    allow = _allowed_now(view, shapes)
    frag = _strand(total, takers, small, allow, count)
    if stranded:
        runnable = runnable_any_host(view, shapes, view.memory_pods, view.core_pods)
        frag = frag + _stranded_of(share, takes, takers, runnable, allow, count)
    return frag


def growth_per_gpu(view: NodesView, shapes: Shapes, request: GPURequest, candidates: np.ndarray,
                   parts: Parts | None = None, stranded: bool = False, appetite=None) -> np.ndarray:
    """(n, G): increase of Frag (+ Stranded, + Starved for an ``appetite`` (c̄, h̄): policy.starvation)
    if the single-GPU ``request`` went on GPU g; +inf where not a candidate. ``parts``: the
    nodes' :class:`Parts` for ``shapes.classes`` when the caller has them."""
    classes = shapes.classes
    count = classes[3]
    total, takers, small, share, takes, _ = node_parts(view, classes) if parts is None else parts
    mode_now = _mode_ok(view, shapes, view.memory_pods, view.core_pods)
    allow_now = _allowed_now(view, shapes, mode_now)
    before = _strand(total, takers, small, allow_now, count)

    rows, gpus = np.nonzero(candidates)
    one = _one_gpu_each(view, rows, gpus)
    mem_after = one.mem_used + request.memory_per_gpu
    core_after = one.core_used + request.core_per_gpu
    share_after = idle(one, mem_after, core_after)[:, 0]
    takes_after = gpu_takes(one, classes, mem_after, core_after, one.pods + 1)[:, 0]
    takes_before, share_before = takes[rows, gpus], share[rows, gpus]
    takers_after = takers[rows] - takes_before + takes_after
    small_after = small[rows] - share_before[:, None] * ~takes_before + share_after[:, None] * ~takes_after
    total_after = total[rows] - share_before + share_after
    allow_after = _allowed_after(view, shapes, request)
    change = _strand(total_after, takers_after, small_after, allow_after[rows], count) - before[rows]
    if stranded:
        change = change + _stranded_growth(view, shapes, share, takes, takers, allow_now, allow_after, rows, gpus,
                                           share_after, takes_after, takers_after, mode_now)
    if appetite is not None:
        change = change + starved_growth(view, rows, total[rows], total_after, request, appetite)

    growth = np.full(candidates.shape, np.inf)
    growth[rows, gpus] = change
    return growth


def _stranded_growth(view, shapes, share, takes, takers, allow_now, allow_after, rows, gpus, share_after,
                     takes_after, takers_after, mode_now) -> np.ndarray:
    """Stranded after − before for each candidate GPU (``rows``, ``gpus``) of :func:`growth_per_gpu`.

    ``allow_after`` is per node (n, U). Only nodes where the CPU and memory shut out a class the node could
    otherwise run, before or with the pod, can strand anything; the rest are skipped. With the pod a GPU
    takes no more classes than before, so a node that shuts none out with the GPUs as they are does not either
    with the pod on one of them. The node takes the pod's kind (it is a candidate), so its mode lets the same
    classes run after.
    """
    count = shapes.classes[3]
    runnable = runnable_any_host(view, shapes, view.memory_pods, view.core_pods, mode_now)
    could = _gpu_classes(runnable, takers, count)
    before = _stranded_where(share, takes, could, _gpu_classes(allow_now > 0, takers, count))
    shut_out = (could & (allow_after <= 0)).any(axis=1)
    risky = np.flatnonzero(shut_out[rows])
    after = np.zeros(len(rows))
    if len(risky):  # the candidate's node with the pod on GPU g
        pick, gpu, index = rows[risky], gpus[risky], np.arange(len(risky))
        node_takes, node_share = takes[pick, :], share[pick]
        node_takes[index, gpu] = takes_after[risky]
        node_share[index, gpu] = share_after[risky]
        after[risky] = _stranded(node_share, node_takes, _gpu_classes(runnable[pick], takers_after[risky], count),
                                 _gpu_classes(allow_after[pick] > 0, takers_after[risky], count))
    return after - before[rows]


def growth_on(view: NodesView, shapes: Shapes, request: GPURequest, gpus: np.ndarray,
              parts: Parts | None = None, stranded: bool = False, appetite=None) -> np.ndarray:
    """(n,): increase of Frag (+ Stranded, + Starved for an ``appetite``) if ``request`` went on each node's
    ``gpus`` (n, N), -1 = infeasible node; ``parts`` as for :func:`growth_per_gpu`."""
    classes = shapes.classes
    before = node_parts(view, classes) if parts is None else parts
    if request.gpu_count == 0:
        return _host_growth(view, shapes, request, before, stranded, appetite)
    chosen = np.zeros(view.healthy.shape, dtype=np.int64)
    if gpus.shape[1]:
        rows = np.repeat(np.arange(len(view)), gpus.shape[1])
        valid = gpus.reshape(-1) >= 0
        chosen[rows[valid], gpus.reshape(-1)[valid]] = 1
    if chosen.any():
        total, takers, small, share, takes = _parts(view, classes, view.mem_used + chosen * request.memory_per_gpu,
                                                    view.core_used + chosen * request.core_per_gpu, view.pods + chosen)
    else:
        total, takers, small, share, takes, _ = before
    allow = _allowed_after(view, shapes, request)
    frag = _strand(total, takers, small, allow, classes[3])
    if stranded:
        runnable = runnable_any_host(view, shapes, *_pods_after(view, request))
        frag = frag + _stranded_of(share, takes, takers, runnable, allow, classes[3])
    if appetite is not None:
        frag = frag + starved_growth(view, np.arange(len(view)), before[0], total, request, appetite)
    return frag - _measure(view, shapes, before, stranded)


def _host_growth(view: NodesView, shapes: Shapes, request: GPURequest, parts: Parts, stranded: bool,
                 appetite) -> np.ndarray:
    """:func:`growth_on` for a pod that takes no GPU: the GPUs and the pod counts stay, so Frag and
    Stranded change only on the nodes where its CPU and memory change what A(node, u) lets run; elsewhere
    only Starved (with an ``appetite``) does."""
    count = shapes.classes[3]
    mode = _mode_ok(view, shapes, view.memory_pods, view.core_pods)
    allow_now = _allowed_now(view, shapes, mode)
    allow = allowed(view, shapes, view.cpu_used + request.cpu, view.host_mem_used + request.host_memory,
                    view.memory_pods, view.core_pods, mode)
    growth = np.zeros(len(view))
    moved = np.flatnonzero((allow != allow_now).any(axis=1))
    if len(moved):
        total, takers, small, share = (a[moved] for a in parts[:4])
        takes = parts.takes[moved, :]
        growth[moved] = (_strand(total, takers, small, allow[moved], count)
                         - _strand(total, takers, small, allow_now[moved], count))
        if stranded:
            runnable = runnable_any_host(view, shapes, view.memory_pods, view.core_pods, mode)[moved]
            growth[moved] += (_stranded_of(share, takes, takers, runnable, allow[moved], count)
                              - _stranded_of(share, takes, takers, runnable, allow_now[moved], count))
    if appetite is not None:
        growth = growth + starved_growth(view, np.arange(len(view)), parts.total, parts.total, request, appetite)
    return growth


def subview(view: NodesView, index: np.ndarray) -> NodesView:
    """The rows ``index`` of ``view`` (a full view or a row subset of one)."""
    return view.take(index)


_PER_GPU_FIELDS = ("mode", "max_pod", "mem_total", "mem_used", "core_total", "core_used", "pods", "healthy")


def _one_gpu_each(view: NodesView, rows: np.ndarray, gpus: np.ndarray) -> NodesView:
    """The candidate GPUs as a view of M one-GPU nodes, with the fields :func:`idle` and
    :func:`gpu_takes` read (the others None)."""
    fields = dict.fromkeys(VIEW_FIELDS)
    for name in _PER_GPU_FIELDS:
        value = getattr(view, name)
        fields[name] = value[rows, gpus][:, None] if value.ndim == 2 else value[rows]
    return NodesView(**fields)
