"""Cluster backends: where Nodes and Pods come from, where bindings go, and who may write them.

A backend feeds the ledger (``observe_*``/``forget_*``) and writes binds; the
interface every backend implements, and the errors the verbs see, are in
:mod:`~extender.cluster.base` (the one module of this package the verbs import).

* :mod:`~extender.cluster.base` — the backend interface, :class:`~extender.cluster.base.ClusterError`,
  :class:`~extender.cluster.base.NotLeading`;
* :mod:`~extender.cluster.factory` — the backend a configuration asks for;
* :mod:`~extender.cluster.embedded` — nodes and pods held in memory, from :mod:`~extender.cluster.demo`
  (the built-in demo) or :mod:`~extender.cluster.clusterfile` (a ``kubectl get -o yaml`` dump);
* :mod:`~extender.cluster.leadership` — which replica answers the verbs (the state leader election
  writes and every request and Binding reads);
* :mod:`extender.cluster.kube` — the Kubernetes API server: list/watch, bind, events, leader election,
  a new leader's catch-up, scale-up placeholders.

May import :mod:`policy`, :mod:`extender.logs` and :mod:`extender.ledger` (layering: tests/test_layout.py).
"""
