"""Failover of two ``serve --leader-elect`` replicas in a burst of shared-GPU pods, on the fake API server.

What issue 32's "done means" asks of a real cluster, run against ``tests/fakekube.py``
(a process of its own would not change the timings, which the Lease sets): two
replicas, a "Service" that sends each request to a replica whose ``readyz`` was
200 at its last probe (every ``--probe`` seconds, as a kubelet readiness probe
with that period), and a kube-scheduler emulation that, pod after pod at
``--rate`` pods/s, filters and binds through that Service, retrying a pod
after ``--backoff`` seconds when a call fails. ``--fault-at`` seconds into the
burst the leader is

* ``kill``: SIGKILLed;
* ``stop``: SIGSTOPped, and SIGCONTed once the other replica has been Ready
  for ``--stopped-extra`` seconds (so, frozen for longer than its lease);
* ``term``: SIGTERMed (a drain, a rollout: it releases the Lease).

Printed: seconds from the signal to the other replica's ``readyz`` 200 (polled
every 0.1 s) and to the first bind through it, the longest time without a bind,
pods bound, the most GiB on one GPU (15 each: more would be a double allocation),
bound pods without allocation annotations, and replicas Ready at the end.

    python -m benchmarks.failover --fault kill stop term
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from builders import node, pod  # noqa: E402  (the tests' object builders)
from fakekube import FakeKube  # noqa: E402  (the tests' fake API server)

from benchmarks.slowclients import free_port  # noqa: E402

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{{name: fake, cluster: {{server: "{url}"}}}}]
users: [{{name: bench, user: {{token: x}}}}]
contexts: [{{name: fake, context: {{cluster: fake, user: bench}}}}]
current-context: fake
"""
ALLOCATION = "scheduler.framework.gpushare.allocation"


def request(port: int, method: str, path: str, body=None, timeout: float = 10.0):
    """``(status, JSON)``; ``(None, None)`` when the replica does not answer in time."""
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        data = json.dumps(body).encode() if body is not None else None
        connection.request(method, f"/cgpu-scheduler/{path}", data, {"Content-Type": "application/json"})
        reply = connection.getresponse()
        return reply.status, json.loads(reply.read() or b"null")
    except (OSError, ValueError):
        return None, None


class Replica:
    def __init__(self, name: str, kubeconfig: str, durations: list, log_dir: str):
        self.name, self.port = name, free_port()
        env = {**os.environ, "POD_NAME": name, "POD_NAMESPACE": "kube-system"}
        env.pop("KUBERNETES_SERVICE_HOST", None)
        self.log = open(os.path.join(log_dir, f"{name}.log"), "w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "extender", "serve", "--port", str(self.port), "--kubeconfig", kubeconfig,
             "--leader-elect", "--leader-elect-lease-duration", durations[0], "--leader-elect-renew-deadline",
             durations[1], "--leader-elect-retry-period", durations[2]],
            env=env, stdout=subprocess.DEVNULL, stderr=self.log)

    def ready(self) -> bool:
        return request(self.port, "GET", "readyz", timeout=0.5)[0] == 200


class Service:
    """Ready endpoints as a readiness probe of period ``probe`` sees them."""

    def __init__(self, replicas: list, probe: float):
        self.replicas, self.probe = replicas, probe
        self.endpoints: list = []
        self._stop = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.endpoints = [r for r in self.replicas if r.ready()]
            self._stop.wait(self.probe)

    def stop(self) -> None:
        self._stop.set()


