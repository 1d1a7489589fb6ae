"""Ledger.snapshot: the state as if one namespace's allocations were not there, consistent under binds."""

import threading

import orjson

from builders import node, pod
from extender.cluster.embedded import EmbeddedCluster
from extender.serving.app import build_extender
from extender.serving.config import Config


def test_snapshot_leaves_out_one_namespace_and_is_consistent_while_binds_run():
    nodes = [node(f"n{i}", "cgpu", gpus=4, gib=15) for i in range(4)]
    extender = build_extender(Config(), cluster=EmbeddedCluster(nodes, source="test"), clock=lambda: 1)
    names = [n["metadata"]["name"] for n in nodes]

    def bind_all(namespace, count):
        for i in range(count):
            p = pod(f"{namespace}-{i}", mem=1, namespace=namespace)
            reply = orjson.loads(extender.filter(orjson.dumps({"Pod": p, "Nodes": None, "NodeNames": names})))
            if reply["NodeNames"]:
                extender.bind(orjson.dumps({"PodName": p["metadata"]["name"], "PodNamespace": namespace,
                                            "PodUID": p["metadata"]["uid"], "Node": reply["NodeNames"][0]}))
            extender.ledger.release(p["metadata"]["uid"]) if i % 3 == 0 else None

    threads = [threading.Thread(target=bind_all, args=(ns, 60)) for ns in ("ph", "real")]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        snapshot = extender.ledger.snapshot("ph")
        assert (snapshot.array("mem_used") >= 0).all() and (snapshot.array("pods") >= 0).all()
    for t in threads:
        t.join()
    snapshot = extender.ledger.snapshot("ph")
    real = sum(1 for a in extender.ledger.allocations() if a.pod.namespace == "real")
    assert int(snapshot.array("mem_used").sum()) == real
    assert int(extender.ledger.state.array("mem_used").sum()) == len(extender.ledger.allocations())
