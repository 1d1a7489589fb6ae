"""Replies written as padded byte fragments decode exactly as the ordinary encoding."""

import numpy as np
import orjson
from hypothesis import given
from hypothesis import strategies as st

from extender.verbs import wire
from extender.verbs.nodelists import NodeLists
from extender.verbs.replies import ReplyWriter
from named_nodes import node_names, state_with
from policy import reasons as R
from policy.node import NodeSpec


def generic_filter(names, codes):
    ok = codes == R.FITS
    unresolvable = R.UNRESOLVABLE_TABLE[codes]
    failed = ~ok & ~unresolvable
    pick = lambda mask: [n for n, m in zip(names, mask) if m]
    return wire.filter_reply(pick(ok), None, dict(zip(pick(failed), R.MESSAGE_TABLE[codes[failed]])),
                             dict(zip(pick(unresolvable), R.MESSAGE_TABLE[codes[unresolvable]])))


@given(node_names, st.data())
def test_filter_reply_decodes_like_the_ordinary_one(names, data):
    state = state_with(names)
    asked = data.draw(st.lists(st.sampled_from(names), unique=True))
    codes = np.array(data.draw(st.lists(st.integers(0, len(R.MESSAGES) - 1), min_size=len(asked),
                                        max_size=len(asked))), dtype=np.int8)
    rows, layout = state.lookup(asked)
    written = ReplyWriter(NodeLists(state)).filter(wire.ExtenderArgs({}, asked, None), rows, layout, codes)
    assert orjson.loads(written) == generic_filter(asked, codes)


@given(node_names, st.data())
def test_prioritize_reply_decodes_like_the_ordinary_one(names, data):
    state = state_with(names)
    asked = data.draw(st.lists(st.sampled_from(names), unique=True))
    scores = np.array(data.draw(st.lists(st.integers(0, 10), min_size=len(asked), max_size=len(asked))),
                      dtype=np.int64)
    rows, layout = state.lookup(asked)
    written = ReplyWriter(NodeLists(state)).scores(wire.ExtenderArgs({}, asked, None), rows, layout, scores)
    decoded = orjson.loads(written)
    assert decoded == [{"Host": n, "Score": s} for n, s in zip(asked, scores.tolist())]
    assert all(type(item["Score"]) is int for item in decoded)


def test_unknown_names_and_a_changed_layout_fall_back_to_the_ordinary_encoding():
    state = state_with(["a", "b"])
    writer = ReplyWriter(NodeLists(state))
    rows, layout = state.lookup(["a", "ghost"])
    codes = np.array([R.FITS, R.UNKNOWN_NODE], dtype=np.int8)
    assert orjson.loads(writer.filter(wire.ExtenderArgs({}, ["a", "ghost"], None), rows, layout, codes)) == \
        generic_filter(["a", "ghost"], codes)
    rows, layout = state.lookup(["a", "b"])
    state.remove_node("b")
    state.set_node(NodeSpec("c"))  # takes b's row
    reply = orjson.loads(writer.scores(wire.ExtenderArgs({}, ["a", "b"], None), rows, layout, np.array([3, 4])))
    assert [item["Host"] for item in reply] == ["a", "b"]


def test_lookup_memo_follows_layout_changes():
    state = state_with(["a", "b"])
    names = ["b", "a"]
    first, layout = state.lookup(names)
    assert first.tolist() == [1, 0]
    assert state.lookup(names)[0] is first  # memo hit
    state.remove_node("a")
    assert state.lookup(names)[0].tolist() == [1, -1]
