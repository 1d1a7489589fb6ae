"""Leader election between replicas in this process (real backends, real election threads) on the fake
API server: one leader, a standby that refuses the verbs, handover, fencing of a leader that cannot
renew, and the catch-up a new leader does before its first verb."""

import time

import pytest

from builders import node, pod
from fakekube import wait_until
from replicas import FAST, Overlap, Replica, leader_of


@pytest.fixture
def replicas(kube):
    made = []

    def start(*names, settings=FAST):
        for name in names:
            made.append(Replica(kube, name, settings))
        return made[-len(names):]

    yield start
    for replica in made:
        replica.stop()


def bindings(kube, name=None) -> list:
    """The Binding requests that reached the API server (for pod ``name`` if given)."""
    return [path for method, path in kube.requests
            if method == "POST" and path.endswith("/binding") and (name is None or f"/pods/{name}/" in path)]


def metric(replica, name) -> str:
    status, text = replica.get("metrics")
    assert status == 200
    return "\n".join(line for line in text.splitlines() if line.startswith(name))


def test_one_replica_leads_and_the_standby_answers_no_verb(kube, replicas):
    kube.create("nodes", node("gpu-a", "cgpu", gpus=1, gib=15))
    p = kube.create("pods", pod("p", mem=2))
    a, b = replicas("a", "b")
    leader = leader_of([a, b])
    standby = b if leader is a else a
    wait_until(lambda: standby.role() == "standby" and standby.extender.ready(), what="the standby to sync")
    assert kube.leases.get("kube-system", "cgpu-extender")["spec"]["holderIdentity"] == leader.identity

    assert leader.get("readyz") == (200, {"ready": True, "role": "leader", "leader": leader.identity})
    assert standby.get("readyz") == (503, {"ready": False, "role": "standby", "leader": leader.identity})
    assert leader.get("healthz")[0] == standby.get("healthz")[0] == 200
    refused = f"this replica is a standby; the leader is {leader.identity} (lease kube-system/cgpu-extender)"
    args = {"Pod": p, "Nodes": None, "NodeNames": ["gpu-a"]}
    for verb, body in (("filter", args), ("prioritize", args), ("bind", {"PodName": "p", "PodNamespace": "default",
                                                                         "PodUID": p["metadata"]["uid"],
                                                                         "Node": "gpu-a"}),
                       ("preempt", {"Pod": p, "NodeNameToMetaVictims": {"gpu-a": {"Pods": []}}})):
        assert standby.post(verb, body) == (503, {"Error": refused}), verb
    assert bindings(kube) == []
    assert leader.filter(p, ["gpu-a"])[1]["NodeNames"] == ["gpu-a"]
    assert leader.bind(p, "gpu-a") == (200, {"Error": ""})
    wait_until(lambda: standby.extender.ledger.allocation(p["metadata"]["uid"]), what="the standby to see the bind")

    assert metric(leader, "cgpu_leader ") == "cgpu_leader 1.0"
    assert metric(standby, "cgpu_leader ") == "cgpu_leader 0.0"
    assert 'cgpu_leader_transitions_total{role="leader"} 1.0' in metric(leader, "cgpu_leader_transitions_total")
    assert 'cgpu_binds_total{result="not_leader"} 1.0' in metric(standby, "cgpu_binds_total")
    assert standby.get("inspect")[1]["leadership"]["role"] == "standby"


def test_a_leader_that_stops_releases_the_lease_and_the_standby_takes_over(kube, replicas):
    kube.create("nodes", node("gpu-a", "cgpu", gpus=1, gib=15))
    a, b = replicas("a", "b")
    old = leader_of([a, b])
    new = b if old is a else a
    old.stop()
    released = [spec for method, _, _, spec in kube.leases.writes if spec["holderIdentity"] == ""]
    assert released and released[0]["leaseDurationSeconds"] == 1  # as client-go's ReleaseOnCancel
    assert leader_of([new]) is new
    assert kube.leases.get("kube-system", "cgpu-extender")["spec"]["holderIdentity"] == new.identity
    assert new.leadership.transitions() == {"standby": 0, "catching-up": 1, "leader": 1}


def test_a_leader_that_cannot_renew_stops_before_the_standby_takes_over(kube, replicas):
    kube.create("nodes", node("gpu-a", "cgpu", gpus=1, gib=15))
    a, b = replicas("a", "b")
    old = leader_of([a, b])
    new = b if old is a else a
    with Overlap([a, b]) as overlap:
        kube.leases.refuse.add(old.identity)  # its renewals fail from now on
        cut = time.monotonic()
        wait_until(lambda: not old.serving(), timeout=5, what="the cut-off leader to stop")
        stopped = time.monotonic() - cut
        assert leader_of([a, b]) is new
        kube.leases.refuse.clear()
        time.sleep(3 * FAST.retry_period)  # the old leader can reach the API again: it stays a standby
    assert overlap.samples > 100 and overlap.both == 0
    assert stopped <= FAST.renew_deadline + 0.5  # (generous for a loaded CI machine; the lease is 1 s)
    assert old.role() == "standby" and old.leadership.status()["leader"] == new.identity
    status, reply = old.filter(pod("late", mem=1), ["gpu-a"])
    assert status == 503 and new.identity in reply["Error"]


