"""Opt-in defragmentation (``serve --defrag-execute``): the plan's moves made one at a time, rate-limited.

Contract of :class:`Executor` (a thread of its own; the Kubernetes backend
only — it needs the Eviction API):

* every ``interval`` seconds, once the cluster view is synced, a round
  (:meth:`Executor.round`):

  1. holds past their time are dropped (and counted), and the holds of
     pending pods that no longer wait;
  2. while a move's replacement is not bound yet (its hold is open) nothing
     more happens: one move at a time;
  3. nor when ``moves_per_hour`` evictions were attempted in the last hour;
  4. a fresh plan (:mod:`extender.defrag.inputs`, the PodDisruptionBudgets
     read from the API server) of at most ``max_moves`` moves and no more
     than the hour has left; the pods held for before keep their room until
     they bind or their hold's time is up (where the plan now puts them, if
     it places them);
  5. its first move: the replacement's GPUs are held for the evicted pod's
     controller and the room of every pod the plan lets in for that pod
     (:mod:`extender.defrag.holds`, ``hold_seconds`` at most, replacing the
     pending pods' holds of earlier rounds), then the pod is evicted through
     the Eviction API with its UID as precondition, so the API server
     enforces its PodDisruptionBudgets. Evicted: a Normal Event
     ``GPUDefragEvicted`` on the pod, counted with the GPUs its going leaves
     idle; refused by a budget (429): the holds go, a Warning Event
     ``GPUDefragBlocked``, counted; any other failure: the holds go, logged
     and counted;

* no plan is kept between rounds: each is made from the cluster as it is
  then. Once the first move of a k-move plan is made, the other k − 1 still
  give the same pods room, so the next plan needs at most k − 1 moves, and
  rounds make progress while nothing else changes;
* every bind, replacements' included, goes through the ledger's re-check
  (the holds only ever take room away from other pods or steer a
  replacement), so nothing is allocated past a GPU's capacity.
"""

from __future__ import annotations

import secrets
import threading
from collections import deque
from dataclasses import dataclass

import numpy as np

from extender.cluster import ClusterError
from extender.defrag.holds import Hold
from extender.defrag.inputs import Defragged, defrag_of
from extender.logs import fields, get_logger
from policy.defrag import DEFAULT_MAX_MOVES

EVICTED, BLOCKED = "GPUDefragEvicted", "GPUDefragBlocked"  # the reasons of the Events on moved pods
HOUR = 3600.0


@dataclass
class DefragSettings:
    max_moves: int = DEFAULT_MAX_MOVES  # most moves a round's plan may have
    moves_per_hour: int = 6  # evictions attempted in any hour, at most
    interval: float = 60.0  # seconds between rounds
    hold_seconds: float = 300.0  # a move's holds (and the steering of its replacement) end by then


@dataclass
class DefragStats:
    rounds: int = 0
    evicted: int = 0
    blocked: int = 0  # refused by a PodDisruptionBudget (429)
    failed: int = 0
    gpus_freed: int = 0  # GPUs the evicted pods held alone (idle once they are gone)
    holds_expired: int = 0
    last: Defragged | None = None  # the last round's plan
    last_outcome: str = ""


