import orjson
import pytest

from builders import scheduler_pod
from extender.verbs import wire


def body(**kwargs) -> bytes:
    return orjson.dumps(kwargs)


def test_node_cache_capable_body_as_the_scheduler_sends_it():
    args = wire.parse_extender_args(body(Pod=scheduler_pod(), Nodes=None, NodeNames=["a", "b"]))
    assert args.names == ["a", "b"] and args.nodes is None
    assert args.pod["metadata"]["managedFields"]


def test_full_node_objects_body():
    nodes = {"metadata": {"resourceVersion": "1"}, "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]}
    args = wire.parse_extender_args(body(Pod=scheduler_pod(), Nodes=nodes, NodeNames=None))
    assert args.names == ["a", "b"] and len(args.nodes) == 2


def test_keys_match_case_insensitively_like_go():
    args = wire.parse_extender_args(b'{"pod": {"metadata": {}}, "nodenames": ["x"]}')
    assert args.names == ["x"]
    assert wire.field({"Pod": 1, "pod": 2}, "Pod") == 1  # exact match preferred


def test_no_nodes_at_all():
    assert wire.parse_extender_args(body(Pod={}, Nodes=None, NodeNames=None)).names == []


@pytest.mark.parametrize("raw, message", [
    (b"{", "not valid JSON"),
    (b"[]", "must be a JSON object (ExtenderArgs)"),
    (b'{"NodeNames": []}', "ExtenderArgs.Pod is missing"),
    (b'{"Pod": {}, "NodeNames": "a,b"}', "NodeNames must be a list of node names"),
    (b'{"Pod": {}, "Nodes": {"items": {}}}', "Nodes must be a NodeList"),
    (b'{"Pod": {}, "Nodes": {"items": [{"metadata": {}}]}}', "Nodes.items[0] has no metadata.name"),
])
def test_bad_bodies_say_what_is_wrong(raw, message):
    with pytest.raises(wire.WireError) as caught:
        wire.parse_extender_args(raw)
    assert message in str(caught.value)


def test_binding_args():
    args = wire.parse_binding_args(body(PodName="p", PodNamespace="ns", PodUID="u", Node="n"))
    assert (args.name, args.namespace, args.uid, args.node) == ("p", "ns", "u", "n")
    with pytest.raises(wire.WireError, match="missing PodUID, Node"):
        wire.parse_binding_args(body(PodName="p"))
    with pytest.raises(wire.WireError, match="must be strings: Node"):
        wire.parse_binding_args(body(PodName="p", PodUID="u", Node=3))


def test_reply_shapes_use_go_field_names_and_null():
    assert wire.filter_reply(["a"], None, {"b": "r"}, {}) == {
        "Nodes": None, "NodeNames": ["a"], "FailedNodes": {"b": "r"}, "FailedAndUnresolvableNodes": {}, "Error": ""}
    assert orjson.loads(wire.encode(wire.prioritize_reply(["a"], [7]))) == [{"Host": "a", "Score": 7}]
    assert wire.encode(wire.prioritize_reply(["a"], [7])) == b'[{"Host":"a","Score":7}]'  # integer, never 7.0
    assert wire.bind_reply() == {"Error": ""}


# -- the NodeNames split: the same result as decoding the whole body --------------------------------
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

tricky_text = st.sampled_from(['"NodeNames":["x"]', ',"NodeNames":[', '\\"NodeNames\\":[', "]}", "{", "\\", "ä"])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8) | tricky_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6) | tricky_text, inner, max_size=3),
    max_leaves=12)
members = st.fixed_dictionaries({}, optional={
    "Pod": st.dictionaries(st.text(max_size=6) | st.just("NodeNames") | tricky_text, json_values, max_size=4),
    "Nodes": st.none() | st.just({"items": [{"metadata": {"name": "n0"}}]}) | json_values,
    "NodeNames": st.none() | st.lists(st.text(max_size=6) | tricky_text, max_size=4) | json_values,
    "nodenames": st.lists(st.text(max_size=3), max_size=2),
    "Extra": json_values,
})


def decoded(parse):
    try:
        args = parse()
        return ("ok", args.pod, args.names, args.nodes)
    except wire.WireError as exc:
        return ("error", str(exc).split(":")[0])


@given(members, st.permutations(range(5)), st.sampled_from([None, 1, 2]))
def test_splitting_off_node_names_never_changes_the_result(obj, order, indent):
    keys = list(obj)
    ordered = {keys[i]: obj[keys[i]] for i in order if i < len(keys)}
    import json
    body = json.dumps(ordered, indent=indent, ensure_ascii=False).encode()
    assert decoded(lambda: wire.parse_extender_args(body)) == decoded(lambda: wire._from_object(orjson.loads(body)))


def test_the_schedulers_body_splits_without_decoding_the_names():
    raw = body(Pod=scheduler_pod(), Nodes=None, NodeNames=["a", "b"])
    args = wire.parse_extender_args(raw)
    assert args.names_json == b'["a","b"]' and args.names == ["a", "b"]
    assert wire.split_node_names(b'{"Pod":{},"NodeNames":["a"],"X":["b"]}') is not None  # looks split ...
    args = wire.parse_extender_args(b'{"Pod":{},"NodeNames":["a"],"X":["b"]}')
    assert args.names == ["a"]  # ... but the tail is no array: the whole body decides


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12)


@given(st.dictionaries(st.text(max_size=6).filter(lambda k: k != "nodes"), json_values, max_size=5),
       st.lists(st.dictionaries(st.text(max_size=6), json_values, max_size=4), max_size=5),
       st.integers(0, 5))
def test_a_report_encoded_node_by_node_is_the_same_bytes(rest, nodes, position):
    keys = list(rest)
    position = min(position, len(keys))
    report = {**{k: rest[k] for k in keys[:position]}, "nodes": nodes, **{k: rest[k] for k in keys[position:]}}
    streamed = {**report, "nodes": iter(nodes)}
    assert wire.encode_report(streamed) == wire.encode(report)
    assert wire.encode_report({k: v for k, v in report.items() if k != "nodes"}) == wire.encode(
        {k: v for k, v in report.items() if k != "nodes"})
