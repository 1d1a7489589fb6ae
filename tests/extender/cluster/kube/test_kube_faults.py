"""Fault cases of the Kubernetes backend, each against the fake API server over HTTP."""

from builders import node, pod
from extender.ledger import annotations as A
from extender.verbs.service import NOT_SYNCED
from fakekube import FakeKube, free_port, wait_until
from kubesteps import bind, filter_, synced, used


def test_watch_cut_mid_stream_resumes_without_losing_events(kube, started):
    extender, (keep,) = synced(started, kube, [node("gpu-a", "cgpu", gpus=2, gib=15)], [pod("keep", mem=4)])
    assert bind(extender, keep, "gpu-a") == ""
    kube.wait_watches(3)
    lists_before = extender.cluster.status()["pods"]["lists"]
    kube.cut_watches()  # every stream ends inside an event
    # changes made while the extender reconnects
    kube.create("pods", pod("other", mem=3, node_name="gpu-a") | {"metadata": {
        "name": "other", "namespace": "default", "uid": "uid-other",
        "annotations": {A.V2_ALLOCATION: '{"0":{"1":3}}'}}})
    kube.delete("pods", "keep")
    wait_until(lambda: [a.pod.name for a in extender.ledger.allocations()] == ["other"], what="resumed watch")
    assert used(extender, "gpu-a")[0] == [0, 3]
    status = extender.cluster.status()["pods"]
    assert status["errors"] >= 1 and status["lists"] == lists_before  # resumed from its resourceVersion
    assert extender.ready()


def test_410_gone_on_watch_lists_again_and_applies_what_was_missed(kube, started):
    extender, (a,) = synced(started, kube, [node("gpu-a", "cgpu", gpus=2, gib=15)], [pod("a", mem=4)])
    assert bind(extender, a, "gpu-a") == ""
    wait_until(lambda: extender.ledger.allocation(a["metadata"]["uid"]).confirmed, what="confirmation")
    kube.wait_watches(3)
    with kube.cond:  # atomically: cut the streams, change things, forget the history
        kube.cut_watches()
        kube.delete("pods", "a")
        kube.create("pods", pod("b", mem=6, node_name="gpu-a") | {"metadata": {
            "name": "b", "namespace": "default", "uid": "uid-b",
            "annotations": {A.V2_ALLOCATION: '{"0":{"0":6}}'}}})
        kube.delete("nodes", "gpu-a")
        kube.create("nodes", node("gpu-a", "cgpu", gpus=4, gib=15))
        kube.compact()
    wait_until(lambda: extender.cluster.status()["pods"]["gone"] >= 1, what="410 seen")
    wait_until(lambda: [x.pod.name for x in extender.ledger.allocations()] == ["b"] and
               extender.ledger.state.specs["gpu-a"].gpu_count == 4, what="relist applied")
    assert used(extender, "gpu-a")[0] == [6, 0, 0, 0]
    assert extender.cluster.status()["pods"]["lists"] >= 2 and extender.ready()


def test_a_failed_binding_writes_nothing_and_releases_the_share(kube, started):
    extender, (p,) = synced(started, kube, [node("gpu-a", "core_mem", gpus=1, gib=15)], [pod("p", mem=8, core=50)])
    assert filter_(extender, p, ["gpu-a"])["NodeNames"] == ["gpu-a"]
    kube.fail_bindings.append(500)
    error = bind(extender, p, "gpu-a")
    assert "500" in error and "etcdserver" in error
    assert [r for r in kube.requests if r[0] == "PATCH"] == []  # annotations travel in the Binding only
    on_api = kube.get("pods", "p")
    assert "annotations" not in on_api["metadata"] and "nodeName" not in on_api["spec"]
    assert extender.ledger.allocations() == [] and used(extender, "gpu-a") == ([0], [0])
    # the scheduler retries: the GPU is still there to take
    assert bind(extender, p, "gpu-a") == ""
    assert kube.get("pods", "p")["metadata"]["annotations"][A.V2_ALLOCATION] == '{"0":{"0":8}}'


def test_api_unreachable_at_start_then_ready_once_it_is_up(started):
    kube = FakeKube(port=free_port())  # nothing listens on the port yet
    extender = started(kube)
    p = pod("early", mem=2, core=30)
    try:
        wait_until(lambda: extender.cluster.status()["nodes"]["errors"] >= 2, what="failed attempts")
        assert not extender.ready()
        reply = filter_(extender, p, ["gpu-a"])
        assert reply["Error"] == NOT_SYNCED and reply["NodeNames"] == []
        assert bind(extender, p, "gpu-a") == NOT_SYNCED
        kube.start()
        kube.create("nodes", node("gpu-a", "core_mem", gpus=1, gib=15))
        kube.create("pods", p)
        wait_until(extender.ready, what="sync after the API came up")
        assert filter_(extender, p, ["gpu-a"]) == {"Nodes": None, "NodeNames": ["gpu-a"], "FailedNodes": {},
                                                   "FailedAndUnresolvableNodes": {}, "Error": ""}
    finally:
        kube.stop()


def test_readyz_is_503_until_synced_then_200(started):
    from extender.serving.app import create_app
    from extender.serving.config import Config

    kube = FakeKube(port=free_port())
    extender = started(kube)
    client = create_app(Config(), extender=extender).test_client()
    try:
        assert client.get("/cgpu-scheduler/readyz").status_code == 503
        kube.start()
        wait_until(extender.ready, what="sync")
        assert client.get("/cgpu-scheduler/readyz").status_code == 200
    finally:
        kube.stop()


