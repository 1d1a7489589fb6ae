"""The inspect report: every node and GPU, used and total, the pods on each, and what could not be counted.

``GET <prefix>/inspect`` answers it (with ``ready``, ``cluster``, ``scoring``,
the stranded share and, with leader election, ``leadership`` added by the
service), ``cgpu-extender inspect`` renders it as text
(:mod:`extender.views.inspect_text`), and the GPU map reads its compact form
(:mod:`extender.views.mapfeed`). :meth:`Reporting.summary` is the cluster
totals alone, cheap enough for every metrics scrape.
"""

from __future__ import annotations

from collections import defaultdict

from extender.ledger.nodefacts import facts
from extender.ledger.unaccounted import Unaccounted
from policy.names import MODE_CORE, MODE_NAMES, MODE_NONE, PLACEMENT_NAMES, UNLIMITED_PODS
from policy.pools import pool_name


class Reporting:
    """The ledger's :meth:`summary` and :meth:`inspect` (a mixin of :class:`~extender.ledger.ledger.Ledger`,
    whose records they read)."""

    def summary(self) -> dict:
        """Cluster totals, from the arrays alone (cheap enough for every metrics scrape).

        GPU memory counts on sharing nodes and on any node still holding
        allocations; compute counts on core_mem nodes.
        """
        _, view = self.state.view_all()
        memory_used, core_used = view.mem_used.sum(axis=1), view.core_used.sum(axis=1)
        counted = (view.mode != MODE_NONE) | (memory_used > 0)
        core_nodes = view.mode == MODE_CORE
        return {
            "memory": {"used": int(memory_used[counted].sum()), "total": int(view.mem_total[counted].sum())},
            "core": {"used": int(core_used[core_nodes].sum()), "total": int(view.core_total[core_nodes].sum())},
            "allocations": len(self._allocations),
            "unaccountedPods": len(self._unaccounted),
        }

    def inspect(self, annotations: bool = True) -> dict:
        """Every node, every GPU: used/total memory and compute, the pods on it (without the
        annotations each pod's allocation writes, two thirds of the work, unless ``annotations``)."""
        report = self.inspect_report(annotations)
        report["nodes"] = list(report["nodes"])
        return report

    def inspect_report(self, annotations: bool = True) -> dict:
        """:meth:`inspect` with ``nodes`` an iterator that builds each node's entry when it is taken,
        so that a large cluster's report is encoded node by node and never held whole as objects
        (:func:`extender.verbs.wire.encode_report`; at 5,000 nodes 56 MB of objects for 22 MB of JSON)."""
        names, view = self.state.view_all()
        unaccounted_by_node = defaultdict(list)
        for item in self._unaccounted.values():
            unaccounted_by_node[item.node].append(item)
        orphans = [
            {"node": a.node, "namespace": a.pod.namespace, "name": a.pod.name, "uid": a.pod.uid,
             "memory": _by_index(a.memory_per_gpu), "core": _by_index(a.core_per_gpu)}
            for a in list(self._allocations.values()) if a.node not in self.state.index
        ]
        known = set(names)
        return {
            "nodes": (entry for i, name in enumerate(names)
                      if (entry := self._node_entry(i, name, view, unaccounted_by_node.get(name, ()), annotations))
                      is not None),
            "summary": self.summary(),
            "allocationsOnUnknownNodes": orphans,
            "malformedObjects": self.malformed(),
            "unaccountedOnUnknownNodes": [_unaccounted_json(u) for node, items in unaccounted_by_node.items()
                                          if node not in known for u in items],
        }

    def _node_entry(self, i: int, name: str, view, unaccounted, annotations: bool) -> dict | None:
        """Row ``i`` of ``view``'s node ``name``; None when the node has gone since ``view`` was read."""
        spec = self.state.specs.get(name)
        if spec is None:
            return None
        pods_by_gpu = defaultdict(list)
        for allocation in list(self._by_node.get(name, {}).values()):
            memory, core = allocation.memory_per_gpu, allocation.core_per_gpu
            written = {"annotations": allocation.annotations} if annotations else {}
            for g in sorted(set(memory) | set(core)):
                pods_by_gpu[g].append({
                    "namespace": allocation.pod.namespace, "name": allocation.pod.name,
                    "uid": allocation.pod.uid, "memory": memory.get(g, 0), "core": core.get(g, 0),
                    "source": allocation.source, "confirmed": allocation.confirmed, **written,
                })
        gpus = [{
            "index": g,
            "healthy": bool(view.healthy[i, g]),
            "memory": {"used": int(view.mem_used[i, g]), "total": int(view.mem_total[i, g])},
            "core": {"used": int(view.core_used[i, g]), "total": int(view.core_total[i, g])},
            "pods": sorted(pods_by_gpu.get(g, []), key=lambda p: (p["namespace"], p["name"])),
        } for g in range(int(view.gpu_count[i]))]
        node = self._nodes.get(name)
        return {
            "name": name,
            "address": _internal_ip(node),
            "schedule": spec.schedule_label,
            "pool": pool_name(((node or {}).get("metadata") or {}).get("labels") or {}, self.pool_labels),
            **facts(node, spec),
            "sharing": MODE_NAMES[spec.mode],
            "placement": PLACEMENT_NAMES[spec.placement],
            "maxPodsPerGPU": None if spec.max_pod == UNLIMITED_PODS else spec.max_pod,
            "problem": spec.problem,
            "warnings": list(spec.warnings),
            "memory": {"used": int(view.mem_used[i].sum()), "total": int(view.mem_total[i].sum())},
            "core": {"used": int(view.core_used[i].sum()), "total": int(view.core_total[i].sum())},
            "gpus": gpus,
            "unaccounted": [_unaccounted_json(u) for u in unaccounted],
        }


def _internal_ip(node: dict | None) -> str | None:
    addresses = ((node or {}).get("status") or {}).get("addresses") or []
    return next((a.get("address") for a in addresses if a.get("type") == "InternalIP"), None)


def _by_index(amounts: dict) -> dict:
    """GPU index → amount, keyed by the index as text (JSON's object keys are strings)."""
    return {str(g): v for g, v in amounts.items()}


def _unaccounted_json(item: Unaccounted) -> dict:
    """``memory``/``core``: the pod's request per GPU (null: unreadable); ``held``: what is
    counted for it on each GPU of its node (GPU index → amount)."""
    memory, core = item.held or ({}, {})
    return {"namespace": item.pod.namespace, "name": item.pod.name, "uid": item.pod.uid, "node": item.node,
            "memory": item.memory, "core": item.core, "reason": item.reason,
            "held": {"memory": _by_index(memory), "core": _by_index(core)}}
