"""The backend interface: where nodes and pods come from and where bindings go, and its errors.

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

Backends: :class:`extender.cluster.embedded.EmbeddedCluster` (demo, cluster file) and
:class:`extender.cluster.kube.backend.KubernetesCluster` (the API server).
"""

from __future__ import annotations


class ClusterError(Exception):
    """The cluster refused or failed an operation (patch, binding)."""

    status: int | None = None  # the API server's HTTP status, when it answered
    ambiguous: bool = False  # the operation may have taken effect after all


class NotLeading(ClusterError):
    """Nothing was written: this replica does not hold the leader lease (extender.cluster.leadership)."""
