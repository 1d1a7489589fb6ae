"""Steps the Kubernetes backend tests share: drive the extender as kube-scheduler does, read the ledger."""

import orjson

from builders import pod


def filter_(extender, p, names):
    return orjson.loads(extender.filter(orjson.dumps({"Pod": p, "Nodes": None, "NodeNames": names})))


def bind(extender, p, node_name):
    meta = p["metadata"]
    return orjson.loads(extender.bind(orjson.dumps({"PodName": meta["name"], "PodNamespace": meta["namespace"],
                                                    "PodUID": meta["uid"], "Node": node_name})))["Error"]


def used(extender, node_name):
    """(memory, compute) used per GPU of a node, as lists."""
    names, view = extender.ledger.state.view_all()
    i = names.index(node_name)
    n = int(view.gpu_count[i])
    return view.mem_used[i, :n].tolist(), view.core_used[i, :n].tolist()


def create_pending(kube, name, **kwargs):
    return kube.create("pods", pod(name, **kwargs))


def synced(started, kube, nodes, pods=()):
    """Put ``nodes`` and ``pods`` on the API, start an extender on it, wait for its first sync."""
    from fakekube import wait_until

    for n in nodes:
        kube.create("nodes", n)
    created = [kube.create("pods", p) for p in pods]
    extender = started(kube)
    wait_until(extender.ready, what="first sync")
    return extender, created
