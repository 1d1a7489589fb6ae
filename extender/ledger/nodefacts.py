"""What an operator reads of a Node beside its GPU sharing: readiness, cordon, GPU model, whole GPUs.

Contract:

* :func:`kept_conditions` is what the ledger keeps of ``status.conditions``:
  the ``Ready`` condition's ``type`` and ``status`` only — no timestamps, so a
  heartbeat changes nothing kept; a malformed list keeps nothing;
* :func:`facts` reads a kept Node (and its parsed spec) for inspect:
  ``ready`` (True/False, None when the node reports no Ready condition or
  ``Unknown``), ``unschedulable`` (cordoned), ``model`` (the GPU model label,
  None when absent), ``wholeGpus`` (``nvidia.com/gpu`` allocatable: GPUs
  handed out whole, not shared; 0 when absent, malformed or more than any
  node has).

May import ``policy``; nothing else of the service.
"""

from __future__ import annotations

from policy.names import MAX_GPUS_PER_NODE, WHOLE_GPU
from policy.node import NodeSpec
from policy.quantity import QuantityError, parse_whole


def _object(value) -> dict:
    return value if isinstance(value, dict) else {}


def kept_conditions(status: dict) -> list:
    """The Ready condition of a Node's ``status``, as ``[{"type": "Ready", "status": ...}]`` (or [])."""
    conditions = _object(status).get("conditions")
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, dict) and condition.get("type") == "Ready" and isinstance(condition.get("status"), str):
            return [{"type": "Ready", "status": condition["status"][:16]}]
    return []


def facts(node: dict | None, spec: NodeSpec) -> dict:
    """``ready``, ``unschedulable``, ``model`` and ``wholeGpus`` of a kept Node (see module doc)."""
    node = _object(node)
    status = _object(node.get("status"))
    ready = next((c["status"] for c in kept_conditions(status)), None)
    try:
        whole = parse_whole(_object(status.get("allocatable")).get(WHOLE_GPU, 0))
    except QuantityError:
        whole = 0
    if whole > MAX_GPUS_PER_NODE:
        whole = 0
    return {"ready": {"True": True, "False": False}.get(ready),
            "unschedulable": _object(node.get("spec")).get("unschedulable") is True,
            "model": spec.model or None,
            "wholeGpus": whole}
