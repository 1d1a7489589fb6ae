"""The autoscaling plan on cluster files: `cgpu-extender plan` (JSON and text), GET {prefix}/plan, metrics."""

import json

import pytest
import yaml

from builders import node, pod
from extender.app import create_app
from extender.cli import main
from extender.config import Config
from extender.embedded import EmbeddedCluster

POOL_KEY = "alibabacloud.com/nodepool-id"
TAINT = {"key": "scaler", "value": "gpu", "effect": "NoSchedule"}
TOLERATION = {"key": "scaler", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}


def pool_node(name, pool="np-a10", gpus=4, gib=15, schedule="cgpu"):
    n = node(name, schedule, gpus=gpus, gib=gib)
    n["metadata"]["labels"][POOL_KEY] = pool
    n["spec"] = {"taints": [dict(TAINT)]}
    return n


def bound(name, node_name, gpu, gib):
    p = pod(name, mem=gib, node_name=node_name)
    p["metadata"]["annotations"] = {"scheduler.framework.gpushare.allocation": f'{{"0":{{"{gpu}":{gib}}}}}'}
    p["status"]["phase"] = "Running"
    return p


def waiting(name, mem, pool="np-a10", **spec):
    p = pod(name, mem=mem)
    p["spec"].update({"nodeSelector": {POOL_KEY: pool}, "tolerations": [dict(TOLERATION)], **spec})
    return p


def done_case(used_per_gpu=15) -> list:
    """The issue's case: a full pool of 4 nodes of 4 x 15 GiB, 10 pending 6 GiB pods selecting it, one 16 GiB pod."""
    objects = []
    for i in range(4):
        objects.append(pool_node(f"gpu-{i}"))
        objects += [bound(f"busy-{i}-{g}", f"gpu-{i}", g, used_per_gpu) for g in range(4)]
    objects += [waiting(f"train-{k}", 6) for k in range(10)]
    objects.append(waiting("huge", 16))
    return objects


