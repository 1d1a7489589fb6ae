"""The Eviction subresource of the fake API server (:mod:`fakekube`), as kube-apiserver answers it.

``POST /api/v1/namespaces/{ns}/pods/{name}/eviction`` with a policy/v1
Eviction: 404 for no such pod, 409 when ``deleteOptions.preconditions.uid``
names another pod, 500 when more than one PodDisruptionBudget selects the pod
(the real server does not support that), 429 when the budget selecting it
allows no disruption (``status.disruptionsAllowed`` 0); otherwise the
budget's ``disruptionsAllowed`` goes down by one and the pod is deleted at
once (a real pod would terminate gracefully first), 201. A budget selects by
``matchLabels`` in its own namespace. ``kube.fail_evictions`` answers the
next evictions with the statuses it holds, before any of that.
"""

from __future__ import annotations

import copy


def evict(kube, namespace: str, name: str, body: dict) -> dict:
    from fakekube import ApiError

    with kube.cond:
        if kube.fail_evictions:
            raise ApiError(kube.fail_evictions.pop(0), "InternalError", "eviction failed (injected)")
        pod = kube.store["pods"].get((namespace, name))
        if pod is None:
            raise ApiError(404, "NotFound", f'pods "{name}" not found')
        uid = ((body.get("deleteOptions") or {}).get("preconditions") or {}).get("uid")
        if uid and uid != pod["metadata"]["uid"]:
            raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on Pod "{name}": the UID in the '
                                            f'precondition ({uid}) does not match the UID in record '
                                            f'({pod["metadata"]["uid"]}). The object might have been deleted and '
                                            f'then recreated')
        labels = pod["metadata"].get("labels") or {}
        budgets = [b for (ns, _), b in kube.store["poddisruptionbudgets"].items() if ns == namespace and
                   (((b.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}).items() <= labels.items()]
        if len(budgets) > 1:
            raise ApiError(500, "InternalError", "This pod has more than one PodDisruptionBudget, which the eviction "
                                                 "subresource does not support.")
        if budgets:
            budget = copy.deepcopy(budgets[0])
            status = budget.setdefault("status", {})
            if (status.get("disruptionsAllowed") or 0) <= 0:
                raise ApiError(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption "
                                                       "budget.")
            status["disruptionsAllowed"] -= 1
            kube.update("poddisruptionbudgets", budget)
        kube.delete("pods", name, namespace)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
