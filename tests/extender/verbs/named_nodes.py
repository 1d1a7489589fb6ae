"""States whose nodes have arbitrary names, for tests of how names are encoded."""

from hypothesis import strategies as st

from policy.node import NodeSpec
from policy.state import ClusterState

node_names = st.lists(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30),
                      min_size=1, max_size=25, unique=True)


def state_with(names) -> ClusterState:
    state = ClusterState(rows=2)
    for name in names:
        state.set_node(NodeSpec(name))
    return state
