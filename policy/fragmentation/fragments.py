"""Stranded fragments: the free share of partly used GPUs that the workload's shapes cannot use.

For a mix of task shapes (:class:`~policy.fragmentation.shapes.Shapes`; only shapes that ask
for a GPU count), GPU g of a node holds a *stranded fragment* when

* it is a **fragment**: healthy, touched (some memory, compute or a pod on
  it) and with idle share left, ``idle(g) > 0``
  (:func:`policy.fragmentation.measure.idle`);
* the workload **could** use it: some class u of the mix whose mode and GPU
  model let it run on the node would take g if g were untouched, and the node
  has at least k_u GPUs that would;
* and **cannot** now: no class the node lets run now (mode, model, free CPU
  and host memory) takes g as it is, with at least k_u GPUs of the node taking
  it.

A node strands ``Σ_g idle(g) · stranded(g)`` GPUs. An untouched GPU is never
stranded, whatever the mix: if no shape fits it whole, that is a mismatch of
the node with the workload (sharing mode, model, GPU size), not capacity lost
to fragments, and packing pods differently would not free anything. This is
what the service reports as stranded (metrics, inspect, the GPU map).

It differs from FGD's ``Frag(node)`` (:func:`policy.fragmentation.measure.fragmentation`),
which the ``fragmentation`` strategy minimises: ``Frag`` is the idle share
the next pod of the mix is expected not to be able to use, so it counts every
idle GPU of a node where a popular shape cannot run at all — a memory-only
node's untouched GPUs while only memory+compute pods arrive — which is right
for choosing where to place a pod and wrong for telling an operator what is
wasted.

Pure and vectorised over nodes × GPUs × shape classes: O(n · G · U).
"""

from __future__ import annotations

import numpy as np

from policy.fragmentation.measure import allowed, gpu_takes, idle, runnable_any_host
from policy.fragmentation.shapes import Shapes
from policy.state import NodesView


def stranded_gpus(view: NodesView, shapes: Shapes) -> tuple:
    """``(stranded, share)``: (n, G) bool, GPU g holds a stranded fragment (module doc), and (n, G) its idle share."""
    share = idle(view)
    classes = shapes.classes
    count = classes[3]
    uses_gpu = count > 0
    untouched = np.zeros_like(view.mem_used)
    would = gpu_takes(view, classes, untouched, untouched, untouched) & uses_gpu  # (n, G, U) if g were untouched
    takes = gpu_takes(view, classes, view.mem_used, view.core_used, view.pods) & uses_gpu  # as g is
    runnable = runnable_any_host(view, shapes, view.memory_pods, view.core_pods)  # (n, U) by mode and model
    could = runnable & (would.sum(axis=1) >= count)
    runs = allowed(view, shapes, view.cpu_used, view.host_mem_used, view.memory_pods, view.core_pods) > 0
    can = runs & (takes.sum(axis=1) >= count)
    touched = (view.mem_used > 0) | (view.core_used > 0) | (view.pods > 0)
    fragment = touched & (share > 0)
    wanted = (would & could[:, None, :]).any(axis=2)
    usable = (takes & can[:, None, :]).any(axis=2)
    return fragment & wanted & ~usable, share


def stranded_share(view: NodesView, shapes: Shapes) -> tuple:
    """``(per_node, per_gpu, idle)``: GPUs stranded per node (n,), :func:`stranded_gpus` (n, G), and the
    node's idle share in GPUs (n,)."""
    per_gpu, share = stranded_gpus(view, shapes)
    return (share * per_gpu).sum(axis=1), per_gpu, share.sum(axis=1)
