"""The autoscaling plan as the service sees it: the ledger's nodes and pending pods, through policy.planner.

Contract:

* :func:`plan_of` plans the ledger's pending pods that are this extender's
  to schedule — their ``schedulerName`` is one of ``scheduler_names`` — and
  are not placeholders (pods of ``placeholder_namespace``), on a snapshot of
  the cluster state in which the placeholders' GPU shares are free (they
  give way to any real pod), with node pools grouped by ``pool_labels`` and
  the templates file's entries;
* :func:`plan_json` is the ``GET {prefix}/plan`` and ``plan --json`` reply::

      {"pending": N, "fitsNow": [pod refs],
       "pools": {POOL: {"nodesNeeded": K, "pods": [pod refs], "maxSize": M or null}},
       "unplaceable": [{"pod": ref, "reason": "..."}], "defragCouldPlace": [pod refs]}

  with ``namespace/name`` pod refs, sorted; ``pools`` lists the pools that
  need new nodes; ``defragCouldPlace`` the pods of ``pools`` or
  ``unplaceable`` that moving other pods (:mod:`extender.defrag.inputs`, at
  most its default moves, within the PodDisruptionBudgets of ``budgets()``)
  would give room on an existing node, of the first 64 pending pods by
  priority then age (computed only when some pod may move) — a statement
  only: ``nodesNeeded`` does not count on it, as nothing moves unless
  defragmentation runs;
* :meth:`Planned.beyond_autoscaler` is what placeholders ask for: the new
  nodes a pool needs less those cluster-autoscaler adds by itself for the
  pods it sees unschedulable (:mod:`policy.totals`);
* :class:`PlanCache` keeps the last plan for readers that may reuse one a few
  seconds old (metrics); one plan is computed at a time.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from extender.defrag.inputs import defrag_of
from policy.defrag import Limits
from policy.planner import Plan, plan
from policy.pools import DEFAULT_POOL_LABELS, pools_of
from policy.scoring import make_strategy
from policy.totals import own_scale_up

DEFAULT_SCHEDULER_NAMES = ("default-scheduler",)
COULD_PLACE_LIMITS = Limits(pending=64)  # defragCouldPlace weighs the first 64 pending pods (priority, then age)
DEFAULT_PLACEHOLDER_NAMESPACE = "cgpu-placeholders"


@dataclass
class PlanSettings:
    pool_labels: tuple = DEFAULT_POOL_LABELS
    scheduler_names: tuple = DEFAULT_SCHEDULER_NAMES
    placeholder_namespace: str | None = DEFAULT_PLACEHOLDER_NAMESPACE
    templates: dict = field(default_factory=dict)  # pool → policy.pools.Entry (extender.templates.load)


@dataclass
class Planned:
    """A plan, every pool known when it was made, and the pending pods it placed (by ref)."""

    plan: Plan
    pools: dict  # name → policy.pools.Pool
    pods: dict  # ref → the pending pod
    cpu_seconds: float = 0.0  # CPU time the plan took (this thread's)
    autoscaler_adds: dict = field(default_factory=dict)  # pool → nodes cluster-autoscaler adds by itself
    other_schedulers: dict = field(default_factory=dict)  # scheduler name → its pending pods, left out
    defrag_could_place: tuple = ()  # refs of pods needing a new node (or none fits) that moves would place

    def beyond_autoscaler(self, pool: str) -> int:
        """New nodes of ``pool`` the plan needs that cluster-autoscaler would not add by itself
        (policy.totals): what placeholders must ask for."""
        pool_plan = self.plan.pools.get(pool)
        needed = pool_plan.nodes_needed if pool_plan is not None else 0
        return max(needed - self.autoscaler_adds.get(pool, 0), 0)


def plan_of(ledger, settings: PlanSettings, strategy=None, budgets=None) -> Planned:
    """The plan for the ledger's cluster as it is now (see module doc); ``budgets()``: the
    cluster's PodDisruptionBudgets (None: there are none)."""
    started = time.thread_time()
    served = set(settings.scheduler_names)
    pending, others = [], {}
    for p in ledger.pending.all():
        if p.namespace == settings.placeholder_namespace:
            continue
        if p.scheduler_name in served:
            pending.append(p)
        else:
            others[p.scheduler_name] = others.get(p.scheduler_name, 0) + 1
    nodes = {n["metadata"]["name"]: n for n in ledger.node_objects()}
    pools = pools_of(nodes.values(), settings.pool_labels, settings.templates, dict(ledger.state.specs))
    if strategy is None or not getattr(strategy, "row_local", False):
        strategy = make_strategy()  # the plan needs a strategy that neither learns nor draws
    state = ledger.snapshot(settings.placeholder_namespace) if pending else None  # no pods: no state read
    result = plan(state, nodes, pools, pending, strategy)
    adds = own_scale_up(state, nodes, pools, pending, result) if result.pools else {}
    could = ()
    if (result.pools or result.unplaceable) and any(a.facts is not None and not a.facts.why_not
                                                      for a in ledger.allocations()):
        waiting = {p.pod for pool in result.pools.values() for p in pool.placements} | \
            {ref for ref, _ in result.unplaceable}
        moved = defrag_of(ledger, settings, budgets() if budgets is not None else [], limits=COULD_PLACE_LIMITS,
                          explain=False)
        could = tuple(sorted(waiting & set(moved.plan.unblocks)))
    return Planned(result, pools, {p.ref: p for p in pending}, time.thread_time() - started, adds, others, could)


def plan_json(planned: Planned) -> dict:
    """The plan's JSON form (see module doc)."""
    result = planned.plan
    return {
        "pending": result.pending,
        "fitsNow": sorted(p.pod for p in result.fits_now),
        "pools": {name: {"nodesNeeded": pool_plan.nodes_needed,
                         "pods": sorted(p.pod for p in pool_plan.placements),
                         "maxSize": pool_plan.pool.max_size}
                  for name, pool_plan in sorted(result.pools.items())},
        "unplaceable": [{"pod": ref, "reason": reason} for ref, reason in sorted(result.unplaceable)],
        "defragCouldPlace": list(planned.defrag_could_place),
    }


class PlanCache:
    """The last plan and when it was made; ``compute()`` makes a new one (one at a time)."""

    def __init__(self, compute, clock=time.monotonic):
        self._compute = compute
        self._clock = clock
        self._lock = threading.Lock()
        self._last: tuple | None = None  # (made at, Planned)

    def fresh(self) -> Planned:
        """A plan made now."""
        with self._lock:
            planned = self._compute()
            self._last = (self._clock(), planned)
            return planned

    def latest(self, max_age: float) -> Planned:
        """The last plan if it is at most ``max_age`` seconds old, else a fresh one."""
        last = self._last
        if last is not None and self._clock() - last[0] <= max_age:
            return last[1]
        return self.fresh()
