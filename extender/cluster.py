"""Cluster backends: where nodes and pods come from and where bindings go.

A backend has:

* ``kind`` — a short name shown by inspect (``embedded``, ``kubernetes``);
* ``start(ledger)`` — feed every Node, Pod and unhealthy-GPU ConfigMap to the
  ledger (``observe_*``/``forget_*``) and keep doing so as they change;
* ``ready()`` — True once the ledger holds a complete view of the cluster;
* ``get_pod(namespace, name, uid)`` — the Pod for a bind the filter cache
  does not hold, or None;
* ``bind(pod, node, annotations)`` — write the annotations on the pod and bind
  it to the node; raise :class:`ClusterError` if that fails;
* ``stop()``.
"""

from __future__ import annotations


class ClusterError(Exception):
    """The cluster refused or failed an operation (patch, binding)."""


def make_cluster(cluster_file: str | None = None):
    """The embedded backend on ``cluster_file``, or on the built-in demo."""
    from extender.clusterfile import load
    from extender.demo import demo_objects
    from extender.embedded import EmbeddedCluster

    if cluster_file:
        objects, _skipped = load(cluster_file)
        return EmbeddedCluster(objects, source=cluster_file)
    return EmbeddedCluster(demo_objects(), source="demo")
