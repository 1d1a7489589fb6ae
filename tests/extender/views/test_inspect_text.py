"""`cgpu-extender inspect` / `kubectl inspect cgpu`: the same text from the API server's
annotations and from a running extender, for the same allocations."""

import re
import threading

import pytest
import yaml
from kubernetes import client
from werkzeug.serving import make_server

from builders import node, pod
from extender.cli.inspect import from_api, from_endpoint, from_objects, kubectl_plugin
from extender.cli.main import main
from extender.cluster.kube.backend import KubernetesCluster
from extender.cluster.kube.reflector import Backoff
from extender.ledger import annotations as A
from extender.serving.app import build_extender, create_app
from extender.serving.config import Config
from extender.views.inspect_text import UnknownNode, render
from fakekube import FakeKube, wait_until

NS = 1_700_000_000_000_000_000


def bound(name, node_name, annotations, **kwargs):
    p = pod(name, node_name=node_name, **kwargs)
    p["metadata"]["annotations"] = annotations
    p["status"]["phase"] = "Running"
    return p


def with_ip(n, ip):
    n["status"]["addresses"] = [{"type": "Hostname", "address": n["metadata"]["name"]},
                                {"type": "InternalIP", "address": ip}]
    return n


def with_facts(n, ready=None, model=None, cordoned=False, whole=None):
    """``n`` with a Ready condition (with the heartbeat a kubelet writes), a GPU model label, a cordon,
    whole GPUs."""
    if ready is not None:
        n["status"]["conditions"] = [
            {"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": "2025-01-01T00:00:00Z"},
            {"type": "Ready", "status": ready, "lastHeartbeatTime": "2025-01-01T00:00:00Z",
             "reason": "KubeletReady", "message": "kubelet is posting ready status"}]
    if model is not None:
        n["metadata"]["labels"]["aliyun.accelerator/nvidia_name"] = model
    if cordoned:
        n["spec"] = {"unschedulable": True}
    if whole is not None:
        n["status"]["allocatable"]["nvidia.com/gpu"] = whole
    return n


OBJECTS = {
    "nodes": [with_facts(with_ip(node("core-a", "core_mem", gpus=2, gib=15), "192.0.2.10"), "True", "Tesla-T4"),
              with_facts(with_ip(node("cgpu-a", "cgpu", gpus=2, gib=22), "192.0.2.11"), "False", cordoned=True),
              with_facts(node("plain", None), whole="4")],
    "pods": [
        bound("cuda-sample", "core-a", A.write({0: {1: 2}}, {0: {1: 30}}, 15, NS), mem=2, core=30),
        bound("train", "core-a", A.write({0: {1: 8}}, {0: {1: 50}}, 15, NS), mem=8, core=50, namespace="ml"),
        bound("infer", "cgpu-a", {A.V1_INDEX: "0", A.V1_POD: "6", A.V1_DEVICE: "22"}, mem=6),
        bound("wide", "cgpu-a", A.write({0: {0: 4, 1: 4}}, {}, 22, NS), mem=8,
              labels={"aliyun.com/gpu-count": "2"}),
        bound("stray", "cgpu-a", {}, mem=5),  # bound, requests GPU memory, no GPU index
        pod("waiting", mem=3),  # not bound: not shown
    ],
}

SUMMARY = """\
NAME    IPADDRESS   GPU0(Allocated/Total)  GPU1(Allocated/Total)  PENDING(Allocated)  GPU Memory(GiB)  GPU Core(%)
cgpu-a  192.0.2.11  10/22                  4/22                   5                   19/44            -
core-a  192.0.2.10  0/15                   10/15                                      10/30            80/200
----------------------------------------------------------------------------------------------------------------------
Allocated/Total GPU Memory In Cluster:
29/74 (39%)
Allocated/Total GPU Core In Cluster:
80/200 (40%)
"""

DETAILS = """\

NAME:       cgpu-a
IPADDRESS:  192.0.2.11

NAME   NAMESPACE  GPU0(Allocated)  GPU1(Allocated)  Pending(Allocated)
infer  default    6                0                0
wide   default    4                4                0
stray  default    0                0                5
Allocated :  19 (43%)
Total :      44
----------------------------------------------------------------------------

NAME:       core-a
IPADDRESS:  192.0.2.10

NAME         NAMESPACE  GPU0(Allocated)  GPU1(Allocated)
cuda-sample  default    0                2 (30%)
train        ml         0                8 (50%)
Allocated :       10 (33%)
Total :           30
Allocated Core :  80 (40%)
Total Core :      200
--------------------------------------------------------------


Allocated/Total GPU Memory In Cluster:  29/74 (39%)
Allocated/Total GPU Core In Cluster:  80/200 (40%)
"""