def write(tmp_path, objects, name="cluster.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects}))
    return str(path)


def plan_cli(capsys, *args) -> tuple[int, str, str]:
    code = main(["plan", *args])
    out, err = capsys.readouterr()
    return code, out, err


TRAIN = [f"default/train-{k}" for k in range(10)]
HUGE_REASON = ("fits no node now, nor a new node of any pool it may use: np-a10 (4 x 15 GiB, memory): "
               "GPU memory request is larger than the node's GPUs")


@pytest.mark.parametrize("used_per_gpu", [15, 10])  # full; or 20 GiB free per node, none on any one GPU
def test_the_issues_case_needs_two_nodes_of_the_pool(tmp_path, capsys, used_per_gpu):
    code, out, _ = plan_cli(capsys, "--cluster", write(tmp_path, done_case(used_per_gpu)), "--json")
    assert code == 0
    assert json.loads(out) == {"pending": 11, "fitsNow": [],
                               "pools": {"np-a10": {"nodesNeeded": 2, "pods": TRAIN, "maxSize": None}},
                               "unplaceable": [{"pod": "default/huge", "reason": HUGE_REASON}],
                               "defragCouldPlace": []}  # the pods in the way have no controller: none moves


def test_endpoint_answers_what_the_cli_prints(tmp_path, capsys):
    path = write(tmp_path, done_case() + [waiting("small", 2, pool="np-t4")] + [pool_node("t4-0", "np-t4")])
    code, out, _ = plan_cli(capsys, "--cluster", path, "--json")
    client = create_app(Config(cluster_file=path)).test_client()
    reply = client.get("/cgpu-scheduler/plan")
    assert code == 0 and reply.status_code == 200 and reply.json == json.loads(out)
    assert reply.json["fitsNow"] == ["default/small"]


def test_text_is_a_table_per_pool(tmp_path, capsys):
    objects = done_case() + [waiting("small", 2, pool="np-t4"), pool_node("t4-0", "np-t4")]
    code, out, _ = plan_cli(capsys, "--cluster", write(tmp_path, objects))
    lines = out.splitlines()
    assert code == 0 and lines[0] == ("12 pending shared-GPU pods: 1 fits now, 10 need 2 new nodes, "
                                      "1 is unplaceable")
    assert "pool np-a10: 2 new nodes (4 x 15 GiB, memory); 4 nodes now, max size not known" in lines
    header = next(i for i, line in enumerate(lines) if line.split() == ["NEW", "NODE", "POD", "GPU", "MEMORY",
                                                                     "GPU", "CORE", "GPUS"])
    rows = [line.split() for line in lines[header + 1:header + 11]]
    assert [r[0] for r in rows] == ["1"] * 8 + ["2"] * 2 and sorted(r[1] for r in rows) == TRAIN
    assert all(r[2:4] == ["6", "-"] for r in rows)
    assert lines[lines.index("fits now:") + 2].split() == ["default/small", "t4-0", "0"]
    assert lines[-1] == f"default/huge  {HUGE_REASON}"


def test_only_pods_of_the_extenders_schedulers_and_not_placeholders(tmp_path, capsys):
    objects = [pool_node("gpu-0"), waiting("mine", 6), waiting("second", 6, schedulerName="cgpu-scheduler"),
               waiting("other", 6, schedulerName="volcano"),
               {**waiting("placeholder", 60), "metadata": {"name": "placeholder", "namespace": "cgpu-placeholders",
                                                           "uid": "ph-1"}}]
    path = write(tmp_path, objects)
    assert json.loads(plan_cli(capsys, "--cluster", path, "--json")[1])["fitsNow"] == ["default/mine"]
    chosen = json.loads(plan_cli(capsys, "--cluster", path, "--json", "--scheduler-name", "cgpu-scheduler",
                                 "--scheduler-name", "default-scheduler")[1])
    assert chosen["fitsNow"] == ["default/mine", "default/second"]
    text = plan_cli(capsys, "--cluster", path)[1].splitlines()
    assert text[:2] == ["1 pending shared-GPU pod: 1 fits now, 0 need 0 new nodes, 0 are unplaceable",
                        "(left out, pending for other schedulers — cgpu-scheduler: 1, volcano: 1; "
                        "see --scheduler-name)"]


def test_invalid_pods_and_unknown_pools_are_unplaceable_with_their_reasons(tmp_path, capsys):
    bad = waiting("bad", 2)
    bad["spec"]["containers"][0]["resources"]["limits"]["aliyun.com/gpu-core.percentage"] = "33"
    objects = [pool_node("gpu-0"), bound("busy", "gpu-0", 0, 15), bad, waiting("lost", 2, pool="np-none")]
    result = json.loads(plan_cli(capsys, "--cluster", write(tmp_path, objects), "--json")[1])
    assert result["unplaceable"] == [
        {"pod": "default/bad", "reason": "invalid request: aliyun.com/gpu-core.percentage must be a multiple of 5 "
                                         "from 5 to 100, got '33' in container 'main'"},
        {"pod": "default/lost", "reason": "fits no node now, and no node pool admits it (nodeSelector, node "
                                          "affinity, tolerations)"}]


def test_templates_give_max_sizes_and_pools_at_zero_nodes(tmp_path, capsys):
    templates = tmp_path / "templates.yaml"
    templates.write_text(yaml.safe_dump({"pools": {
        "np-a10": {"maxSize": 5},
        "np-a100": {"maxSize": 3, "node": {"metadata": {"labels": {"ack.node.gpu.schedule": "cgpu"}},
                                           "spec": {"taints": [TAINT]},
                                           "status": {"allocatable": {"aliyun.com/gpu-count": "8",
                                                                      "aliyun.com/gpu-mem": "640"}}}}}}))
    objects = done_case() + [waiting(f"big-{k:02}", 80, pool="np-a100") for k in range(30)]
    result = json.loads(plan_cli(capsys, "--cluster", write(tmp_path, objects), "--templates", str(templates),
                                 "--json")[1])
    assert result["pools"]["np-a10"] == {"nodesNeeded": 1, "pods": TRAIN[:8], "maxSize": 5}
    assert result["pools"]["np-a100"] == {"nodesNeeded": 3, "pods": [f"default/big-{k:02}" for k in range(24)],
                                          "maxSize": 3}
    full = [u["pod"] for u in result["unplaceable"] if "every pool it fits is at its max size" in u["reason"]]
    assert full == [f"default/big-{k:02}" for k in range(24, 30)] + TRAIN[8:]


@pytest.mark.parametrize("text,message", [
    ("pools: [1]", "expected an object with one key, pools"),
    ("pools: {np: {maxSize: -1}}", "pool 'np': maxSize must be a whole number ≥ 0, got -1"),
    ("pools: {np: {size: 3}}", "pool 'np': unknown key(s) size (known: maxSize, node)"),
    ("pools: {np: {node: {metadata: {labels: {alibabacloud.com/nodepool-id: other}}}}}",
     "pool 'np': its node's label alibabacloud.com/nodepool-id='other' names another pool"),
    ("pools: {np: [", "not valid YAML or JSON"),
])
def test_a_bad_templates_file_is_refused_with_why(tmp_path, capsys, text, message):
    templates = tmp_path / "t.yaml"
    templates.write_text(text)
    code, out, err = plan_cli(capsys, "--cluster", write(tmp_path, done_case()), "--templates", str(templates))
    assert code == 1 and out == "" and message in err
    assert main(["serve", "--cluster", write(tmp_path, done_case()), "--templates", str(templates)]) == 2


def test_plan_before_the_first_sync_is_503():
    class NotSynced(EmbeddedCluster):
        def start(self, ledger):
            pass

    client = create_app(Config(), cluster=NotSynced([])).test_client()
    reply = client.get("/cgpu-scheduler/plan")
    assert reply.status_code == 503 and "first sync" in reply.json["Error"]
    assert "cgpu_pending_pods" not in client.get("/cgpu-scheduler/metrics").get_data(as_text=True)


def test_metrics_count_pending_pods_by_outcome_and_nodes_per_pool(tmp_path):
    path = write(tmp_path, done_case() + [waiting("small", 2, pool="np-t4"), pool_node("t4-0", "np-t4")])
    text = create_app(Config(cluster_file=path)).test_client().get("/cgpu-scheduler/metrics").get_data(as_text=True)
    for line in ('cgpu_pending_pods{outcome="fits_now"} 1.0', 'cgpu_pending_pods{outcome="new_node"} 10.0',
                 'cgpu_pending_pods{outcome="unplaceable"} 1.0', 'cgpu_pool_nodes_needed{pool="np-a10"} 2.0',
                 'cgpu_pool_nodes_needed{pool="np-t4"} 0.0', 'cgpu_pool_nodes_autoscaler_adds{pool="np-a10"} 1.0'):
        assert line in text.splitlines(), line
    assert "cgpu_plan_cpu_seconds " in text and "cgpu_placeholders" not in text


def test_the_readme_shows_what_plan_prints(tmp_path, capsys):
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme[readme.index("\n## Autoscaling\n"):]
    shown = json.loads(re.search(r"```json\n(.*?)```", section, re.S).group(1))
    printed = json.loads(plan_cli(capsys, "--cluster", write(tmp_path, done_case()), "--json")[1])
    pods = printed["pools"]["np-a10"]["pods"]
    assert shown["pools"]["np-a10"]["pods"] == pods[:2] and "shortened" in section  # the README cuts the list
    shown["pools"]["np-a10"]["pods"] = pods
    assert shown == printed
    usage = re.search(r"```\ncgpu-extender plan (.*?)```", section, re.S).group(1)
    options = set(re.findall(r"--[a-z-]+", usage))
    assert options and options <= set(re.findall(r"--[a-z-]+", _plan_help())), options


def _plan_help() -> str:
    from extender.cli import build_parser

    return build_parser()._subparsers._group_actions[0].choices["plan"].format_help()


def test_gpu_use_of_pods_without_annotations_is_counted_where_it_most_likely_is(tmp_path, capsys):
    objects = [o for o in done_case() if not o["metadata"]["name"].startswith("busy-")]
    for i in range(4):  # bound 15 GiB pods that carry no allocation annotation: their GPUs are not recorded
        objects += [{**bound(f"busy-{i}-{g}", f"gpu-{i}", g, 15), "metadata": {
            "name": f"busy-{i}-{g}", "namespace": "default", "uid": f"u-{i}-{g}"}} for g in range(4)]
    path = write(tmp_path, objects)
    assert len(create_app(Config(cluster_file=path)).extensions["cgpu"].ledger.unaccounted()) == 16
    result = json.loads(plan_cli(capsys, "--cluster", path, "--json")[1])
    assert result["fitsNow"] == [] and result["pools"]["np-a10"]["nodesNeeded"] == 2


def test_a_hand_written_file_without_uids_counts_every_bound_pod(tmp_path, capsys):
    objects = [o for o in done_case() if not o["metadata"]["name"].startswith("busy-")]
    for i in range(4):  # V1 annotations, no uid, no namespace: as one writes a cluster file by hand
        objects += [{"kind": "Pod", "apiVersion": "v1", "metadata": {
            "name": f"busy-{i}-{g}", "annotations": {"ALIYUN_COM_GPU_MEM_IDX": str(g), "ALIYUN_COM_GPU_MEM_POD": "15",
                                                     "ALIYUN_COM_GPU_MEM_DEV": "15"}},
            "spec": {"nodeName": f"gpu-{i}", "containers": [{"name": "c", "resources": {
                "limits": {"aliyun.com/gpu-mem": "15"}}}]}, "status": {"phase": "Running"}} for g in range(4)]
    path = write(tmp_path, objects)
    assert len(create_app(Config(cluster_file=path)).extensions["cgpu"].ledger.allocations()) == 16
    result = json.loads(plan_cli(capsys, "--cluster", path, "--json")[1])
    assert result["fitsNow"] == [] and result["pools"]["np-a10"]["nodesNeeded"] == 2
