"""The extender in kube mode, as deployed, against a fake API server: CPU per scheduled pod.

``cgpu-extender serve --kubeconfig`` (one process, as the manifests run it) on
``tests/fakekube.py`` serving real Kubernetes JSON from a process of its own
(:class:`KubeProcess`): ``--nodes`` nodes of the
load benchmark's synthetic cluster (``benchmarks.synthetic``, with its bound
pods), then ``--pods`` pending pods created in a burst once the extender is
synced (each an ADDED watch event). kube-scheduler is emulated as
``benchmarks.load`` does: per pod, filter over every node, prioritize over the
ones that passed, bind to the best; the extender's bind creates the Binding,
which carries the annotations, and an Event (MODIFIED watch event), and the driver,
as a kubelet would, then marks the pod Running (another MODIFIED event).

Printed: the extender process's CPU time per scheduled pod (from /proc, user +
system, every thread), split by running the steps one after another for all pods and taking
the process's CPU across each: the watch decoding the burst of new pods; filter
and prioritize; bind (its Binding and Event, and the watch events they cause);
the watch decoding the pods turning Running. Then the pods/s one process can
sustain at that cost (1 / CPU per pod), and RSS.

    python -m benchmarks.load_kube --nodes 1000 5000 --pods 1000

With ``--watch-events N`` it measures instead the watch alone (:func:`measure_watch`):

    python -m benchmarks.load_kube --nodes 1000 5000 --watch-events 20000

With ``--pipelined OWN_MS ...`` it measures instead the rate a paced
kube-scheduler keeps with binds running concurrently (:func:`measure_pipelined`):

    python -m benchmarks.load_kube --nodes 500 --pods 1000 --pipelined 26 10

``--by-thread`` adds the CPU per pod of each of the extender's threads (the event loop, the
request threads binds run on, the watches, the events sender), named by ``py-spy dump``.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import http.client
import multiprocessing
import operator
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fakekube import FakeKube  # noqa: E402  (the tests' fake API server, run here in the driver)

from benchmarks import processes  # noqa: E402
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


def thread_cpu(pid: int) -> dict[str, int]:
    """CPU nanoseconds of each live thread of the served extender (gunicorn's arbiter and its
    worker), by thread id (``schedstat``; ``stat`` counts 10 ms ticks, too coarse for the watch's share)."""
    spent = {}
    for process in processes.tree(pid):
        try:
            tasks = os.listdir(f"/proc/{process}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{process}/task/{task}/schedstat") as stat:
                    spent[task] = int(stat.read().split()[0])
            except OSError:  # the thread ended meanwhile
                pass
    return spent


def cpu_seconds(pid: int) -> float:
    """CPU time of every live thread of the process."""
    return sum(thread_cpu(pid).values()) / 1e9


def thread_names(pid: int) -> dict[str, str]:
    """Python's name of each thread of the process, by thread id (:func:`names_in_dump` of
    ``py-spy dump``); empty without py-spy (the bench extra)."""
    names = {}
    for process in processes.tree(pid):
        try:
            names.update(names_in_dump(subprocess.run([_py_spy(), "dump", "--pid", str(process)],
                                                      capture_output=True, text=True, timeout=60).stdout))
        except (OSError, subprocess.SubprocessError):
            pass
    return names


def names_in_dump(dump: str) -> dict[str, str]:
    """Thread id → name from ``py-spy dump``'s lines ``Thread 3611 (idle): "request_3"``; a
    pool's numbered threads share one name (``request_3`` → ``request``)."""
    names = {}
    for line in dump.splitlines():
        if line.startswith("Thread ") and line.count('"') >= 2:
            name = line.split('"')[1]
            names[line.split()[1]] = name.rstrip("0123456789").rstrip("_") if name[-1:].isdigit() else name
    return names


def spent_between(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """CPU nanoseconds each thread alive at ``after`` spent since ``before`` (:func:`thread_cpu`
    readings; a thread started meanwhile counts from 0, one that ended is not seen)."""
    return {tid: ns - before.get(tid, 0) for tid, ns in after.items()}


def by_thread(pid: int, spent: dict[str, int], per: int) -> dict[str, float]:
    """CPU-ms per ``per`` (scheduled pods) of each named thread, from :func:`spent_between`'s
    nanoseconds by thread id, largest first; threads py-spy cannot name are ``thread <id>``."""
    names, ms = thread_names(pid), {}
    for tid, ns in spent.items():
        label = names.get(tid, f"thread {tid}")
        ms[label] = ms.get(label, 0.0) + ns / 1e6 / max(per, 1)
    return {k: round(v, 3) for k, v in sorted(ms.items(), key=lambda kv: -kv[1])}


def post(connection, path: str, body: bytes) -> tuple[dict | list, float]:
    connection.request("POST", path, body, {"Content-Type": "application/json"})
    reply = connection.getresponse()
    data = reply.read()
    timing = reply.getheader("Server-Timing", "app;dur=0").split("dur=")[1]
    return orjson.loads(data), float(timing)


class KubeProcess:
    """The fake API server in a process of its own: its work (stdlib JSON for every write and
    every watch event) then neither shares the driver's GIL nor delays the emulated scheduler's
    calls, as kube-apiserver shares nothing with kube-scheduler. Its :class:`FakeKube` methods
    are called through a pipe (``kube.create(kind, obj)``, ...); ``load(objects)`` creates many at
    once and ``set(name, value)`` sets an attribute (``write_delay``)."""

    def __init__(self):
        context = multiprocessing.get_context("spawn")
        self._pipe, theirs = context.Pipe()
        self._process = context.Process(target=_serve_kube, args=(theirs,), daemon=True)
        self._process.start()
        self.url = self._receive()

    def _receive(self):
        """The child's next message; an error, not a hang, if it died (e.g. a caller's script
        without an ``if __name__ == "__main__"`` guard, which ``spawn`` needs)."""
        while True:
            try:
                if self._pipe.poll(0.5):
                    return self._pipe.recv()
            except (EOFError, OSError):  # its end of the pipe closed: it is ending
                self._process.join(5)
            if not self._process.is_alive():
                raise RuntimeError(f"the fake API server's process ended (exit code {self._process.exitcode})")

    def __getattr__(self, method: str):
        def call(*args):
            with contextlib.suppress(OSError):  # a child that is gone: _receive says so
                self._pipe.send((method, args))
            ok, value = self._receive()
            if not ok:
                raise RuntimeError(f"fake API server: {method}: {value}")
            return value
        return call

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self._pipe.send(None)
        self._process.join(15)
        if self._process.is_alive():
            self._process.kill()


def _serve_kube(pipe) -> None:
    """:class:`KubeProcess`'s child: a FakeKube answering the parent's calls until told to stop."""
    kube = FakeKube().start()

    def load(objects: list) -> None:
        for obj in objects:
            kube.create("nodes" if obj["kind"] == "Node" else "pods", obj)

    extra = {"load": load, "set": lambda name, value: setattr(kube, name, value)}
    pipe.send(kube.url)
    while (message := pipe.recv()) is not None:
        method, args = message
        try:
            pipe.send((True, (extra.get(method) or getattr(kube, method))(*args)))
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises it
            pipe.send((False, f"{type(exc).__name__}: {exc}"))
    kube.stop()


@contextlib.contextmanager
def served(nodes: int, seed: int, write_delay: float = 0.0):
    """``(kube, server process, port, node names, startup seconds)``: the fake API server with the
    synthetic cluster (a :class:`KubeProcess`), and the extender serving it, synced."""
    kube = KubeProcess()
    objects = cluster_objects(nodes, seed=seed)
    kube.load(objects)
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
            wait_ready(port, timeout=600, process=server)
            kube.set("write_delay", write_delay)
            yield kube, server, port, names, time.monotonic() - started
        finally:
            server.terminate()
            server.wait(15)
            kube.stop()


def filter_body(pod: dict, names_json: bytes) -> bytes:
    return b'{"Pod":' + orjson.dumps(pod) + b',"Nodes":null,"NodeNames":' + names_json + b"}"


_score = operator.itemgetter("Score")


def choose(connection, base: str, pod: dict, names_json: bytes, taken: set, spent: list | None = None) -> str | None:
    """kube-scheduler's cycle for one pod: filter, prioritize, the best node no earlier pod took
    (decided before any bind, so pods do not collide). The server's own time (``Server-Timing``,
    ms) of the calls is appended to ``spent`` when given."""
    answer, server_ms = post(connection, f"{base}/filter", filter_body(pod, names_json))
    passed = answer.get("NodeNames") or []
    if len(passed) > 1:
        scores, more = post(connection, f"{base}/prioritize", filter_body(pod, orjson.dumps(passed)))
        server_ms += more
        # the first best score, as a stable sort would rank it, in one pass (kube-scheduler's
        # selectHost is one pass too); a node an earlier pod took only if every node was taken
        free = [s for s in scores if s["Host"] not in taken] or scores
        passed = [max(free, key=_score)["Host"]]
    if spent is not None:
        spent.append(server_ms)
    if passed:
        taken.add(passed[0])
        return passed[0]
    return None


def bind_body(pod: dict, node: str) -> bytes:
    meta = pod["metadata"]
    return orjson.dumps({"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"],
                         "Node": node})


def measure(nodes: int, pods: int, seed: int, profile: tuple[str, str] | None = None) -> dict:
    """The figures of one run; ``profile``: ``(phase prefix, file)`` for py-spy's raw samples."""
    with served(nodes, seed) as (kube, server, port, names, startup):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        base = "/cgpu-scheduler"
        rss0 = processes.rss_mb(server.pid)
        phases = {}

        def phase(name, work, settle=2.0):
            spy = None
            if profile and name.startswith(profile[0]):  # py-spy (the bench extra) on that phase
                spy = subprocess.Popen([_py_spy(), "record", "-p", str(processes.worker(server.pid)), "-o", profile[1], "-f", "raw",
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
            taken = set()
            return [(pod, node) for pod in burst if (node := choose(connection, base, pod, names_json, taken))]

        chosen = phase("filter + prioritize", decide, settle=0.0)

        def bind_all():
            return [pod["metadata"] for pod, node in chosen
                    if not post(connection, f"{base}/bind", bind_body(pod, node))[0]["Error"]]

        bound = phase("bind (Binding, Event) + its watch events", bind_all)
        phase("watch: pods Running", lambda: [kube.set_pod_phase(m["name"], "Running", m["namespace"])
                                              for m in bound])
        cpu = sum(c for c, _ in phases.values())
        n = max(len(bound), 1)
        return {"nodes": nodes, "pods": pods, "bound": len(bound), "startup_s": round(startup, 1),
                "cpu_ms_per_pod": round(1000 * cpu / n, 2),
                "phases_ms_per_pod": {k: round(1000 * c / n, 2) for k, (c, _) in phases.items()},
                "ceiling_pods_per_s": round(len(bound) / cpu) if cpu else None,
                "rss_mb": [round(rss0), round(processes.rss_mb(server.pid))]}



def measure_pipelined(nodes: int, pods: int, seed: int, own_ms: float, write_ms: float,
                      binders: int = 16, split: bool = False) -> dict:
    """kube-scheduler's shape, paced: per pod its own work (``own_ms``, slept: the scheduler's
    plugins, in another process) then the extender's filter and prioritize, one pod after
    another, while the binds of earlier pods run concurrently (``binders`` at once, as its
    binding goroutines), the API server taking ``write_ms`` per write. The rate with the
    extender is measured; alone, the same loop would have taken its time less the calls'.
    ``split``: the extender's CPU per pod by thread too (:func:`by_thread`)."""
    with served(nodes, seed, write_delay=write_ms / 1000) as (kube, server, port, names, _):
        base = "/cgpu-scheduler"
        burst = [kube.create("pods", pending_pod(i, seed)) for i in range(pods)]
        time.sleep(2.0)  # the watch has seen them
        names_json, taken, local = orjson.dumps(names), set(), threading.local()

        def bind(pod, node):
            if not hasattr(local, "connection"):
                local.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            started = time.perf_counter()
            error = post(local.connection, f"{base}/bind", bind_body(pod, node))[0]["Error"]
            return not error, time.perf_counter() - started

        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        calls, handled, binds = [], [], []
        threads0, clock = thread_cpu(server.pid), time.monotonic()
        with ThreadPoolExecutor(binders) as pool:
            for pod in burst:
                time.sleep(own_ms / 1000)
                started = time.perf_counter()
                node = choose(connection, base, pod, names_json, taken, handled)
                calls.append(time.perf_counter() - started)
                if node is not None:
                    binds.append(pool.submit(bind, pod, node))
            results = [b.result() for b in binds]
        wall = time.monotonic() - clock
        spent = spent_between(threads0, thread_cpu(server.pid))
        cpu = sum(spent.values()) / 1e9
        bound = sum(ok for ok, _ in results)
        alone = len(calls) / (wall - sum(calls))  # the same loop without the extender's calls
        return {"nodes": nodes, "pods": pods, "bound": bound, "own_ms": own_ms, "write_ms": write_ms,
                "calls_ms": [round(1000 * float(np.percentile(calls, q)), 2) for q in (50, 99)],
                "handled_ms": [round(float(np.percentile(handled, q)), 2) for q in (50, 99)],
                "bind_ms": [round(1000 * float(np.percentile([t for _, t in results], q)), 2) for q in (50, 99)],
                "pods_per_s": round(len(calls) / wall, 1), "alone_pods_per_s": round(alone, 1),
                "cpu_ms_per_pod": round(1000 * cpu / max(bound, 1), 2),
                "threads_ms_per_pod": by_thread(server.pid, spent, bound) if split else {}}


def watched_events(port: int) -> float:
    """``cgpu_watch_events_total`` of pods, from the extender's metrics."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", "/cgpu-scheduler/metrics")
    for line in connection.getresponse().read().decode().splitlines():
        if line.startswith("cgpu_watch_events_total") and 'resource="pods"' in line:
            return float(line.rsplit(" ", 1)[1])
    raise RuntimeError("no cgpu_watch_events_total for pods in the metrics")


def measure_watch(nodes: int, events: int, seed: int) -> dict:
    """A burst of ``events`` status changes (MODIFIED, a new Ready condition time) to the bound
    pods, round-robin, written at once: the extender's CPU per event and the wall time until its
    watch has applied them all (a rate the fake API server's own serializing, in its process
    on the other core, may bound first). The end is seen by polling the extender's
    metrics every 50 ms; the polls' own CPU (a scrape's, measured before) is subtracted."""
    with served(nodes, seed) as (kube, server, port, _, _):
        bound = [p for p in kube.objects("pods") if (p.get("spec") or {}).get("nodeName")]
        burst = []
        for i in range(events):
            pod = copy.deepcopy(bound[i % len(bound)])
            pod.setdefault("status", {})["conditions"] = [
                {"type": "Ready", "status": "True", "lastTransitionTime": f"2026-11-26T00:{i // 60 % 60:02d}:"
                                                                          f"{i % 60:02d}Z"}]
            burst.append(pod)
        # the polls below are metrics scrapes, dear at 5,000 nodes: their CPU, measured first, is taken off
        cpu0 = cpu_seconds(server.pid)
        for _ in range(10):
            seen = watched_events(port)
        per_scrape = (cpu_seconds(server.pid) - cpu0) / 10
        polls, cpu0, clock = 0, cpu_seconds(server.pid), time.monotonic()
        kube.update_many("pods", burst)
        while watched_events(port) < seen + events:
            polls += 1
            time.sleep(0.05)
        wall = time.monotonic() - clock
        cpu = cpu_seconds(server.pid) - cpu0 - (polls + 1) * per_scrape
        return {"nodes": nodes, "events": events, "bound_pods": len(bound), "scrape_ms": round(1000 * per_scrape, 1),
                "polls": polls + 1, "cpu_us_per_event": round(1e6 * cpu / events, 1),
                "events_per_cpu_s": round(events / cpu), "events_per_s": round(events / wall)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pipelined", type=float, nargs="+", metavar="OWN_MS",
                        help="instead: kube-scheduler's cycle paced at OWN_MS of its own work per pod, "
                             "binds concurrent (see measure_pipelined); 0: as fast as the driver goes")
    parser.add_argument("--write-ms", type=float, default=5.0, help="with --pipelined: ms per API write")
    parser.add_argument("--by-thread", action="store_true",
                        help="with --pipelined: the CPU per pod of each of the extender's threads (needs py-spy)")
    parser.add_argument("--watch-events", type=int, metavar="N",
                        help="instead: a burst of N pod status changes; the watch's CPU per event and rate")
    parser.add_argument("--profile", nargs=2, metavar=("PHASE", "FILE"),
                        help="py-spy's raw samples of the phase whose name starts with PHASE (bind, filter, watch) "
                             "in FILE")
    args = parser.parse_args(argv)
    if args.watch_events:
        for nodes in args.nodes:
            r = measure_watch(nodes, args.watch_events, args.seed)
            print(f"{nodes} nodes ({r['bound_pods']} bound pods), {r['events']} status changes: "
                  f"{r['cpu_us_per_event']} CPU-µs per event ({r['events_per_cpu_s']} events per CPU-second), "
                  f"all applied at {r['events_per_s']} events/s (less {r['polls']} metrics polls of "
                  f"{r['scrape_ms']} CPU-ms each)", flush=True)
        return 0
    if args.pipelined:
        for nodes in args.nodes:
            for own_ms in args.pipelined:
                r = measure_pipelined(nodes, args.pods, args.seed, own_ms, args.write_ms, split=args.by_thread)
                share = (f"({100 * r['pods_per_s'] / r['alone_pods_per_s']:.0f} %)" if own_ms else
                         "(as fast as this driver goes: the extender's ceiling is 1 / CPU per pod, "
                         f"{1000 / max(r['cpu_ms_per_pod'], 1e-9):.0f} pods/s a core)")
                alone = f"alone: {r['alone_pods_per_s']} pods/s" if own_ms else "no pause"
                print(f"{nodes} nodes, scheduler's own {own_ms} ms/pod ({alone}), "
                      f"API writes {args.write_ms} ms: {r['pods_per_s']} pods/s through the extender "
                      f"{share}, {r['bound']} of {r['pods']} "
                      f"bound; filter + prioritize p50 {r['calls_ms'][0]} / p99 {r['calls_ms'][1]} ms (the extender's "
                      f"handling p50 {r['handled_ms'][0]} / p99 {r['handled_ms'][1]} ms); bind p50 "
                      f"{r['bind_ms'][0]} / p99 {r['bind_ms'][1]} ms; {r['cpu_ms_per_pod']} CPU-ms per pod",
                      flush=True)
                for name, ms in r["threads_ms_per_pod"].items():
                    print(f"    {name:<45} {ms:>7} ms/pod")
        return 0
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
