"""What the extender holds, as Prometheus metric families read at scrape time.

:class:`ExtenderCollector` reads the ledger, the service's outcome counters,
the learned mix's stranded share and the cluster backend's watch and event
counts when Prometheus scrapes, so a pod's or a node's series are there
exactly while the pod holds a share or the node is known. Units are
Prometheus base units: bytes, ratios of one GPU (compute), GPUs as a count.
The families and their cardinality are listed in the README ("Watching it").
"""

from __future__ import annotations

import numpy as np
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.samples import Sample

from policy.names import MODE_CORE, MODE_NAMES, MODE_NONE, PLACEMENT_NAMES
from policy.pools import pool_name

GIB = 2 ** 30
PLAN_MAX_AGE = 10.0  # seconds a scrape may reuse the last autoscaling plan for
WATCH_COUNTERS = (("lists", "full lists"), ("watches", "watch requests"), ("events", "watch events"),
                  ("gone", "410 Gone answers (resourceVersion expired; listed again)"),
                  ("errors", "failed lists or watches (retried with backoff)"),
                  ("handler_errors", "objects the ledger could not apply (skipped, logged)"))


def _gauge(name: str, help_text: str, value, labels=None) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, help_text, value=value, labels=labels)


def _gauges(name: str, help_text: str, labels: list, values: list) -> GaugeMetricFamily:
    """A gauge family of one sample per label dict. The samples are built directly, the label
    dicts shared between families (add_metric would build a dict per sample: a third of a
    scrape's time at 10^5 series)."""
    family = GaugeMetricFamily(name, help_text, labels=())
    family.samples = [Sample(name, label, value, None, None, None) for label, value in zip(labels, values)]
    return family


