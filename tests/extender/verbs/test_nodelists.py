"""Node-name lists: compact encodings as Go writes them, and rows found without decoding names."""

import numpy as np
import orjson
from hypothesis import given
from hypothesis import strategies as st

from extender.verbs import wire
from extender.verbs.nodelists import NodeLists
from named_nodes import node_names, state_with


@given(node_names, st.data())
def test_compact_list_is_the_ordinary_encoding(names, data):
    state = state_with(names)
    lists = NodeLists(state)
    asked = data.draw(st.lists(st.sampled_from(names), unique=True))
    rows, layout = state.lookup(asked)
    fragments = lists.fragments(layout, rows)
    assert fragments.compact_list_of(rows) == orjson.dumps(asked)
    assert fragments.compact_size(rows) == len(orjson.dumps(asked))


class NoDecode(wire.ExtenderArgs):
    @property
    def names(self):
        raise AssertionError("the names were decoded")


def test_remembered_lists_are_found_by_their_bytes_alone():
    state = state_with(["a", "bb", "c"])
    lists = NodeLists(state)
    rows, layout = lists.rows(wire.ExtenderArgs({}, None, None, b'["c","a","bb"]'))
    assert rows.tolist() == [2, 0, 1]
    again, _ = lists.rows(NoDecode({}, None, None, b'["c","a","bb"]'))
    assert again is rows
    lists.remember(np.array([2, 1]), layout)  # what filter passed
    assert lists.rows(NoDecode({}, None, None, b'["c","bb"]'))[0].tolist() == [2, 1]
    state.remove_node("a")  # a new layout: nothing remembered holds
    assert lists.rows(wire.ExtenderArgs({}, None, None, b'["c","a","bb"]'))[0].tolist() == [2, -1, 1]


def test_a_list_naming_unknown_nodes_is_not_remembered_at_any_level():
    """A list the scheduler repeats names known nodes; one with unknown names (a hostile client's
    100,000 of them) would otherwise stay in memory, up to the body limit per remembered list."""
    state = state_with(["a", "bb"])
    lists = NodeLists(state)
    raw = b'["a","ghost","bb"]'
    rows, _ = lists.rows(wire.ExtenderArgs({}, None, None, raw))
    assert rows.tolist() == [0, -1, 1]
    assert not lists._memo and not state._lookup_memo
    lists.rows(wire.ExtenderArgs({}, None, None, b'["a","bb"]'))
    assert len(lists._memo) == 1 and len(state._lookup_memo) == 1