def test_a_leader_whose_election_thread_hangs_stops_on_time_all_the_same(kube, replicas):
    kube.create("nodes", node("gpu-a", "cgpu", gpus=1, gib=15))
    a, b = replicas("a", "b")
    old = leader_of([a, b])
    new = b if old is a else a
    with Overlap([a, b]) as overlap:
        release = old.stall_renewals()
        wait_until(new.serving, what="the standby to take over")
        assert leader_of([a, b]) is new
        assert old.role() == "standby"  # as it stands now, though its thread has not noticed
        assert old.leadership.holding()
        release.set()
        wait_until(lambda: not old.leadership.holding(), what="the old leader's thread to step down")
    assert overlap.samples > 100 and overlap.both == 0
    assert old.leadership.status()["leader"] == new.identity


def test_a_bind_that_waited_while_the_lease_was_lost_is_never_sent(kube, replicas):
    """The bind passed the check at its start, then waited on the API server (reading a pod
    filter never showed it) while the leader's renewals failed: the check right before the
    Binding stops it."""
    kube.create("nodes", node("gpu-a", "cgpu", gpus=1, gib=15))
    p = kube.create("pods", pod("p", mem=2))
    a, b = replicas("a", "b")
    old = leader_of([a, b])
    kube.pod_delays["GET"] = 3 * FAST.renew_deadline
    kube.leases.refuse.add(old.identity)
    status, reply = old.bind(p, "gpu-a")
    assert status == 200 and "was not sent" in reply["Error"]
    assert bindings(kube) == []
    assert old.extender.ledger.allocation(p["metadata"]["uid"]) is None  # its reservation was released
    assert kube.get("pods", "p")["spec"].get("nodeName") is None
    assert old.extender.outcomes.binds()["not_leader"] == 1


def test_the_check_is_made_right_before_the_binding_is_sent(kube, replicas):
    """A bind that must first clear stale allocation keys: the annotation patch goes out while
    the lease is held and takes long; by its reply the lease is lost: the Binding is not sent."""
    kube.create("nodes", node("gpu-a", "cgpu", gpus=2, gib=15))
    stale = pod("p", mem=2)
    stale["metadata"]["annotations"] = {"gpushare.alibabacloud.com/core-percentage": '{"0":{"0":30}}'}
    p = kube.create("pods", stale)
    a, b = replicas("a", "b")
    old = leader_of([a, b])
    assert old.filter(p, ["gpu-a"])[1]["NodeNames"] == ["gpu-a"]
    kube.pod_delays["PATCH"] = 3 * FAST.renew_deadline
    kube.leases.refuse.add(old.identity)
    status, reply = old.bind(p, "gpu-a")
    assert ("PATCH", "/api/v1/namespaces/default/pods/p") in kube.requests  # that write was sent in time
    assert status == 200 and "was not sent" in reply["Error"]
    assert bindings(kube) == []


def test_a_new_leader_answers_no_verb_before_it_holds_the_old_leaders_binds(kube, replicas):
    """The standby's watch lags (its events held back); the old leader binds 10 of a GPU's 15 GiB and
    stops. The new leader must not place another 10 GiB pod on that GPU."""
    kube.create("nodes", node("gpu-a", "cgpu", gpus=1, gib=15))
    first, second = kube.create("pods", pod("first", mem=10)), kube.create("pods", pod("second", mem=10))
    a, b = replicas("a", "b")
    old = leader_of([a, b])
    new = b if old is a else a
    wait_until(new.extender.ready, what="the standby's sync")
    kube.hold_watches = True
    assert old.filter(first, ["gpu-a"])[1]["NodeNames"] == ["gpu-a"]
    assert old.bind(first, "gpu-a") == (200, {"Error": ""})
    assert new.extender.ledger.allocation(first["metadata"]["uid"]) is None  # it has not seen the bind
    old.stop()
    wait_until(lambda: new.role() != "standby", what="the new leader to take the lease")
    replies = []
    while True:
        status, reply = new.filter(second, ["gpu-a"])
        replies.append(status)
        if status == 200:
            break
        assert status == 503 and "catching up" in reply["Error"]
        time.sleep(0.02)
    assert replies[0] == 503  # it answered nothing before it had caught up
    assert reply["NodeNames"] == [] and "gpu-a" in reply["FailedNodes"]
    assert new.extender.ledger.allocation(first["metadata"]["uid"]).node == "gpu-a"
    kube.hold_watches = False


def test_in_a_busy_cluster_the_watch_catches_up_without_listing_again(kube, replicas):
    kube.create("nodes", node("gpu-a", "cgpu", gpus=1, gib=15))
    busy = kube.create("pods", pod("busy", mem=1))
    a, b = replicas("a", "b")
    old = leader_of([a, b])
    new = b if old is a else a
    wait_until(new.extender.ready, what="the standby's sync")
    lists = new.cluster.pods.stats["lists"]
    old.stop()
    deadline = time.monotonic() + 10
    while not new.serving() and time.monotonic() < deadline:  # pod events flow past the new lease's version
        busy["metadata"].setdefault("labels", {})["tick"] = str(time.monotonic_ns())
        kube.update("pods", busy)
        time.sleep(0.05)
    assert new.serving()
    assert new.cluster.pods.stats["lists"] == lists
