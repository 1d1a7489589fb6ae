"""Fragmentation: how much GPU a cluster strands for its workload, and what placing one more pod changes.

Everything the ``fragmentation`` scoring strategy (:mod:`policy.scoring.fragmentation`)
and the stranded-GPU metrics build on, apart from the rest of the core because
it is one body of math (FGD, Weng et al., USENIX ATC 2023, with the terms this
project adds), vectorised over nodes × GPUs × shape classes:

* :mod:`~policy.fragmentation.shapes` — the workload's task shapes and their popularity,
  learned from the pods seen (``ShapeMix``) and grouped into classes (``Shapes``);
* :mod:`~policy.fragmentation.measure` — Frag(node) and Stranded(node) as the nodes are;
* :mod:`~policy.fragmentation.growth` — the same with one more pod placed, per candidate GPU;
* :mod:`~policy.fragmentation.cache` — each node's parts kept per state row between decisions;
* :mod:`~policy.fragmentation.pressure` — π(m): how scarce the idle GPUs of a shape's models are;
* :mod:`~policy.fragmentation.starvation` — Starved(node): idle GPU its node's CPU and memory cannot feed;
* :mod:`~policy.fragmentation.spillover` — the CPU-only pods' share that lands beside idle GPUs;
* :mod:`~policy.fragmentation.ties` — the tie-break below the rounded measure;
* :mod:`~policy.fragmentation.alike` — nodes in the same state, worked out once;
* :mod:`~policy.fragmentation.kept` — arrays kept per state row at the version they were computed at;
* :mod:`~policy.fragmentation.fragments` — stranded fragments, what the service reports as stranded
  (not FGD's measure: that module says why).

May import the rest of :mod:`policy` (state, placement, request, names), never the
strategies that use it. Names with a leading underscore are shared between the
modules of this package only.
"""
