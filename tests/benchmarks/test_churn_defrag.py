"""The churn replay with policy.defrag's planner in its defragmentation step."""

import numpy as np
from hypothesis import given, strategies as st

import churn_cases as C
from benchmarks.churn import Defrag, churn
from benchmarks.defrag_step import planner


def test_the_planner_moves_a_share_pod_so_a_whole_gpu_pod_fits():
    # as in test_churn: 500 on one GPU, 400 on the other, a whole-GPU pod waits from t=1
    work = C.work([(0, 1000, 1, 500, 0), (0, 0.5, 1, 500, 0), (0.2, 1000, 1, 400, 0), (1, 1000, 1, 1000, 2)])
    run = churn(C.nodes([1, 1]), work, "binpack", 0, audit=True, defrag=Defrag(planner(), per_hour=6, every=30.0))
    assert run.audit == [] and run.consistent
    assert len(run.moves) == 1 and run.placed_at[3] == 30.0 and run.steps == [(30.0, 6, 1, 1, 1)]


def test_no_move_for_a_pod_of_lower_priority_than_those_in_its_way():
    work = C.work([(0, 1000, 1, 500, 2), (0, 0.5, 1, 500, 0), (0.2, 1000, 1, 400, 2), (1, 1000, 1, 1000, 0)])
    run = churn(C.nodes([1, 1]), work, "binpack", 0, audit=True, defrag=Defrag(planner(), per_hour=6, every=30.0))
    assert run.moves == [] and np.isnan(run.placed_at[3])


def test_a_gpu_model_constraint_holds_through_moves():
    # seed 0: the 500 pod (priority 3: it may not move for the priority-2 pod) lands on the P100 node, the
    # 400 pod may only use T4 and sits on the T4 node: the one move that would free a GPU is forbidden
    work = C.work([(0, 1000, 1, 500, 3, 1_000, 1_024, ""), (0, 0.5, 1, 500, 0, 1_000, 1_024, ""),
                   (0.2, 1000, 1, 400, 0, 1_000, 1_024, "T4"), (1, 1000, 1, 1000, 2, 1_000, 1_024, "")])
    nodes = C.nodes([1, 1], models=["T4", "P100"])
    run = churn(nodes, work, "binpack", 0, audit=True, defrag=Defrag(planner(), per_hour=6, every=30.0))
    assert run.audit == [] and run.placed_at[2] == 0.2
    assert run.moves == [] and np.isnan(run.placed_at[3])
    # the same without the constraint: the 400 pod moves beside the 500 one and the GPU it left is taken
    work.pods.gpu_spec[2] = ""
    run = churn(nodes, work, "binpack", 0, audit=True, defrag=Defrag(planner(), per_hour=6, every=30.0))
    assert [m[1:] for m in run.moves] == [(2, 0, 1)] and run.placed_at[3] == 30.0


@given(seed=st.integers(0, 2**16), per_hour=st.sampled_from([0, 1, 4]))
def test_with_the_planner_moves_stay_within_budget_and_nothing_overfills(seed, per_hour):
    rng = np.random.default_rng(seed)
    work = C.random_work(rng, 40, horizon=3 * 3600.0)
    nodes = C.nodes([1, 2, 4, 2])
    run = churn(nodes, work, "fragmentation", seed, audit=True, defrag=Defrag(planner(), per_hour=per_hour, every=300.0))
    assert run.audit == [] and run.consistent
    times = np.array([m[0] for m in run.moves])
    assert all(((times > t - 3600.0) & (times <= t)).sum() <= per_hour for t in times)
    if per_hour == 0:
        plain = churn(nodes, work, "fragmentation", seed)
        assert np.array_equal(plain.placed_at, run.placed_at, equal_nan=True)


def test_the_planner_sees_the_first_waiting_pod_of_each_kind_in_queue_order(monkeypatch):
    import benchmarks.defrag_step as step
    seen, original = [], step.plan

    def plan(state, residents, pending, max_moves, **options):
        seen.append(([w.key for w in pending], sorted(r.key for r in residents)))
        return original(state, residents, pending, max_moves, **options)

    monkeypatch.setattr(step, "plan", plan)
    # one GPU held by a 600 pod; two 500 pods (same kind) and a whole-GPU pod wait
    work = C.work([(0, 100, 1, 600, 0), (1, 100, 1, 500, 0), (2, 100, 1, 1000, 2), (3, 100, 1, 500, 0)])
    churn(C.nodes([1]), work, "binpack", 0, defrag=Defrag(planner(), per_hour=6, every=30.0))
    assert seen[0] == (["trace/p2-2", "trace/p1-1"], ["trace/p0-0"])  # priority first, then age; p3 like p1
