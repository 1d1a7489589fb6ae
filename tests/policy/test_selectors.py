"""nodeSelector, required node affinity and tolerations over a table of nodes (policy.selectors)."""

from hypothesis import given, strategies as st

from policy.selectors import UNSCHEDULABLE, NodeTable, Taint, allowed, taints_of, tolerates

NODES = {
    "a": {"metadata": {"labels": {"pool": "p1", "gpu": "A10", "cores": "8"}},
          "spec": {"taints": [{"key": "scaler", "value": "gpu", "effect": "NoSchedule"}]}},
    "b": {"metadata": {"labels": {"pool": "p2", "gpu": "T4", "cores": "16"}},
          "spec": {"taints": [{"key": "soft", "value": "x", "effect": "PreferNoSchedule"}]}},
    "c": {"metadata": {"labels": {"pool": "p2", "cores": "many"}}, "spec": {"unschedulable": True}},
    "d": {"metadata": {"labels": {}},
          "spec": {"taints": [{"key": "dedicated", "value": "infer", "effect": "NoExecute"}]}},
}
TOLERATE_ALL = [{"operator": "Exists"}]


def table(names=("a", "b", "c", "d")):
    return NodeTable.of(list(names), NODES)


def names_allowed(selector=None, terms=None, tolerations=TOLERATE_ALL, names=("a", "b", "c", "d")):
    t = table(names)
    return [n for n, ok in zip(names, allowed(t, selector or {}, terms or [], tolerations)) if ok]


def expression(key, operator, values=None):
    e = {"key": key, "operator": operator}
    if values is not None:
        e["values"] = values
    return {"matchExpressions": [e]}


def test_node_selector_needs_every_label():
    assert names_allowed({"pool": "p2"}) == ["b", "c"]
    assert names_allowed({"pool": "p2", "gpu": "T4"}) == ["b"]
    assert names_allowed({"pool": "p9"}) == []


def test_affinity_operators():
    assert names_allowed(terms=[expression("gpu", "In", ["A10", "T4"])]) == ["a", "b"]
    assert names_allowed(terms=[expression("gpu", "NotIn", ["A10"])]) == ["b", "c", "d"]  # no label: NotIn holds
    assert names_allowed(terms=[expression("gpu", "Exists")]) == ["a", "b"]
    assert names_allowed(terms=[expression("gpu", "DoesNotExist")]) == ["c", "d"]
    assert names_allowed(terms=[expression("cores", "Gt", ["8"])]) == ["b"]  # "many" is no integer
    assert names_allowed(terms=[expression("cores", "Lt", ["16"])]) == ["a"]


def test_terms_are_ored_and_requirements_anded():
    both = {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["p2"]},
                                 {"key": "gpu", "operator": "Exists"}]}
    assert names_allowed(terms=[both]) == ["b"]
    assert names_allowed(terms=[both, expression("pool", "In", ["p1"])]) == ["a", "b"]


def test_match_fields_on_the_node_name():
    by_name = {"key": "metadata.name", "operator": "In", "values": ["c"]}
    assert names_allowed(terms=[{"matchFields": [by_name]}]) == ["c"]
    assert names_allowed(terms=[{"matchFields": [{"key": "metadata.name", "operator": "NotIn",
                                                  "values": ["c"]}]}]) == ["a", "b", "d"]


def test_malformed_terms_match_nothing():
    for term in ({}, expression("gpu", "Near", ["A10"]), expression("gpu", "In", []),
                 expression("cores", "Gt", ["8", "9"]), expression("cores", "Lt", ["x"]),
                 expression("gpu", "Exists", ["A10"]), {"matchExpressions": "gpu"},
                 {"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["a"]}]}):
        assert names_allowed(terms=[term]) == [], term


def test_taints_keep_pods_off_unless_tolerated():
    assert names_allowed(tolerations=[]) == ["b"]  # PreferNoSchedule is only a preference
    scaler = {"key": "scaler", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
    assert names_allowed(tolerations=[scaler]) == ["a", "b"]
    assert names_allowed(tolerations=[{**scaler, "value": "cpu"}]) == ["b"]
    assert names_allowed(tolerations=[{"key": "scaler", "operator": "Exists"}]) == ["a", "b"]
    assert names_allowed(tolerations=[{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]) == ["b"]
    assert names_allowed(tolerations=[{"key": UNSCHEDULABLE, "operator": "Exists"}]) == ["b", "c"]


def test_cordoned_node_is_tainted_once():
    assert taints_of(NODES["c"]) == (Taint(UNSCHEDULABLE, "", "NoSchedule"),)
    cordoned = {"spec": {"unschedulable": True, "taints": [{"key": UNSCHEDULABLE, "effect": "NoSchedule"}]}}
    assert taints_of(cordoned) == (Taint(UNSCHEDULABLE, "", "NoSchedule"),)


def test_free_rows_are_never_allowed():
    assert names_allowed(names=("a", None, "b")) == ["a", "b"]


KEYS = st.sampled_from(["k1", "k2"])
VALUES = st.sampled_from(["v1", "v2", ""])
EFFECTS = st.sampled_from(["NoSchedule", "NoExecute", ""])


@given(taint=st.tuples(KEYS, VALUES, st.sampled_from(["NoSchedule", "NoExecute"])),
       toleration=st.fixed_dictionaries({"key": st.sampled_from(["k1", "k2", ""]),
                                         "operator": st.sampled_from(["Equal", "Exists"]),
                                         "value": VALUES, "effect": EFFECTS}))
def test_toleration_matches_by_the_documented_rule(taint, toleration):
    taint = Taint(*taint)
    effect_ok = toleration["effect"] in ("", taint.effect)
    if toleration["operator"] == "Exists":
        expected = effect_ok and toleration["key"] in ("", taint.key)
    else:
        expected = effect_ok and toleration["key"] == taint.key and toleration["value"] == taint.value
    assert tolerates([toleration], taint) == expected