class ExtenderCollector:
    """A custom collector over one :class:`~extender.service.Extender` (see module doc)."""

    def __init__(self, extender):
        self.extender = extender

    def describe(self):
        return []  # families vary with the cluster; nothing to check at registration

    def collect(self):
        extender = self.extender
        ledger = extender.ledger
        yield _gauge("cgpu_ready", "1 once the cluster view is complete (readyz), else 0", int(extender.ready()))
        yield from self._cluster(ledger)
        yield from self._gpus(ledger)
        yield from self._pods(ledger)
        yield from self._outcomes(extender.outcomes, ledger.counters)
        yield from self._stranded(extender.stranded)
        yield from self._plan(extender)
        yield from self._defrag(extender)
        yield from self._backend(extender.cluster)

    @staticmethod
    def _cluster(ledger):
        summary = ledger.summary()
        yield _gauge("cgpu_allocations", "pods holding a GPU share", summary["allocations"])
        yield _gauge("cgpu_unaccounted_pods", "bound pods requesting shared GPU without an allocation annotation",
                     summary["unaccountedPods"])
        yield _gauge("cgpu_memory_allocated_bytes", "GPU memory allocated, all sharing nodes",
                     summary["memory"]["used"] * GIB)
        yield _gauge("cgpu_memory_capacity_bytes", "GPU memory of all sharing nodes", summary["memory"]["total"] * GIB)
        yield _gauge("cgpu_compute_allocated_gpus", "GPU compute allocated on core_mem nodes, in GPUs (100 % = 1)",
                     summary["core"]["used"] / 100)
        yield _gauge("cgpu_compute_capacity_gpus", "GPU compute of core_mem nodes, in GPUs",
                     summary["core"]["total"] / 100)

    @staticmethod
    def _gpus(ledger):
        names, view = ledger.state.view_all()
        specs = ledger.state.specs
        info = GaugeMetricFamily("cgpu_node_info", "a known node: its GPU sharing mode, placement and node pool",
                                 labels=("node", "mode", "placement", "pool"))
        labels_of = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in ledger.node_objects()}
        for name in names:
            spec = specs.get(name)
            if spec is not None:
                info.add_metric((name, MODE_NAMES[spec.mode], PLACEMENT_NAMES[spec.placement],
                                 pool_name(labels_of.get(name, {}), ledger.pool_labels)), 1)
        yield info
        slots = np.arange(view.healthy.shape[1])
        shown = (slots < view.gpu_count[:, None]) & ((view.mode != MODE_NONE)[:, None] | (view.mem_used > 0))
        rows, gpus = np.nonzero(shown)
        labels = [{"node": names[i], "gpu": str(g)} for i, g in zip(rows.tolist(), gpus.tolist())]
        every, core = np.arange(len(rows)), np.flatnonzero(view.mode[rows] == MODE_CORE)

        def at(array):
            return array[rows, gpus].astype(np.int64)

        for name, help_text, values, which in (
            ("cgpu_gpu_memory_allocated_bytes", "GPU memory allocated on the GPU", at(view.mem_used) * GIB, every),
            ("cgpu_gpu_memory_capacity_bytes", "GPU memory of the GPU", at(view.mem_total) * GIB, every),
            ("cgpu_gpu_compute_allocated_ratio", "share of the GPU's compute allocated (core_mem nodes)",
             at(view.core_used) / 100, core),
            ("cgpu_gpu_compute_capacity_ratio", "the GPU's compute (1 on core_mem nodes)", at(view.core_total) / 100,
             core),
            ("cgpu_gpu_pods", "pods holding a share of the GPU", at(view.pods), every),
            ("cgpu_gpu_healthy", "1 if the GPU takes new pods' shares, 0 if reported unhealthy", at(view.healthy),
             every),
        ):
            yield _gauges(name, help_text, labels if which is every else [labels[k] for k in which.tolist()],
                          values[which].tolist())

    @staticmethod
    def _pods(ledger):
        labels, memory, core_labels, core = [], [], [], []
        for allocation in ledger.allocations():
            pod = allocation.pod
            for container, gpu, gib, compute in allocation.shares:
                label = {"namespace": pod.namespace, "pod": pod.name, "container": allocation.container_name(container),
                         "node": allocation.node, "gpu": str(gpu)}
                labels.append(label)
                memory.append(gib * GIB)
                if allocation.wants_core:
                    core_labels.append(label)
                    core.append(compute / 100)
        yield _gauges("cgpu_pod_gpu_memory_allocated_bytes",
                      "GPU memory the pod's container holds on the GPU (the HPA's denominator)", labels, memory)
        yield _gauges("cgpu_pod_gpu_compute_allocated_ratio",
                      "share of the GPU's compute the pod's container holds (core_mem pods)", core_labels, core)

    @staticmethod
    def _outcomes(outcomes, counters):
        rejections = CounterMetricFamily("cgpu_filter_rejections", "nodes filter refused, by reason code",
                                         labels=("reason",))
        for reason, count in outcomes.rejections().items():
            rejections.add_metric((reason,), count)
        yield rejections
        binds = CounterMetricFamily("cgpu_binds", "bind calls, by result", labels=("result",))
        for result, count in outcomes.binds().items():
            binds.add_metric((result,), count)
        yield binds
        for name, help_text, value in (
            ("cgpu_allocations_reserved", "allocations recorded by bind", counters.reserved),
            ("cgpu_allocations_released", "allocations released (deleted, finished, failed bind)", counters.released),
            ("cgpu_allocations_recovered", "allocations rebuilt from pod annotations", counters.recovered),
            ("cgpu_unaccounted_pods_seen", "bound shared-GPU pods first seen without annotations",
             counters.unaccounted_seen),
        ):
            yield CounterMetricFamily(name, help_text, value=value)

    @staticmethod
    def _stranded(meter):
        yield _gauge("cgpu_learned_shapes", "distinct pod shapes in the workload mix learned from filter",
                     len(meter.mix))
        measured = meter.current()
        if measured is None:
            return
        yield _gauge("cgpu_stranded_gpus", "GPU share the next pod of the learned mix cannot use (FGD's "
                     "fragmentation, summed over nodes), in GPUs", float(measured.per_node.sum()))
        yield _gauge("cgpu_unallocated_gpus", "unallocated share of healthy GPUs on sharing nodes, in GPUs",
                     float(measured.idle.sum()))

    @staticmethod
    def _plan(extender):
        """The autoscaling plan (at most PLAN_MAX_AGE seconds old) and the placeholders kept for it."""
        if not extender.ready():
            return
        planned = extender.plans.latest(PLAN_MAX_AGE)
        plan = planned.plan
        pending = GaugeMetricFamily("cgpu_pending_pods", "pending shared-GPU pods of this extender's schedulers, "
                                    "by where the autoscaling plan puts them", labels=("outcome",))
        for outcome, count in (("fits_now", len(plan.fits_now)),
                               ("new_node", sum(len(p.placements) for p in plan.pools.values())),
                               ("unplaceable", len(plan.unplaceable))):
            pending.add_metric((outcome,), count)
        yield pending
        needed = GaugeMetricFamily("cgpu_pool_nodes_needed", "new nodes the autoscaling plan needs, per node pool",
                                   labels=("pool",))
        own = GaugeMetricFamily("cgpu_pool_nodes_autoscaler_adds", "of those, the nodes cluster-autoscaler adds by "
                                "itself (for the pods it sees unschedulable by node totals)", labels=("pool",))
        for name in sorted(planned.pools):
            pool_plan = plan.pools.get(name)
            needed.add_metric((name,), pool_plan.nodes_needed if pool_plan is not None else 0)
            own.add_metric((name,), planned.autoscaler_adds.get(name, 0))
        yield needed
        yield own
        yield _gauge("cgpu_plan_cpu_seconds", "CPU time the last autoscaling plan took", planned.cpu_seconds)
        placeholders = extender.placeholders
        if placeholders is not None:
            stats = placeholders.stats
            kept = GaugeMetricFamily("cgpu_placeholders", "scale-up placeholder pods kept, per node pool",
                                     labels=("pool",))
            for name, count in sorted(stats.kept.items()):
                kept.add_metric((name,), count)
            yield kept
            for name, help_text, value in (("created", "placeholder pods created", stats.created),
                                           ("deleted", "placeholder pods deleted", stats.deleted),
                                           ("errors", "placeholder API calls or rounds that failed", stats.errors)):
                yield CounterMetricFamily(f"cgpu_placeholders_{name}", help_text, value=value)

    @staticmethod
    def _defrag(extender):
        """Defragmentation's moves and holds, with --defrag-execute (docs/defrag.md)."""
        executor = extender.defragger
        if executor is None:
            return
        stats = executor.stats
        moves = CounterMetricFamily("cgpu_defrag_moves", "defragmentation evictions attempted, by result "
                                    "(evicted; blocked_by_budget: the API server's 429; failed)", labels=("result",))
        for result, count in (("evicted", stats.evicted), ("blocked_by_budget", stats.blocked),
                              ("failed", stats.failed)):
            moves.add_metric((result,), count)
        yield moves
        yield CounterMetricFamily("cgpu_defrag_gpus_freed", "GPUs the evicted pods held alone (idle once they went)",
                                  value=stats.gpus_freed)
        yield CounterMetricFamily("cgpu_defrag_rounds", "defragmentation rounds run", value=stats.rounds)
        yield CounterMetricFamily("cgpu_defrag_holds_expired", "defragmentation holds that ended by expiring",
                                  value=stats.holds_expired)
        holds = extender.ledger.defrag_holds.current()
        held = GaugeMetricFamily("cgpu_defrag_holds", "rooms defragmentation holds now, for a replacement or a "
                                 "pending pod", labels=("for",))
        held.add_metric(("replacement",), sum(h.owner is not None for h in holds))
        held.add_metric(("pending_pod",), sum(h.uid is not None for h in holds))
        yield held
        last = stats.last
        if last is not None:
            for name, help_text, value in (
                ("moves", "moves in the last round's plan", len(last.plan.moves)),
                ("unblocks", "pending pods the last round's plan gives room", len(last.plan.unblocks)),
                ("whole_gpus_freed", "whole GPUs the last round's plan frees", last.plan.whole_gpus_freed)):
                yield _gauge(f"cgpu_defrag_plan_{name}", help_text, value)

    @staticmethod
    def _backend(cluster):
        status = getattr(cluster, "status", None)
        if status is not None:
            watched = sorted(status().items())
            synced = GaugeMetricFamily("cgpu_watch_synced", "1 once the resource's first list completed",
                                       labels=("resource",))
            for resource, stats in watched:
                synced.add_metric((resource,), int(stats["synced"]))
            yield synced
            for stat, help_text in WATCH_COUNTERS:
                family = CounterMetricFamily(f"cgpu_watch_{stat}", f"{help_text}, per watched resource",
                                             labels=("resource",))
                for resource, stats in watched:
                    family.add_metric((resource,), stats[stat])
                yield family
        events = getattr(cluster, "event_counts", None)
        if events is not None:
            family = CounterMetricFamily("cgpu_events", "Kubernetes Events the extender recorded, by reason and "
                                         "result (sent, failed, dropped when its queue was full)",
                                         labels=("reason", "result"))
            for (reason, result), count in sorted(events().items()):
                family.add_metric((reason, result), count)
            yield family
