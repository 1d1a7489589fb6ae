"""Events the Kubernetes backend records: a Normal event at bind, best effort (never fails or holds up a bind)."""

import json
import threading
import time

from builders import node, pod
from extender.cluster.kube.backend import ALLOCATED, UNACCOUNTED
from extender.logs import JsonFormatter, get_logger
from fakekube import wait_until
from kubesteps import bind, filter_, synced

from kubefixtures import connect


def allocated_events(kube) -> list:
    return [e for e in kube.events if e["reason"] == ALLOCATED]


def test_bind_records_a_normal_event_naming_node_gpu_memory_and_compute(kube, started):
    extender, (p,) = synced(started, kube, [node("gpu-a", "core_mem", gpus=2, gib=15)],
                            [pod("cuda-sample", mem=2, core=30)])
    assert filter_(extender, p, ["gpu-a"])["NodeNames"] == ["gpu-a"]
    assert bind(extender, p, "gpu-a") == ""
    (event,) = wait_until(lambda: allocated_events(kube), what="a GPUShareAllocated event")
    assert event["type"] == "Normal" and event["source"]["component"] == "cgpu-extender"
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Pod", "name": "cuda-sample",
                                       "namespace": "default", "uid": p["metadata"]["uid"]}
    assert event["message"] == "allocated GPU 0: 2 GiB + 30 % compute on node gpu-a"
    assert bind(extender, p, "gpu-a") == ""  # kube-scheduler retried: already there, nothing new to say
    time.sleep(0.2)
    assert len(allocated_events(kube)) == 1
    assert extender.cluster.event_counts() == {(ALLOCATED, "sent"): 1}


def test_a_multi_gpu_memory_only_pod_is_named_on_each_gpu(kube, started):
    extender, (p,) = synced(started, kube, [node("gpu-a", "cgpu", gpus=4, gib=15)],
                            [pod("split", mem=8, labels={"aliyun.com/gpu-count": "2"})])
    assert bind(extender, p, "gpu-a") == ""
    (event,) = wait_until(lambda: allocated_events(kube), what="a GPUShareAllocated event")
    assert event["message"] == "allocated GPU 0: 4 GiB, GPU 1: 4 GiB on node gpu-a"


def test_event_failures_never_fail_a_bind(kube, started):
    extender, pods = synced(started, kube, [node("gpu-a", "cgpu", gpus=1, gib=15)],
                            [pod("p1", mem=4), pod("p2", mem=4)])
    kube.fail_events = [500]
    assert [bind(extender, p, "gpu-a") for p in pods] == ["", ""]
    assert kube.get("pods", "p1")["spec"]["nodeName"] == kube.get("pods", "p2")["spec"]["nodeName"] == "gpu-a"
    wait_until(lambda: extender.cluster.event_counts() == {(ALLOCATED, "failed"): 1, (ALLOCATED, "sent"): 1},
               what="one event failed, one sent")


def test_a_full_event_queue_drops_the_event_at_once_and_counts_it(kube):
    cluster = connect(kube)  # not started: nothing drains the queue
    meta = {"name": "p", "namespace": "default", "uid": "u"}
    for _ in range(cluster._events.maxsize):
        cluster._event(UNACCOUNTED, meta, "gpu-a", None)
    cluster._event(ALLOCATED, meta, "gpu-a", {})  # returns at once (a blocking put would hang here)
    assert cluster.event_counts() == {(ALLOCATED, "dropped"): 1}


def test_a_burst_of_events_goes_in_one_write_and_a_failed_one_is_counted_alone(kube):
    from extender.cluster.kube import backend

    cluster = connect(kube)
    sent, settles = [], []

    def create_events(events, settle=0.0):
        sent.append([body["involvedObject"]["name"] for _, body in events])
        settles.append(settle)
        return [ValueError("refused") if body["involvedObject"]["name"] == "p2" else {} for _, body in events]

    cluster.raw.create_events = create_events
    for i in range(5):
        cluster._event(ALLOCATED, {"name": f"p{i}", "namespace": "default", "uid": f"u{i}"}, "gpu-a", {})
    cluster._events.put(None)  # stop after them
    cluster._send_events()
    assert sent == [["p0", "p1", "p2", "p3", "p4"]]
    assert settles == [backend.EVENT_REPLIES_AFTER_SECONDS]  # a batch's replies are read together
    assert cluster.event_counts() == {(ALLOCATED, "sent"): 4, (ALLOCATED, "failed"): 1}
    assert backend.EVENT_BATCH >= 5


def test_a_batch_that_fails_whole_is_one_log_line_not_one_per_event(kube, caplog, monkeypatch):
    monkeypatch.setattr(get_logger(), "propagate", True)  # configure() (serve) turns it off; caplog reads the root
    cluster = connect(kube)
    cluster.raw.create_events = lambda events, settle=0.0: [ConnectionRefusedError("refused")] * len(events)
    for i in range(20):
        cluster._event(ALLOCATED, {"name": f"p{i}", "namespace": "default", "uid": f"u{i}"}, "gpu-a", {})
    cluster._events.put(None)
    with caplog.at_level("WARNING"):
        cluster._send_events()
    lines = [json.loads(JsonFormatter().format(r)) for r in caplog.records if "could not record" in r.getMessage()]
    assert len(lines) == 1 and lines[0]["failed"] == 20 and lines[0]["pod"] == "default/p0"
    assert "Kubernetes API unreachable: ConnectionRefusedError" in lines[0]["error"]
    assert cluster.event_counts() == {(ALLOCATED, "failed"): 20}


def test_a_batch_of_events_reaches_the_api_server_pipelined(kube):
    cluster = connect(kube)
    metas = [{"name": f"p{i}", "namespace": "default", "uid": f"u{i}"} for i in range(3)]
    replies = cluster.raw.create_events([("default", {"apiVersion": "v1", "kind": "Event",
                                                      "metadata": {"generateName": "p.", "namespace": "default"},
                                                      "involvedObject": {"kind": "Pod", **m}, "reason": ALLOCATED,
                                                      "message": "m", "type": "Normal"}) for m in metas])
    assert all(isinstance(r, dict) for r in replies)
    assert [e["involvedObject"]["name"] for e in kube.events] == ["p0", "p1", "p2"]


def test_a_fault_while_building_events_fails_that_batch_and_the_thread_goes_on(kube, monkeypatch):
    from extender.cluster.kube import backend

    cluster = connect(kube)
    message = backend._event_message
    faults = [RuntimeError("a fault of ours")]

    def faulty(*args):
        if faults:
            raise faults.pop()
        return message(*args)

    monkeypatch.setattr(backend, "_event_message", faulty)
    meta = {"name": "p", "namespace": "default", "uid": "u"}
    cluster._event(ALLOCATED, meta, "gpu-a", {})
    thread = threading.Thread(target=cluster._send_events, daemon=True)
    thread.start()
    wait_until(lambda: cluster.event_counts() == {(ALLOCATED, "failed"): 1}, what="the first batch failed")
    cluster._event(ALLOCATED, meta, "gpu-a", {})
    cluster._events.put(None)
    thread.join(5)
    assert not thread.is_alive()
    assert cluster.event_counts() == {(ALLOCATED, "failed"): 1, (ALLOCATED, "sent"): 1}
    assert [e["involvedObject"]["name"] for e in kube.events] == ["p"]
