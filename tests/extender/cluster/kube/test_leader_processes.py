"""Two `cgpu-extender serve --leader-elect` processes on the fake API server: one ready, a SIGKILLed
leader replaced, a SIGSTOPped leader that resumes and never binds, a SIGTERMed leader that releases
its lease. Short durations: lease 1 s, renew deadline 600 ms, retry period 200 ms."""

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request

import pytest

from builders import node, pod
from extender.ledger import annotations as A
from fakekube import FakeKube, free_port, wait_until

ELECT = ["--leader-elect", "--leader-elect-lease-duration", "1s", "--leader-elect-renew-deadline", "600ms",
         "--leader-elect-retry-period", "200ms"]
KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{{name: fake, cluster: {{server: "{url}"}}}}]
users: [{{name: tester, user: {{token: not-checked}}}}]
contexts: [{{name: fake, context: {{cluster: fake, user: tester}}}}]
current-context: fake
"""


def call(url, payload=None, timeout=10):
    """``(status, JSON reply)``; ``(None, None)`` when nothing answers."""
    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
    except OSError:
        return None, None


class Replica:
    def __init__(self, name, kubeconfig, log_dir, *args):
        self.name = name
        self.base = f"http://127.0.0.1:{free_port()}/cgpu-scheduler"
        self.log = open(log_dir / f"{name}.log", "w")
        env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
        env.update(POD_NAME=name, POD_NAMESPACE="kube-system", HOME=str(log_dir))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "extender", "serve", "--port", self.base.split(":")[2].split("/")[0],
             "--kubeconfig", str(kubeconfig), *args], env=env, stdout=subprocess.DEVNULL, stderr=self.log)

    def ready(self) -> bool:
        return call(f"{self.base}/readyz")[0] == 200

    def live(self) -> bool:
        return call(f"{self.base}/healthz")[0] == 200

    def signal(self, signum) -> None:
        self.process.send_signal(signum)

    def filter(self, p, nodes=("gpu-a",)):
        return call(f"{self.base}/filter", {"Pod": p, "Nodes": None, "NodeNames": list(nodes)})

    def bind(self, p, node_name="gpu-a", timeout=10):
        meta = p["metadata"]
        return call(f"{self.base}/bind", {"PodName": meta["name"], "PodNamespace": meta["namespace"],
                                          "PodUID": meta["uid"], "Node": node_name}, timeout)


@pytest.fixture
def cluster(tmp_path):
    kube = FakeKube().start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG.format(url=kube.url))
    started = []

    def start(*names, args=ELECT):
        replicas = [Replica(name, kubeconfig, tmp_path, *args) for name in names]
        started.extend(replicas)
        for replica in replicas:
            wait_until(replica.live, timeout=30, what=f"{replica.name} to serve")
        return replicas

    yield kube, start
    for replica in started:
        if replica.process.poll() is None:
            replica.signal(signal.SIGCONT)
            replica.process.kill()
        replica.process.wait(15)
        replica.log.close()
    kube.stop()


def one_ready(replicas):
    """The one ready replica, once exactly one is."""
    def check():
        ready = [r for r in replicas if r.process.poll() is None and r.ready()]
        return ready[0] if len(ready) == 1 else None
    return wait_until(check, timeout=30, what="exactly one ready replica")


def holder(kube):
    return ((kube.leases.get("kube-system", "cgpu-extender") or {}).get("spec") or {}).get("holderIdentity")


def bindings(kube, name):
    return [path for method, path in kube.requests if method == "POST" and path == f"/api/v1/namespaces/default/"
            f"pods/{name}/binding"]


def gpu_memory(kube):
    """GPU index → GiB the bound pods' annotations hold on node gpu-a."""
    used = {}
    for p in kube.objects("pods"):
        if p["spec"].get("nodeName") == "gpu-a":
            for gpus in json.loads(p["metadata"]["annotations"][A.V2_ALLOCATION]).values():
                for gpu, gib in gpus.items():
                    used[gpu] = used.get(gpu, 0) + gib
    return used


