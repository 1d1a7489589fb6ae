"""Autoscaling plan benchmark: what the plan costs, and what cluster-autoscaler alone would miss.

For each cluster size a synthetic cluster (:mod:`benchmarks.synthetic`, its
sharing GPUs already partly used) is grouped into node pools of ``--pool-size``
nodes (label ``alibabacloud.com/nodepool-id``); ``--fill`` pods per node of the
load driver's shapes are bound where a first plan fits them (the cluster is
then about full), and ``--pending`` more such pods wait. Reported:

* CPU time (``time.process_time``, this process; the median of ``--repeats``)
  of a whole plan (``extender.views.planning.plan_of``: snapshot, pools, placement)
  and of the snapshot alone, which holds the state's lock (binds wait for it);
* the plan's outcome: pods that fit now, new nodes and the pods on them,
  unplaceable pods;
* of the pods on new nodes, those that *look schedulable to
  cluster-autoscaler* — judged as it judges them, GPU memory (and compute)
  as one free number per node, first fit, each pod taking its room
  (:mod:`policy.totals`): without placeholders nothing scales up for them —;
  the nodes it adds by itself for the others, and the placeholders the
  extender then keeps (new nodes less those).

    python -m benchmarks.plan --nodes 1000 5000 10000 --pending 100 1000 --fill 12 --repeats 3
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time

import numpy as np

from benchmarks.synthetic import cluster_objects, pending_pod
from extender.cluster.embedded import EmbeddedCluster
from extender.ledger.ledger import Ledger
from extender.ledger.records import PodRef
from extender.views.planning import PlanSettings, plan_of
from policy.scoring import make_strategy
from policy.state import ClusterState
from policy.totals import looks_schedulable

POOL_KEY = "alibabacloud.com/nodepool-id"


def build(nodes: int, pending: int, pool_size: int, fill: int, seed: int = 0) -> Ledger:
    """The ledger of a synthetic cluster in pools, ``fill`` more pods bound where the plan puts them, then
    ``pending`` pods waiting."""
    objects = cluster_objects(nodes, seed=seed)
    for i, obj in enumerate(o for o in objects if o["kind"] == "Node"):
        obj["metadata"]["labels"][POOL_KEY] = f"pool-{i // pool_size:03d}"
    filling = [_pod(pending_pod(i, seed + 1), "fill") for i in range(fill)]
    ledger = Ledger(ClusterState(), make_strategy())
    EmbeddedCluster(objects + filling, source="bench").start(ledger)
    if fill:
        by_ref = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in filling}
        for placement in plan_of(ledger, PlanSettings()).plan.fits_now:
            meta = by_ref[placement.pod]["metadata"]
            ledger.reserve(PodRef(meta["uid"], meta["namespace"], meta["name"]),
                           ledger.pending.get(meta["uid"]).request, placement.node, 0)
        for p in filling:
            ledger.pending.forget(p["metadata"]["uid"])  # what did not fit leaves the picture
    for i in range(pending):
        ledger.observe_pod(_pod(pending_pod(i, seed), "load"))
    return ledger


def _pod(body: dict, namespace: str) -> dict:
    meta = {**body["metadata"], "namespace": namespace, "uid": f"{namespace}-{body['metadata']['uid']}"}
    return {**body, "kind": "Pod", "apiVersion": "v1", "metadata": meta}


def measure(nodes: int, pending: int, pool_size: int, fill: int, repeats: int) -> dict:
    ledger = build(nodes, pending, pool_size, fill)
    settings = PlanSettings()
    plans, snapshots = [], []
    planned = None
    for _ in range(repeats):
        started = time.process_time()
        ledger.snapshot(settings.placeholder_namespace)
        snapshots.append(time.process_time() - started)
        started = time.process_time()
        planned = plan_of(ledger, settings)
        plans.append(time.process_time() - started)
    result = planned.plan
    new_node_pods = {p.pod for pool_plan in result.pools.values() for p in pool_plan.placements}
    return {
        "nodes": nodes, "pending": pending, "pools": len(planned.pools),
        "plan_ms": statistics.median(plans) * 1000, "snapshot_ms": statistics.median(snapshots) * 1000,
        "fits_now": len(result.fits_now), "new_nodes": sum(p.nodes_needed for p in result.pools.values()),
        "on_new_nodes": sum(len(p.placements) for p in result.pools.values()),
        "unplaceable": len(result.unplaceable),
        "hidden": len(new_node_pods & looks_schedulable(ledger.snapshot(), nodes_of(ledger), planned.pods.values())),
        "autoscaler_adds": sum(planned.autoscaler_adds.values()),
        "placeholders": sum(planned.beyond_autoscaler(name) for name in result.pools),
    }


def nodes_of(ledger: Ledger) -> dict:
    return {n["metadata"]["name"]: n for n in ledger.node_objects()}


def table(rows: list) -> str:
    head = ("| nodes | pending | pools | plan CPU ms | snapshot CPU ms | fit now | new nodes | pods on them "
            "| unplaceable | pods on new nodes that look schedulable to cluster-autoscaler | nodes it adds itself "
            "| placeholders |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        lines.append(f"| {r['nodes']:,} | {r['pending']:,} | {r['pools']} | {r['plan_ms']:.0f} | "
                     f"{r['snapshot_ms']:.1f} | {r['fits_now']} | {r['new_nodes']} | {r['on_new_nodes']} | "
                     f"{r['unplaceable']} | {r['hidden']} | {r['autoscaler_adds']} | {r['placeholders']} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="CPU cost and outcome of the autoscaling plan at cluster scale.")
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 5000, 10000])
    parser.add_argument("--pending", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--pool-size", type=int, default=100, help="nodes per pool (default 100)")
    parser.add_argument("--fill", type=float, default=0.0, metavar="PODS_PER_NODE",
                        help="first bind this many more pods per node where the plan fits them (default 0)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"# {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
          f"numpy {np.__version__}; CPU time of this process", file=sys.stderr)
    rows = []
    for nodes in args.nodes:
        for pending in args.pending:
            rows.append(measure(nodes, pending, args.pool_size, int(args.fill * nodes), args.repeats))
            print(table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
