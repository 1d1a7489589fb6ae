"""Scale-up placeholders against the fake API server: created for the plan's new nodes, sized to the
pool's template, deleted as the need drops or once bound, bounded by the pool's max size."""

import kubernetes_validate
import pytest

from builders import node, pod
from extender.cluster.kube.placeholders import POOL_ANNOTATION, SAFE_TO_EVICT, SELECTOR
from extender.serving.app import build_extender
from extender.serving.config import Config
from extender.views.metrics import Metrics
from extender.views.planning import plan_json
from fakekube import wait_until
from kubefixtures import connect
from kubesteps import bind, filter_
from policy.pools import Entry

POOL_KEY = "alibabacloud.com/nodepool-id"
NS = "cgpu-placeholders"
SCALER = {"key": "scaler", "value": "gpu", "effect": "NoSchedule"}
TOLERATION = {"key": "scaler", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}


def pool_node(name, pool="np-a10"):
    n = node(name, "cgpu", gpus=4, gib=15)
    n["metadata"]["labels"][POOL_KEY] = pool
    n["spec"] = {"taints": [dict(SCALER)]}
    return n


def full_pod(name, node_name, gpu, gib):
    p = pod(name, mem=gib, node_name=node_name)
    p["metadata"]["annotations"] = {"scheduler.framework.gpushare.allocation": f'{{"0":{{"{gpu}":{gib}}}}}'}
    return p


def pending(name, mem=6):
    p = pod(name, mem=mem)
    p["spec"]["nodeSelector"] = {POOL_KEY: "np-a10"}
    p["spec"]["tolerations"] = [dict(TOLERATION)]
    return p


@pytest.fixture
def extender_on(kube):
    made = []

    def start(**config):
        cluster = connect(kube)
        extender = build_extender(Config(**config), cluster=cluster, clock=lambda: 1)
        made.append(cluster)
        wait_until(extender.ready, what="first sync")
        return extender

    yield start
    for cluster in made:
        cluster.stop()


def full_pool(kube, nodes=4, used=10):
    """``nodes`` nodes of 4 x 15 GiB, ``used`` GiB taken on every GPU: with 10, no GPU has room for 6 GiB
    though every node has 20 GiB free in all (what cluster-autoscaler sees)."""
    for i in range(nodes):
        kube.create("nodes", pool_node(f"n{i}"))
        for g in range(4):
            kube.create("pods", full_pod(f"busy-{i}-{g}", f"n{i}", g, used))


def placeholders(kube):
    return [p for p in kube.objects("pods") if p["metadata"]["namespace"] == NS]


def test_placeholders_follow_the_plan(kube, extender_on):
    full_pool(kube)
    for i in range(10):
        kube.create("pods", pending(f"job-{i}"))
    extender = extender_on(scale_up_placeholders=True, placeholder_interval=3600)  # rounds run by hand here
    loop = extender.placeholders
    assert plan_json(extender.plan())["pools"]["np-a10"]["nodesNeeded"] == 2

    assert loop.reconcile()
    made = placeholders(kube)
    assert len(made) == 2 and loop.stats.kept == {"np-a10": 2} and loop.stats.created == 2
    for p in made:
        kubernetes_validate.validate({"apiVersion": "v1", "kind": "Pod", **p}, "1.28", strict=True)
        spec, meta = p["spec"], p["metadata"]
        assert spec["nodeSelector"] == {POOL_KEY: "np-a10"} and spec["tolerations"] == [TOLERATION]
        assert spec["containers"][0]["resources"]["limits"] == {"aliyun.com/gpu-mem": "60"}
        assert meta["labels"]["aliyun.com/gpu-count"] == "4"
        assert meta["labels"]["ack.gpushare.placement"] == "require-whole-device"
        assert (spec["priorityClassName"], spec["schedulerName"]) == ("cgpu-placeholder", "default-scheduler")
        assert meta["annotations"][POOL_ANNOTATION] == "np-a10" and meta["annotations"][SAFE_TO_EVICT] == "true"
    # the placeholders are pending shared-GPU pods too, but never part of the plan
    wait_until(lambda: len(extender.ledger.pending) == 12, what="the watch to see the placeholders")
    assert plan_json(extender.plan())["pending"] == 10
    assert loop.reconcile() and len(placeholders(kube)) == 2 and loop.stats.created == 2  # steady
    scraped = Metrics(extender).render(None)[0].decode().splitlines()
    assert {'cgpu_placeholders{pool="np-a10"} 2.0', "cgpu_placeholders_created_total 2.0",
            'cgpu_pool_nodes_needed{pool="np-a10"} 2.0'} <= set(scraped)

    for i in range(8):  # 2 pods left: one new node
        kube.delete("pods", f"job-{i}")
    wait_until(lambda: plan_json(extender.plan())["pending"] == 2, what="the deletions")
    loop.reconcile()
    assert len(placeholders(kube)) == 1 and loop.stats.deleted == 1
    for i in (8, 9):
        kube.delete("pods", f"job-{i}")
    wait_until(lambda: plan_json(extender.plan())["pending"] == 0, what="the deletions")
    loop.reconcile()
    assert placeholders(kube) == [] and loop.stats.kept == {}


