"""The per-request cache gives, after any sequence of changes, what a fresh evaluation gives."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from clusters import clusters, node_specs, requests
from policy.placement import evaluate
from policy.rowcache import RowCache
from policy.scoring import make_strategy

STRATEGY = make_strategy("ack")


def compute_for(request):
    def compute(view):
        result = evaluate(view, request, STRATEGY)
        return result.reason, result.gpus, result.raw
    return compute


def fresh(state, request, rows):
    result = evaluate(state.view(rows), request, STRATEGY)
    return result.reason, result.gpus, result.raw


changes = st.lists(st.tuples(st.sampled_from(["use", "free", "respec", "remove", "add"]), st.integers(0, 10**6)),
                   max_size=12)


@settings(max_examples=80)
@given(clusters(max_nodes=8), st.lists(requests(), min_size=1, max_size=3), changes, st.data())
def test_cached_results_equal_a_fresh_evaluation_after_any_changes(state, asks, steps, data):
    cache = RowCache(state, size=2)  # smaller than the number of requests: eviction too
    added = 0
    for kind, pick in [("none", 0)] + steps:
        names = sorted(state.index)
        name = names[pick % len(names)] if names else None
        if kind == "use" and name:
            spec = state.specs[name]
            gpu = pick % spec.gpu_count
            state.add_usage(name, {gpu: 1}, {gpu: 5} if spec.core_per_gpu else {}, bool(spec.core_per_gpu))
        elif kind == "free" and name:
            spec = state.specs[name]
            gpu = pick % spec.gpu_count
            if state.array("pods")[state.index[name], gpu] > 0:
                state.add_usage(name, {gpu: 1}, {gpu: 5} if spec.core_per_gpu else {}, bool(spec.core_per_gpu), -1)
        elif kind == "respec" and name:
            state.set_node(data.draw(node_specs(name)))
        elif kind == "remove" and name and len(names) > 1:
            state.remove_node(name)
        elif kind == "add":
            added += 1
            state.set_node(data.draw(node_specs(f"new-{added}")))
        rows = np.array(sorted(state.index.values()) + [-1])[::-1]  # unknown first, then every live row
        for request in asks:
            got = cache.take(request.placement_key, compute_for(request), rows)
            want = fresh(state, request, rows)
            known = rows >= 0
            assert (got[0][known] == want[0][known]).all()
            assert (got[1][known] == want[1][known]).all()
            assert np.array_equal(got[2][known], want[2][known])


def test_only_changed_rows_are_recomputed():
    from policy.node import NodeSpec
    from policy.names import MODE_MEMORY
    from policy.state import ClusterState
    from policy.request import simple_request

    state = ClusterState()
    for i in range(10):
        state.set_node(NodeSpec(f"n{i}", mode=MODE_MEMORY, gpu_count=2, memory_per_gpu=16))
    request = simple_request(4)
    seen = []

    def compute(view):
        seen.append(len(view))
        return compute_for(request)(view)

    cache = RowCache(state)
    rows = np.arange(10)
    cache.take("k", compute, rows)
    cache.take("k", compute, rows)
    state.add_usage("n3", {0: 4}, {}, False)
    state.add_usage("n7", {1: 4}, {}, False)
    (reason, gpus, raw) = cache.take("k", compute, rows)
    assert seen == [10, 2]  # everything once, nothing when unchanged, then the two changed nodes
    assert gpus[3, 0] == 0 and gpus[7, 0] == 1  # binpack now prefers the used GPU on both


def test_changed_since_names_the_rows_written_and_none_once_rows_move():
    from policy.node import NodeSpec
    from policy.names import MODE_MEMORY
    from policy.state import ClusterState

    state = ClusterState()
    for i in range(4):
        state.set_node(NodeSpec(f"n{i}", mode=MODE_MEMORY, gpu_count=2, memory_per_gpu=16))
    then = state.mark()
    assert state.changed_since(then, state.mark()).tolist() == []
    state.add_usage("n2", {0: 4}, {}, False)
    state.add_usage("n0", {1: 4}, {}, False)
    assert state.changed_since(then, state.mark()).tolist() == [state.index["n0"], state.index["n2"]]
    state.remove_node("n3")
    assert state.changed_since(then, state.mark()) is None