def test_one_replica_is_ready_and_a_killed_leader_is_replaced(cluster):
    kube, start = cluster
    kube.create("nodes", node("gpu-a", "cgpu", gpus=2, gib=15))
    pods = [kube.create("pods", pod(f"p{i}", mem=4)) for i in range(8)]
    a, b = start("replica-a", "replica-b")
    leader = one_ready([a, b])
    standby = b if leader is a else a
    assert holder(kube).startswith(f"{leader.name}_")
    assert standby.live() and not standby.ready()
    status, reply = standby.filter(pods[0])
    assert status == 503 and reply["Error"].startswith(f"this replica is a standby; the leader is {leader.name}_")
    kept = http.client.HTTPConnection("127.0.0.1", int(standby.base.split(":")[2].split("/")[0]), timeout=10)
    kept.request("POST", "/cgpu-scheduler/filter", json.dumps({"Pod": pods[0], "NodeNames": ["gpu-a"]}),
                 {"Content-Type": "application/json"})
    refused = kept.getresponse()
    refused.read()
    # kube-scheduler's kept connection is closed: its next request goes through the Service to the leader
    assert refused.status == 503 and refused.getheader("Connection") == "close" and refused.will_close
    kept.close()
    for p in pods[:3]:
        assert leader.filter(p)[1]["NodeNames"] == ["gpu-a"] and leader.bind(p) == (200, {"Error": ""})
    leader.process.kill()
    assert one_ready([a, b]) is standby
    bound = 3
    for p in pods[3:]:
        status, reply = standby.filter(p)
        if reply["NodeNames"]:
            assert standby.bind(p) == (200, {"Error": ""})
            bound += 1
    assert bound == 6  # 3 pods of 4 GiB per 15 GiB GPU
    assert all(gib <= 15 for gib in gpu_memory(kube).values()) and sum(gpu_memory(kube).values()) == 24


def test_a_frozen_leader_that_resumes_never_binds(cluster):
    kube, start = cluster
    kube.create("nodes", node("gpu-a", "cgpu", gpus=1, gib=15))
    p = kube.create("pods", pod("p", mem=10))
    a, b = start("replica-a", "replica-b")
    frozen = one_ready([a, b])
    other = b if frozen is a else a
    assert frozen.filter(p)[1]["NodeNames"] == ["gpu-a"]
    frozen.signal(signal.SIGSTOP)
    replies = []
    queued = threading.Thread(target=lambda: replies.append(frozen.bind(p, timeout=60)))
    queued.start()  # the request waits in the frozen process's socket
    wait_until(other.ready, timeout=30, what="the other replica to take over")
    assert holder(kube).startswith(f"{other.name}_")
    frozen.signal(signal.SIGCONT)
    queued.join(60)
    status, reply = replies[0]
    assert status == 503 and ("no longer the leader" in reply["Error"] or "standby" in reply["Error"]), reply
    assert bindings(kube, "p") == []  # the queued bind never reached the API server
    assert one_ready([a, b]) is other
    wait_until(lambda: call(f"{frozen.base}/readyz")[1]["role"] == "standby", what="the resumed one to stand by")
    assert other.filter(p)[1]["NodeNames"] == ["gpu-a"] and other.bind(p) == (200, {"Error": ""})
    assert len(bindings(kube, "p")) == 1 and gpu_memory(kube) == {"0": 10}


def test_a_terminated_leader_releases_its_lease_so_the_standby_need_not_wait_it_out(cluster):
    kube, start = cluster
    kube.create("nodes", node("gpu-a", "cgpu", gpus=1, gib=15))
    slow = ["--leader-elect", "--leader-elect-lease-duration", "60s", "--leader-elect-renew-deadline", "40s",
            "--leader-elect-retry-period", "200ms"]
    a, b = start("replica-a", "replica-b", args=slow)
    leader = one_ready([a, b])
    standby = b if leader is a else a
    leader.signal(signal.SIGTERM)
    assert leader.process.wait(30) == 0
    released = [spec for method, _, _, spec in kube.leases.writes if method == "PUT" and not spec["holderIdentity"]]
    assert released and released[-1]["leaseDurationSeconds"] == 1
    wait_until(standby.ready, timeout=20, what="the standby to lead (a lease duration is 60 s)")
    assert holder(kube).startswith(f"{standby.name}_")
