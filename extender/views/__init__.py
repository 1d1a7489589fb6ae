"""Operators' views: what the ledger holds, shown — metrics, the inspect and plan texts, the plans, the GPU map.

Each view reads the ledger (and, for the metrics, the service's counters at
scrape time) and changes nothing:

* :mod:`~extender.views.metrics`, :mod:`~extender.views.collectors` — ``GET metrics``, Prometheus families
  read at scrape time;
* :mod:`~extender.views.inspect_text` — ``kubectl inspect cgpu``'s text, from an inspect report
  (the report itself is the ledger's: :mod:`extender.ledger.report`);
* :mod:`~extender.views.planning`, :mod:`~extender.views.plan_text`, :mod:`~extender.views.templates` —
  the autoscaling plan (``GET plan``, ``cgpu-extender plan``), its text and the pool templates file;
* :mod:`~extender.views.defrag_plan`, :mod:`~extender.views.defrag_text` — the defragmentation plan
  (``GET defrag``, ``cgpu-extender defrag``) and its text (making its moves is :mod:`extender.defrag`);
* :mod:`~extender.views.stranded`, :mod:`~extender.views.mapfeed` and ``static/gpumap.html`` — the
  stranded share, the GPU map's feed (``GET inspect?compact=1``) and its page (``GET ui``).

A view is computed for whoever asks — the HTTP routes, the CLI, the metrics
scrape — so none of them knows HTTP or argparse. May import :mod:`policy`,
:mod:`extender.logs` and :mod:`extender.ledger` (layering: tests/test_layout.py).
"""
