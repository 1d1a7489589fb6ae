"""GET metrics: what a Prometheus scrape shows is what the ledger and the verbs did, in base units."""

import copy
import re

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from builders import container, node, pod, scheduler_pod
from extender.cluster.embedded import EmbeddedCluster
from extender.serving.app import build_extender, create_app
from extender.serving.config import Config
from policy.reasons import MESSAGES, NAMES

PREFIX = "/cgpu-scheduler"
GIB = 2**30
DEMO_NODES = ["gpu-core-a", "gpu-core-b", "gpu-core-full", "gpu-cgpu-a", "gpu-share-a", "gpu-whole-a"]
REASON_OF = {message: NAMES[code] for code, message in MESSAGES.items()}


def scrape(client, accept=None):
    """``{(sample name, ((label, value), ...)): value}`` of one scrape, and the families by name."""
    reply = client.get(f"{PREFIX}/metrics", headers={"Accept": accept} if accept else {})
    assert reply.status_code == 200
    families = list(text_string_to_metric_families(reply.get_data(as_text=True)))
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}
    return samples, {f.name: f for f in families}


def series(samples, name) -> dict:
    """``{labels as a dict's items: value}`` of one sample name."""
    return {labels: value for (sample, labels), value in samples.items() if sample == name}


def verb(client, name, payload):
    reply = client.post(f"{PREFIX}/{name}", data=orjson.dumps(payload), content_type="application/json")
    assert reply.status_code == 200
    return orjson.loads(reply.data)


def bind_args(p, node_name):
    meta = p["metadata"]
    return {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node_name}


def demo_client():
    return create_app(Config(), extender=build_extender(Config())).test_client()


def test_after_the_readme_bind_the_pod_holds_2_gib_in_bytes_on_its_node_and_gpu():
    client = demo_client()
    p = scheduler_pod()
    verb(client, "filter", {"Pod": p, "Nodes": None, "NodeNames": DEMO_NODES})
    verb(client, "prioritize", {"Pod": p, "Nodes": None, "NodeNames": ["gpu-core-a", "gpu-core-b"]})
    assert verb(client, "bind", bind_args(p, "gpu-core-a")) == {"Error": ""}
    samples, families = scrape(client)
    mine = {labels: value for labels, value in series(samples, "cgpu_pod_gpu_memory_allocated_bytes").items()
            if ("pod", p["metadata"]["name"]) in labels}
    assert mine == {(("container", p["spec"]["containers"][0]["name"]), ("gpu", "1"), ("namespace", "default"), ("node", "gpu-core-a"),
                     ("pod", p["metadata"]["name"])): 2 * GIB}
    compute = series(samples, "cgpu_pod_gpu_compute_allocated_ratio")
    assert compute[next(iter(mine))] == 0.3
    gpu = (("gpu", "1"), ("node", "gpu-core-a"))
    assert series(samples, "cgpu_gpu_memory_allocated_bytes")[gpu] == 6 * GIB  # train-a's 4 GiB beside it
    assert series(samples, "cgpu_gpu_compute_allocated_ratio")[gpu] == 0.5
    assert series(samples, "cgpu_gpu_pods")[gpu] == 2
    for name in ("filter", "prioritize", "bind"):
        assert samples[("cgpu_request_duration_seconds_count", (("verb", name),))] == 1
        assert samples[("cgpu_request_duration_seconds_bucket", (("le", "+Inf"), ("verb", name)))] == 1
    assert families["cgpu_request_duration_seconds"].type == "histogram"
    rejections = {dict(labels)["reason"]: v for labels, v in series(samples, "cgpu_filter_rejections_total").items()}
    assert {reason: n for reason, n in rejections.items() if n} == {"no_memory": 1, "needs_core_node": 2,
                                                                     "not_sharing": 1}
    assert series(samples, "cgpu_binds_total")[(("result", "bound"),)] == 1


def test_families_follow_prometheus_naming():
    client = demo_client()
    p = scheduler_pod()
    verb(client, "filter", {"Pod": p, "Nodes": None, "NodeNames": DEMO_NODES})
    _, families = scrape(client)
    units = ("_bytes", "_seconds", "_ratio", "_gpus", "_pods", "_total")
    for name, family in families.items():
        assert re.fullmatch(r"cgpu_[a-z_]+", name) and not re.search(r"gib|percent|_ms$", name), name
        if family.type == "counter":
            assert all(s.name == f"{name}_total" for s in family.samples if not s.name.endswith("_created")), name
        for sample in family.samples:
            assert set(sample.labels) <= {"node", "gpu", "namespace", "pod", "container", "verb", "reason", "result",
                                          "resource", "mode", "placement", "pool", "le", "outcome"}, sample
    measured = [n for n in families if n.endswith(units)]
    assert {"cgpu_pod_gpu_memory_allocated_bytes", "cgpu_request_duration_seconds", "cgpu_stranded_gpus",
            "cgpu_gpu_compute_allocated_ratio"} <= set(measured)


