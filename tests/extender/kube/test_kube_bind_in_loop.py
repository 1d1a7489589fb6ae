"""Bind served as deployed on the Kubernetes backend: checks and reservation in the server's event
loop, the Binding sent from the loop, and every case that must read or wait handed to a thread —
with the same outcomes as the thread's bind (tests/extender/kube/test_kube_backend.py)."""

import http.client
import threading

import orjson
import pytest

from builders import ServedInThread, node, pod
from extender.app import create_app
from extender.config import Config
from extender.httpserver import HTTPServer
from extender.server import routes
from fakekube import wait_until
from kubesteps import filter_, synced, used

PREFIX = "/cgpu-scheduler"


@pytest.fixture
def served(kube, started):
    """``served(nodes, pods)`` → (extender, created pods, post(verb, payload) → reply JSON)."""
    servers = []

    def serve(nodes, pods):
        extender, created = synced(started, kube, nodes, pods)
        app = create_app(Config(), extender=extender)
        server = ServedInThread(HTTPServer(app, "127.0.0.1", 0, threads=4, **routes(app)))
        servers.append(server)
        port = server.__enter__().port
        local = threading.local()

        def post(verb, payload):
            if not hasattr(local, "conn"):
                local.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
            local.conn.request("POST", f"{PREFIX}/{verb}", orjson.dumps(payload),
                               {"Content-Type": "application/json"})
            reply = local.conn.getresponse()
            assert reply.status == 200
            return orjson.loads(reply.read())

        return extender, created, post

    yield serve
    for server in servers:
        server.__exit__(None, None, None)


def binding(p, node_name):
    meta = p["metadata"]
    return {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node_name}


def in_thread(extender):
    """Count the binds that reach the cluster through its thread path."""
    calls = []
    bind = extender.cluster.bind
    extender.cluster.bind = lambda *a: calls.append(a[1]) or bind(*a)
    return calls


def test_a_bind_after_filter_sends_its_binding_from_the_loop(served, kube):
    extender, (p,), post = served([node("gpu-a", "core_mem", gpus=2, gib=15)], [pod("p1", mem=4, core=20)])
    threads = in_thread(extender)
    assert filter_(extender, p, ["gpu-a"])["NodeNames"] == ["gpu-a"]
    assert post("bind", binding(p, "gpu-a")) == {"Error": ""}
    assert threads == []  # not through the thread's path
    assert extender.cluster.raw._loop_client._idle  # its connection kept in the loop's pool
    assert kube.get("pods", "p1")["spec"]["nodeName"] == "gpu-a"
    assert extender.ledger.allocation(p["metadata"]["uid"]).committed
    wait_until(lambda: used(extender, "gpu-a") == ([4, 0], [20, 0]), what="counted once")


def test_a_failed_binding_releases_the_reservation_and_says_why(served, kube):
    extender, (p,), post = served([node("gpu-a", "cgpu", gpus=1, gib=15)], [pod("p1", mem=4)])
    filter_(extender, p, ["gpu-a"])
    kube.fail_bindings = [500]
    error = post("bind", binding(p, "gpu-a"))["Error"]
    assert "binding pod default/p1 to node gpu-a failed" in error and "500" in error
    assert extender.ledger.allocation(p["metadata"]["uid"]) is None
    assert kube.get("pods", "p1")["spec"].get("nodeName") is None
    assert post("bind", binding(p, "gpu-a")) == {"Error": ""}  # kube-scheduler's retry
    assert kube.get("pods", "p1")["spec"]["nodeName"] == "gpu-a"


def test_a_binding_refused_because_the_pod_is_there_already_is_success(served, kube):
    extender, (p,), post = served([node("gpu-a", "cgpu", gpus=1, gib=15)], [pod("p1", mem=4)])
    filter_(extender, p, ["gpu-a"])
    assert post("bind", binding(p, "gpu-a")) == {"Error": ""}
    extender.cluster._pods.store.pop(p["metadata"]["uid"], None)  # the watch has not shown it yet
    assert post("bind", binding(p, "gpu-a")) == {"Error": ""}  # 409 from the loop, read back in a thread
    assert extender.ledger.allocation(p["metadata"]["uid"]).committed


def test_the_api_server_gone_leaves_the_outcome_unknown_and_the_reservation_kept(served, kube):
    extender, (p,), post = served([node("gpu-a", "cgpu", gpus=1, gib=15)], [pod("p1", mem=4)])
    filter_(extender, p, ["gpu-a"])
    kube.stop()
    error = post("bind", binding(p, "gpu-a"))["Error"]
    assert "binding pod default/p1 to node gpu-a failed: Kubernetes API unreachable" in error
    assert extender.ledger.allocation(p["metadata"]["uid"]) is not None  # the Binding may exist


def test_a_pod_filter_never_saw_is_read_in_a_thread_and_bound(served, kube):
    extender, (p,), post = served([node("gpu-a", "cgpu", gpus=1, gib=15)], [pod("p1", mem=4)])
    threads = in_thread(extender)
    assert post("bind", binding(p, "gpu-a")) == {"Error": ""}
    assert threads == ["gpu-a"]
    assert kube.get("pods", "p1")["metadata"]["annotations"]


def test_concurrent_binds_of_pods_and_retries_bind_each_once_and_never_over_allocate(served, kube):
    pods = [pod(f"p{i}", mem=4) for i in range(12)]
    extender, created, post = served([node(f"gpu-{n}", "cgpu", gpus=1, gib=15) for n in "ab"], pods)
    for p in created:
        filter_(extender, p, ["gpu-a", "gpu-b"])
    errors = []

    def bind_all(offset):
        for i in range(len(created)):
            p = created[(i + offset) % len(created)]
            errors.append(post("bind", binding(p, "gpu-a" if i % 2 else "gpu-b"))["Error"])

    workers = [threading.Thread(target=bind_all, args=(k * 3,)) for k in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    bound = {p["metadata"]["name"]: kube.get("pods", p["metadata"]["name"])["spec"].get("nodeName")
             for p in created}
    assert sum(1 for n in bound.values() if n) == 6  # 3 pods of 4 GiB per 15 GiB GPU, two GPUs
    wait_until(lambda: all(sum(used(extender, n)[0]) == 12 for n in ("gpu-a", "gpu-b")), what="settled")
    for a in extender.ledger.allocations():
        assert bound[a.pod.name] == a.node  # what the ledger holds is what the API shows
    assert errors.count("") >= 6  # a pod bound again to its node is bound (idempotent)
    assert all(e == "" or "is already bound to node" in e or "no longer fits" in e for e in errors), errors
