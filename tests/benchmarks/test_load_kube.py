"""The kube-mode benchmark runs end to end on a tiny cluster, its fake API server in a process of
its own (figures are not checked here)."""

import json
import urllib.request

import pytest

from benchmarks import load_kube
from benchmarks.synthetic import cluster_objects, pending_pod


def test_fake_api_server_process_answers_calls_and_serves_http():
    kube = load_kube.KubeProcess()
    try:
        objects = cluster_objects(3, seed=2)
        kube.load(objects)
        created = kube.create("pods", pending_pod(0, 2))
        assert created["metadata"]["uid"] == pending_pod(0, 2)["metadata"]["uid"]
        kube.set("write_delay", 0.0)
        with urllib.request.urlopen(f"{kube.url}/api/v1/nodes", timeout=10) as reply:
            nodes = json.load(reply)["items"]
        assert sorted(n["metadata"]["name"] for n in nodes) == sorted(
            o["metadata"]["name"] for o in objects if o["kind"] == "Node")
        assert any(p["metadata"]["name"] == created["metadata"]["name"] for p in kube.objects("pods"))
        with pytest.raises(RuntimeError, match="fake API server: no_such_method"):
            kube.no_such_method()
    finally:
        kube.stop()


def test_a_dead_fake_api_server_is_an_error_not_a_hang():
    kube = load_kube.KubeProcess()
    kube._process.kill()
    kube._process.join(10)
    with pytest.raises(RuntimeError, match="process ended"):
        kube.objects("pods")
    kube.stop()


def test_measure_runs_end_to_end_on_a_tiny_cluster():
    result = load_kube.measure(nodes=12, pods=8, seed=1)
    assert result["bound"] >= 1
    assert set(result["phases_ms_per_pod"]) == {"watch: pods created", "filter + prioritize",
                                                "bind (Binding, Event) + its watch events", "watch: pods Running"}
    assert result["cpu_ms_per_pod"] > 0