def test_openmetrics_when_the_scraper_asks_for_it():
    client = demo_client()
    reply = client.get(f"{PREFIX}/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert reply.content_type.startswith("application/openmetrics-text")
    assert reply.get_data(as_text=True).endswith("# EOF\n")
    assert client.get(f"{PREFIX}/metrics").content_type == "text/plain; version=0.0.4; charset=utf-8"


def test_each_app_has_its_own_registry():
    extender = build_extender(Config())
    first, second = (create_app(Config(), extender=extender).test_client() for _ in range(2))
    first.get(f"{PREFIX}/healthz")
    assert scrape(first)[0][("cgpu_request_duration_seconds_count", (("verb", "healthz"),))] == 1
    assert scrape(second)[0][("cgpu_request_duration_seconds_count", (("verb", "healthz"),))] == 0


def test_a_configured_pool_label_names_the_pool_in_metrics_and_inspect_as_in_plan():
    labelled = node("gpu-a")
    labelled["metadata"]["labels"].update({"team.example.com/pool": "train", "karpenter.sh/nodepool": "other"})
    config = Config(pool_labels=("team.example.com/pool",))
    extender = build_extender(config, cluster=EmbeddedCluster([labelled], source="test"))
    client = create_app(config, extender=extender).test_client()
    info = series(scrape(client)[0], "cgpu_node_info")
    assert [dict(labels)["pool"] for labels in info] == ["train"]
    report = orjson.loads(client.get(f"{PREFIX}/inspect").data)
    assert [n["pool"] for n in report["nodes"]] == ["train"]


def test_a_node_that_strands_gpu_for_the_learned_mix_is_measured():
    # two GPUs with 1 GiB free each; the only pods ever seen ask for 2 GiB: both idle shares are stranded
    nodes = [node("full", "cgpu", gpus=2, gib=15), node("empty", "cgpu", gpus=1, gib=15)]
    objects = copy.deepcopy(nodes) + [pod(f"big-{g}", mem=14, node_name="full") for g in range(2)]
    for g, p in enumerate(objects[2:]):
        p["metadata"]["annotations"] = {"scheduler.framework.gpushare.allocation": f'{{"0":{{"{g}":14}}}}'}
        p["status"]["phase"] = "Running"
    extender = build_extender(Config(), cluster=EmbeddedCluster(objects))
    client = create_app(Config(render_ttl=0), extender=extender).test_client()
    samples, _ = scrape(client)
    assert ("cgpu_stranded_gpus", ()) not in samples  # no pod seen yet: no mix to measure for
    assert samples[("cgpu_learned_shapes", ())] == 0
    verb(client, "filter", {"Pod": pod("asks-2", mem=2), "Nodes": None, "NodeNames": ["full", "empty"]})
    samples, _ = scrape(client)
    assert samples[("cgpu_learned_shapes", ())] == 1
    assert abs(samples[("cgpu_stranded_gpus", ())] - 2 / 15) < 1e-9  # 1/15 of each of full's GPUs
    assert abs(samples[("cgpu_unallocated_gpus", ())] - (1 + 2 / 15)) < 1e-9
    report = orjson.loads(client.get(f"{PREFIX}/inspect").data)
    by_name = {n["name"]: n for n in report["nodes"]}
    assert [g["stranded"] for g in by_name["full"]["gpus"]] == [True, True]
    assert [g["stranded"] for g in by_name["empty"]["gpus"]] == [False]
    assert abs(by_name["full"]["stranded"] - 2 / 15) < 1e-4 and by_name["empty"]["stranded"] == 0
    assert extender.stranded.current() is extender.stranded.current()  # nothing changed: not measured again


def test_on_the_demo_after_the_readme_pod_only_the_full_nodes_fragments_are_stranded_never_an_untouched_gpu():
    # the README's pod asks for memory and compute: the memory-only nodes (gpu-cgpu-a, gpu-share-a) are out of
    # its reach, so neither their untouched GPUs nor infer-a's 16 GiB left are stranded; gpu-core-full's
    # 1 GiB + 60 % left on each GPU is, where an untouched GPU of that node would take the pod
    client = demo_client()
    verb(client, "filter", {"Pod": scheduler_pod(), "Nodes": None, "NodeNames": DEMO_NODES})
    report = orjson.loads(client.get(f"{PREFIX}/inspect").data)
    marked = {(n["name"], g["index"]) for n in report["nodes"] for g in n["gpus"] if g["stranded"]}
    assert marked == {("gpu-core-full", 0), ("gpu-core-full", 1)}
    assert {n["name"]: n["stranded"] for n in report["nodes"] if n["stranded"]} == {"gpu-core-full": round(2 / 15, 4)}
    samples, _ = scrape(client)
    assert abs(samples[("cgpu_stranded_gpus", ())] - 2 / 15) < 1e-9


CLUSTER = [node("core-a", "core_mem", gpus=2, gib=15), node("cgpu-a", "cgpu", gpus=2, gib=16),
           node("plain", None)]
NAMES_ = [n["metadata"]["name"] for n in CLUSTER]
shapes = st.one_of(st.builds(lambda m, c: {"mem": m, "core": c}, st.integers(1, 16), st.sampled_from([10, 30, 50])),
                   st.builds(lambda m: {"mem": m}, st.integers(1, 17)),
                   st.just({"mem": 2, "core": 33}))  # invalid: compute is not a multiple of 5
steps = st.lists(st.tuples(shapes, st.integers(0, len(NAMES_) - 1), st.booleans()), min_size=1, max_size=12)


@settings(max_examples=25, deadline=None)
@given(steps)
def test_every_scrape_shows_exactly_the_ledger_and_the_verbs_answers(plan):
    cluster = EmbeddedCluster(copy.deepcopy(CLUSTER), source="test")
    extender = build_extender(Config(), cluster=cluster)
    client = create_app(Config(), extender=extender).test_client()
    reasons, results = {}, {}
    for i, (shape, target, delete_after) in enumerate(plan):
        p = pod(f"p{i}", namespace=f"ns{i % 2}", containers=[container(f"c{i}", mem=shape["mem"],
                                                                         core=shape.get("core"))])
        reply = verb(client, "filter", {"Pod": p, "Nodes": None, "NodeNames": NAMES_})
        for message in {**reply["FailedNodes"], **reply["FailedAndUnresolvableNodes"]}.values():
            reason = REASON_OF.get(message, "invalid_request")
            reasons[reason] = reasons.get(reason, 0) + 1
        error = verb(client, "bind", bind_args(p, NAMES_[target]))["Error"]
        result = ("invalid" if shape.get("core") == 33 else "bound" if NAMES_[target] in reply["NodeNames"]
                  else "refused")
        assert (result == "bound") == (error == "")
        results[result] = results.get(result, 0) + 1
        if delete_after and not error:
            cluster.delete_pod(p["metadata"]["namespace"], p["metadata"]["name"])
    samples, _ = scrape(client)
    expected = {}
    for allocation in extender.ledger.allocations():
        for c, gpu, gib, _ in allocation.shares:
            key = (("container", allocation.container_name(c)), ("gpu", str(gpu)),
                   ("namespace", allocation.pod.namespace), ("node", allocation.node), ("pod", allocation.pod.name))
            expected[key] = gib * GIB
    pods = series(samples, "cgpu_pod_gpu_memory_allocated_bytes")
    assert pods == expected  # a deleted pod's series are gone with it
    per_gpu = {}
    for labels, value in pods.items():
        where = (labels[1], labels[3])
        per_gpu[where] = per_gpu.get(where, 0) + value
    gpus = series(samples, "cgpu_gpu_memory_allocated_bytes")
    assert {k: v for k, v in gpus.items() if v} == {(("gpu", g), ("node", n)): v for ((_, g), (_, n)), v in
                                                    per_gpu.items()}
    rejections = {dict(k)["reason"]: v for k, v in series(samples, "cgpu_filter_rejections_total").items() if v}
    assert rejections == reasons
    binds = {dict(k)["result"]: v for k, v in series(samples, "cgpu_binds_total").items() if v}
    assert binds == {k: v for k, v in results.items() if v}
    assert samples[("cgpu_allocations", ())] == len(extender.ledger.allocations())


@pytest.mark.parametrize("accept", [None, "application/openmetrics-text; version=1.0.0", "text/plain; version=1.0.0"])
def test_a_page_written_one_family_at_a_time_is_the_library_s_page(accept):
    from prometheus_client.exposition import choose_encoder

    from benchmarks.synthetic import cluster_objects
    from extender.views.metrics import Metrics, encode_by_family

    metrics = Metrics(build_extender(Config(), cluster=EmbeddedCluster(cluster_objects(40, 8, seed=1))))
    metrics.observe("bind", 0.003)
    encode, _ = choose_encoder(accept or "")
    whole = encode(metrics.registry)
    assert encode_by_family(encode, metrics.registry) == whole and whole.count(b"\n# TYPE ") > 10
