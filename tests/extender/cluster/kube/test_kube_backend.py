"""The Kubernetes backend against a Kubernetes API over HTTP: sync, bind, watch, node changes."""

from builders import node, pod
from extender.ledger import annotations as A
from extender.ledger.records import PodRef
from fakekube import wait_until
from kubesteps import bind, create_pending, filter_, synced, used
from policy.request import parse_pod_request


def test_syncs_then_binds_with_annotations_on_the_api_pod(kube, started):
    extender, (p,) = synced(started, kube, [node("gpu-a", "core_mem", gpus=2, gib=15)],
                            [pod("cuda-sample", mem=2, core=30)])
    assert filter_(extender, p, ["gpu-a"])["NodeNames"] == ["gpu-a"]
    assert bind(extender, p, "gpu-a") == ""
    on_api = kube.get("pods", "cuda-sample")
    assert on_api["spec"]["nodeName"] == "gpu-a"
    annotations = on_api["metadata"]["annotations"]
    assert annotations[A.V2_ALLOCATION] == '{"0":{"0":2}}'
    assert annotations[A.V2_CORE] == '{"0":{"0":30}}'
    assert annotations[A.V1_INDEX] == "0" and annotations[A.V1_POD] == "2"
    # the watch shows the binding: the allocation is confirmed, counted once
    allocation = extender.ledger.allocation(p["metadata"]["uid"])
    wait_until(lambda: allocation.confirmed, what="watch confirms the binding")
    assert used(extender, "gpu-a") == ([2, 0], [30, 0])
    assert len(extender.ledger.allocations()) == 1


def test_bind_is_idempotent_and_reads_the_pod_from_the_api_when_filter_did_not_see_it(kube, started):
    extender, (p,) = synced(started, kube, [node("gpu-a", "core_mem", gpus=2, gib=15)], [pod("p1", mem=4, core=20)])
    assert bind(extender, p, "gpu-a") == ""  # no filter before: the pod comes from the watch cache
    wait_until(lambda: extender.cluster.bound_node(p["metadata"]["uid"]) == "gpu-a", what="the watch shows it")
    assert bind(extender, p, "gpu-a") == ""  # the scheduler retried: the pod is already there
    assert len([r for r in kube.requests if r[1].endswith("/binding")]) == 1
    assert "already bound to node gpu-a" in bind(extender, p, "gpu-b")
    wait_until(lambda: extender.ledger.allocation(p["metadata"]["uid"]).confirmed, what="confirmation")
    assert used(extender, "gpu-a") == ([4, 0], [20, 0])


def test_a_binding_refused_because_the_pod_is_already_there_is_success(kube, started):
    extender, (p,) = synced(started, kube, [node("gpu-a", "cgpu", gpus=1, gib=15)], [pod("p1", mem=4)])
    cluster = extender.cluster
    allocation, _ = extender.ledger.reserve(PodRef.of(p), parse_pod_request(p), "gpu-a", 1)
    cluster.bind(p, "gpu-a", allocation.annotations)
    cluster._pods.store.pop(p["metadata"]["uid"])  # the watch has not shown the binding yet
    cluster.bind(p, "gpu-a", allocation.annotations)  # 409 "already assigned" to this node → success
    assert kube.get("pods", "p1")["spec"]["nodeName"] == "gpu-a"


def test_deleted_and_finished_pods_free_their_gpus(kube, started):
    kube.create("nodes", node("gpu-a", "cgpu", gpus=2, gib=15))
    pods = [create_pending(kube, f"p{i}", mem=5) for i in range(3)]
    extender = started(kube)
    wait_until(extender.ready, what="first sync")
    for p in pods:
        assert bind(extender, p, "gpu-a") == ""
    wait_until(lambda: sum(used(extender, "gpu-a")[0]) == 15 and
               all(a.confirmed for a in extender.ledger.allocations()), what="three confirmed")
    kube.delete("pods", "p0")
    kube.set_pod_phase("p1", "Succeeded")
    wait_until(lambda: sum(used(extender, "gpu-a")[0]) == 5, what="deleted and finished pods released")
    assert [a.pod.name for a in extender.ledger.allocations()] == ["p2"]


def test_a_pod_deleted_between_filter_and_bind_leaks_nothing(kube, started):
    extender, (p,) = synced(started, kube, [node("gpu-a", "cgpu", gpus=1, gib=15)], [pod("gone", mem=5)])
    assert filter_(extender, p, ["gpu-a"])["NodeNames"] == ["gpu-a"]
    kube.delete("pods", "gone")
    error = bind(extender, p, "gpu-a")
    assert "404" in error and "not found" in error
    assert extender.ledger.allocations() == [] and used(extender, "gpu-a") == ([0], [0])


