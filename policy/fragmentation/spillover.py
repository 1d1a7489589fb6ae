"""Spill-over: the share of the CPU-only pods to come whose CPU must come from beside idle GPUs.

Starved (:mod:`policy.fragmentation.starvation`) feeds an idle GPU at c̄, the CPU a GPU of
demand comes with. CPU-only pods come too, at a rate per GPU of demand

    r = Σ_{m CPU-only} n(m) · cpu(m) / Σ_{m GPU} n(m) · d(m)

(``n``, ``d`` as in :mod:`policy.fragmentation.starvation`). While the cluster's free CPU
is more than its idle GPUs' pods and the CPU-only pods coming with them will
want, CPU-only pods can run where no idle GPU needs the CPU. When it is less,
the shortfall falls where they land, beside idle GPUs:

    k = clip( (Σ_n (c̄ + r) · idle(n) − Σ_n cpu_free(n)) / Σ_n r · idle(n), 0, 1 )

over the nodes whose CPU is known, is the share of the CPU-only pods to come
that will eat CPU idle GPUs need, and Starved feeds an idle GPU at c̄ + k · r
(host memory alike, with its own k). k is 0 on a mix whose CPU is ample
whatever the placement, so Starved is then as before; it grows as CPU becomes
the scarcer resource.

The sums run over every node seen in a view, each kept at its row's version
(:class:`Spillover`): a look pays for the rows changed since they were last
seen, not for the cluster, and only every :data:`LOOK_EVERY`-th view is
looked at. A row in none of the last :data:`FORGET_AFTER` views looked at is
dropped from the sums: a node no pod can use any more (neither its GPU nor
its CPU fits one), or one that left the cluster without the owner being told
(:meth:`Spillover.forget` drops a removed node's row at once).
"""

from __future__ import annotations

import threading

import numpy as np

from policy.fragmentation.kept import NEVER
from policy.fragmentation.measure import idle
from policy.state import WRITING, NodesView

# A decision moves the sums by a row or two, and k by a few thousandths: looking at every view cost ~90 µs
# a decision at the trace's 1,213 nodes (most of it fixed numpy cost), every 8th ~20.
LOOK_EVERY = 8
FORGET_AFTER = 512  # looks (4,096 views); far more than the views between two that show a usable node
_SWEEP = 32  # looks between two searches for rows to forget


