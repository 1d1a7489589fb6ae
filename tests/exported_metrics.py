"""Every metric family the extender exports, from real scrapes in the configurations that add families.

The demo after a filter and a bind (per-pod series, the verbs' histogram, the learned mix), the
Kubernetes backend against the fake API server with scale-up placeholders (watch, Events,
placeholder families), and an extender whose defragmentation executor has run a round (the
executor's families, read from its stats as the collector reads them).
"""

from __future__ import annotations

import functools

import orjson
from kubernetes import client as kube_client
from prometheus_client.parser import text_string_to_metric_families

from builders import node, pod, scheduler_pod
from extender.cluster.kube.backend import KubernetesCluster
from extender.cluster.kube.reflector import Backoff
from extender.serving.app import build_extender, create_app
from extender.serving.config import Config
from extender.views.metrics import Metrics
from fakekube import FakeKube, wait_until


def _post(client, verb: str, payload: dict) -> dict:
    reply = client.post(f"/cgpu-scheduler/{verb}", data=orjson.dumps(payload), content_type="application/json")
    assert reply.status_code == 200
    return orjson.loads(reply.data)


def _families(text: str) -> dict:
    """Family name → (type, label names) of one scrape."""
    return {f.name: (f.type, {label for s in f.samples for label in s.labels})
            for f in text_string_to_metric_families(text)}


@functools.lru_cache(maxsize=1)
def exported() -> dict:
    """Family name (as the exposition names it: counters without ``_total``) → (type, label names)."""
    app = create_app(Config(render_ttl=0))
    client = app.test_client()
    p = scheduler_pod()
    _post(client, "filter", {"Pod": p, "Nodes": None, "NodeNames": ["gpu-core-a"]})
    _post(client, "bind", {"PodName": p["metadata"]["name"], "PodNamespace": "default",
                           "PodUID": p["metadata"]["uid"], "Node": "gpu-core-a"})
    found = _families(client.get("/cgpu-scheduler/metrics").get_data(as_text=True))

    from extender.defrag.executor import DefragStats
    from extender.views.defrag_plan import defrag_of

    extender = app.extensions["cgpu"]
    extender.defragger = type("Ran", (), {"stats": DefragStats(last=defrag_of(
        extender.ledger, extender.planning, [], explain=False))})()
    found.update(_families(Metrics(extender).render(None)[0].decode()))

    kube = FakeKube().start()
    try:
        kube.create("nodes", node("gpu-a", "cgpu", gpus=2, gib=15))
        kube.create("pods", pod("waiting", mem=2))
        configuration = kube_client.Configuration()
        configuration.host = kube.url
        cluster = KubernetesCluster.from_configuration(configuration, backoff=Backoff(initial=0.02, maximum=0.2),
                                                       watch_timeout=5, request_timeout=5)
        try:
            extender = build_extender(Config(scale_up_placeholders=True, placeholder_interval=3600),
                                      cluster=cluster, clock=lambda: 1)
            wait_until(extender.ready, what="first sync")
            found.update(_families(Metrics(extender).render(None)[0].decode()))
        finally:
            cluster.stop()
    finally:
        kube.stop()
    return found


def sample_names(families: dict) -> set:
    """The sample names a query may select (a counter's ``_total``, a histogram's ``_bucket`` ...)."""
    names = set()
    for name, (kind, _) in families.items():
        names |= {"counter": {f"{name}_total"}, "histogram": {f"{name}_{s}" for s in ("bucket", "count", "sum")}
                  }.get(kind, {name})
    return names
