"""The Kubernetes backend: the ledger fed by the API server, bindings written to it, one leader among replicas.

* :mod:`~extender.cluster.kube.backend` — :class:`~extender.cluster.kube.backend.KubernetesCluster`, the
  backend (watches, bind, evict, events); :mod:`~extender.cluster.kube.reflector` — list then watch one kind;
* :mod:`~extender.cluster.kube.connect` — where the client configuration comes from;
  :mod:`~extender.cluster.kube.api` and :mod:`~extender.cluster.kube.httpclient` — bind's writes without
  the generated client's per-call cost;
* :mod:`~extender.cluster.kube.election` (``--leader-elect``), :mod:`~extender.cluster.kube.follow`
  (``--leader-elect-follow``), :mod:`~extender.cluster.kube.lease`, :mod:`~extender.cluster.kube.catchup` —
  leader election over a Lease and a new leader's catch-up;
* :mod:`~extender.cluster.kube.placeholders` — pause pods that make cluster-autoscaler add the nodes
  the plan asks for.

May import what :mod:`extender.cluster` may, and the rest of :mod:`extender.cluster`.
"""
