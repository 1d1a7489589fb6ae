"""The HTTP service on the built-in demo cluster, driven as kube-scheduler drives it."""

import json

import orjson
import pytest

from builders import container, pod, scheduler_pod
from extender.cluster.demo import demo_objects
from extender.cluster.embedded import EmbeddedCluster
from extender.ledger import annotations as A
from extender.serving.app import build_extender, create_app
from extender.serving.config import Config

PREFIX = "/cgpu-scheduler"
DEMO_NODES = ["gpu-core-a", "gpu-core-b", "gpu-core-full", "gpu-cgpu-a", "gpu-share-a", "gpu-whole-a"]
NOW = 1_795_000_000_000_000_000


@pytest.fixture
def client():
    app = create_app(Config(), extender=build_extender(Config(), clock=lambda: NOW))
    return app.test_client()


def post(client, verb, payload, prefix=PREFIX):
    raw = payload if isinstance(payload, bytes) else orjson.dumps(payload)
    reply = client.post(f"{prefix}/{verb}", data=raw, content_type="application/json")
    assert reply.status_code == 200, reply.data
    assert reply.mimetype == "application/json"
    return orjson.loads(reply.data)


def args(p, names=DEMO_NODES):
    return {"Pod": p, "Nodes": None, "NodeNames": names}


def bind_args(p, node):
    meta = p["metadata"]
    return {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node}


def inspect(client):
    reply = client.get(f"{PREFIX}/inspect")
    assert reply.status_code == 200
    return orjson.loads(reply.data)


def state_of(client):
    """Everything inspect says about GPUs and pods (what must not change on a refusal)."""
    return json.dumps(inspect(client)["nodes"], sort_keys=True)


def test_cuda_sample_filter_prioritize_bind_inspect(client):
    p = scheduler_pod()
    result = post(client, "filter", args(p))
    assert result["NodeNames"] == ["gpu-core-a", "gpu-core-b"]
    assert result["Nodes"] is None and result["Error"] == ""
    assert result["FailedNodes"] == {"gpu-core-full": "insufficient free GPU memory"}
    assert result["FailedAndUnresolvableNodes"] == {
        "gpu-cgpu-a": "pod shares GPU compute; node shares GPU memory only",
        "gpu-share-a": "pod shares GPU compute; node shares GPU memory only",
        "gpu-whole-a": "node does not share GPUs",
    }
    rejected = set(result["FailedNodes"]) | set(result["FailedAndUnresolvableNodes"])
    assert rejected | set(result["NodeNames"]) == set(DEMO_NODES)

    scores = post(client, "prioritize", args(p, result["NodeNames"]))
    assert all(set(s) == {"Host", "Score"} and type(s["Score"]) is int and 0 <= s["Score"] <= 10 for s in scores)
    assert scores == [{"Host": "gpu-core-a", "Score": 10}, {"Host": "gpu-core-b", "Score": 0}]

    assert post(client, "bind", bind_args(p, "gpu-core-a")) == {"Error": ""}
    node = next(n for n in inspect(client)["nodes"] if n["name"] == "gpu-core-a")
    gpu1 = node["gpus"][1]
    assert gpu1["memory"] == {"used": 6, "total": 15} and gpu1["core"] == {"used": 50, "total": 100}
    mine = next(q for q in gpu1["pods"] if q["name"] == p["metadata"]["name"])
    assert mine["memory"] == 2 and mine["core"] == 30
    notes = mine["annotations"]
    assert json.loads(notes[A.V2_ALLOCATION]) == {"0": {"1": 2}}
    assert json.loads(notes[A.V2_CORE]) == {"0": {"1": 30}}
    assert json.loads(notes[A.V2_DEVICE]) == {"1": 15}
    assert notes[A.V2_ASSUME_TIME] == notes[A.V1_ASSUME_TIME] == str(NOW)
    assert (notes[A.V1_INDEX], notes[A.V1_POD], notes[A.V1_DEVICE]) == ("1", "2", "15")


