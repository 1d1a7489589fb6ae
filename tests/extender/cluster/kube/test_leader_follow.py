"""`serve --leader-elect-follow`: the sidecar extender follows kube-scheduler's own Lease on the fake API
server. It answers only while the Lease names this host's scheduler and is being renewed, and a
sidecar whose scheduler has just become the leader catches up before its first verb."""

import threading
import time
import uuid
from dataclasses import replace

import pytest

from builders import node, pod
from extender.cluster.kube.follow import this_host
from extender.cluster.kube.lease import micro_time
from fakekube import wait_until
from replicas import FAST, Replica

FOLLOW = replace(FAST, name="kube-scheduler", namespace="kube-system", follow=True)


class Scheduler:
    """A kube-scheduler's leader election as the Lease shows it: ``<host>_<uuid>``, renewed every 0.1 s."""

    def __init__(self, kube, host: str):
        self.kube = kube
        self.identity = f"{host}_{uuid.uuid4()}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def lead(self) -> "Scheduler":
        self._renew()
        self._thread.start()
        return self

    def _renew(self) -> None:
        now = micro_time()
        self.kube.leases.put("kube-system", "kube-scheduler", {
            "holderIdentity": self.identity, "leaseDurationSeconds": 1, "acquireTime": now, "renewTime": now})

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self._renew()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


@pytest.fixture
def world(kube):
    made = []

    def sidecar(host=None):
        replica = Replica(kube, "sidecar", FOLLOW)
        if host is not None:
            replica.loop.host = host  # the sidecar of another host's scheduler
        made.append(replica)
        return replica

    def scheduler(host=None):
        made.append(Scheduler(kube, host or this_host()).lead())
        return made[-1]

    kube.create("nodes", node("gpu-a", "cgpu", gpus=1, gib=15))
    yield kube, sidecar, scheduler
    for thing in made:
        thing.stop()


def test_the_sidecar_answers_only_while_its_scheduler_holds_and_renews_the_lease(world):
    kube, sidecar, scheduler = world
    p = kube.create("pods", pod("p", mem=2))
    ours = scheduler()
    extender = sidecar()
    wait_until(extender.serving, what="the sidecar to follow its scheduler's lead")
    assert extender.get("readyz") == (200, {"ready": True, "role": "leader", "leader": ours.identity})
    assert extender.filter(p, ["gpu-a"])[1]["NodeNames"] == ["gpu-a"]
    ours.stop()  # the scheduler stops renewing (it died, or lost its connection)
    wait_until(lambda: not extender.serving(), timeout=5, what="the sidecar to stop")
    status, reply = extender.filter(p, ["gpu-a"])
    assert status == 503 and reply["Error"].startswith("this replica is ")
    theirs = scheduler("another-host")
    standby = f"this replica is a standby; the leader is {theirs.identity} (lease kube-system/kube-scheduler)"
    wait_until(lambda: extender.filter(p, ["gpu-a"]) == (503, {"Error": standby}), what="the sidecar to stand by")
    assert not extender.serving()


def test_a_lease_left_by_a_dead_scheduler_of_this_host_does_not_make_the_sidecar_answer(world):
    kube, sidecar, _ = world
    now = micro_time()
    kube.leases.put("kube-system", "kube-scheduler", {"holderIdentity": f"{this_host()}_{uuid.uuid4()}",
                                                      "leaseDurationSeconds": 1, "renewTime": now})
    extender = sidecar()
    wait_until(extender.extender.ready, what="the sync")
    deadline = time.monotonic() + 3 * FOLLOW.renew_deadline
    while time.monotonic() < deadline:
        assert not extender.serving() and extender.role() == "standby"
        time.sleep(0.02)


def test_a_sidecar_whose_scheduler_becomes_the_leader_catches_up_before_its_first_verb(world):
    kube, sidecar, scheduler = world
    first, second = kube.create("pods", pod("first", mem=10)), kube.create("pods", pod("second", mem=10))
    theirs = scheduler("another-host")
    old = sidecar("another-host")
    new = sidecar()
    wait_until(old.serving, what="the leading scheduler's sidecar to answer")
    wait_until(lambda: new.extender.ready() and new.role() == "standby", what="this host's sidecar to stand by")
    kube.hold_watches = True  # this host's sidecar will not see the next bind by its watch
    assert old.filter(first, ["gpu-a"])[1]["NodeNames"] == ["gpu-a"] and old.bind(first, "gpu-a")[1]["Error"] == ""
    theirs.stop()
    scheduler()  # this host's scheduler takes the lease over
    wait_until(lambda: new.role() != "standby", what="this host's sidecar to notice")
    statuses = []
    while True:
        status, reply = new.filter(second, ["gpu-a"])
        statuses.append(status)
        if status == 200:
            break
        assert status == 503 and "catching up" in reply["Error"]
        time.sleep(0.02)
    assert statuses[0] == 503 and not old.serving()
    assert reply["NodeNames"] == [] and "gpu-a" in reply["FailedNodes"]  # the first pod's 10 GiB are counted
    kube.hold_watches = False
