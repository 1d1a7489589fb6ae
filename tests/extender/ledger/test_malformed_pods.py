"""Any JSON where a Pod should be: every verb answers (never a fault) and nothing changes."""

import copy

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import container, node, pod
from extender.cluster.embedded import EmbeddedCluster
from extender.serving.app import build_extender
from extender.serving.config import Config
from test_ledger_properties import ledger_fingerprint

NAMES = ["core-a", "cgpu-a"]
leaf = st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["2", "1k", "x", "", "30", "main"])
anything = st.recursive(leaf, lambda inner: st.lists(inner, max_size=2) | st.dictionaries(
    st.sampled_from(["metadata", "spec", "containers", "resources", "limits", "requests", "labels", "name",
                     "uid", "aliyun.com/gpu-mem", "aliyun.com/gpu-core.percentage", "aliyun.com/gpu-count",
                     "initContainers", "overhead", "nodeSelector", "affinity", "cpu", "memory"]),
    inner, max_size=3), max_leaves=10)


@st.composite
def broken_pods(draw):
    """A valid shared-GPU pod with one part replaced by anything."""
    p = pod("broken", mem=2, core=30, containers=[container(mem=2, core=30), container("side", mem=None)])
    p["metadata"]["resourceVersion"] = "1"
    p["spec"]["initContainers"] = [container("init")]
    path = draw(st.sampled_from([("metadata",), ("spec",), ("metadata", "labels"), ("metadata", "uid"),
                                 ("metadata", "name"), ("spec", "containers"), ("spec", "containers", 0),
                                 ("spec", "containers", 0, "resources"),
                                 ("spec", "containers", 0, "resources", "limits"),
                                 ("spec", "containers", 0, "resources", "requests"),
                                 ("spec", "containers", 1, "resources"), ("spec", "initContainers"),
                                 ("spec", "initContainers", 0, "resources"), ("spec", "overhead"),
                                 ("spec", "nodeSelector"), ("spec", "affinity")]))
    target = p
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = draw(anything)
    return p


@settings(max_examples=150)
@given(broken_pods())
def test_every_verb_answers_a_broken_pod_and_changes_nothing(broken):
    cluster = EmbeddedCluster([node("core-a", "core_mem", gpus=2, gib=15), node("cgpu-a", "cgpu", gpus=2, gib=22)],
                              source="test")
    extender = build_extender(Config(), cluster=cluster, clock=lambda: 1)
    before = ledger_fingerprint(extender.ledger)
    body = orjson.dumps({"Pod": broken, "Nodes": None, "NodeNames": NAMES})
    reply = orjson.loads(extender.filter(body))
    assert set(reply) == {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}
    assert ledger_fingerprint(extender.ledger) == before
    scores = orjson.loads(extender.prioritize(body))
    assert all(type(s["Score"]) is int for s in scores)
    meta = broken.get("metadata") if isinstance(broken.get("metadata"), dict) else {}
    uid, name = meta.get("uid"), meta.get("name")
    bind = {"PodName": name if isinstance(name, str) and name else "broken",
            "PodNamespace": "default", "PodUID": uid if isinstance(uid, str) and uid else "uid-broken",
            "Node": "core-a"}
    error = orjson.loads(extender.bind(orjson.dumps(bind)))["Error"]
    if error:
        assert ledger_fingerprint(extender.ledger) == before
    assert copy.deepcopy(broken) == broken  # nothing of the request was changed either
