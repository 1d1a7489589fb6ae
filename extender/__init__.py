"""The extender service: kube-scheduler's calls answered from a ledger of GPU shares, kept in sync with the cluster.

Rooms, lowest first (each package's docstring says what it holds and may
import; the map is ``LAYERS`` in tests/test_layout.py, and docs/ARCHITECTURE.md
walks a filter, a bind and a watch event through them):

* :mod:`extender.logs` — structured logs; :mod:`extender.periodic` — background rounds;
* :mod:`extender.ledger` — which pod holds which share of which GPU, and what it keeps;
* :mod:`extender.cluster` — the backends (embedded, cluster file, demo, Kubernetes) and leadership;
  :mod:`extender.views` — metrics, the inspect and plan texts, the plans, the GPU map;
* :mod:`extender.defrag` — the executor of defragmentation's moves;
  :mod:`extender.verbs` — filter, prioritize, preempt and bind, independent of HTTP;
* :mod:`extender.serving` — the Flask app, the verbs over HTTP, gunicorn;
* :mod:`extender.cli` — the ``cgpu-extender`` command line.

Builds on :mod:`policy`; never imports :mod:`benchmarks`.
"""
