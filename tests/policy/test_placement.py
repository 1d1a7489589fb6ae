import dataclasses

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from clusters import clusters, reference_place, requests
from policy import reasons as R
from policy.names import BINPACK, MODE_CORE, MODE_MEMORY, SPREAD
from policy.node import NodeSpec
from policy.placement import evaluate, fullness
from policy.request import simple_request
from policy.scoring import make_strategy
from policy.state import ClusterState


def evaluate_all(state, request, strategy="ack"):
    names, _ = state.view_all()
    return names, evaluate(state.view(state.rows(names)), request, make_strategy(strategy))


@given(clusters(), requests())
def test_vectorised_pass_matches_the_per_node_rules(state, request):
    names, result = evaluate_all(state, request)
    for i, name in enumerate(names):
        fits, gpus = reference_place(state, name, request)
        assert bool(result.feasible[i]) == fits, (name, R.MESSAGES[int(result.reason[i])])
        if fits:
            assert result.gpus[i].tolist() == gpus
            assert len(set(gpus)) == request.gpu_count
        else:
            assert (result.gpus[i] == -1).all() and result.raw[i] == -np.inf


@given(clusters(), requests())
def test_binpack_takes_the_fullest_fitting_gpu_and_spread_the_emptiest(state, request):
    names, result = evaluate_all(state, request)
    _, view = state.view_all()
    full = fullness(view)
    for i in np.flatnonzero(result.feasible):
        chosen = set(result.gpus[i].tolist())
        fitting = [g for g in range(int(view.gpu_count[i])) if reference_place_gpu(state, names[i], request, g)]
        others = [g for g in fitting if g not in chosen]
        for g in chosen:
            for o in others:
                if view.placement[i] == BINPACK:
                    assert full[i, g] > full[i, o] or (full[i, g] == full[i, o] and g < o)
                else:
                    assert full[i, g] < full[i, o] or (full[i, g] == full[i, o] and g < o)


def reference_place_gpu(state, name, request, gpu):
    """Does this one GPU fit the pod's per-GPU share (ignoring how many are needed)?"""
    m, c, _ = request.shape
    row = state.index[name]
    a = {f: state.array(f)[row, gpu] for f in ("mem_total", "mem_used", "core_total", "core_used", "pods", "healthy")}
    ok = (a["healthy"] and a["mem_total"] - a["mem_used"] >= m and a["pods"] < state.specs[name].max_pod
          and (c == 0 or a["core_total"] - a["core_used"] >= c))
    if request.whole_device:
        ok = ok and a["mem_used"] == 0 and a["core_used"] == 0 and a["pods"] == 0
    return ok


@given(clusters(), requests())
def test_unresolvable_means_it_would_not_fit_even_on_an_empty_healthy_node(state, request):
    names, result = evaluate_all(state, request)
    for i, name in enumerate(names):
        code = int(result.reason[i])
        if code == R.FITS:
            continue
        empty = ClusterState()
        empty.set_node(dataclasses.replace(state.specs[name], unhealthy=frozenset()))
        _, fresh = evaluate_all(empty, request)
        assert bool(fresh.feasible[0]) == (code not in R.UNRESOLVABLE), R.MESSAGES[code]


@given(clusters(), requests())
def test_no_job_type_mixing(state, request):
    names, result = evaluate_all(state, request)
    _, view = state.view_all()
    feasible = result.feasible
    if request.wants_core:
        assert (view.mode[feasible] == MODE_CORE).all() and (view.memory_pods[feasible] == 0).all()
    else:
        assert (view.mode[feasible] == MODE_MEMORY).all() and (view.core_pods[feasible] == 0).all()


def one_node(spec, usage=()):
    state = ClusterState()
    state.set_node(spec)
    for gpu, mem, core in usage:
        state.add_usage(spec.name, {gpu: mem}, {gpu: core} if core else {}, bool(core))
    return state


CORE4 = NodeSpec("n", MODE_CORE, 4, 15, 100, BINPACK, 20)


def reason_for(state, request):
    return R.MESSAGES[int(evaluate_all(state, request)[1].reason[0])]