def test_a_pod_replaced_under_the_same_name_is_not_bound(kube, started):
    extender, (old,) = synced(started, kube, [node("gpu-a", "cgpu", gpus=1, gib=15)], [pod("web-0", mem=5)])
    assert filter_(extender, old, ["gpu-a"])["NodeNames"] == ["gpu-a"]
    kube.delete("pods", "web-0")
    new = create_pending(kube, "web-0", mem=5, uid="uid-web-0-again")  # a StatefulSet recreated it
    error = bind(extender, old, "gpu-a")
    assert "409" in error and "Precondition failed: UID" in error
    on_api = kube.get("pods", "web-0")
    assert on_api["metadata"]["uid"] == new["metadata"]["uid"] and "annotations" not in on_api["metadata"]
    assert "nodeName" not in on_api["spec"] and extender.ledger.allocations() == []


def test_a_bind_is_one_write_that_sets_node_and_annotations_together(kube, started):
    extender, (p,) = synced(started, kube, [node("gpu-a", "cgpu", gpus=2, gib=15)], [pod("p1", mem=3)])
    before = len(kube.requests)
    assert bind(extender, p, "gpu-a") == ""
    writes = [r for r in kube.requests[before:] if r[0] != "GET" and not r[1].endswith("/events")]
    assert writes == [("POST", "/api/v1/namespaces/default/pods/p1/binding")]
    on_api = kube.get("pods", "p1")
    assert on_api["spec"]["nodeName"] == "gpu-a" and on_api["metadata"]["annotations"][A.V1_POD] == "3"


def test_keys_of_ours_the_allocation_does_not_use_are_cleared_before_the_binding(kube, started):
    stale = pod("p1", mem=3)
    stale["metadata"]["annotations"] = {A.V2_CORE: '{"0":{"1":40}}', "team": "ml"}  # an earlier attempt's core
    extender, (p,) = synced(started, kube, [node("gpu-a", "cgpu", gpus=2, gib=15)], [stale])
    assert bind(extender, p, "gpu-a") == ""
    annotations = kube.get("pods", "p1")["metadata"]["annotations"]
    assert A.V2_CORE not in annotations and annotations["team"] == "ml"
    assert annotations[A.V2_ALLOCATION] == '{"0":{"0":3}}'


def test_a_binding_that_exists_already_gets_this_allocations_annotations(kube, started):
    extender, (p,) = synced(started, kube, [node("gpu-a", "cgpu", gpus=2, gib=15)], [pod("p1", mem=3)])
    earlier = dict(p, metadata={**p["metadata"], "annotations": {}})
    kube.api_bind("default", "p1", {"metadata": {"uid": p["metadata"]["uid"],
                                                 "annotations": {A.V2_ALLOCATION: '{"0":{"1":3}}'}},
                                    "target": {"name": "gpu-a"}})  # an attempt whose reply was lost
    cluster = extender.cluster
    cluster._pods.store.pop(p["metadata"]["uid"], None)  # the watch has not shown it yet
    allocation, _ = extender.ledger.reserve(PodRef.of(p), parse_pod_request(p), "gpu-a", 1)
    cluster.bind(earlier, "gpu-a", allocation.annotations)  # 409 "already assigned" to this node → success
    on_api = kube.get("pods", "p1")["metadata"]["annotations"]
    assert {k: on_api.get(k) for k in A.ALL_KEYS} == {k: allocation.annotations.get(k) for k in A.ALL_KEYS}


def test_node_changes_rebuild_rows_and_keep_counting_pods(kube, started):
    nodes = [node("gpu-a", "core_mem", gpus=2, gib=15), node("gpu-b", "core_mem", gpus=1, gib=15)]
    extender, (p,) = synced(started, kube, nodes, [pod("p1", mem=6, core=50)])
    assert bind(extender, p, "gpu-a") == ""
    # allocatable grows (a GPU is added): the row is rebuilt, the pod still counted
    kube.update("nodes", node("gpu-a", "core_mem", gpus=4, gib=15))
    wait_until(lambda: extender.ledger.state.specs["gpu-a"].gpu_count == 4, what="node update")
    assert used(extender, "gpu-a") == ([6, 0, 0, 0], [50, 0, 0, 0])
    # mode switch to cgpu with the core pod still there: counted, and memory-only pods refused
    kube.update("nodes", node("gpu-a", "cgpu", gpus=4, gib=15))
    wait_until(lambda: extender.ledger.state.specs["gpu-a"].schedule_label == "cgpu", what="mode switch")
    assert used(extender, "gpu-a")[0] == [6, 0, 0, 0]
    memory_only = create_pending(kube, "m1", mem=2)
    assert filter_(extender, memory_only, ["gpu-a"])["NodeNames"] == []
    # unhealthy GPU 0 of gpu-b: a pod that only fits there is refused
    kube.create("configmaps", {"metadata": {"name": "unhealthy-gpu-gpu-b", "namespace": "kube-system"},
                               "data": {"gpus": "0"}})
    wait_until(lambda: extender.ledger.state.specs["gpu-b"].unhealthy == frozenset({0}), what="unhealthy GPU")
    assert filter_(extender, create_pending(kube, "c1", mem=2, core=10), ["gpu-b"])["NodeNames"] == []
    # the node disappears: its row goes, the pod's record waits for it
    kube.delete("nodes", "gpu-a")
    wait_until(lambda: "gpu-a" not in extender.ledger.state.specs, what="node removal")
    assert len(extender.ledger.allocations()) == 1
    assert extender.inspect()["allocationsOnUnknownNodes"][0]["name"] == "p1"


