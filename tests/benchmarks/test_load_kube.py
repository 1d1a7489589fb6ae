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


def test_thread_names_come_from_py_spy_dump_and_pools_share_one():
    dump = ('Process 3609: python -m extender serve\nPython v3.11.7\n\n'
            'Thread 3609 (idle): "MainThread"\n    run (asyncio/base_events.py:607)\n'
            'Thread 3611 (active): "request_0"\n    bind (extender/serving/http_verbs.py:90)\n'
            'Thread 3612 (idle): "request_12"\n'
            'Thread 3613 (idle): "reflector-pods"\n')
    assert load_kube.names_in_dump(dump) == {"3609": "MainThread", "3611": "request", "3612": "request",
                                             "3613": "reflector-pods"}


def test_by_thread_sums_each_named_threads_cpu_per_pod(monkeypatch):
    monkeypatch.setattr(load_kube, "thread_names", lambda pid: {"1": "MainThread", "2": "request", "3": "request"})
    before = {"1": 1_000_000, "2": 0, "4": 5_000_000}  # thread 4 ended; 3 started meanwhile
    after = {"1": 5_000_000, "2": 2_000_000, "3": 4_000_000}
    spent = load_kube.spent_between(before, after)
    assert spent == {"1": 4_000_000, "2": 2_000_000, "3": 4_000_000}
    assert load_kube.by_thread(0, spent, per=2) == {"request": 3.0, "MainThread": 2.0}


def test_the_pipelined_measure_splits_its_cpu_by_thread_on_a_tiny_cluster(monkeypatch):
    monkeypatch.setattr(load_kube, "thread_names", lambda pid: {})  # py-spy is the bench extra's
    result = load_kube.measure_pipelined(nodes=12, pods=8, seed=1, own_ms=1, write_ms=0, split=True)
    assert result["bound"] >= 1
    assert all(label.startswith("thread ") for label in result["threads_ms_per_pod"])
    assert sum(result["threads_ms_per_pod"].values()) == pytest.approx(result["cpu_ms_per_pod"], abs=0.05)
