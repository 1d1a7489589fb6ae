"""ClusterState.copy: an independent twin of every row."""

from hypothesis import given

from clusters import clusters
from policy.node import NodeSpec
from policy.state import VIEW_FIELDS


@given(clusters())
def test_a_copy_reads_the_same_and_writes_apart(state):
    twin = state.copy()
    names, view = state.view_all()
    twin_names, twin_view = twin.view_all()
    assert names == twin_names
    for f in VIEW_FIELDS:
        assert (getattr(view, f) == getattr(twin_view, f)).all(), f
    twin.set_node(NodeSpec("added", mode=1, gpu_count=9, memory_per_gpu=8))
    twin.add_usage(names[0], {0: 1}, {}, False)
    assert "added" not in state.index and state.view_all()[1].mem_used.tolist() == view.mem_used.tolist()

