"""The pending-pod store: unbound shared-GPU pods, as the ledger observes them."""

from __future__ import annotations

from extender.cluster.embedded import EmbeddedCluster
from extender.ledger.ledger import Ledger
from extender.ledger.pending import PendingPods, pending_of
from extender.ledger.records import PodRef
from extender.serving.app import build_extender
from extender.serving.config import Config
from policy.request import GPURequest, InvalidRequest
from policy.scoring import make_strategy
from policy.state import ClusterState
from tests.builders import node, pod, scheduler_pod


def test_scheduler_shaped_pod_keeps_what_scheduling_reads():
    body = scheduler_pod()
    body["spec"]["nodeSelector"] = {"gpu-spec": "NVIDIA-A10"}
    body["spec"]["priority"] = 1000
    body["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}]}}}
    body["status"]["nominatedNodeName"] = "gpu-1"
    pending = pending_of(body)
    assert isinstance(pending.request, GPURequest) and pending.request.memory == 2
    assert (pending.ref, pending.priority, pending.nominated_node) == ("default/cuda-sample-7x9kq", 1000, "gpu-1")
    assert pending.node_selector == {"gpu-spec": "NVIDIA-A10"}
    assert pending.node_affinity[0]["matchExpressions"][0]["key"] == "pool"
    assert pending.tolerations[0]["key"] == "scaler"
    assert (pending.scheduler_name, pending.created) == ("default-scheduler", "2026-11-22T03:00:00Z")


def test_not_pending():
    finished = pod("done")
    finished["status"]["phase"] = "Succeeded"
    deleting = pod("going")
    deleting["metadata"]["deletionTimestamp"] = "2026-11-22T03:00:00Z"
    for body in (pod("bound", node_name="n1"), finished, deleting, pod("cpu", mem=None)):
        assert pending_of(body) is None


def test_invalid_request_is_pending_with_its_reason():
    pending = pending_of(pod("odd", mem=2, core=33))
    assert isinstance(pending.request, InvalidRequest) and "multiple of 5" in str(pending.request)


def test_store_follows_the_pod():
    store = PendingPods()
    body = pod("p", uid="u1")
    assert store.observe(body) is not None and len(store) == 1
    body["status"]["nominatedNodeName"] = "n1"
    store.observe(body)
    assert store.get("u1").nominated_node == "n1"
    body["spec"]["nodeName"] = "n1"
    assert store.observe(body) is None and store.get("u1") is None
    store.observe(pod("q", uid="u2"))
    store.forget("u2")
    assert store.all() == []


def test_ledger_feeds_it_and_bind_takes_it_out():
    ledger = Ledger(ClusterState(), make_strategy("binpack"))
    ledger.observe_node(node("n1", schedule="cgpu"))
    body = pod("p", mem=2, uid="u1")
    ledger.observe_pod(body)
    assert [p.uid for p in ledger.pending.all()] == ["u1"]
    request = ledger.pending.get("u1").request
    ledger.reserve(PodRef("u1", "default", "p"), request, "n1", 1)
    assert ledger.pending.get("u1") is None
    ledger.observe_pod(pod("q", mem=2, uid="u2"))
    ledger.forget_pod("u2")
    assert len(ledger.pending) == 0


def test_cluster_file_pending_pods_reach_the_store():
    objects = [node("n1"), pod("waiting", mem=3, uid="w1"), pod("placed", mem=2, uid="b1", node_name="n1")]
    extender = build_extender(Config(), cluster=EmbeddedCluster(objects, source="test"))
    assert [p.uid for p in extender.ledger.pending.all()] == ["w1"]
