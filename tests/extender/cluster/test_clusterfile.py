import pytest
import yaml

from builders import node, pod
from extender.cluster.clusterfile import ClusterFileError, load, parse_objects


def test_kubectl_list_dump(tmp_path):
    dump = {"apiVersion": "v1", "kind": "List", "items": [node("a"), pod("p"), {"kind": "Service", "metadata": {"name": "s"}}]}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(dump))
    objects, skipped = load(str(path))
    assert [o["kind"] for o in objects] == ["Node", "Pod"] and skipped == ["Service"]


def test_typed_lists_and_multiple_documents():
    text = yaml.safe_dump({"kind": "NodeList", "items": [{"metadata": {"name": "a"}}]}) + "---\n" + \
        yaml.safe_dump(pod("p")) + "---\n"
    objects, _ = parse_objects(text)
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [("Node", "a"), ("Pod", "p")]


def test_json_is_yaml_too():
    objects, _ = parse_objects('{"kind": "List", "items": [{"kind": "Node", "metadata": {"name": "a"}}]}')
    assert objects[0]["metadata"]["name"] == "a"


@pytest.mark.parametrize("text, message", [
    ("a: [", "not valid YAML"), ("- 1\n- 2\n", "expected Kubernetes objects"),
])
def test_errors_name_the_file_and_the_problem(text, message):
    with pytest.raises(ClusterFileError, match=message):
        parse_objects(text, "c.yaml")


def test_missing_file(tmp_path):
    with pytest.raises(ClusterFileError, match="cannot read"):
        load(str(tmp_path / "nope.yaml"))


def test_json_lines_are_streamed_one_object_at_a_time(tmp_path):
    import orjson

    from extender.cluster.clusterfile import check, stream

    path = tmp_path / "c.jsonl"
    path.write_bytes(orjson.dumps(pod("p")) + b"\n\n" + orjson.dumps(node("a")) + b"\n" +
                     orjson.dumps({"kind": "List", "items": [node("b")]}) + b"\n")
    objects = stream(str(path))
    assert next(objects)["kind"] == "Pod"  # nothing past the first line was needed for it
    assert [o["metadata"]["name"] for o in objects] == ["a", "b"]
    assert check(str(path)) == 3
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(orjson.dumps(node("a")) + b"\n{oops\n")
    with pytest.raises(ClusterFileError, match=r"bad.jsonl:2: not a JSON object"):
        check(str(bad))


def test_pods_before_their_nodes_give_the_same_ledger():
    from builders import pod as make_pod
    from extender.ledger.annotations import write
    from extender.cluster.embedded import EmbeddedCluster
    from extender.ledger.ledger import Ledger
    from policy.scoring import make_strategy
    from policy.state import ClusterState

    bound = make_pod("b", mem=3, node_name="a")
    bound["metadata"]["annotations"] = write({0: {1: 3}}, {}, 15, 1)
    objects = [node("a", "cgpu", gpus=2), bound]
    ledgers = []
    for order in (objects, objects[::-1]):
        ledger = Ledger(ClusterState(), make_strategy())
        EmbeddedCluster(iter(order)).start(ledger)
        _, view = ledger.state.view_all()
        ledgers.append(view.mem_used[:, :2].tolist())
    assert ledgers[0] == ledgers[1] == [[0, 3]]


def test_a_path_that_is_not_a_regular_file_is_refused_without_waiting(tmp_path):
    import os

    from extender.cluster.clusterfile import ClusterFileError, check

    fifo = tmp_path / "cluster.fifo"
    os.mkfifo(fifo)  # opening it to read would block until a writer came
    for path in (fifo, tmp_path):
        with pytest.raises(ClusterFileError, match="not a regular file"):
            check(str(path))


BILLION_LAUGHS = """a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]
h: [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]
"""


def test_yaml_aliases_are_refused_before_they_expand(tmp_path):
    from extender.cluster.clusterfile import ClusterFileError, check

    path = tmp_path / "laughs.yaml"
    path.write_text(BILLION_LAUGHS)
    with pytest.raises(ClusterFileError, match=r"laughs.yaml:2: YAML aliases \(\*a\)"):
        check(str(path))
    quoted = tmp_path / "star.yaml"  # a * inside a string is no alias
    quoted.write_text('kind: Node\napiVersion: v1\nmetadata: {name: "n*1", labels: {x: "*"}}\n')
    assert check(str(quoted)) == 1