class Spillover:
    """Idle GPU, free CPU and free host memory of every node seen, by state row, and the shortfall
    they give (see module doc). Thread-safe."""

    def __init__(self):
        self._lock = threading.Lock()
        self._version = np.zeros(0, dtype=np.int64)
        self._seen = np.zeros(0, dtype=np.int64)  # the look that last showed the row
        self._values = np.zeros((0, 5))  # idle, cpu_free, host_free, cpu known, host known
        self._size = np.zeros(0)  # GPU memory per GPU
        self._idle_by_size: dict = {}  # GPU memory per GPU → [idle where CPU known, idle where memory known]
        self._free = [0.0, 0.0]  # free CPU, free host memory, where known
        self._views = 0
        self._looks = 0

    def see(self, view: NodesView) -> bool:
        """Take the rows of ``view`` that changed since they were last seen (every
        :data:`LOOK_EVERY`-th view; the others only count); True if it looked."""
        with self._lock:
            self._views += 1
            if self._views % LOOK_EVERY:
                return False
        index = np.flatnonzero(view.row >= 0)
        if not len(index):
            return True
        if len(index) < len(view):
            view = view.take(index)
        version = np.array(view.version)  # noted before the usage is read: a write meanwhile is seen
        rows = view.row
        with self._lock:
            self._looks += 1
            self._grow(int(rows.max()) + 1)
            self._seen[rows] = self._looks
            stale = np.flatnonzero(self._version[rows] != version)
            if len(stale):
                part = view.take(stale)
                values, size = _values(part)
                whole = (version[stale] != WRITING) & (np.asarray(part.version) == version[stale])
                keep, target = stale[whole], rows[stale[whole]]
                self._put(target, values[whole], size[whole], version[keep])
            if self._looks % _SWEEP == 0:
                self._forget()
        return True

    def forget(self, row: int) -> None:
        """Drop ``row`` from the sums (its node left the cluster)."""
        with self._lock:
            if 0 <= row < len(self._version) and self._version[row] != NEVER:
                self._drop(np.array([row]))

    def shortfall(self, sizes: np.ndarray, cpu: np.ndarray, host: np.ndarray, cpu_rate: np.ndarray,
                  host_rate: np.ndarray) -> tuple[float, float]:
        """(k for CPU, k for host memory), for c̄ (``cpu``), h̄ (``host``) and the CPU-only pods' rates
        r per GPU memory size in ``sizes`` (sorted); sizes not among them are left out."""
        with self._lock:
            by_size = {size: list(sums) for size, sums in self._idle_by_size.items()}
            free = list(self._free)
        at = {size: i for i, size in enumerate(np.asarray(sizes).tolist())}
        ks = []
        for j, (need, rate) in enumerate(((cpu, cpu_rate), (host, host_rate))):
            wanted = short = 0.0
            for size, sums in by_size.items():
                i = at.get(size)
                if i is not None:
                    wanted += rate[i] * sums[j]
                    short += (need[i] + rate[i]) * sums[j]
            short -= free[j]
            ks.append(min(max(short / wanted, 0.0), 1.0) if wanted > 0 else 0.0)
        return ks[0], ks[1]

    # -- the kept rows (under the lock) -----------------------------------------------------------
    def _grow(self, n: int) -> None:
        grow = n - len(self._version)
        if grow > 0:
            self._version = np.concatenate([self._version, np.full(grow, NEVER, dtype=np.int64)])
            self._seen = np.concatenate([self._seen, np.zeros(grow, dtype=np.int64)])
            self._values = np.concatenate([self._values, np.zeros((grow, 5))])
            self._size = np.concatenate([self._size, np.zeros(grow)])

    def _put(self, rows: np.ndarray, values: np.ndarray, size: np.ndarray, version: np.ndarray) -> None:
        self._add(self._values[rows], self._size[rows], -1.0)
        self._values[rows], self._size[rows], self._version[rows] = values, size, version
        self._add(values, size, 1.0)

    def _add(self, values: np.ndarray, size: np.ndarray, sign: float) -> None:
        # a decision changes a row or two: plain Python over them is 5× cheaper than numpy's grouping
        free, by_size = self._free, self._idle_by_size
        for (idle_, cpu_free, host_free, cpu_known, host_known), one in zip(values.tolist(), size.tolist()):
            free[0] += sign * cpu_free
            free[1] += sign * host_free
            sums = by_size.get(one)
            if sums is None:
                sums = by_size[one] = [0.0, 0.0]
            sums[0] += sign * idle_ * cpu_known
            sums[1] += sign * idle_ * host_known

    def _forget(self) -> None:
        old = np.flatnonzero((self._seen < self._looks - FORGET_AFTER) & (self._version != NEVER))
        if len(old):
            self._drop(old)

    def _drop(self, rows: np.ndarray) -> None:
        """Take ``rows`` out of the sums; seen again, they are read afresh."""
        self._put(rows, np.zeros((len(rows), 5)), np.zeros(len(rows)), np.full(len(rows), NEVER, dtype=np.int64))


def _values(view) -> tuple[np.ndarray, np.ndarray]:
    """Per row: (idle, free CPU, free host memory, CPU known, memory known) (n, 5), and the GPU memory
    per GPU (n,); free CPU and memory count only where known."""
    cpu_known = np.asarray(view.cpu_total) > 0
    host_known = np.asarray(view.host_mem_total) > 0
    values = np.stack([idle(view).sum(axis=1),
                       np.where(cpu_known, view.cpu_total - view.cpu_used, 0),
                       np.where(host_known, view.host_mem_total - view.host_mem_used, 0),
                       cpu_known, host_known], axis=1).astype(np.float64)
    mem_total = np.asarray(view.mem_total)
    size = mem_total[:, 0].astype(np.float64) if mem_total.shape[1] else np.zeros(len(values))
    return values, size