@pytest.fixture(scope="module")
def sources():
    kube = FakeKube().start()
    for kind, items in OBJECTS.items():
        for item in items:
            kube.create(kind, item)
    configuration = client.Configuration()
    configuration.host = kube.url
    cluster = KubernetesCluster.from_configuration(configuration, backoff=Backoff(0.02, 0.2), watch_timeout=5)
    extender = build_extender(Config(), cluster=cluster)
    wait_until(extender.ready, what="sync")
    server = make_server("127.0.0.1", 0, create_app(Config(), extender=extender), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    endpoint = f"http://127.0.0.1:{server.server_port}/cgpu-scheduler"
    yield {"api": from_api(api_client=client.ApiClient(configuration)), "endpoint": from_endpoint(endpoint),
           "url": endpoint, "server": kube.url}
    server.shutdown()
    cluster.stop()
    kube.stop()


@pytest.mark.parametrize("source", ["api", "endpoint"])
def test_summary_and_details_match_the_documented_format(sources, source):
    assert render(sources[source]) == SUMMARY
    assert render(sources[source], details=True) == DETAILS


@pytest.mark.parametrize("source", ["api", "endpoint"])
def test_inspect_reports_readiness_cordon_gpu_model_and_whole_gpus(sources, source):
    facts = {n["name"]: {k: n[k] for k in ("ready", "unschedulable", "model", "wholeGpus")}
             for n in sources[source]["nodes"]}
    assert facts == {"core-a": {"ready": True, "unschedulable": False, "model": "Tesla-T4", "wholeGpus": 0},
                     "cgpu-a": {"ready": False, "unschedulable": True, "model": None, "wholeGpus": 0},
                     "plain": {"ready": None, "unschedulable": False, "model": None, "wholeGpus": 4}}


def test_one_node_and_an_unknown_one(sources):
    text = render(sources["api"], node="cgpu-a")
    assert text.splitlines()[1].startswith("cgpu-a  192.0.2.11  10/22") and "core-a" not in text
    assert text.splitlines()[-1] == "19/44 (43%)"
    with pytest.raises(UnknownNode):
        render(sources["api"], node="plain")


def test_the_commands_print_it(sources, capsys, tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": sources["server"]}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u"}}]}))
    assert main(["inspect", "-d", "--kubeconfig", str(kubeconfig)]) == 0
    assert capsys.readouterr().out == DETAILS
    assert main(["inspect", "--endpoint", sources["url"]]) == 0
    assert capsys.readouterr().out == SUMMARY
    assert kubectl_plugin(["-d", "--endpoint", sources["url"] + "/inspect"]) == 0
    assert capsys.readouterr().out == DETAILS
    assert main(["inspect", "--endpoint", "http://127.0.0.1:9/nothing"]) == 1
    assert "inspect: cannot read http://127.0.0.1:9/nothing/inspect" in capsys.readouterr().err
    assert main(["inspect", "--kubeconfig", "/nonexistent/kubeconfig"]) == 1
    assert "no such kubeconfig file" in capsys.readouterr().err


# The example of the shared reference (ack-gpu-sharing.md, "kubectl inspect cgpu output"), as users know it
# from ACK. It shows two GPU columns of a node whose total is 60 GiB (4 x 15): the tool prints one column per
# GPU, so the same allocations give GPU2 and GPU3 columns too; everything else is cell for cell the same.
REFERENCE_EXAMPLE = """\
NAME       IPADDRESS    GPU0(Allocated/Total)  GPU1(Allocated/Total)  GPU Memory(GiB)
node-a     192.0.2.10   15/15                  9/15                   24/60
---------------------------------------------------------------------
Allocated/Total GPU Memory In Cluster:
24/60 (40%)
"""


def cells(line: str) -> list:
    return re.split(r"\s{2,}", line.strip())


def test_the_reference_example_column_by_column():
    objects = [with_ip(node("node-a", "cgpu", gpus=4, gib=15), "192.0.2.10"),
               bound("a", "node-a", A.write({0: {0: 15}}, {}, 15, NS), mem=15),
               bound("b", "node-a", A.write({0: {1: 9}}, {}, 15, NS), mem=9)]
    ours = render(from_objects(objects)).splitlines()
    reference = REFERENCE_EXAMPLE.splitlines()
    assert len(ours) == len(reference)
    extra = ["GPU2(Allocated/Total)", "GPU3(Allocated/Total)"]
    assert cells(ours[0]) == cells(reference[0])[:4] + extra + cells(reference[0])[4:]
    assert cells(ours[1]) == cells(reference[1])[:4] + ["0/15", "0/15"] + cells(reference[1])[4:]
    assert set(ours[2]) == {"-"}
    assert ours[3:] == reference[3:]
    # columns line up: each cell of the row starts where its header starts
    header, row = ours[0], ours[1]
    assert [header.index(h) for h in cells(header)] == [row.index(c, header.index(h)) for h, c in
                                                         zip(cells(header), cells(row))]