class Executor:
    """The rounds (see module doc), in a thread of its own."""

    def __init__(self, cluster, extender, settings: DefragSettings):
        self.cluster = cluster
        self.extender = extender
        self.settings = settings
        self.clock = extender.ledger.defrag_holds.clock  # the holds' clock: their expiry is on it
        self.stats = DefragStats()
        self._attempts: deque = deque()  # clock() of each eviction attempted, the last hour's
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # one round at a time (the thread's, or a test's)
        self.log = get_logger()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="defrag", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self.settings.interval):
            try:
                self.round()
            except Exception as exc:  # noqa: BLE001 - the loop must outlive any one bad round
                self.stats.failed += 1
                self.log.error("defragmentation round failed", exc_info=exc)

    # -- one round -----------------------------------------------------------------
    def round(self) -> str:
        """One round; what it did, in a few words (also ``stats.last_outcome``)."""
        with self._lock:
            outcome = self._round()
            self.stats.last_outcome = outcome
            return outcome

    def _round(self) -> str:
        extender, holds = self.extender, self.extender.ledger.defrag_holds
        if not extender.ready():
            return "not synced"
        self.stats.rounds += 1
        self.stats.holds_expired += len(holds.expire())
        pending = extender.ledger.pending
        holds.drop(lambda h: h.uid is None or pending.get(h.uid) is not None)
        if any(h.owner is not None for h in holds.current()):
            return "waiting for a replacement to be bound"
        now = self.clock()
        while self._attempts and now - self._attempts[0] >= HOUR:
            self._attempts.popleft()
        left = self.settings.moves_per_hour - len(self._attempts)
        if left <= 0:
            return "at the limit of moves per hour"
        defragged = defrag_of(extender.ledger, extender.planning, extender.budgets(),
                              min(self.settings.max_moves, left), explain=False)
        self.stats.last = defragged
        if not defragged.plan.moves:
            self._hold_pending(defragged, None, None)
            return "no move helps"
        return self._move(defragged, now)

    def _hold_pending(self, defragged: Defragged, campaign: str | None, expires: float | None) -> None:
        """Hold the room of each pod the plan lets in, where the plan puts it (until ``expires``); the
        pods held for before that still wait keep theirs until their own time — where the plan now
        puts them, or where it was if the plan places them nowhere (the room was freed for them: no
        other pod may take it before they bind)."""
        holds, plan = self.extender.ledger.defrag_holds, defragged.plan
        before = {h.uid: h for h in holds.current() if h.uid is not None}
        new = {}
        for key, spot in plan.placements.items():
            p = defragged.pending[key]
            if key in plan.unblocks and campaign is not None:
                new[p.uid] = Hold(spot.node, spot.gpus, p.request, p.priority, campaign, expires, uid=p.uid)
            elif p.uid in before:
                old = before[p.uid]
                new[p.uid] = Hold(spot.node, spot.gpus, p.request, p.priority, old.campaign, old.expires, uid=p.uid)
        for uid, old in before.items():
            new.setdefault(uid, old)
        holds.drop(lambda h: h.uid is None)
        holds.add(new.values())

    def _move(self, defragged: Defragged, now: float) -> str:
        plan, holds = defragged.plan, self.extender.ledger.defrag_holds
        move = plan.moves[0]
        allocation = defragged.allocations[move.pod]
        resident = defragged.residents[move.pod]
        controller = allocation.facts.controller if allocation.facts is not None else None
        if controller is None:  # movable pods have a controller: never expected
            return f"{move.pod} has no controller"
        campaign = secrets.token_hex(4)
        expires = now + self.settings.hold_seconds
        placements = [(defragged.pending[key], plan.placements[key]) for key in plan.unblocks]
        self._hold_pending(defragged, campaign, expires)
        holds.add([Hold(move.to_node, move.gpus, resident.request, allocation.priority, campaign, expires,
                        owner=controller, evicted=allocation.pod.uid)])
        freed = self._alone_on(allocation)
        pod = allocation.pod
        meta = {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid}
        self._attempts.append(now)
        try:
            evicted = self.cluster.evict(pod.namespace, pod.name, pod.uid)
        except ClusterError as exc:
            holds.drop(lambda h: h.campaign != campaign)
            self.stats.failed += 1
            self.log.warning("defragmentation eviction failed", extra=fields(pod=str(pod), error=str(exc)))
            return f"evicting {pod} failed: {exc}"
        room = ", ".join(f"{p.ref} on {spot.node} GPU {','.join(map(str, spot.gpus))}" for p, spot in placements)
        if not evicted:
            holds.drop(lambda h: h.campaign != campaign)
            self.stats.blocked += 1
            self.cluster.note(BLOCKED, meta, f"defragmentation could not evict the pod: its PodDisruptionBudget "
                                             f"allows no disruption now (it was to make room for {room})")
            self.log.info("defragmentation move blocked by a budget", extra=fields(pod=str(pod)))
            return f"evicting {pod} was refused by its PodDisruptionBudget"
        self.stats.evicted += 1
        self.stats.gpus_freed += freed
        gpus = ",".join(map(str, move.gpus))
        self.cluster.note(EVICTED, meta, f"evicted by defragmentation: its replacement is held GPU {gpus} of node "
                                         f"{move.to_node}; this makes room for {room} "
                                         f"(move 1 of {len(plan.moves)} planned)")
        self.log.info("defragmentation move", extra=fields(pod=str(pod), source=move.from_node,
                                                          target=move.to_node, gpus=list(move.gpus),
                                                          room_for=list(plan.unblocks)))
        return f"evicted {pod}; its replacement goes to {move.to_node} GPU {gpus}"

    def _alone_on(self, allocation) -> int:
        """GPUs of its node the pod holds alone (idle once it is gone)."""
        state = self.extender.ledger.state
        row = state.index.get(allocation.node, -1)
        if row < 0:
            return 0
        pods = state.view(np.array([row])).pods[0]
        return sum(1 for g in set(allocation.memory_per_gpu) | set(allocation.core_per_gpu) if pods[g] == 1)
