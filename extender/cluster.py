"""Cluster backends: where nodes and pods come from and where bindings go.

A backend has:

* ``kind`` — a short name shown by inspect (``embedded``, ``kubernetes``);
* ``start(ledger)`` — feed every Node, Pod and unhealthy-GPU ConfigMap to the
  ledger (``observe_*``/``forget_*``) and keep doing so as they change;
* ``ready()`` — True once the ledger holds a complete view of the cluster;
* ``get_pod(namespace, name, uid)`` — the Pod for a bind the filter cache
  does not hold, or None;
* ``bind(pod, node, annotations)`` — write the annotations on the pod and bind
  it to the node; raise :class:`ClusterError` if that fails (with
  ``ambiguous`` set when it cannot tell whether the binding took effect;
  :class:`NotLeading`, nothing sent, when leader election fences it off);
* ``pod_node(namespace, name, uid)`` — the node the pod is bound to now, read
  from the source of truth (None when unbound); ClusterError if it cannot
  tell;
* ``stop()``.

Backends: :class:`extender.embedded.EmbeddedCluster` (demo, cluster file) and
:class:`extender.kube.backend.KubernetesCluster` (the API server).
"""

from __future__ import annotations


class ClusterError(Exception):
    """The cluster refused or failed an operation (patch, binding)."""

    status: int | None = None  # the API server's HTTP status, when it answered
    ambiguous: bool = False  # the operation may have taken effect after all


class NotLeading(ClusterError):
    """Nothing was written: this replica does not hold the leader lease (extender.leadership)."""


def make_cluster(config):
    """The backend ``config`` asks for: its cluster file, the Kubernetes API, or the demo."""
    if config.cluster_file:
        from extender.clusterfile import stream
        from extender.embedded import EmbeddedCluster

        return EmbeddedCluster(stream(config.cluster_file), source=config.cluster_file)
    if config.kubernetes:
        from extender.kube import connect
        from extender.kube.backend import KubernetesCluster

        return KubernetesCluster.from_configuration(connect.load(config.kubeconfig),
                                                    source=connect.available(config.kubeconfig) or "kubernetes")
    from extender.demo import demo_objects
    from extender.embedded import EmbeddedCluster

    return EmbeddedCluster(demo_objects(), source="demo")
