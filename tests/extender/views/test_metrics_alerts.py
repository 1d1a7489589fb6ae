"""The metrics the alert rules need (manifests/components/monitoring/prometheusrule.yaml): the verbs'
errors by verb and reason, and the age of the oldest pending shared-GPU pod."""

from datetime import datetime, timedelta, timezone

import orjson
import pytest

from builders import node, pod
from extender.cluster.embedded import EmbeddedCluster
from extender.ledger.pending import PendingPod, oldest_age
from extender.serving.app import build_extender, create_app
from extender.serving.config import Config
from extender.verbs.outcomes import ERROR_REASONS, ERROR_VERBS
from test_metrics import PREFIX, scrape, series


class NotSynced(EmbeddedCluster):
    def ready(self) -> bool:
        return False


def client_on(cluster):
    return create_app(Config(), extender=build_extender(Config(), cluster=cluster)).test_client()


def errors(client) -> dict:
    return {(dict(labels)["verb"], dict(labels)["reason"]): value
            for labels, value in series(scrape(client)[0], "cgpu_verb_errors_total").items()}


def post(client, verb, body: bytes):
    return client.post(f"{PREFIX}/{verb}", data=body, content_type="application/json")


def test_every_verb_and_reason_is_a_series_from_the_start():
    assert errors(client_on(EmbeddedCluster([node("gpu-a")]))) == {
        (verb, reason): 0 for verb in ERROR_VERBS for reason in ERROR_REASONS}


def test_bad_bodies_count_as_bad_requests_of_their_verb():
    client = client_on(EmbeddedCluster([node("gpu-a")]))
    for verb in ERROR_VERBS:
        post(client, verb, b'{"Pod": 7}')
    post(client, "filter", b"[")
    counted = errors(client)
    assert {k: v for k, v in counted.items() if v} == {("filter", "bad_request"): 2, ("prioritize", "bad_request"): 1,
                                                        ("preempt", "bad_request"): 1, ("bind", "bad_request"): 1}


def test_verbs_answered_before_the_first_sync_count_as_not_ready():
    client = client_on(NotSynced([node("gpu-a")]))
    p = pod("a", mem=2, core=30)
    args = orjson.dumps({"Pod": p, "Nodes": None, "NodeNames": ["gpu-a"]})
    assert orjson.loads(post(client, "filter", args).data)["Error"]
    post(client, "prioritize", args)
    post(client, "preempt", orjson.dumps({"Pod": p, "NodeNameToMetaVictims": {"gpu-a": {"Pods": []}}}))
    post(client, "bind", orjson.dumps({"PodName": "a", "PodNamespace": "default", "PodUID": "uid-a",
                                       "Node": "gpu-a"}))
    assert {k: v for k, v in errors(client).items() if v} == {(verb, "not_ready"): 1 for verb in ERROR_VERBS}


def test_a_pod_that_asks_for_no_shared_gpu_is_no_prioritize_error_before_the_sync():
    client = client_on(NotSynced([node("gpu-a")]))
    plain = pod("plain", containers=[{"name": "main", "resources": {}}])
    post(client, "prioritize", orjson.dumps({"Pod": plain, "Nodes": None, "NodeNames": ["gpu-a"]}))
    assert not any(errors(client).values())


def test_a_handler_fault_counts_as_internal(monkeypatch):
    extender = build_extender(Config(), cluster=EmbeddedCluster([node("gpu-a")]))

    def broken(body):
        raise RuntimeError("boom")

    monkeypatch.setattr(extender, "bind", broken)
    client = create_app(Config(), extender=extender).test_client()
    reply = post(client, "bind", b"{}")
    assert reply.status_code == 500
    assert {k: v for k, v in errors(client).items() if v} == {("bind", "internal"): 1}


def created(minutes_ago: float, now: datetime) -> str:
    return (now - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_the_oldest_pending_pods_age_is_a_gauge_of_seconds():
    now = datetime.now(timezone.utc)
    waiting = [pod(f"w-{m}", mem=2, core=30) for m in (20, 3)]
    for p, minutes in zip(waiting, (20, 3)):
        p["metadata"]["creationTimestamp"] = created(minutes, now)
    other = pod("other-scheduler", mem=2, core=30)
    other["spec"]["schedulerName"] = "someone-else"
    other["metadata"]["creationTimestamp"] = created(90, now)
    client = client_on(EmbeddedCluster([node("gpu-a")] + waiting + [other]))
    (age,) = series(scrape(client)[0], "cgpu_pending_pod_max_age_seconds").values()
    assert 20 * 60 <= age < 20 * 60 + 120  # the oldest of this extender's schedulers' pods, not the other's


def test_no_pending_pod_is_age_zero():
    client = client_on(EmbeddedCluster([node("gpu-a")]))
    assert series(scrape(client)[0], "cgpu_pending_pod_max_age_seconds") == {(): 0}


def pending(created_at: str) -> PendingPod:
    return PendingPod("u", "default", "p", None, 0, None, "default-scheduler", {}, [], [], created_at)


@pytest.mark.parametrize("stamps,expected", [
    ([], 0.0),
    (["1970-01-01T00:01:40Z"], 900.0),
    (["1970-01-01T00:01:40Z", "1970-01-01T00:00:00Z"], 1000.0),
    (["", "not a time", "1970-01-01T00:15:00Z"], 100.0),
    (["1970-01-01T01:00:00Z"], 0.0),  # created after now (clock skew): no negative age
])
def test_oldest_age(stamps, expected):
    assert oldest_age([pending(s) for s in stamps], now=1000.0) == expected
