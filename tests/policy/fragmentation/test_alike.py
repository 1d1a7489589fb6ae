"""Nodes in the same state share an id, and only they do, whatever changed between two questions."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.fragmentation.alike import FIELDS, NodeStates
from policy.names import BINPACK, MODE_MEMORY, SPREAD, UNLIMITED_PODS
from policy.node import NodeSpec
from policy.state import ClusterState

NAMES = [f"n{i}" for i in range(6)]


def contents(view) -> np.ndarray:
    return np.concatenate([np.asarray(getattr(view, f)).reshape(len(view), -1).astype(np.int64) for f in FIELDS],
                          axis=1)


steps = st.lists(st.one_of(
    st.tuples(st.just("node"), st.sampled_from(NAMES), st.integers(1, 3), st.sampled_from([BINPACK, SPREAD])),
    st.tuples(st.just("gpu"), st.sampled_from(NAMES), st.integers(0, 2), st.sampled_from([250, 500])),
    st.tuples(st.just("host"), st.sampled_from(NAMES), st.sampled_from([1_000, 2_000])),
    st.tuples(st.just("forget"), st.sampled_from(NAMES)),
    st.tuples(st.just("ask"), st.lists(st.sampled_from(NAMES), min_size=1, max_size=10)),
), max_size=30)


@settings(max_examples=80, deadline=None)
@given(steps, st.integers(2, 40))
def test_rows_share_an_id_exactly_when_their_states_are_equal(actions, limit):
    state, states = ClusterState(), NodeStates(limit=limit)  # a small limit: ids are forgotten and given again
    for action in actions:
        kind, name = action[0], action[1]
        known = kind != "ask" and name in state.index
        if kind == "node":
            state.set_node(NodeSpec(name, MODE_MEMORY, action[2], 1000, 0, action[3], UNLIMITED_PODS,
                                    cpu=8_000, host_memory=2**34))
        elif kind == "gpu" and known and action[2] < state.specs[name].gpu_count:
            state.add_usage(name, {action[2]: action[3]}, {}, False)
        elif kind == "host" and known:
            state.add_host_usage(name, action[2], 0)
        elif kind == "forget" and known:
            state.remove_node(name)
        elif kind == "ask":
            asked = [n for n in action[1] if n in state.index]
            if not asked:
                continue
            view = state.view(state.rows(asked))
            ids, rows = states.ids(view), contents(view)
            same_state = (rows[:, None, :] == rows[None, :, :]).all(axis=2)
            assert ((ids[:, None] == ids[None, :]) == same_state).all()
            first, group = states.alike(view)
            assert (rows[first[group]] == rows).all() and len(set(ids[first].tolist())) == len(first)


def test_a_node_that_changes_leaves_its_twins_state_and_can_join_it_again():
    state, states = ClusterState(), NodeStates()
    for name in ("a", "b", "c"):
        state.set_node(NodeSpec(name, MODE_MEMORY, 2, 1000, 0, BINPACK, UNLIMITED_PODS, cpu=8_000))
    view = lambda: state.view(state.rows(["a", "b", "c"]))  # noqa: E731
    assert len(set(states.ids(view()).tolist())) == 1
    state.add_usage("a", {0: 250}, {}, False)
    a, b, c = states.ids(view()).tolist()
    assert a != b == c
    state.add_usage("b", {0: 250}, {}, False)
    a, b, c = states.ids(view()).tolist()
    assert a == b != c
    first, group = states.alike(view())
    assert sorted(first.tolist()) == [0, 2]  # the first row of each state stands for it
    assert first[group].tolist() == [0, 0, 2]