def test_reservations_whose_pods_vanish_are_released_by_watch_or_relist(kube, started):
    from extender.ledger.records import PodRef
    from policy.request import parse_pod_request

    extender, (in_flight, survivor) = synced(started, kube, [node("gpu-a", "cgpu", gpus=1, gib=15)],
                                            [pod("in-flight", mem=4), pod("survivor", mem=3)])
    ledger = extender.ledger
    # a bind reserved the GPU, then the pod was deleted before it was ever bound
    ledger.reserve(PodRef.of(in_flight), parse_pod_request(in_flight), "gpu-a", 1)
    kube.delete("pods", "in-flight")
    wait_until(lambda: ledger.allocation("uid-in-flight") is None, what="DELETED releases the reservation")
    # a reservation whose pod the API never had (its deletion was missed) and one whose pod exists
    ghost = pod("ghost", mem=5)
    ledger.reserve(PodRef.of(ghost), parse_pod_request(ghost), "gpu-a", 1)
    ledger.reserve(PodRef.of(survivor), parse_pod_request(survivor), "gpu-a", 1)
    assert used(extender, "gpu-a")[0] == [8]
    with kube.cond:
        kube.cut_watches()
        kube.create("nodes", node("gpu-b", "cgpu", gpus=1, gib=15))
        kube.compact()
    wait_until(lambda: ledger.allocation("uid-ghost") is None, what="the relist releases the ghost")
    assert [a.pod.name for a in ledger.allocations()] == ["survivor"] and used(extender, "gpu-a")[0] == [3]


def test_an_object_the_ledger_cannot_apply_is_skipped_not_retried_forever(kube, started, monkeypatch):
    from extender.ledger.ledger import Ledger

    real = Ledger.observe_pod

    def picky(self, p):
        if p["metadata"]["name"] == "odd":
            raise ValueError("cannot apply this pod")
        return real(self, p)

    monkeypatch.setattr(Ledger, "observe_pod", picky)
    extender, _ = synced(started, kube, [node("gpu-a", "cgpu", gpus=1, gib=15)], [pod("odd", mem=1)])
    kube.create("pods", pod("fine", mem=2, node_name="gpu-a") | {"metadata": {
        "name": "fine", "namespace": "default", "uid": "uid-fine", "annotations": {A.V2_ALLOCATION: '{"0":{"0":2}}'}}})
    wait_until(lambda: extender.ledger.allocation("uid-fine"), what="later events still applied")
    assert extender.cluster.status()["pods"]["handler_errors"] == 1


def test_lists_come_in_pages_and_an_expired_continue_token_lists_again(kube, started):
    from builders import node, pod

    for i in range(5):
        kube.create("nodes", node(f"gpu-{i}", "cgpu", gpus=1, gib=15))
    for i in range(7):
        kube.create("pods", pod(f"p{i}", mem=2, node_name="gpu-0" if i == 0 else None))
    original, expired = kube.api_list, []

    def compact_after_the_first_page(kind, namespace, limit=0, token=""):
        page = original(kind, namespace, limit, token)
        if kind == "pods" and not token and not expired:
            expired.append(True)
            kube.create("pods", pod("late", mem=1))
            kube.compact()  # the next page's continue token now names a compacted revision
        return page

    kube.api_list = compact_after_the_first_page
    extender = started(kube, page_size=2)
    wait_until(extender.ready, what="first sync in pages")
    assert sorted(extender.ledger.state.specs) == [f"gpu-{i}" for i in range(5)]
    pods = extender.cluster._pods
    assert len(pods.store) == 8 and pods.stats["gone"] >= 1 and expired
    assert set(pods.store.values()) == {"gpu-0", None}  # the store keeps node names, not pod bodies
    assert kube.list_pages >= 3 + 4 + 1


def test_a_bind_whose_outcome_is_unknown_keeps_its_reservation_until_the_api_says_otherwise(kube, started):
    extender, (p,) = synced(started, kube, [node("gpu-a", "cgpu", gpus=1, gib=15),
                                            node("gpu-b", "cgpu", gpus=1, gib=15)], [pod("p1", mem=10)])
    filter_(extender, p, ["gpu-a", "gpu-b"])
    kube.fail_bindings.append(500)
    kube.fail_reads.append(503)  # and the read-back cannot tell whether the Binding happened
    assert "failed" in bind(extender, p, "gpu-a")
    assert used(extender, "gpu-a")[0] == [10]  # kept: the pod may be on gpu-a
    # the scheduler retries on another node: the API shows the pod unbound, so the stale
    # reservation goes and the pod is bound where the scheduler now wants it
    assert bind(extender, p, "gpu-b") == ""
    assert kube.get("pods", "p1")["spec"]["nodeName"] == "gpu-b"
    assert used(extender, "gpu-a")[0] == [0] and used(extender, "gpu-b")[0] == [10]
    assert kube.get("pods", "p1")["metadata"]["annotations"][A.V1_INDEX] == "0"


def test_a_stale_reservation_is_not_replaced_while_the_api_cannot_be_read(kube, started):
    extender, (p,) = synced(started, kube, [node("gpu-a", "cgpu", gpus=1, gib=15),
                                            node("gpu-b", "cgpu", gpus=1, gib=15)], [pod("p1", mem=10)])
    filter_(extender, p, ["gpu-a", "gpu-b"])
    kube.fail_bindings.append(500)
    kube.fail_reads.extend([503, 503])
    assert "failed" in bind(extender, p, "gpu-a")
    assert "cannot tell whether pod default/p1 is already bound" in bind(extender, p, "gpu-b")
    assert used(extender, "gpu-a")[0] == [10] and used(extender, "gpu-b")[0] == [0]
    assert kube.get("pods", "p1")["spec"].get("nodeName") is None