def run(fault: str, args) -> dict:
    kube = FakeKube().start()
    for i in range(args.nodes):
        kube.create("nodes", node(f"gpu-{i:03d}", "cgpu", gpus=2, gib=15))
    capacity = args.nodes * 2 * (15 // args.gib)
    pods = [kube.create("pods", pod(f"p{i:04d}", mem=args.gib)) for i in range(int(capacity * 1.2))]
    names = [f"gpu-{i:03d}" for i in range(args.nodes)]
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = os.path.join(tmp, "kubeconfig")
        Path(kubeconfig).write_text(KUBECONFIG.format(url=kube.url))
        replicas = [Replica(f"replica-{x}", kubeconfig, args.durations, tmp) for x in "ab"]
        try:
            return drive(fault, args, kube, replicas, pods, names)
        finally:
            for replica in replicas:
                if replica.process.poll() is None:
                    replica.process.send_signal(signal.SIGCONT)
                    replica.process.kill()
                replica.process.wait(15)
            kube.stop()


def drive(fault: str, args, kube, replicas: list, pods: list, names: list) -> dict:
    deadline = time.monotonic() + 60
    while sum(r.ready() for r in replicas) != 1:
        if time.monotonic() > deadline:
            raise RuntimeError("no replica became the leader within 60 s")
        time.sleep(0.1)
    service = Service(replicas, args.probe)
    leader = next(r for r in replicas if r.ready())
    other = next(r for r in replicas if r is not leader)
    queue, binds, unschedulable = list(pods), [], 0
    began = time.monotonic()
    signalled = other_ready = resumed = None
    while queue and time.monotonic() - began < args.max_seconds:
        now = time.monotonic()
        if signalled is None and now - began >= args.fault_at:
            leader.process.send_signal({"kill": signal.SIGKILL, "stop": signal.SIGSTOP, "term": signal.SIGTERM}[fault])
            signalled = now
        if signalled is not None and other_ready is None and other.ready():
            other_ready = time.monotonic()
        if (fault == "stop" and resumed is None and other_ready is not None
                and now - other_ready >= args.stopped_extra):
            leader.process.send_signal(signal.SIGCONT)
            resumed = now
        endpoints = service.endpoints
        if not endpoints:
            time.sleep(0.05)
            continue
        target, p = endpoints[0], queue.pop(0)
        meta = p["metadata"]
        status, reply = request(target.port, "POST", "filter", {"Pod": p, "Nodes": None, "NodeNames": names})
        if status == 200 and not reply.get("Error") and not reply["NodeNames"]:
            unschedulable += 1
            continue
        if status == 200 and not reply.get("Error"):
            status, reply = request(target.port, "POST", "bind", {
                "PodName": meta["name"], "PodNamespace": "default", "PodUID": meta["uid"],
                "Node": reply["NodeNames"][0]})
            if status == 200 and not reply["Error"]:
                binds.append((time.monotonic(), target.name))
                time.sleep(1 / args.rate)
                continue
        queue.append(p)  # failed: kube-scheduler retries the pod later
        time.sleep(args.backoff)
    service.stop()
    if fault == "stop" and resumed is None:
        leader.process.send_signal(signal.SIGCONT)
    time.sleep(3)  # the resumed replica reads the Lease and stands by
    used: dict = {}
    unannotated = 0
    for obj in kube.objects("pods"):
        if obj["spec"].get("nodeName"):
            annotations = obj["metadata"].get("annotations") or {}
            if ALLOCATION not in annotations:
                unannotated += 1
                continue
            for gpus in json.loads(annotations[ALLOCATION]).values():
                for gpu, gib in gpus.items():
                    key = (obj["spec"]["nodeName"], gpu)
                    used[key] = used.get(key, 0) + gib
    times = [began] + [t for t, _ in binds]
    after = [t for t, name in binds if name == other.name and signalled and t > signalled]
    return {"fault": fault, "to_ready": round(other_ready - signalled, 2) if other_ready else None,
            "to_first_bind": round(after[0] - signalled, 2) if after else None,
            "longest_gap": round(max(b - a for a, b in zip(times, times[1:])), 2) if len(times) > 1 else None,
            "bound": len(binds), "left": len(queue), "unschedulable": unschedulable,
            "most_gib_on_a_gpu": max(used.values(), default=0), "unannotated": unannotated,
            "ready_at_end": sum(r.process.poll() is None and r.ready() for r in replicas)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fault", nargs="+", default=["kill", "stop", "term"], choices=["kill", "stop", "term"])
    parser.add_argument("--durations", nargs=3, default=["8s", "5s", "1s"], metavar=("LEASE", "RENEW", "RETRY"),
                        help="--leader-elect-lease-duration, -renew-deadline, -retry-period (default: the issue's)")
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--gib", type=int, default=5, help="GPU memory per pod (GiB of a 15 GiB GPU)")
    parser.add_argument("--rate", type=float, default=10.0, help="pods per second while binds succeed")
    parser.add_argument("--fault-at", type=float, default=3.0, help="seconds into the burst")
    parser.add_argument("--probe", type=float, default=1.0, help="readiness probe period of the Service emulation")
    parser.add_argument("--backoff", type=float, default=0.5, help="seconds before a failed pod is tried again")
    parser.add_argument("--stopped-extra", type=float, default=2.0)
    parser.add_argument("--max-seconds", type=float, default=90.0)
    args = parser.parse_args(argv)
    print(f"lease {args.durations[0]}, renew deadline {args.durations[1]}, retry period {args.durations[2]}; "
          f"{args.nodes} nodes x 2 GPUs x 15 GiB, pods of {args.gib} GiB, {args.rate:g} pods/s, "
          f"probe every {args.probe:g} s")
    for fault in args.fault:
        print(json.dumps(run(fault, args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