def test_placeholders_ask_only_for_the_nodes_cluster_autoscaler_would_not_add_itself(kube, extender_on):
    full_pool(kube, used=15)  # no GPU memory left even by node totals: it sees the pending pods unschedulable
    for i in range(10):
        kube.create("pods", pending(f"job-{i}"))
    extender = extender_on(scale_up_placeholders=True, placeholder_interval=3600)
    planned = extender.plan()
    # 60 GiB of pods fit one 60 GiB node by totals: it adds one node itself; two are needed (2 pods per GPU)
    assert plan_json(planned)["pools"]["np-a10"]["nodesNeeded"] == 2
    assert planned.autoscaler_adds == {"np-a10": 1} and planned.beyond_autoscaler("np-a10") == 1
    extender.placeholders.reconcile()
    assert len(placeholders(kube)) == 1


def test_a_bound_placeholder_has_done_its_work(kube, extender_on):
    full_pool(kube)
    for i in range(10):
        kube.create("pods", pending(f"job-{i}"))
    extender = extender_on(scale_up_placeholders=True, placeholder_interval=3600)
    extender.placeholders.reconcile()
    kube.create("nodes", pool_node("n4"))  # cluster-autoscaler added a node for one placeholder
    wait_until(lambda: "n4" in extender.ledger.state.index, what="the new node")
    placeholder = placeholders(kube)[0]
    assert filter_(extender, placeholder, ["n0", "n4"])["NodeNames"] == ["n4"]  # only an empty node takes it
    assert bind(extender, placeholder, "n4") == ""
    wait_until(lambda: extender.ledger.allocation(placeholder["metadata"]["uid"]) is not None, what="the bind")
    # its GPUs count as free in the plan: 8 pods fit n4 now, 2 need one more node
    result = plan_json(extender.plan())
    assert (len(result["fitsNow"]), result["pools"]["np-a10"]["nodesNeeded"]) == (8, 1)
    extender.placeholders.reconcile()
    left = placeholders(kube)
    assert len(left) == 1 and not left[0]["spec"].get("nodeName")  # the bound one is gone


def test_placeholders_stay_within_the_pools_max_size(kube, extender_on, tmp_path):
    full_pool(kube)
    for i in range(10):
        kube.create("pods", pending(f"job-{i}"))
    templates = tmp_path / "templates.yaml"
    templates.write_text("pools:\n  np-a10:\n    maxSize: 5\n")
    extender = extender_on(scale_up_placeholders=True, placeholder_interval=3600, templates_file=str(templates))
    assert extender.planning.templates == {"np-a10": Entry(max_size=5)}
    result = plan_json(extender.plan())
    assert result["pools"]["np-a10"] == {"nodesNeeded": 1, "pods": sorted(result["pools"]["np-a10"]["pods"]),
                                         "maxSize": 5}
    assert len(result["unplaceable"]) == 2
    extender.placeholders.reconcile()
    assert len(placeholders(kube)) == 1


def test_failures_are_counted_and_retried_and_only_own_pods_are_touched(kube, extender_on):
    full_pool(kube)
    kube.create("pods", pending("job-0"))
    stranger = pod("not-ours", mem=60, namespace=NS)  # in the namespace, without the labels
    kube.create("pods", stranger)
    extender = extender_on(scale_up_placeholders=True, placeholder_interval=3600)
    kube.fail_creates.append(403)
    extender.placeholders.reconcile()
    assert extender.placeholders.stats.errors == 1 and [p["metadata"]["name"] for p in placeholders(kube)] == \
        ["not-ours"]
    extender.placeholders.reconcile()
    assert len(placeholders(kube)) == 2 and extender.placeholders.stats.kept == {"np-a10": 1}
    kube.delete("pods", "job-0")
    wait_until(lambda: plan_json(extender.plan())["pending"] == 0, what="the deletion")
    extender.placeholders.reconcile()
    assert [p["metadata"]["name"] for p in placeholders(kube)] == ["not-ours"]
    assert ("GET", f"/api/v1/namespaces/{NS}/pods") in kube.requests


