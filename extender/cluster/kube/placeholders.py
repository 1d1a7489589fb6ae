"""Scale-up placeholders: pause pods that make cluster-autoscaler add the nodes the plan asks for.

cluster-autoscaler adds a node to a pool for pods kube-scheduler marked
unschedulable that a new node of the pool would take, judged with
kube-scheduler's own plugins: GPU memory is one number per node to it, so a
shared-GPU pod pending because no *single* GPU has room looks as if it fit an
existing node, and nothing happens. A placeholder asks for a whole template
node's GPU memory, which no partly used node has, so cluster-autoscaler adds
a node of its pool for each one.

Contract of :class:`Placeholders`:

* every ``interval`` seconds, once the cluster view is synced, it makes a
  fresh plan (:mod:`extender.views.planning`) and, for each pool that needs K new
  nodes of which cluster-autoscaler adds A by itself (for the pods it sees
  unschedulable by node totals, :mod:`policy.totals`), keeps
  ``min(K − A, bound)`` placeholders, ``bound`` being the pool's max size
  minus its nodes when known, else ``per_pool``;
* a placeholder (:func:`placeholder_pod`): the pause image; a PriorityClass
  below every real workload (and not below cluster-autoscaler's
  expendable-pods cutoff, or it would not scale up for it), so that any real
  pod preempts it; GPU memory of one template node — with the pod label
  ``aliyun.com/gpu-count`` = the node's GPUs and
  ``ack.gpushare.placement=require-whole-device``, so the extender places it
  only on an empty node of the pool; on a core_mem pool of one-GPU nodes
  also that GPU's compute (a pod split over several GPUs shares memory only,
  so on core_mem pools of several GPUs per node the extender never places
  it: it stays pending, which is all cluster-autoscaler needs) —; the pool's
  nodeSelector and tolerations of the template's taints; the annotation
  ``cluster-autoscaler.kubernetes.io/safe-to-evict: "true"``;
* it lists, creates and deletes only pods of its own namespace that carry its
  labels. A placeholder the scheduler bound has done its work — the node it
  called for joined, and the plan (which leaves placeholders out) counts that
  node's room as free for the pending pods — and is deleted. Of the waiting
  ones, surplus placeholders are deleted newest first, those made for another
  template shape (the pool changed) are replaced, and pools that need no new
  node lose all of theirs;
* API failures are logged and counted; the next round tries again;
* with leader election only the leader reconciles.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field

from extender.cluster.base import ClusterError
from extender.logs import fields, get_logger
from extender.periodic import Periodic
from policy.names import GPU_CORE, GPU_MEM, MODE_CORE, POD_GPU_COUNT, POD_PLACEMENT, REQUIRE_WHOLE_DEVICE
from policy.pools import Pool
from policy.selectors import taints_of

MANAGED_BY = ("app.kubernetes.io/managed-by", "cgpu-extender")
ROLE = ("cgpu-extender.io/role", "scale-up-placeholder")
SELECTOR = f"{MANAGED_BY[0]}={MANAGED_BY[1]},{ROLE[0]}={ROLE[1]}"
POOL_ANNOTATION = "cgpu-extender.io/pool"
SHAPE_ANNOTATION = "cgpu-extender.io/shape"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"


@dataclass
class PlaceholderSettings:
    namespace: str = "cgpu-placeholders"
    priority_class: str = "cgpu-placeholder"
    image: str = "registry.k8s.io/pause:3.10"
    scheduler_name: str = "default-scheduler"
    interval: float = 10.0
    per_pool: int = 10  # bound for a pool whose max size is not known


@dataclass
class PlaceholderStats:
    rounds: int = 0
    created: int = 0
    deleted: int = 0
    errors: int = 0
    kept: dict = field(default_factory=dict)  # pool → placeholders after the last round


def shape(pool: Pool) -> str:
    """What a placeholder of ``pool`` asks for, e.g. ``4x15``: a placeholder of another shape is stale."""
    spec = pool.spec
    return f"{spec.gpu_count}x{spec.memory_per_gpu}" + ("+core" if spec.mode == MODE_CORE and spec.gpu_count == 1
                                                         else "")


def _name(pool: str) -> str:
    slug = re.sub(r"[^a-z0-9-]+", "-", pool.lower()).strip("-")[:40].strip("-") or "pool"
    return f"cgpu-placeholder-{slug}-{secrets.token_hex(3)}"


def placeholder_pod(pool: Pool, settings: PlaceholderSettings) -> dict:
    """The placeholder Pod for one new node of ``pool`` (see module doc)."""
    spec = pool.spec
    limits = {GPU_MEM: str(spec.gpu_count * spec.memory_per_gpu)}
    labels = {MANAGED_BY[0]: MANAGED_BY[1], ROLE[0]: ROLE[1], POD_PLACEMENT: REQUIRE_WHOLE_DEVICE}
    if spec.gpu_count > 1:
        labels[POD_GPU_COUNT] = str(spec.gpu_count)
    elif spec.mode == MODE_CORE:
        limits[GPU_CORE] = "100"
    tolerations = [{"key": t.key, "operator": "Equal", "value": t.value, "effect": t.effect}
                   for t in taints_of(pool.template)]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": _name(pool.name), "namespace": settings.namespace, "labels": labels,
                     "annotations": {POOL_ANNOTATION: pool.name, SHAPE_ANNOTATION: shape(pool),
                                     SAFE_TO_EVICT: "true"}},
        "spec": {
            "schedulerName": settings.scheduler_name,
            "priorityClassName": settings.priority_class,
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "nodeSelector": {pool.label: pool.name},
            "tolerations": tolerations,
            "containers": [{
                "name": "placeholder", "image": settings.image,
                "resources": {"limits": limits, "requests": dict(limits)},
                "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                    "runAsNonRoot": True, "runAsUser": 65535,
                                    "capabilities": {"drop": ["ALL"]}},
            }],
        },
    }


def _newest_first(pods: list) -> list:
    return sorted(pods, key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp") or ""), reverse=True)


def _bound(pod: dict) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


class Placeholders:
    """The reconcile loop (see module doc), in a thread of its own."""

    def __init__(self, cluster, extender, settings: PlaceholderSettings):
        self.cluster = cluster
        self.extender = extender
        self.settings = settings
        self.stats = PlaceholderStats()
        self.log = get_logger()
        self._loop = Periodic("placeholders", settings.interval, self.reconcile, self._failed)

    def start(self) -> None:
        self._loop.start()

    def stop(self) -> None:
        self._loop.stop()

    def _failed(self, exc: Exception) -> None:
        self.stats.errors += 1
        self.log.error("placeholder round failed", exc_info=exc)

    # -- one round ------------------------------------------------------------------
    def wanted(self) -> dict:
        """pool → (placeholders wanted, the Pool), from a fresh plan."""
        planned = self.extender.plans.fresh()
        wanted = {}
        for name, pool_plan in planned.plan.pools.items():
            pool = pool_plan.pool
            bound = pool.room if pool.room is not None else self.settings.per_pool
            wanted[name] = (min(planned.beyond_autoscaler(name), bound), pool)
        return wanted

    def reconcile(self) -> bool:
        """One round; False when the cluster view is not synced yet or this replica is not the
        leader (leader election: one replica keeps the placeholders), nothing done."""
        if not self.extender.serving():
            return False
        wanted = self.wanted()
        have: dict = {}
        for pod in self._list():
            meta = pod.get("metadata") or {}
            if meta.get("deletionTimestamp"):
                continue  # on its way out
            have.setdefault((meta.get("annotations") or {}).get(POOL_ANNOTATION, ""), []).append(pod)
        self.stats.rounds += 1
        kept = {}
        for name in sorted(set(wanted) | set(have)):
            count, pool = wanted.get(name, (0, None))
            pods = have.get(name, [])
            done = [p for p in pods if _bound(p)]  # its node joined; the plan counts that room as free
            waiting = [p for p in pods if not _bound(p)]
            stale = [p for p in waiting if pool is None or
                     ((p.get("metadata") or {}).get("annotations") or {}).get(SHAPE_ANNOTATION) != shape(pool)]
            current = _newest_first([p for p in waiting if p not in stale])
            surplus = current[:max(len(current) - count, 0)]
            for pod in done + stale + surplus:
                self._delete(pod)
            present = len(current) - len(surplus)
            for _ in range(count - present):
                present += self._create(pool)
            if present:
                kept[name] = present
        self.stats.kept = kept
        return True

    # -- API --------------------------------------------------------------------------
    def _list(self) -> list:
        reply = self.cluster.call(self.cluster.api.list_namespaced_pod, self.settings.namespace,
                                  label_selector=SELECTOR)
        return [p for p in reply.get("items") or [] if _ours(p)]

    def _create(self, pool: Pool) -> int:
        body = placeholder_pod(pool, self.settings)
        try:
            self.cluster.call(self.cluster.api.create_namespaced_pod, self.settings.namespace, body)
        except ClusterError as exc:
            self._failed("create", body, exc)
            return 0
        self.stats.created += 1
        self.log.info("placeholder created", extra=fields(pool=pool.name, pod=body["metadata"]["name"]))
        return 1

    def _delete(self, pod: dict) -> None:
        name = (pod.get("metadata") or {}).get("name") or ""
        try:
            self.cluster.call(self.cluster.api.delete_namespaced_pod, name, self.settings.namespace)
        except ClusterError as exc:
            if exc.status != 404:
                self._failed("delete", pod, exc)
                return
        self.stats.deleted += 1
        self.log.info("placeholder deleted", extra=fields(pod=name))

    def _failed(self, action: str, pod: dict, exc: ClusterError) -> None:
        self.stats.errors += 1
        self.log.warning(f"placeholder {action} failed", extra=fields(
            pod=(pod.get("metadata") or {}).get("name"), error=str(exc)))


def _ours(pod: dict) -> bool:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return labels.get(MANAGED_BY[0]) == MANAGED_BY[1] and labels.get(ROLE[0]) == ROLE[1]
