"""Every API call the extender makes is allowed by manifests/base/rbac.yaml (least privilege must not be too little).

The backend runs through sync, binds (one whose Binding fails and is undone, one
for a pod filter never saw), watches and a Warning event against the fake API
server; each request it sent is mapped to the RBAC (namespace, resource, verb)
it needs and checked against the ClusterRole and the kube-system Role.
"""

from pathlib import Path

import yaml

from builders import node, pod
from fakekube import wait_until
from kubesteps import bind, filter_, synced

RBAC = Path(__file__).resolve().parents[4] / "manifests" / "base" / "rbac.yaml"
VERBS = {"PATCH": "patch", "POST": "create", "PUT": "update", "DELETE": "delete"}


def granted() -> tuple:
    docs = [d for d in yaml.safe_load_all(RBAC.read_text()) if d]
    rules = {(d["kind"], d["metadata"].get("namespace")): d["rules"] for d in docs if d["kind"] in ("ClusterRole", "Role")}
    expand = lambda rs: {(r, v) for rule in rs if "" in rule["apiGroups"]  # noqa: E731
                         for r in rule["resources"] for v in rule["verbs"]}
    cluster = expand(rules[("ClusterRole", None)])
    kube_system = expand(rules[("Role", "kube-system")])
    return cluster, kube_system


def needed(method: str, path: str) -> set:
    """{(namespace or None, resource, verb)} a request to the core API needs."""
    parts = path.strip("/").split("/")
    assert parts[:2] == ["api", "v1"], path
    rest, namespace = parts[2:], None
    if rest[0] == "namespaces" and len(rest) > 2:
        namespace, rest = rest[1], rest[2:]
    resource = "/".join([rest[0]] + rest[2:3])
    if method == "GET":
        verbs = {"get"} if len(rest) > 1 else {"list", "watch"}  # a collection is listed, then watched
    else:
        verbs = {VERBS[method]}
    return {(namespace, resource, verb) for verb in verbs}


def test_every_request_the_extender_sends_is_granted(kube, started):
    extender, (rogue, p1, p2, p3) = synced(started, kube, [node("gpu-a", "cgpu", gpus=2, gib=15)], [
        pod("rogue", mem=3, node_name="gpu-a"),  # bound without annotations: a Warning event
        pod("p1", mem=2), pod("p2", mem=2), pod("p3", mem=2)])
    assert filter_(extender, p1, ["gpu-a"])["NodeNames"] == ["gpu-a"]
    assert bind(extender, p1, "gpu-a") == ""
    kube.fail_bindings.append(500)
    assert "500" in bind(extender, p2, "gpu-a")  # the Binding failed: nothing written
    assert bind(extender, p3, "gpu-a") == ""  # filter never saw it
    wait_until(lambda: kube.events, what="the Warning event")
    cluster, kube_system = granted()
    sent = {need for method, path in kube.requests for need in needed(method, path)}
    assert {resource for _, resource, _ in sent} >= {"nodes", "pods", "configmaps", "pods/binding", "events"}
    refused = sorted((ns or "", resource, verb) for ns, resource, verb in sent
                     if (resource, verb) not in cluster and not (ns == "kube-system" and (resource, verb) in kube_system))
    assert not refused, f"RBAC in manifests/base/rbac.yaml does not allow: {refused}"
    # ConfigMaps are read in kube-system only (the Role), never cluster-wide
    assert {ns for ns, resource, _ in sent if resource == "configmaps"} == {"kube-system"}
