"""The autoscaling plan as text: a summary line, then a table per pool, the pods that fit now, the rest.

::

    12 pending shared-GPU pods: 1 fits now, 10 need 2 new nodes, 1 is unplaceable
    (left out, pending for other schedulers — cgpu-scheduler: 3; see --scheduler-name)

    pool np-a10: 2 new nodes (4 x 15 GiB, memory); 4 nodes now, max size 10
    NEW NODE  POD            GPU MEMORY  GPU CORE  GPUS
    1         default/p0     6           -         0
    ...

    fits now:
    POD        NODE  GPUS
    default/x  n1    2

    unplaceable:
    POD           REASON
    default/huge  fits no node now, nor a new node of any pool it may use: ...

    defragmentation could place without a new node (see `cgpu-extender defrag`):
    default/p3

The second line appears only when pods of other schedulers wait, the last
section only when moving other pods would give some of the pods that need a
new node (or fit none) room on an existing one. GPU memory
is the pod's GiB per GPU, GPU core its percent per GPU ("-" for memory-only
pods), GPUs the indices the extender's GPU choice gives it.
"""

from __future__ import annotations

from extender.inspect_text import align
from extender.planning import Planned
from policy.planner import node_shape


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _gpus(gpus) -> str:
    return ",".join(str(g) for g in gpus)


def render(planned: Planned) -> str:
    result = planned.plan
    new_pods = sum(len(p.placements) for p in result.pools.values())
    new_nodes = sum(p.nodes_needed for p in result.pools.values())
    lines = [f"{_count(result.pending, 'pending shared-GPU pod', 'pending shared-GPU pods')}: "
             f"{len(result.fits_now)} {'fits' if len(result.fits_now) == 1 else 'fit'} now, "
             f"{new_pods} need {_count(new_nodes, 'new node', 'new nodes')}, "
             f"{len(result.unplaceable)} {'is' if len(result.unplaceable) == 1 else 'are'} unplaceable"]
    if planned.other_schedulers:
        counted = ", ".join(f"{name}: {n}" for name, n in sorted(planned.other_schedulers.items()))
        lines.append(f"(left out, pending for other schedulers — {counted}; see --scheduler-name)")
    for name, pool_plan in sorted(result.pools.items()):
        pool = pool_plan.pool
        size = f"max size {pool.max_size}" if pool.max_size is not None else "max size not known"
        lines += ["", f"pool {name}: {_count(pool_plan.nodes_needed, 'new node', 'new nodes')} "
                      f"({node_shape(pool)}); {_count(pool.nodes, 'node', 'nodes')} now, {size}"]
        rows = [["NEW NODE", "POD", "GPU MEMORY", "GPU CORE", "GPUS"]]
        for p in sorted(pool_plan.placements, key=lambda p: (p.new_node, p.pod)):
            request = planned.pods[p.pod].request
            rows.append([str(p.new_node + 1), p.pod, str(request.memory_per_gpu),
                         str(request.core_per_gpu) if request.wants_core else "-", _gpus(p.gpus)])
        lines += align(rows)
    if result.fits_now:
        lines += ["", "fits now:"]
        lines += align([["POD", "NODE", "GPUS"]] + [[p.pod, p.node, _gpus(p.gpus)]
                                                  for p in sorted(result.fits_now, key=lambda p: p.pod)])
    if result.unplaceable:
        lines += ["", "unplaceable:"]
        lines += align([["POD", "REASON"]] + [[ref, reason] for ref, reason in sorted(result.unplaceable)])
    if planned.defrag_could_place:
        lines += ["", "defragmentation could place without a new node (see `cgpu-extender defrag`):"]
        lines += list(planned.defrag_could_place)
    return "\n".join(lines) + "\n"
