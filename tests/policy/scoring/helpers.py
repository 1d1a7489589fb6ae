"""Small clusters for the strategy tests: node name → (spec, usage [(gpu, mem, core)])."""

from policy.placement import evaluate
from policy.state import ClusterState


def build(nodes: dict) -> ClusterState:
    state = ClusterState()
    for spec, usage in nodes.values():
        state.set_node(spec)
        for gpu, mem, core in usage:
            state.add_usage(spec.name, {gpu: mem}, {gpu: core} if core else {}, bool(core))
    return state


def raw_and_scores(state, request, strategy):
    names, _ = state.view_all()
    result = evaluate(state.view(state.rows(names)), request, strategy)
    return dict(zip(names, result.raw.tolist())), dict(zip(names, result.scores().tolist()))
