"""Prioritize reads the GPU fit from the filter's cache; its answers equal a fresh evaluation's.

A strategy that is not ``row_local`` is evaluated on every call, but the fit
(which GPUs take the pod, and why a node cannot) comes from the cache the
filter keeps, refreshed where rows changed. Whatever happened between two
calls — pods bound and released, nodes added and removed, unknown names
asked about — the evaluation must be the one a fresh :func:`gpu_fit` gives.
"""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import node, pod
from extender.ledger.ledger import Ledger
from extender.ledger.records import PodRef
from policy.placement import evaluate
from policy.request import parse_pod_request
from policy.state import ClusterState

NAMES = [f"n{i}" for i in range(6)]


class Fullest:
    """Not row-local: the fullest node scores highest; the placement label chooses the GPUs."""

    name = "fullest"

    def score(self, candidates):
        return candidates.node_fill()


actions = st.lists(st.one_of(
    st.tuples(st.just("add"), st.sampled_from(NAMES), st.sampled_from(["cgpu", "core_mem"]), st.integers(1, 4)),
    st.tuples(st.just("remove"), st.sampled_from(NAMES)),
    st.tuples(st.just("bind"), st.sampled_from(NAMES), st.integers(1, 8)),
    st.tuples(st.just("release")),
    st.tuples(st.just("ask"), st.lists(st.sampled_from(NAMES + ["ghost"]), min_size=1, max_size=8), st.integers(1, 8)),
), max_size=25)


@settings(max_examples=60, deadline=None)
@given(actions)
def test_prioritize_with_the_cached_fit_answers_as_a_fresh_evaluation(steps):
    ledger = Ledger(ClusterState(), Fullest())
    bound = []
    for step in steps:
        kind = step[0]
        if kind == "add":
            ledger.observe_node(node(step[1], step[2], gpus=step[3], gib=8))
        elif kind == "remove":
            ledger.forget_node(step[1])
        elif kind == "release" and bound:
            ledger.release(bound.pop(0))
        elif kind in ("bind", "ask"):
            names = [step[1]] if kind == "bind" else step[1]
            p = pod(mem=step[2])
            request = parse_pod_request(p)
            rows = ledger.state.rows(names)
            ledger.check_rows(request, rows)  # the filter fills the cache
            got = ledger.evaluate_rows(request, rows)
            fresh = evaluate(ledger.state.view(rows), request, ledger.strategy)
            assert got.reason.tolist() == fresh.reason.tolist()
            assert got.gpus.tolist() == fresh.gpus.tolist()
            assert np.array_equal(got.raw, fresh.raw)
            if kind == "bind" and got.feasible[0]:
                ref = PodRef.of(p)
                ledger.reserve(ref, request, names[0], 1)
                bound.append(ref.uid)
