"""Room held for a defragmentation move: the replacement's GPUs and the pending pod's freed room.

When the executor (:mod:`extender.defrag.executor`) evicts a pod, it holds:

* for the **replacement** — the next pod of the evicted pod's controller
  (``owner``, ``namespace/uid`` of the owner reference with ``controller:
  true``; not the evicted pod itself) — the GPUs the plan chose on the node it
  chose. Filter, prioritize and bind steer it there: every other node is
  refused with :data:`~policy.reasons.HELD_ELSEWHERE`, and on its node it is
  given the planned GPUs when they fit (else the node's usual choice);
* for each **pending pod** the plan lets in (``uid``) the room the plan puts
  it in, which the moves are freeing; on that node it is given the planned
  GPUs when they fit (it may go to any node it fits).

Every pod but a hold's own, of the hold's priority or lower, sees the held
GPUs as taken (:meth:`DefragHolds.hold_back`, as :mod:`extender.nominations`
does for preemptors; a pod of higher priority is not held back, as in
kube-scheduler) — the pods of one plan too, so a replacement never takes the
room the pending pod waits for. A held GPU may be counted past its capacity
while the moves are still under way; it then takes nothing. Every bind still
goes through the ledger's re-check, so nothing is ever allocated past a GPU's
capacity. ``campaign`` names the plan round a hold belongs to (the executor
drops a round's holds together).

A hold ends when its pod binds (:meth:`DefragHolds.bound`), when the
executor drops it, or when it expires (``expires``, on the holds' clock):
nothing stays held, nor any pod steered, for longer than that.

Imports: :mod:`policy` only.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from policy import reasons as R
from policy.holds import held_at
from policy.placement import Evaluation, evaluate, gpu_fit
from policy.request import GPURequest


@dataclass(frozen=True)
class Hold:
    node: str
    gpus: tuple
    request: GPURequest
    priority: int
    campaign: str  # the plan round it belongs to
    expires: float  # on the holds' clock
    owner: str | None = None  # a replacement's: the controller whose next pod takes it
    evicted: str | None = None  # ... and the UID of the pod it replaces (never the replacement itself)
    uid: str | None = None  # a pending pod's: its UID

    def belongs_to(self, uid: str | None, owner: str | None) -> bool:
        """True when this is the pod's own hold."""
        if self.uid is not None:
            return uid == self.uid
        return owner is not None and owner == self.owner and uid != self.evicted


class DefragHolds:
    """The holds in force (see module doc); thread-safe."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock  # what ``Hold.expires`` is measured on
        self._lock = threading.Lock()
        self._holds: tuple = ()

    def __bool__(self) -> bool:
        """True while any hold is kept (expired or not): the verbs' cheap test."""
        return bool(self._holds)

    def add(self, holds) -> None:
        with self._lock:
            self._holds = self._holds + tuple(holds)

    def drop(self, keep) -> list:
        """Drop the holds for which ``keep(hold)`` is false; the dropped ones."""
        with self._lock:
            dropped = [h for h in self._holds if not keep(h)]
            self._holds = tuple(h for h in self._holds if keep(h))
        return dropped

    def expire(self) -> list:
        """Drop the holds past their time; the dropped ones."""
        now = self.clock()
        return self.drop(lambda h: h.expires > now)

    def current(self) -> tuple:
        """The holds in force now (expired ones are left out, whether dropped yet or not)."""
        holds = self._holds
        if not holds:
            return ()
        now = self.clock()
        return tuple(h for h in holds if h.expires > now)

    def bound(self, uid: str, owner: str | None, node: str) -> None:
        """A pod was bound to ``node``: its own hold there has done its work."""
        if self._holds:
            self.drop(lambda h: not (h.belongs_to(uid, owner) and h.node == node))

    def hold_back(self, state, strategy, request: GPURequest, rows: np.ndarray, result, priority: int,
                  uid: str | None, owner: str | None, score: bool, base_row):
        """``result`` (an :class:`Evaluation`, or filter's reason codes) for a pod, with the nodes
        that hold room it must leave alone evaluated again with that room taken; on the node of
        its own hold, its planned GPUs when they fit; for a replacement, every other node refused.
        ``base_row(row)``: the node's one-row view to start from (preemptors' room held).
        ``result`` itself when no hold concerns the nodes asked about."""
        holds = self.current()
        if not holds:
            return result
        own = next((h for h in holds if h.belongs_to(uid, owner)), None)
        by_row: dict = {}
        for h in holds:
            if h is not own and h.priority >= priority:  # a pod of higher priority is not held back
                row = state.index.get(h.node, -1)
                if row >= 0:
                    by_row.setdefault(row, []).append(h)
        own_row = state.index.get(own.node, -1) if own is not None else -1
        steer = own is not None and own.owner is not None and own_row >= 0  # a replacement: its node only
        positions = [i for i, row in enumerate(rows.tolist()) if row in by_row or (row == own_row >= 0)
                     or (steer and row >= 0)]
        if not positions:
            return result
        codes_only = isinstance(result, np.ndarray)
        reason = (result if codes_only else result.reason).copy()
        if not codes_only:
            gpus, raw = result.gpus.copy(), result.raw.copy()
        for i in positions:
            row = int(rows[i])
            if steer and row != own_row:
                reason[i] = R.HELD_ELSEWHERE
                if not codes_only:
                    gpus[i], raw[i] = -1, -np.inf
                continue
            view = held_at(base_row(row), [(h.request, h.gpus) for h in by_row.get(row, ())])
            again = evaluate(view, request, strategy, score=score and not codes_only)
            chosen = again.gpus[0]
            if row == own_row and again.reason[0] == R.FITS and len(own.gpus) == request.gpu_count \
                    and gpu_fit(view, request)[0][0, list(own.gpus)].all():
                chosen = np.array(sorted(own.gpus), dtype=np.int64)  # where the plan put it
            reason[i] = again.reason[0]
            if not codes_only:
                gpus[i], raw[i] = chosen, again.raw[0]
        return reason if codes_only else Evaluation(reason, gpus, raw)
