"""``GET <prefix>/metrics``: the extender's counters in the Prometheus text format (version 0.0.4).

Gauges for what holds now (ready, allocations, unaccounted pods, GPU memory
and compute allocated/total over sharing nodes), counters for what happened
(binds reserved and rejected, allocations released and recovered, unaccounted
pods seen) and, with the Kubernetes backend, per watched resource the lists,
watch requests, events, 410s and failures. Once synced, the autoscaling
plan's figures (pending shared-GPU pods by outcome, new nodes needed per
pool; from a plan at most ``PLAN_MAX_AGE`` seconds old) and, with
``--scale-up-placeholders``, the placeholders kept per pool and the loop's
counters.
"""

from __future__ import annotations

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
PLAN_MAX_AGE = 10.0  # seconds a scrape may reuse the last plan for


def _family(lines: list, name: str, kind: str, help_text: str, samples) -> None:
    lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    for labels, value in samples:
        label_text = ",".join(f'{k}="{v}"' for k, v in labels.items())
        lines.append(f"{name}{{{label_text}}} {value}" if label_text else f"{name} {value}")


def render(extender) -> str:
    ledger = extender.ledger
    counters = ledger.counters
    summary = ledger.summary()
    lines: list = []
    gauges = (
        ("cgpu_ready", "1 once the cluster view is complete", int(extender.ready())),
        ("cgpu_allocations", "pods holding a GPU share", summary["allocations"]),
        ("cgpu_unaccounted_pods", "bound pods requesting shared GPU without an allocation annotation",
         summary["unaccountedPods"]),
        ("cgpu_gpu_memory_allocated_gib", "GPU memory allocated on sharing nodes", summary["memory"]["used"]),
        ("cgpu_gpu_memory_total_gib", "GPU memory of sharing nodes", summary["memory"]["total"]),
        ("cgpu_gpu_core_allocated_percent", "GPU compute allocated on core_mem nodes", summary["core"]["used"]),
        ("cgpu_gpu_core_total_percent", "GPU compute of core_mem nodes", summary["core"]["total"]),
    )
    for name, help_text, value in gauges:
        _family(lines, name, "gauge", help_text, [({}, value)])
    totals = (
        ("cgpu_binds_reserved_total", "allocations recorded by bind", counters.reserved),
        ("cgpu_binds_rejected_total", "binds refused because the pod no longer fits", counters.rejected),
        ("cgpu_allocations_released_total", "allocations released (deleted, finished, failed bind)",
         counters.released),
        ("cgpu_allocations_recovered_total", "allocations rebuilt from pod annotations", counters.recovered),
        ("cgpu_unaccounted_pods_seen_total", "bound shared-GPU pods first seen without annotations",
         counters.unaccounted_seen),
    )
    for name, help_text, value in totals:
        _family(lines, name, "counter", help_text, [({}, value)])
    _plan_families(lines, extender)
    status = getattr(extender.cluster, "status", None)
    if status is not None:
        watched = status()
        for stat, help_text in (("lists", "full lists"), ("watches", "watch requests"), ("events", "watch events"),
                                ("gone", "410 Gone answers (resourceVersion expired)"),
                                ("errors", "failed lists or watches (retried with backoff)"),
                                ("handler_errors", "objects the ledger could not apply (skipped, logged)")):
            _family(lines, f"cgpu_watch_{stat}_total", "counter", f"{help_text}, per watched resource",
                    [({"resource": name}, s[stat]) for name, s in sorted(watched.items())])
    return "\n".join(lines) + "\n"


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _plan_families(lines: list, extender) -> None:
    """Pending shared-GPU pods by outcome, new nodes per pool, the plan's CPU time; placeholders."""
    if not extender.ready():
        return
    planned = extender.plans.latest(PLAN_MAX_AGE)
    plan = planned.plan
    outcomes = {"fits_now": len(plan.fits_now), "new_node": sum(len(p.placements) for p in plan.pools.values()),
                "unplaceable": len(plan.unplaceable)}
    _family(lines, "cgpu_pending_pods", "gauge", "pending shared-GPU pods of this extender's schedulers, by where "
            "the autoscaling plan puts them", [({"outcome": k}, v) for k, v in outcomes.items()])
    needed = {name: 0 for name in planned.pools}
    needed.update({name: p.nodes_needed for name, p in plan.pools.items()})
    _family(lines, "cgpu_pool_nodes_needed", "gauge", "new nodes the autoscaling plan needs, per node pool",
            [({"pool": _label(name)}, n) for name, n in sorted(needed.items())])
    _family(lines, "cgpu_plan_cpu_seconds", "gauge", "CPU time the last autoscaling plan took",
            [({}, round(planned.cpu_seconds, 6))])
    placeholders = extender.placeholders
    if placeholders is not None:
        stats = placeholders.stats
        _family(lines, "cgpu_placeholders", "gauge", "scale-up placeholder pods kept, per node pool",
                [({"pool": _label(name)}, n) for name, n in sorted(stats.kept.items())])
        for name, help_text, value in (("created", "placeholder pods created", stats.created),
                                       ("deleted", "placeholder pods deleted", stats.deleted),
                                       ("errors", "placeholder API calls or rounds that failed", stats.errors)):
            _family(lines, f"cgpu_placeholders_{name}_total", "counter", help_text, [({}, value)])
