"""The API requests leader election sends are the ones its RBAC grants, no more: in the extender's
namespace ``create`` on leases and ``get``/``update`` on the Lease it names; following kube-scheduler,
``get`` on ``kube-system/kube-scheduler`` only (read every retry period, never watched). Anything
else it sends (the catch-up's consistent LIST of pods) is in the cluster-wide role of
manifests/rbac.yaml."""

from dataclasses import replace

from extender.cluster.kube.follow import this_host
from fakekube import wait_until
from fakeleases import LEASE_PATH
from replicas import FAST, Replica, leader_of
from test_kube_rbac import granted, needed
from test_leader_follow import FOLLOW, Scheduler

ELECTION = FAST  # kube-system/cgpu-extender
VERBS = {"GET": "get", "PUT": "update", "POST": "create"}


def lease_requests(kube) -> set:
    """{(namespace, verb, lease name or None for a create)} of every Lease request sent."""
    sent = set()
    for method, path in kube.requests:
        if (match := LEASE_PATH.match(path)) is not None:
            sent.add((match["ns"], VERBS.get(method, method), match["name"]))
    return sent


def other_requests(kube) -> list:
    return [(m, p) for m, p in kube.requests if not LEASE_PATH.match(p)]


def test_election_asks_for_exactly_the_lease_rbac_of_the_contract(kube):
    a, b = Replica(kube, "a"), Replica(kube, "b")
    try:
        old = leader_of([a, b])
        new = b if old is a else a
        old.stop()  # releases: an update
        leader_of([new])
    finally:
        a.stop()
        b.stop()
    assert lease_requests(kube) == {("kube-system", "create", None), ("kube-system", "get", "cgpu-extender"),
                                    ("kube-system", "update", "cgpu-extender")}
    cluster, kube_system = granted()
    core = {need for method, path in other_requests(kube) for need in needed(method, path)}
    assert all((resource, verb) in cluster or (ns == "kube-system" and (resource, verb) in kube_system)
               for ns, resource, verb in core), core
    assert ("GET", "/api/v1/pods") in other_requests(kube)  # the catch-up's consistent list, among the watches'


def test_following_reads_the_schedulers_lease_and_nothing_else_of_coordination(kube):
    scheduler = Scheduler(kube, this_host()).lead()
    sidecar = Replica(kube, "sidecar", replace(FOLLOW))
    try:
        wait_until(sidecar.serving, what="the sidecar to follow")
    finally:
        sidecar.stop()
        scheduler.stop()
    assert lease_requests(kube) == {("kube-system", "get", "kube-scheduler")}
    assert kube.leases.writes == []  # the scheduler's renewals are written by the test, not through the API