def test_reasons_name_the_missing_resource():
    assert reason_for(one_node(CORE4, [(g, 14, 10) for g in range(4)]), simple_request(2, 30)) == \
        "insufficient free GPU memory"
    assert reason_for(one_node(CORE4, [(g, 1, 90) for g in range(4)]), simple_request(2, 30)) == \
        "insufficient free GPU compute"
    assert reason_for(one_node(CORE4, [(0, 14, 5), (1, 1, 95), (2, 14, 5), (3, 1, 95)]), simple_request(2, 30)) == \
        "no GPU has enough free memory and compute together"
    assert reason_for(one_node(CORE4), simple_request(16, 30)) == "GPU memory request is larger than the node's GPUs"
    assert reason_for(one_node(CORE4), simple_request(2)) == "pod shares GPU memory only; node is core_mem"
    assert reason_for(one_node(dataclasses.replace(CORE4, unhealthy=frozenset(range(4)))), simple_request(2, 5)) == \
        "not enough healthy GPUs"
    assert reason_for(one_node(dataclasses.replace(CORE4, max_pod=1), [(g, 1, 5) for g in range(4)]),
                      simple_request(2, 5)) == "GPUs are at their pod limit (ack.node.gpu.max-pod)"


def test_mode_switch_keeps_old_pods_and_refuses_new_ones_until_they_leave():
    state = one_node(CORE4, [(0, 4, 20)])
    state.set_node(dataclasses.replace(CORE4, mode=MODE_MEMORY, core_per_gpu=0))
    assert reason_for(state, simple_request(2)) == "node still hosts pods of another GPU-sharing mode"
    assert state.array("mem_used")[0, 0] == 4  # still counted
    state.add_usage("n", {0: 4}, {0: 20}, True, sign=-1)
    assert reason_for(state, simple_request(2)) == ""


def test_multi_gpu_takes_distinct_gpus_and_whole_device_only_empty_ones():
    state = one_node(NodeSpec("n", MODE_MEMORY, 4, 16, 0, BINPACK, 20), [(1, 4, 0)])
    _, result = evaluate_all(state, simple_request(24, gpu_count=2))
    assert result.gpus[0].tolist() == [0, 1]  # GPU 1 is the fullest, then the lowest index
    _, result = evaluate_all(state, simple_request(32, gpu_count=2, whole_device=True))
    assert result.gpus[0].tolist() == [0, 2]
    _, result = evaluate_all(state, simple_request(15, whole_device=True))
    assert R.MESSAGES[int(result.reason[0])] == "whole-device request does not match the node's GPU size"


def test_spread_node_takes_the_emptiest_gpu():
    state = one_node(NodeSpec("n", MODE_CORE, 3, 15, 100, SPREAD, 20), [(0, 2, 10), (1, 1, 5), (2, 3, 10)])
    _, result = evaluate_all(state, simple_request(1, 5))
    assert result.gpus[0].tolist() == [1]


def test_unknown_names_are_reported_not_guessed():
    state = one_node(CORE4)
    result = evaluate(state.view(state.rows(["ghost", "n"])), simple_request(2, 30), make_strategy())
    assert result.reason.tolist() == [R.UNKNOWN_NODE, R.FITS]


@given(clusters(), requests(), st.data())
def test_reading_every_row_in_place_equals_gathering_the_rows_asked_for(state, request, data):
    names, _ = state.view_all()
    asked = data.draw(st.lists(st.sampled_from(names + ["ghost"]), max_size=10))
    rows = state.rows(asked)
    strategy = make_strategy("ack")
    gathered = evaluate(state.view(rows), request, strategy)
    in_place = evaluate(state.view_live(), request, strategy).take(rows)
    assert gathered.reason.tolist() == in_place.reason.tolist()
    assert gathered.gpus.tolist() == in_place.gpus.tolist()
    assert gathered.raw.tolist() == in_place.raw.tolist()
    assert gathered.scores().tolist() == in_place.scores().tolist()


@given(clusters(), requests())
def test_derived_arrays_match_capacity_and_usage(state, request):
    _, v = state.view_all()
    assert (v.mem_free == v.mem_total - v.mem_used).all()
    assert (v.core_free == v.core_total - v.core_used).all()
    assert (v.usable == (v.healthy & (v.pods < v.max_pod[:, None]))).all()


@given(st.integers(0, 40), st.sampled_from([1, 3, 8, 16, 24]), st.data())
def test_count_per_row_counts_like_numpy(rows, width, data):
    from policy.placement import count_per_row

    mask = np.array(data.draw(st.lists(st.booleans(), min_size=rows * width, max_size=rows * width)),
                    dtype=bool).reshape(rows, width)
    assert count_per_row(mask).tolist() == np.count_nonzero(mask, axis=1).tolist()
    assert count_per_row(mask[:, ::-1]).tolist() == np.count_nonzero(mask[:, ::-1], axis=1).tolist()
