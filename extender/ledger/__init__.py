"""The ledger: which pod holds which share of which GPU, and what the cluster shows besides.

Everything the service knows of the cluster lives here, fed by a backend's
watch (``observe_*``/``forget_*``) and changed by bind (``reserve``/``release``).
Filter, prioritize, preempt, bind, the views and the CLI read it; nothing
here knows HTTP, Kubernetes clients or where the objects come from.

The ledger itself, by job:

* :mod:`~extender.ledger.ledger` — :class:`~extender.ledger.ledger.Ledger`: the fit checks and their
  caches, bind's reservations and releases, the plan's snapshot; its contract;
* :mod:`~extender.ledger.records` — a pod's reference and its allocation record;
* :mod:`~extender.ledger.observing` — Nodes, Pods and unhealthy-GPU ConfigMaps as they come and go;
* :mod:`~extender.ledger.unaccounted` — bound pods without an allocation, held on every GPU of their node;
* :mod:`~extender.ledger.hosts` — bound pods' CPU and host memory, counted on their nodes;
* :mod:`~extender.ledger.report` — the inspect report (JSON) and the cluster totals.

What it keeps, and reads of the objects it is given:

* :mod:`~extender.ledger.pending` — pods waiting for a node; :mod:`~extender.ledger.nominations` — room held
  for preemptors; :mod:`~extender.ledger.defrag_holds` — room held for defragmentation's moves;
  :mod:`~extender.ledger.malformed` — the objects it could not read;
* :mod:`~extender.ledger.annotations` — the allocation as ACK's pod annotations;
  :mod:`~extender.ledger.podinfo`, :mod:`~extender.ledger.defrag_facts`, :mod:`~extender.ledger.nodefacts` —
  what preemption, defragmentation and inspect read of a Pod or a Node;
  :mod:`~extender.ledger.budgets` — PodDisruptionBudgets as preemption and defragmentation count them.

May import :mod:`policy` and :mod:`extender.logs` only (layering: tests/test_layout.py).
"""