def test_unaccounted_pods_are_reported_and_counted(kube, started):
    rogue = pod("rogue", mem=7, node_name="gpu-a")  # bound by someone else, no annotations
    extender, _ = synced(started, kube, [node("gpu-a", "cgpu", gpus=1, gib=15)], [rogue])
    report = extender.inspect()
    assert report["summary"]["unaccountedPods"] == 1
    assert report["nodes"][0]["unaccounted"][0]["name"] == "rogue"
    assert extender.ledger.counters.unaccounted_seen == 1
    event = wait_until(lambda: kube.events, what="a Warning event")[0]
    assert (event["type"], event["reason"]) == ("Warning", "UnaccountedGPUShare")
    assert event["involvedObject"]["name"] == "rogue" and "gpu-a" in event["message"]


def test_metrics_count_binds_unaccounted_pods_and_watch_failures(kube, started):
    from prometheus_client.parser import text_string_to_metric_families

    from extender.serving.app import create_app
    from extender.serving.config import Config

    extender, (_, p) = synced(started, kube, [node("gpu-a", "cgpu", gpus=1, gib=15)],
                               [pod("rogue", mem=7, node_name="gpu-a"), pod("p1", mem=4)])
    assert bind(extender, p, "gpu-a") == ""
    kube.wait_watches(3)
    kube.cut_watches()
    wait_until(lambda: extender.cluster.status()["nodes"]["errors"] >= 1, what="a failed watch")
    reply = create_app(Config(), extender=extender).test_client().get("/cgpu-scheduler/metrics")
    assert reply.status_code == 200 and reply.content_type.startswith("text/plain; version=0.0.4")
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(reply.get_data(as_text=True)) for s in family.samples}
    assert samples[("cgpu_ready", ())] == 1 and samples[("cgpu_binds_total", (("result", "bound"),))] == 1
    assert samples[("cgpu_allocations_reserved_total", ())] == 1
    assert samples[("cgpu_unaccounted_pods", ())] == 1 and samples[("cgpu_unaccounted_pods_seen_total", ())] == 1
    assert samples[("cgpu_memory_allocated_bytes", ())] == (4 + 7) * 2**30  # p1, and rogue held back (unaccounted)
    assert samples[("cgpu_memory_capacity_bytes", ())] == 15 * 2**30
    assert samples[("cgpu_watch_errors_total", (("resource", "nodes"),))] >= 1
    assert samples[("cgpu_watch_lists_total", (("resource", "pods"),))] == 1
    assert samples[("cgpu_watch_synced", (("resource", "configmaps"),))] == 1


def test_concurrent_binds_through_the_api_never_over_allocate(kube, started):
    import json
    import threading

    pods = [pod(f"c{i}", mem=4) for i in range(20)]  # 3 fit on each 15 GiB GPU: 6 in all
    extender, created = synced(started, kube, [node("gpu-a", "cgpu", gpus=2, gib=15)], pods)
    for p in created:
        assert filter_(extender, p, ["gpu-a"])["NodeNames"] == ["gpu-a"]
    errors, barrier = [], threading.Barrier(8)

    def worker(chunk):
        barrier.wait()
        errors.extend(bind(extender, p, "gpu-a") for p in chunk)

    threads = [threading.Thread(target=worker, args=(created[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors.count("") == 6 and all("no longer fits" in e for e in errors if e)
    on_api = [p for p in kube.objects("pods") if p["spec"].get("nodeName")]
    per_gpu = {}
    for p in on_api:
        for gpus in json.loads(p["metadata"]["annotations"][A.V2_ALLOCATION]).values():
            for gpu, gib in gpus.items():
                per_gpu[gpu] = per_gpu.get(gpu, 0) + gib
    assert len(on_api) == 6 and per_gpu == {"0": 12, "1": 12}
    assert not any(p["metadata"].get("annotations") for p in kube.objects("pods") if not p["spec"].get("nodeName"))
    wait_until(lambda: all(a.confirmed for a in extender.ledger.allocations()), what="all bindings seen")
    assert used(extender, "gpu-a")[0] == [12, 12]
