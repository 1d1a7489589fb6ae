"""CPU and host memory: what a pod requests, what a node offers, and host-only requests."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from builders import container, node, pod
from policy import reasons as R
from policy.names import BINPACK, MODE_MEMORY, MODE_NONE
from policy.node import NodeSpec, parse_node
from policy.placement import evaluate, gpu_fit
from policy.request import host_request, host_requests, parse_pod_request
from policy.scoring.binpack import Binpack
from policy.state import ClusterState


def with_host(c: dict, requests: dict | None = None, limits: dict | None = None) -> dict:
    c["resources"].setdefault("requests", {}).update(requests or {})
    c["resources"]["limits"].update(limits or {})
    return c


def test_containers_sum_init_containers_take_the_max_and_overhead_adds():
    p = pod(containers=[with_host(container("a", mem=2), {"cpu": "1500m", "memory": "1Gi"}),
                        with_host(container("b"), {"cpu": "1"}, {"memory": "512Mi"})])
    assert host_requests(p) == (2500, 3 * 2**29)
    p["spec"]["initContainers"] = [{"name": "init", "resources": {"requests": {"cpu": "4"}}}]
    p["spec"]["overhead"] = {"cpu": "250m", "memory": "1Mi"}
    assert host_requests(p) == (4250, 3 * 2**29 + 2**20)


def test_unreadable_or_missing_amounts_count_zero():
    assert host_requests(pod(containers=[{"name": "x", "resources": {"requests": {"cpu": "lots"}}}])) == (0, 0)
    assert host_requests({"spec": {}}) == (0, 0)
    assert host_requests(pod(containers=[{"name": "x", "resources": {"requests": {"cpu": "0.0001"}}}])) == (1, 0)


def test_parsed_request_carries_host_requests():
    p = pod(containers=[with_host(container("a", mem=3, core=30), {"cpu": "2", "memory": "4Gi"})])
    request = parse_pod_request(p)
    assert (request.memory, request.core, request.cpu, request.host_memory) == (3, 30, 2000, 4 * 2**30)


def test_node_allocatable_cpu_and_memory():
    spec = parse_node(node("n"))
    assert (spec.cpu, spec.host_memory) == (32000, 128 * 2**30)
    broken = node("n")
    broken["status"]["allocatable"]["cpu"] = "many"
    assert parse_node(broken).cpu == 0


@given(st.lists(st.tuples(st.sampled_from([MODE_MEMORY, MODE_NONE]), st.integers(0, 4)), min_size=1, max_size=6))
def test_host_only_request_fits_every_known_node_and_takes_no_gpu(nodes):
    state = ClusterState()
    for i, (mode, gpus) in enumerate(nodes):
        state.set_node(NodeSpec(f"n{i}", mode, gpus, 16 if gpus else 0, 0, BINPACK, 20))
    names = [f"n{i}" for i in range(len(nodes))] + ["ghost"]
    view = state.view(state.rows(names))
    fit, reason = gpu_fit(view, host_request(1000, 2**30))
    assert not fit.any()
    assert reason.tolist() == [R.FITS] * len(nodes) + [R.UNKNOWN_NODE]
    result = evaluate(view, host_request(1000), Binpack())
    assert result.gpus.shape == (len(names), 0)
    assert np.isfinite(result.raw[:-1]).all()


def test_host_only_binpack_prefers_the_fuller_node():
    state = ClusterState()
    for name in "ab":
        state.set_node(NodeSpec(name, MODE_MEMORY, 2, 10, 0, BINPACK, 20))
    state.add_usage("a", {0: 5}, {}, False)
    result = evaluate(state.view(state.rows(["a", "b"])), host_request(1000), Binpack())
    assert result.raw == pytest.approx([0.25, 0.0])