def test_full_node_objects_mode_returns_the_passing_nodes(client):
    items = [o for o in demo_objects() if o["kind"] == "Node"]
    result = post(client, "filter", {"Pod": scheduler_pod(), "Nodes": {"items": items}, "NodeNames": None})
    assert [n["metadata"]["name"] for n in result["Nodes"]["items"]] == ["gpu-core-a", "gpu-core-b"]
    assert result["NodeNames"] == ["gpu-core-a", "gpu-core-b"]


def test_big_quantities_are_parsed_not_misread(client):
    result = post(client, "filter", args(pod(mem="1k", core="30")))
    assert result["NodeNames"] == []
    assert result["FailedAndUnresolvableNodes"]["gpu-core-a"] == "GPU memory request is larger than the node's GPUs"


def test_memory_only_pod_goes_to_memory_nodes(client):
    result = post(client, "filter", args(pod(mem=4)))
    assert result["NodeNames"] == ["gpu-cgpu-a", "gpu-share-a"]
    assert result["FailedAndUnresolvableNodes"]["gpu-core-a"] == "pod shares GPU memory only; node is core_mem"


INVALID = {
    "core 33": pod(mem=2, core=33),
    "core 0": pod(mem=2, core=0),
    "core 105": pod(mem=2, core=105),
    "compute without memory": pod(containers=[container(core=30)]),
    "mixed container sets": pod(containers=[container("a", mem=2, core=30), container("b", mem=2)]),
    "gpu-count not dividing": pod(mem=3, labels={"aliyun.com/gpu-count": "2"}),
    "non-integer quantity": pod(mem="2.5"),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_requests_are_refused_on_every_node_with_one_message(client, case):
    before = state_of(client)
    p = INVALID[case]
    result = post(client, "filter", args(p))
    assert result["NodeNames"] == [] and result["Error"] == "" and result["FailedNodes"] == {}
    messages = set(result["FailedAndUnresolvableNodes"].values())
    assert set(result["FailedAndUnresolvableNodes"]) == set(DEMO_NODES) and len(messages) == 1
    scores = post(client, "prioritize", args(p))
    assert {s["Score"] for s in scores} == {0}
    bound = post(client, "bind", bind_args(p, "gpu-core-b"))
    assert bound["Error"] == messages.pop()
    assert state_of(client) == before


def test_each_invalid_case_has_a_distinct_message(client):
    messages = {case: set(post(client, "filter", args(p))["FailedAndUnresolvableNodes"].values()).pop()
                for case, p in INVALID.items()}
    assert len(set(messages.values())) == len(INVALID), messages


def test_pod_without_gpu_request_passes_untouched(client):
    p = pod(containers=[{"name": "web", "resources": {"limits": {"cpu": "1"}}}])
    result = post(client, "filter", args(p))
    assert result["NodeNames"] == DEMO_NODES and result["FailedAndUnresolvableNodes"] == {}
    before = state_of(client)
    assert post(client, "bind", bind_args(p, "gpu-whole-a")) == {"Error": ""}
    assert state_of(client) == before


def test_bind_is_idempotent_for_the_same_uid(client):
    p = scheduler_pod()
    post(client, "filter", args(p))
    assert post(client, "bind", bind_args(p, "gpu-core-b")) == {"Error": ""}
    after_first = state_of(client)
    assert post(client, "bind", bind_args(p, "gpu-core-b")) == {"Error": ""}
    assert state_of(client) == after_first


def test_bind_refusals_change_nothing(client):
    p = scheduler_pod()
    post(client, "filter", args(p))
    post(client, "bind", bind_args(p, "gpu-core-b"))
    before = state_of(client)

    elsewhere = post(client, "bind", bind_args(p, "gpu-core-a"))["Error"]
    assert elsewhere == f"pod default/{p['metadata']['name']} is already bound to node gpu-core-b"

    q = pod(mem=2, core=30)
    post(client, "filter", args(q))
    assert post(client, "bind", bind_args(q, "nowhere"))["Error"] == \
        "node nowhere is unknown to the GPU-share extender"
    assert post(client, "bind", bind_args(q, "gpu-core-full"))["Error"] == \
        f"pod default/{q['metadata']['name']} no longer fits on node gpu-core-full: insufficient free GPU memory"
    assert post(client, "bind", bind_args(pod(mem=1), "gpu-core-a"))["Error"].endswith(
        "is unknown to the extender: bind needs the Pod from a preceding filter call")
    assert "missing PodUID" in post(client, "bind", {"PodName": "x", "Node": "gpu-core-a"})["Error"]
    assert "not valid JSON" in post(client, "bind", b"{nope")["Error"]
    wrong_name = bind_args(q, "gpu-core-a") | {"PodName": "other"}
    assert "belongs to default/" in post(client, "bind", wrong_name)["Error"]
    assert state_of(client) == before


def test_a_pod_that_no_longer_fits_is_refused_at_bind(client):
    # Two pods both pass filter for the last room on a GPU; only the first bind wins.
    first, second = pod(mem=8, core=30), pod(mem=8, core=30)
    for p in (first, second):
        assert "gpu-core-b" in post(client, "filter", args(p, ["gpu-core-b"]))["NodeNames"]
    filler = [pod(mem=11, core=10) for _ in range(3)]
    for p in filler:
        post(client, "filter", args(p, ["gpu-core-b"]))
        assert post(client, "bind", bind_args(p, "gpu-core-b")) == {"Error": ""}
    assert post(client, "bind", bind_args(first, "gpu-core-b")) == {"Error": ""}
    assert "no longer fits on node gpu-core-b" in post(client, "bind", bind_args(second, "gpu-core-b"))["Error"]


def test_bad_filter_body_is_an_error_reply_not_a_crash(client):
    result = post(client, "filter", b'{"Pod": 5}')
    assert result["Error"] == "ExtenderArgs.Pod is missing or not an object" and result["NodeNames"] == []
    assert post(client, "prioritize", b"not json") == []


def test_probes_and_unknown_routes(client):
    assert client.get(f"{PREFIX}/healthz").json == {"status": "ok"}
    assert client.get(f"{PREFIX}/readyz").json == {"ready": True}
    missing = client.get(f"{PREFIX}/nope")
    assert missing.status_code == 404 and "Error" in missing.json
    assert client.get(f"{PREFIX}/filter").status_code == 405


def test_internal_fault_is_a_500_with_one_line_and_no_traceback(client, monkeypatch):
    extender = client.application.extensions["cgpu"]
    monkeypatch.setattr(extender.ledger, "check_rows", lambda *a: 1 / 0)
    reply = client.post(f"{PREFIX}/filter", data=orjson.dumps(args(scheduler_pod())), content_type="application/json")
    assert reply.status_code == 500
    assert reply.json == {"Error": "internal error in the GPU-share extender: ZeroDivisionError"}
    assert b"Traceback" not in reply.data


def test_prefix_is_configurable():
    app = create_app(Config(prefix="/custom/path/"))
    client = app.test_client()
    assert client.get("/custom/path/healthz").status_code == 200
    assert post(client, "filter", args(scheduler_pod()), prefix="/custom/path")["NodeNames"] == ["gpu-core-a",
                                                                                               "gpu-core-b"]


class NotSynced(EmbeddedCluster):
    def start(self, ledger):
        pass  # never finishes its first sync


def test_before_first_sync_filter_errors_and_readyz_is_503():
    app = create_app(Config(), cluster=NotSynced(demo_objects()))
    client = app.test_client()
    result = post(client, "filter", args(scheduler_pod()))
    assert "has not finished its first sync" in result["Error"] and result["NodeNames"] == []
    assert client.get(f"{PREFIX}/readyz").status_code == 503
    assert "has not finished its first sync" in post(client, "bind", bind_args(scheduler_pod(), "gpu-core-a"))["Error"]


def test_two_apps_do_not_share_state():
    a, b = create_app().test_client(), create_app().test_client()
    p = scheduler_pod()
    post(a, "filter", args(p))
    post(a, "bind", bind_args(p, "gpu-core-a"))
    assert inspect(a)["summary"]["allocations"] == inspect(b)["summary"]["allocations"] + 1


def test_cluster_file_replays_a_dump_with_its_allocations(tmp_path):
    import yaml

    dump = tmp_path / "cluster.yaml"
    dump.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": demo_objects()}))
    client = create_app(Config(cluster_file=str(dump))).test_client()
    report = inspect(client)
    assert report["summary"]["allocations"] == 4 and report["cluster"] == "embedded"
    cgpu = next(n for n in report["nodes"] if n["name"] == "gpu-cgpu-a")
    assert cgpu["gpus"][0]["memory"] == {"used": 6, "total": 22}
    assert cgpu["gpus"][0]["pods"][0]["source"] == "v1"


def test_unaccounted_pods_are_reported():
    objects = demo_objects() + [pod("mystery", mem=3, core=10, node_name="gpu-core-b")]
    client = create_app(Config(), cluster=EmbeddedCluster(objects)).test_client()
    report = inspect(client)
    node = next(n for n in report["nodes"] if n["name"] == "gpu-core-b")
    assert [u["name"] for u in node["unaccounted"]] == ["mystery"]
    assert report["summary"]["unaccountedPods"] == 1


def test_every_reply_says_how_long_the_handler_took(client):
    for reply in (client.post(f"{PREFIX}/filter", data=orjson.dumps(args(scheduler_pod()))),
                  client.get(f"{PREFIX}/healthz"), client.get(f"{PREFIX}/nope")):
        name, duration = reply.headers["Server-Timing"].split(";dur=")
        assert name == "app" and float(duration) >= 0


@pytest.mark.parametrize("names", [[1], [["gpu-core-a"]], ["gpu-core-a", None], [{"a": 1}]])
def test_node_names_must_be_strings(client, names):
    result = post(client, "filter", {"Pod": scheduler_pod(), "Nodes": None, "NodeNames": names})
    assert result["Error"] == "ExtenderArgs.NodeNames must be a list of node names or null"
    assert post(client, "prioritize", {"Pod": scheduler_pod(), "Nodes": None, "NodeNames": names}) == []


def test_scheduler_body_with_a_gpu_init_container_places_the_app_containers_only(client):
    # Exactly as kube-scheduler sends it (capitalised keys, "Nodes": null, managedFields), with an init
    # container that asks for GPU memory too: ACK ignores init containers, and so does the extender.
    p = scheduler_pod()
    p["spec"]["initContainers"].append(container("warmup", mem="10", core="100"))
    raw = orjson.dumps({"Pod": p, "Nodes": None, "NodeNames": DEMO_NODES})
    assert b'"Nodes":null' in raw and b'"managedFields"' in raw
    result = post(client, "filter", raw)
    assert result["NodeNames"] == ["gpu-core-a", "gpu-core-b"] and result["Error"] == ""
    assert post(client, "bind", bind_args(p, "gpu-core-a")) == {"Error": ""}
    gpu1 = next(n for n in inspect(client)["nodes"] if n["name"] == "gpu-core-a")["gpus"][1]
    assert gpu1["memory"]["used"] == 6 and gpu1["core"]["used"] == 50
    mine = next(q for q in gpu1["pods"] if q["name"] == p["metadata"]["name"])
    assert json.loads(mine["annotations"][A.V2_ALLOCATION]) == {"0": {"1": 2}}


@pytest.mark.parametrize("compact", ["0", "1"])
def test_inspect_answers_with_allocations_on_a_node_it_does_not_know(compact):
    # a pod bound to a node the cluster no longer lists: its shares are reported per GPU index, as text keys
    objects = [o for o in demo_objects() if o["metadata"]["name"] != "gpu-core-full"]
    client = create_app(Config(), extender=build_extender(Config(), cluster=EmbeddedCluster(objects))).test_client()
    reply = client.get(f"{PREFIX}/inspect", query_string={"compact": compact})
    assert reply.status_code == 200
    orphans = orjson.loads(reply.data)["allocationsOnUnknownNodes"]
    assert sorted((o["name"], o["memory"], o["core"]) for o in orphans) == [
        ("full-0", {"0": 14}, {"0": 40}), ("full-1", {"1": 14}, {"1": 40})]