def test_the_loop_runs_by_itself(kube, extender_on):
    full_pool(kube, nodes=1)
    kube.create("pods", pending("job-0"))
    extender = extender_on(scale_up_placeholders=True, placeholder_interval=0.05)
    wait_until(lambda: len(placeholders(kube)) == 1, what="a placeholder")
    kube.delete("pods", "job-0")
    wait_until(lambda: placeholders(kube) == [], what="the placeholder to go")
    assert extender.placeholders.stats.rounds >= 2 and SELECTOR.startswith("app.kubernetes.io/managed-by=")


@pytest.mark.parametrize("schedule,gpus,fits", [("cgpu", 4, True), ("share", 1, True), ("core_mem", 1, True),
                                                ("core_mem", 2, False)])
def test_a_placeholder_fits_an_empty_node_of_its_pool_and_no_other(schedule, gpus, fits):
    from extender.cluster.kube.placeholders import PlaceholderSettings, placeholder_pod
    from policy.placement import evaluate
    from policy.pools import pools_of
    from policy.request import parse_pod_request
    from policy.scoring import make_strategy
    from policy.state import ClusterState

    template = node("t", schedule, gpus=gpus, gib=24)
    template["metadata"]["labels"][POOL_KEY] = "np"
    pool = pools_of([template])["np"]
    request = parse_pod_request(placeholder_pod(pool, PlaceholderSettings()))
    assert request.memory == 24 * gpus
    state = ClusterState()
    state.set_node(pool.new_node("empty"))
    state.set_node(pool.new_node("used"))
    state.add_usage("used", {0: 1}, {0: 5} if schedule == "core_mem" else {}, schedule == "core_mem")
    result = evaluate(state.view(state.rows(["empty", "used"])), request, make_strategy())
    # a core_mem pool of several GPUs per node: a memory-only placeholder stays pending (still seen by
    # cluster-autoscaler, which is all it is for)
    assert result.feasible.tolist() == [fits, False]


def test_every_request_of_the_loop_is_granted_by_rbac_and_the_placeholder_variant(kube, extender_on):
    from pathlib import Path

    import yaml

    from test_kube_rbac import granted, needed

    full_pool(kube)
    kube.create("pods", pending("job-0"))
    extender = extender_on(scale_up_placeholders=True, placeholder_interval=3600)
    before = len(kube.requests)
    extender.placeholders.reconcile()
    kube.delete("pods", "job-0")
    wait_until(lambda: plan_json(extender.plan())["pending"] == 0, what="the deletion")
    extender.placeholders.reconcile()
    assert extender.placeholders.stats.created == extender.placeholders.stats.deleted == 1
    variant = Path(__file__).resolve().parents[4] / "manifests" / "components" / "autoscaling" / "placeholders.yaml"
    (role,) = [d for d in yaml.safe_load_all(variant.read_text()) if d and d["kind"] == "Role"]
    own = {(r, v) for rule in role["rules"] for r in rule["resources"] for v in rule["verbs"]}
    cluster, _ = granted()
    loop = [(method, path) for method, path in kube.requests[before:] if f"/namespaces/{NS}/" in path]
    sent = {need for method, path in loop for need in needed(method, path)}
    assert {verb for _, _, verb in sent} >= {"list", "create", "delete"}
    refused = sorted((ns or "", resource, verb) for ns, resource, verb in sent
                     if (resource, verb) not in cluster and not (ns == NS and (resource, verb) in own))
    assert not refused
    # the rest of what was sent meanwhile is the watches' (granted by base/rbac.yaml, tested there)
    assert all(method == "GET" for method, path in kube.requests[before:] if (method, path) not in loop)


def test_plan_reads_the_api_server_too(kube, tmp_path, capsys):
    import json

    from extender.cli.main import main
    from test_kube_serve import KUBECONFIG

    full_pool(kube)
    for i in range(10):
        kube.create("pods", pending(f"job-{i}"))
    config = tmp_path / "kubeconfig"
    config.write_text(KUBECONFIG.format(url=kube.url))
    assert main(["plan", "--kubeconfig", str(config), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["pools"]["np-a10"]["nodesNeeded"] == 2 and result["pending"] == 10
