"""What defragmentation reads of a bound pod besides its GPU share: may it move, and where may it go.

:func:`facts_of` reduces a v1 Pod to a :class:`PodFacts`: why it may not move
(:func:`policy.defrag.movable.why_immovable`: no controller, ``kube-system``,
opted out, DaemonSet; or being deleted already), its controller (``namespace/uid`` of the owner with
``controller: true``: a replacement is a pod of the same controller), and the
scheduling constraints its replacement will carry (``nodeSelector``, the
required node affinity terms, tolerations), kept as the API gives them.

Replicas share their facts, so equal facts are one object (at most
:data:`KEPT` distinct ones are remembered; beyond that only sharing is
lost). Imports: :mod:`policy.defrag.movable` only.
"""

from __future__ import annotations

import json
import threading

import orjson
from dataclasses import dataclass

from policy.defrag.movable import controller_of, why_immovable

KEPT = 10_000
BEING_DELETED = "being deleted"


@dataclass(frozen=True, slots=True)
class PodFacts:
    why_not: str  # "" when the pod may move
    controller: str | None  # "namespace/uid" of its controlling owner
    node_selector: tuple  # ((key, value), ...)
    node_affinity: str  # the required nodeSelectorTerms as JSON ("[]" when none)
    tolerations: str  # the tolerations as JSON ("[]" when none)

    @property
    def constraints(self) -> tuple:
        """``(node_selector dict, affinity terms, tolerations)`` as :func:`policy.selectors.allowed` takes them."""
        return dict(self.node_selector), json.loads(self.node_affinity), json.loads(self.tolerations)

    @property
    def signature(self) -> tuple:
        """Equal for pods that may go to the same nodes."""
        return self.node_selector, self.node_affinity, self.tolerations


def _object(value) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value) -> list:
    return value if isinstance(value, list) else []


def _json(items: list) -> str:
    if not items:
        return "[]"
    try:
        return orjson.dumps(items, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:  # not JSON as it stands (not from the API server): kept as text
        return json.dumps(items, sort_keys=True, default=str)


_shared: dict = {}
_lock = threading.Lock()


def facts_of(pod: dict) -> PodFacts:
    """The pod's :class:`PodFacts` (see module doc)."""
    meta, spec = _object(pod.get("metadata")), _object(pod.get("spec"))
    namespace = str(meta.get("namespace") or "default")
    owner = controller_of(meta.get("ownerReferences"))
    uid = owner.get("uid") if owner is not None else None
    affinity = _object(_object(_object(spec.get("affinity")).get("nodeAffinity"))
                       .get("requiredDuringSchedulingIgnoredDuringExecution"))
    selector = _object(spec.get("nodeSelector"))
    facts = PodFacts(
        why_not=BEING_DELETED if meta.get("deletionTimestamp") else
        why_immovable(namespace, meta.get("ownerReferences"), meta.get("annotations")),
        controller=f"{namespace}/{uid}" if isinstance(uid, str) and uid else None,
        node_selector=tuple(sorted((k, v) for k, v in selector.items() if isinstance(k, str) and isinstance(v, str))),
        node_affinity=_json([t for t in _list(affinity.get("nodeSelectorTerms")) if isinstance(t, dict)]),
        tolerations=_json([t for t in _list(spec.get("tolerations")) if isinstance(t, dict)]))
    with _lock:
        if len(_shared) >= KEPT:
            _shared.clear()
        return _shared.setdefault(facts, facts)


def controller_key(pod: dict) -> str | None:
    """``namespace/uid`` of the pod's controlling owner, or None (cheap: for filter's hot path)."""
    meta = _object(pod.get("metadata"))
    owner = controller_of(meta.get("ownerReferences"))
    uid = owner.get("uid") if owner is not None else None
    return f"{meta.get('namespace') or 'default'}/{uid}" if isinstance(uid, str) and uid else None
