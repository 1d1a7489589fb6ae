import orjson
import pytest

from builders import scheduler_pod
from extender import wire


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
