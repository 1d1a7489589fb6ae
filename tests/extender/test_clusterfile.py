import pytest
import yaml

from builders import node, pod
from extender.clusterfile import ClusterFileError, load, parse_objects


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
    ("kind: Node\nmetadata: {}\n", "a Node has no metadata.name"),
])
def test_errors_name_the_file_and_the_problem(text, message):
    with pytest.raises(ClusterFileError, match=message):
        parse_objects(text, "c.yaml")


def test_missing_file(tmp_path):
    with pytest.raises(ClusterFileError, match="cannot read"):
        load(str(tmp_path / "nope.yaml"))
