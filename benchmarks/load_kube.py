"""The extender in kube mode, as deployed, against a fake API server: CPU per scheduled pod.

``cgpu-extender serve --kubeconfig`` (one process, as the manifests run it) on
``tests/fakekube.py`` serving real Kubernetes JSON: ``--nodes`` nodes of the
load benchmark's synthetic cluster (``benchmarks.synthetic``, with its bound
pods), then ``--pods`` pending pods created in a burst once the extender is
synced (each an ADDED watch event). kube-scheduler is emulated as
``benchmarks.load`` does: per pod, filter over every node, prioritize over the
ones that passed, bind to the best; the extender's bind patches the annotations
and creates the Binding on the API server (MODIFIED event), and the driver,
as a kubelet would, then marks the pod Running (another MODIFIED event).

Printed: the extender process's CPU time per scheduled pod (from /proc, user +
system, every thread), split by running the steps one after another for all pods and taking
the process's CPU across each: the watch decoding the burst of new pods; filter
and prioritize; bind (its patch and Binding, and the watch events they cause);
the watch decoding the pods turning Running. Then the pods/s one process can
sustain at that cost (1 / CPU per pod), and RSS.

    python -m benchmarks.load_kube --nodes 1000 5000 --pods 1000
"""

from __future__ import annotations

import argparse
import http.client
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fakekube import FakeKube  # noqa: E402  (the tests' fake API server, run here in the driver)

from benchmarks.slowclients import free_port, wait_ready  # noqa: E402
from benchmarks.synthetic import cluster_objects, pending_pod  # noqa: E402

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{{name: fake, cluster: {{server: "{url}"}}}}]
users: [{{name: fake, user: {{token: x}}}}]
contexts: [{{name: fake, context: {{cluster: fake, user: fake}}}}]
current-context: fake
"""


def _py_spy() -> str:
    """py-spy beside this interpreter (the venv's bench extra), else from PATH."""
    here = Path(sys.executable).with_name("py-spy")
    return str(here) if here.exists() else "py-spy"


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of the process, in ns resolution (``schedstat``; ``stat`` counts
    10 ms ticks, too coarse for the watch's share)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as stat:
                total += int(stat.read().split()[0])
        except OSError:  # the thread ended meanwhile
            pass
    return total / 1e9


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        return int(status.read().split("VmRSS:")[1].split()[0]) / 1024


def post(connection, path: str, body: bytes) -> tuple[dict | list, float]:
    connection.request("POST", path, body, {"Content-Type": "application/json"})
    reply = connection.getresponse()
    data = reply.read()
    timing = reply.getheader("Server-Timing", "app;dur=0").split("dur=")[1]
    return orjson.loads(data), float(timing)


def measure(nodes: int, pods: int, seed: int, profile: tuple[str, str] | None = None) -> dict:
    """The figures of one run; ``profile``: ``(phase prefix, file)`` for py-spy's raw samples."""
    kube = FakeKube().start()
    objects = cluster_objects(nodes, seed=seed)
    for obj in objects:
        kube.create("nodes" if obj["kind"] == "Node" else "pods", obj)
    names = [o["metadata"]["name"] for o in objects if o["kind"] == "Node"]
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "kubeconfig"
        config.write_text(KUBECONFIG.format(url=kube.url))
        port = free_port()
        env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
        server = subprocess.Popen([sys.executable, "-m", "extender", "serve", "--kubeconfig", str(config),
                                   "--port", str(port), "--log-level", "warning"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            started = time.monotonic()
            wait_ready(port, timeout=600)
            startup = time.monotonic() - started
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            base = "/cgpu-scheduler"
            rss0 = rss_mb(server.pid)
            phases = {}

            def phase(name, work, settle=2.0):
                spy = None
                if profile and name.startswith(profile[0]):  # py-spy (the bench extra) on that phase
                    spy = subprocess.Popen([_py_spy(), "record", "-p", str(server.pid), "-o", profile[1], "-f", "raw",
                                            "-r", "500", "--nonblocking", "--gil"], stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL)
                    time.sleep(1.0)
                before, clock = cpu_seconds(server.pid), time.monotonic()
                result = work()
                if spy is not None:
                    spy.send_signal(2)
                    spy.wait(30)
                time.sleep(settle)  # the watch events it caused
                phases[name] = (cpu_seconds(server.pid) - before, time.monotonic() - clock - settle)
                return result

            burst = phase("watch: pods created", lambda: [kube.create("pods", pending_pod(i, seed))
                                                           for i in range(pods)])
            names_json = orjson.dumps(names)

            def decide():
                chosen, taken = [], set()
                for pod in burst:
                    body = b'{"Pod":' + orjson.dumps(pod) + b',"Nodes":null,"NodeNames":' + names_json + b"}"
                    passed = post(connection, f"{base}/filter", body)[0].get("NodeNames") or []
                    if len(passed) > 1:
                        scores = post(connection, f"{base}/prioritize", b'{"Pod":' + orjson.dumps(pod) +
                                      b',"Nodes":null,"NodeNames":' + orjson.dumps(passed) + b"}")[0]
                        # the best node no earlier pod took: decided before any bind, pods must not collide
                        ranked = sorted(scores, key=lambda s: -s["Score"])
                        passed = [next((s["Host"] for s in ranked if s["Host"] not in taken), ranked[0]["Host"])]
                    if passed:
                        taken.add(passed[0])
                        chosen.append((pod, passed[0]))
                return chosen

            chosen = phase("filter + prioritize", decide, settle=0.0)

            def bind_all():
                done = []
                for pod, node in chosen:
                    meta = pod["metadata"]
                    reply = post(connection, f"{base}/bind", orjson.dumps({
                        "PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"],
                        "Node": node}))[0]
                    if not reply["Error"]:
                        done.append(meta)
                return done

            bound = phase("bind (Binding, Event) + its watch events", bind_all)
            phase("watch: pods Running", lambda: [kube.set_pod_phase(m["name"], "Running", m["namespace"])
                                                  for m in bound])
            cpu = sum(c for c, _ in phases.values())
            n = max(len(bound), 1)
            return {"nodes": nodes, "pods": pods, "bound": len(bound), "startup_s": round(startup, 1),
                    "cpu_ms_per_pod": round(1000 * cpu / n, 2),
                    "phases_ms_per_pod": {k: round(1000 * c / n, 2) for k, (c, _) in phases.items()},
                    "ceiling_pods_per_s": round(len(bound) / cpu) if cpu else None,
                    "rss_mb": [round(rss0), round(rss_mb(server.pid))]}
        finally:
            server.terminate()
            server.wait(15)
            kube.stop()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", nargs=2, metavar=("PHASE", "FILE"),
                        help="py-spy's raw samples of the phase whose name starts with PHASE (bind, filter, watch) "
                             "in FILE")
    args = parser.parse_args(argv)
    for nodes in args.nodes:
        r = measure(nodes, args.pods, args.seed, args.profile)
        print(f"{r['nodes']} nodes, {r['bound']} of {r['pods']} pods bound: {r['cpu_ms_per_pod']} CPU-ms per pod, "
              f"ceiling {r['ceiling_pods_per_s']} pods/s; RSS {r['rss_mb'][0]} → {r['rss_mb'][1]} MB; "
              f"startup {r['startup_s']} s", flush=True)
        for name, ms in r["phases_ms_per_pod"].items():
            print(f"    {name:<45} {ms:>7} ms/pod")
    return 0


if __name__ == "__main__":
    sys.exit(main())
