"""POST preempt: kube-scheduler-shaped ExtenderPreemptionArgs in both forms, the reply
always NodeNameToMetaVictims, and the issue's example end to end on the embedded cluster."""

import orjson

from builders import node, pod, running_pod
from extender.cluster.embedded import EmbeddedCluster
from extender.serving.app import build_extender, create_app
from extender.serving.config import Config

PREFIX = "/cgpu-scheduler"


def bound(name, gpu, gib, priority, created):
    return running_pod(name, "gpu-a", gpu, gib, priority, created=created)


RESIDENTS = [bound("a12", 0, 12, 0, "2026-01-01T00:00:00Z"), bound("a10", 0, 10, 0, "2026-06-01T00:00:00Z"),
             bound("b12", 1, 12, 0, "2026-01-01T00:00:00Z"), bound("b10", 1, 10, 0, "2026-06-01T00:00:00Z")]


def client_of(objects):
    return create_app(Config(), extender=build_extender(Config(), cluster=EmbeddedCluster(objects, "test"))) \
        .test_client()


def preemptor(priority=1000, mem=20):
    p = pod("urgent", mem=mem)
    p["spec"]["priority"] = priority
    return p


def uid(name):
    return f"uid-{name}"


def preempt(client, body):
    reply = client.post(f"{PREFIX}/preempt", data=orjson.dumps(body), content_type="application/json")
    return reply.status_code, orjson.loads(reply.data)


def test_meta_form_kube_proposal_that_frees_nothing_is_replaced_by_one_gpus_pods():
    client = client_of([node("gpu-a", "cgpu", gpus=2, gib=22), *RESIDENTS])
    status, reply = preempt(client, {"Pod": preemptor(), "NodeNameToMetaVictims": {
        "gpu-a": {"Pods": [{"UID": uid("a10")}, {"UID": uid("b10")}], "NumPDBViolations": 0}}})
    assert status == 200
    victims = reply["NodeNameToMetaVictims"]["gpu-a"]
    assert {v["UID"] for v in victims["Pods"]} == {uid("a12"), uid("a10")} and victims["NumPDBViolations"] == 0


def test_full_pod_form_is_read_and_answered_in_the_meta_form():
    client = client_of([node("gpu-a", "cgpu", gpus=2, gib=22), *RESIDENTS])
    status, reply = preempt(client, {"Pod": preemptor(), "NodeNameToVictims": {
        "gpu-a": {"Pods": [RESIDENTS[1], RESIDENTS[3]], "NumPDBViolations": 0}}})
    assert status == 200 and set(reply) == {"NodeNameToMetaVictims"}
    assert {v["UID"] for v in reply["NodeNameToMetaVictims"]["gpu-a"]["Pods"]} == {uid("a12"), uid("a10")}


def test_a_proposal_that_makes_room_is_kept_as_it_is():
    client = client_of([node("gpu-a", "cgpu", gpus=2, gib=22), *RESIDENTS])
    body = {"Pod": preemptor(mem=10), "NodeNameToMetaVictims": {
        "gpu-a": {"Pods": [{"UID": uid("b12")}], "NumPDBViolations": 1}}}
    assert preempt(client, body)[1] == {"NodeNameToMetaVictims": {
        "gpu-a": {"Pods": [{"UID": uid("b12")}], "NumPDBViolations": 1}}}


def test_empty_victim_lists_are_filled_and_nodes_without_room_are_dropped():
    client = client_of([node("gpu-a", "cgpu", gpus=2, gib=22), node("small", "cgpu", gpus=1, gib=8), *RESIDENTS])
    status, reply = preempt(client, {"Pod": preemptor(), "NodeNameToMetaVictims": {
        "gpu-a": {"Pods": [], "NumPDBViolations": 0}, "small": {"Pods": None, "NumPDBViolations": 0},
        "no-such-node": {"Pods": [], "NumPDBViolations": 0}}})
    assert status == 200 and set(reply["NodeNameToMetaVictims"]) == {"gpu-a"}


def test_equal_or_higher_priority_pods_are_never_victims():
    client = client_of([node("gpu-a", "cgpu", gpus=2, gib=22), *RESIDENTS])
    reply = preempt(client, {"Pod": preemptor(priority=0), "NodeNameToMetaVictims": {
        "gpu-a": {"Pods": [{"UID": uid("a10")}], "NumPDBViolations": 0}}})[1]
    assert reply == {"NodeNameToMetaVictims": {}}


def test_a_pod_without_a_gpu_request_keeps_kube_schedulers_answer_and_bad_bodies_get_400():
    client = client_of([node("gpu-a", "cgpu", gpus=2, gib=22), *RESIDENTS])
    plain = pod("cpu-only", mem=None)
    plain["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1"}}
    body = {"Pod": plain, "NodeNameToMetaVictims": {"gpu-a": {"Pods": [{"UID": "x"}], "NumPDBViolations": 2}}}
    assert preempt(client, body)[1] == {"NodeNameToMetaVictims": {
        "gpu-a": {"Pods": [{"UID": "x"}], "NumPDBViolations": 2}}}
    for bad in ([], {"Pod": 1}, {"Pod": {}, "NodeNameToMetaVictims": []},
                {"Pod": {}, "NodeNameToMetaVictims": {"n": {"Pods": [{"UID": 5}]}}}):
        status, reply = preempt(client, bad)
        assert status == 400 and reply["Error"]


def test_preempt_answers_what_it_found_by_its_deadline_and_leaves_the_rest_out():
    nodes = [node(f"crowded-{i}", "cgpu", gpus=1, gib=16) for i in range(6)]
    pods = [running_pod(f"low-{i}", f"crowded-{i}", 0, 16, priority=0, gpu_memory=16) for i in range(6)]
    extender = build_extender(Config(), cluster=EmbeddedCluster(nodes + pods))
    body = orjson.dumps({"Pod": preemptor(mem=16), "NodeNameToMetaVictims": {
        f"crowded-{i}": {"Pods": [{"UID": pods[i]["metadata"]["uid"]}], "NumPDBViolations": 0} for i in range(6)}})
    assert len(orjson.loads(extender.preempt(body)[0])["NodeNameToMetaVictims"]) == 6
    extender.preempt_seconds = -1  # the deadline has passed before the first candidate
    reply, status = extender.preempt(body)
    assert status == 200 and orjson.loads(reply) == {"NodeNameToMetaVictims": {}}
