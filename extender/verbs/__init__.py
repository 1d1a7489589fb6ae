"""The scheduler verbs: what filter, prioritize, preempt and bind answer, independent of HTTP.

kube-scheduler's extender protocol, from request bytes to reply bytes:

* :mod:`~extender.verbs.wire` — the wire format (``k8s.io/kube-scheduler/extender/v1``), decoded as Go
  decodes it;
* :mod:`~extender.verbs.service` — :class:`~extender.verbs.service.Extender`: each verb's logic over the
  ledger (and the plans, the stranded share and the inspect report the routes ask it for);
* :mod:`~extender.verbs.nodelists`, :mod:`~extender.verbs.replies` — node-name lists mapped to the
  state's rows and replies cut from padded fragments, without per-node work;
* :mod:`~extender.verbs.outcomes` — what the verbs answered, counted for the metrics.

Serving them over HTTP (status codes, ``Content-Type``, timing) is
:mod:`extender.serving`'s. May import :mod:`policy`, :mod:`extender.logs`,
:mod:`extender.ledger`, :mod:`extender.cluster` (the backend interface,
:mod:`extender.cluster.base`, only) and :mod:`extender.views` (layering:
tests/test_layout.py).
"""
