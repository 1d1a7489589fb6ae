"""Load benchmark: drive the extender the way kube-scheduler does, at cluster scale.

For each cluster size it writes a synthetic cluster (:mod:`benchmarks.synthetic`),
starts :mod:`benchmarks.load_server` (the extender on its own server, as deployed,
plus a floor endpoint) and schedules pods one at a time: filter with every
node, prioritize with the nodes filter kept, then bind to a top-scored node.
Binds run on a pool of 4 threads and overlap the next pods' filters, as
kube-scheduler's binding goroutines do. The same bodies then go, through the
same driver doing the same work, to two endpoints that only decode them and
answer the bytes the extender answered (recorded by the driver): the *floor*,
on the verbs' own path, and the *echo*, a bare Flask route on the same
gunicorn worker (what the extender would cost at least if Flask served the verbs).

Reported per verb: p50/p99 of the server's own time (``Server-Timing``) and of
the client-side round trip; cycles per second; the extender's p50 as a ratio of
the floor's and the echo's; the server's RSS; and how much of the client-side time is the
driver's own JSON work (encode before, decode after the round trip).

    python -m benchmarks.load --nodes 1000 5000 10000 --pods 2000 --json benchmarks/out/load.json
"""

from __future__ import annotations

import argparse
import http.client
import os
import platform
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import orjson

from benchmarks import processes
from benchmarks.slowclients import free_port, wait_ready
from benchmarks.synthetic import cluster_objects, pending_pod

PREFIX = "/cgpu-scheduler"
FLOOR = "/floor"
ECHO = "/echo"
BIND_THREADS = 4
VERBS = ("filter", "prioritize", "bind")


def node_status_bulk(node: dict) -> dict:
    """A Node as the API server holds it: conditions, addresses, nodeInfo, images (for nodeCacheCapable=false)."""
    node = orjson.loads(orjson.dumps(node))
    status = node["status"]
    status["conditions"] = [{"type": t, "status": "False", "reason": f"Kubelet{t}", "message": f"kubelet {t}",
                             "lastHeartbeatTime": "2026-11-22T03:00:00Z",
                             "lastTransitionTime": "2026-11-01T00:00:00Z"}
                            for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable")]
    status["conditions"].append({"type": "Ready", "status": "True", "reason": "KubeletReady",
                                 "lastHeartbeatTime": "2026-11-22T03:00:00Z"})
    status["addresses"] = [{"type": "InternalIP", "address": "10.0.0.1"},
                           {"type": "Hostname", "address": node["metadata"]["name"]}]
    status["nodeInfo"] = {"kubeletVersion": "v1.31.2", "containerRuntimeVersion": "containerd://1.7.22",
                          "kernelVersion": "5.10.134", "osImage": "Alibaba Cloud Linux 3", "architecture": "amd64",
                          "operatingSystem": "linux", "machineID": "0" * 32, "bootID": "1" * 32}
    status["images"] = [{"names": [f"registry.example/team/image-{k}@sha256:{'a' * 64}",
                                   f"registry.example/team/image-{k}:v{k}"], "sizeBytes": 1_000_000 * k}
                        for k in range(1, 11)]
    return node


class Client:
    """One keep-alive HTTP connection; returns (reply, client ms, server ms)."""

    def __init__(self, port: int):
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def post(self, path: str, body: bytes, headers: dict | None = None) -> tuple[bytes, float, float]:
        started = time.perf_counter()
        self.connection.request("POST", path, body, {"Content-Type": "application/json", **(headers or {})})
        response = self.connection.getresponse()
        data = response.read()
        elapsed = (time.perf_counter() - started) * 1000
        if response.status != 200:
            raise RuntimeError(f"{path}: HTTP {response.status}: {data[:200]!r}")
        timing = response.getheader("Server-Timing", "app;dur=nan")
        return data, elapsed, float(timing.split("dur=")[1])


class Run:
    """Timings of one pass (extender or floor) over the same pods."""

    def __init__(self):
        self.client = {"filter": [], "prioritize": [], "bind": []}
        self.server = {"filter": [], "prioritize": [], "bind": []}
        self.driver_json = {"filter": [], "prioritize": [], "bind": []}
        self.cycle_server = []
        self.lock = threading.Lock()
        self.wall = 0.0
        self.pods = 0

    def add(self, verb: str, client_ms: float, server_ms: float, json_ms: float) -> None:
        with self.lock:
            self.client[verb].append(client_ms)
            self.server[verb].append(server_ms)
            self.driver_json[verb].append(json_ms)

    def summary(self) -> dict:
        def pct(values):
            a = np.array(values) if values else np.array([np.nan])
            return {"p50": round(float(np.percentile(a, 50)), 3), "p99": round(float(np.percentile(a, 99)), 3),
                    "mean": round(float(a.mean()), 3)}

        return {
            "pods": self.pods,
            "cycles_per_s": round(self.pods / self.wall, 1) if self.wall else None,
            "cycle_server_ms": pct(self.cycle_server),
            "server_ms": {v: pct(x) for v, x in self.server.items()},
            "client_ms": {v: pct(x) for v, x in self.client.items()},
            "driver_json_ms": {v: pct(x) for v, x in self.driver_json.items()},
        }


class Recorded:
    """The extender pass's replies, appended to one file, for the floor to answer with the same bytes."""

    def __init__(self, path: str):
        self.path = path
        self._file = open(path, "wb")
        self._offset = 0
        self._lock = threading.Lock()
        self.keys = {}  # (uid, verb) -> "offset:length" in the file

    def add(self, uid: str, verb: str, data: bytes) -> None:
        with self._lock:
            self._file.write(data)
            self.keys[uid, verb] = f"{self._offset}:{len(data)}"
            self._offset += len(data)

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def schedule(port: int, pods: list, names: list, node_objects: list | None, run: Run, recorded: Recorded,
             base: str, seed: int) -> None:
    """Schedule ``pods`` one at a time against ``base``: the extender (``PREFIX``), recording its
    replies, or the floor or echo, which answer the recorded bytes. The driver does the same
    work either way: the same bodies, the same decoding, the same choices.
    """
    rng = random.Random(seed)
    floor = base != PREFIX
    main = Client(port)
    local = threading.local()
    pool = ThreadPoolExecutor(BIND_THREADS)
    pending = []

    def post(client: Client, uid: str, verb: str, body: bytes) -> tuple[bytes, float, float]:
        headers = {"X-Floor-Reply": recorded.keys[uid, verb]} if floor else None
        data, client_ms, server_ms = client.post(f"{base}/{verb}", body, headers)
        if not floor:
            recorded.add(uid, verb, data)
        return data, client_ms, server_ms

    def bind(uid: str, body: bytes, filter_server: float, prioritize_server: float):
        if not hasattr(local, "client"):
            local.client = Client(port)
        data, client_ms, server_ms = post(local.client, uid, "bind", body)
        started = time.perf_counter()
        reply = orjson.loads(data)
        json_ms = (time.perf_counter() - started) * 1000
        if reply["Error"]:
            raise RuntimeError(f"bind failed: {reply['Error']}")
        run.add("bind", client_ms, server_ms, json_ms)
        with run.lock:
            run.cycle_server.append(filter_server + prioritize_server + server_ms)

    def ask(verb: str, pod: dict, nodes: list, uid: str):
        """One filter or prioritize call about ``nodes`` (names, or Node objects when
        ``node_objects`` is given): (decoded reply, server ms)."""
        t = time.perf_counter()
        body = orjson.dumps({"Pod": pod, "Nodes": None if node_objects is None else {"items": nodes},
                             "NodeNames": nodes if node_objects is None else None})
        encode_ms = (time.perf_counter() - t) * 1000
        data, client_ms, server_ms = post(main, uid, verb, body)
        t = time.perf_counter()
        reply = orjson.loads(data)
        run.add(verb, client_ms, server_ms, encode_ms + (time.perf_counter() - t) * 1000)
        return reply, server_ms

    started_all = time.perf_counter()
    for pod in pods:
        uid = pod["metadata"]["uid"]
        result, filter_server = ask("filter", pod, names if node_objects is None else node_objects, uid)
        feasible = result["NodeNames"] if node_objects is None else [
            n["metadata"]["name"] for n in (result["Nodes"] or {}).get("items") or []]
        if not feasible:
            continue
        prioritize_server = 0.0
        chosen = feasible[0]
        if len(feasible) > 1:  # kube-scheduler skips prioritize with one feasible node
            wanted = set(feasible)
            kept = feasible if node_objects is None else [n for n in node_objects if n["metadata"]["name"] in wanted]
            scores, prioritize_server = ask("prioritize", pod, kept, uid)
            top = max(s["Score"] for s in scores)
            chosen = rng.choice([s["Host"] for s in scores if s["Score"] == top])
        body = orjson.dumps({"PodName": pod["metadata"]["name"], "PodNamespace": pod["metadata"]["namespace"],
                             "PodUID": uid, "Node": chosen})
        pending.append(pool.submit(bind, uid, body, filter_server, prioritize_server))
        run.pods += 1
    for future in pending:
        future.result()
    run.wall = time.perf_counter() - started_all
    pool.shutdown()


def pinning() -> tuple[set, set] | None:
    """(server cores, driver cores): the extender on one core, the driver on the rest,
    so that neither steals the other's core mid-request; None on a one-core machine."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    return ({cores[0]}, set(cores[1:])) if len(cores) >= 2 else None


def measure(nodes: int, pods: int, warmup: int, modes: list, seed: int, workdir: str, scoring: str = "ack") -> dict:
    objects = cluster_objects(nodes, seed=seed)
    node_objects = [o for o in objects if o["kind"] == "Node"]
    names = [n["metadata"]["name"] for n in node_objects]
    path = os.path.join(workdir, f"cluster-{nodes}.jsonl")  # streamed by the extender, one object per line
    with open(path, "wb") as handle:
        for obj in objects:
            handle.write(orjson.dumps(obj) + b"\n")
    port = free_port()
    cores = pinning()
    replies = os.path.join(workdir, f"replies-{nodes}.bin")
    process = subprocess.Popen([sys.executable, "-m", "benchmarks.load_server", "--cluster", path,
                                "--port", str(port), "--replies", replies, "--scoring", scoring],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               preexec_fn=(lambda: os.sched_setaffinity(0, cores[0])) if cores else None)
    if cores:
        os.sched_setaffinity(0, cores[1])
    pinned = {"server": sorted(cores[0]), "driver": sorted(cores[1])} if cores else None
    result = {"nodes": nodes, "gpus": nodes * 8, "bound_pods_at_start": len(objects) - nodes}
    try:
        started = time.monotonic()
        wait_ready(port, timeout=600, process=process)
        result["startup_s"] = round(time.monotonic() - started, 1)
        worker = process.pid  # gunicorn's arbiter; processes.rss_mb reads its worker
        result["rss_mb_at_start"] = processes.rss_mb(worker)
        counter = 0
        for mode in modes:
            full = [node_status_bulk(n) for n in node_objects] if mode == "objects" else None
            batch = [pending_pod(counter + i, seed) for i in range(warmup + pods)]
            counter += warmup + pods
            recorded = Recorded(replies)
            schedule(port, batch[:warmup], names, full, Run(), recorded, PREFIX, seed)
            recorded.flush()
            for base in (FLOOR, ECHO):  # they warm up too
                schedule(port, batch[:warmup], names, full, Run(), recorded, base, seed)
            extender = Run()
            schedule(port, batch[warmup:], names, full, extender, recorded, PREFIX, seed)
            recorded.close()
            floor, echo = Run(), Run()
            schedule(port, batch[warmup:], names, full, floor, recorded, FLOOR, seed)
            schedule(port, batch[warmup:], names, full, echo, recorded, ECHO, seed)
            e, f, o = extender.summary(), floor.summary(), echo.summary()
            result[mode] = {
                "extender": e, "floor": f, "echo": o,
                "ratio_to_floor_p50": {v: round(e["server_ms"][v]["p50"] / f["server_ms"][v]["p50"], 2)
                                       for v in VERBS},
                "ratio_to_echo_p50": {v: round(e["server_ms"][v]["p50"] / o["server_ms"][v]["p50"], 2)
                                      for v in VERBS},
                "cycles_ratio_to_floor": round(e["cycles_per_s"] / f["cycles_per_s"], 2),
                "rss_mb_at_end": processes.rss_mb(worker),
                "pinned": pinned,
            }
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        if cores:  # the next server must again find both cores free to split
            os.sched_setaffinity(0, cores[0] | cores[1])
    return result


def machine() -> dict:
    model = ""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "")
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform()}


LABELS = {"names": "names", "objects": "Node objects"}


def _runs(results: list):
    """``(result, mode, extender figures, floor figures)`` of every measured mode, in table order."""
    for r in results:
        for mode in ("names", "objects"):
            if mode in r:
                yield r, mode, r[mode]["extender"], r[mode]["floor"]


def _verb_row(r: dict, mode: str, e: dict, f: dict, verb: str) -> list:
    """server p50, p99, client p50, driver JSON p50, floor server p50, p99, floor client p50, ratio."""
    return [e["server_ms"][verb]["p50"], e["server_ms"][verb]["p99"], e["client_ms"][verb]["p50"],
            e["driver_json_ms"][verb]["p50"], f["server_ms"][verb]["p50"], f["server_ms"][verb]["p99"],
            f["client_ms"][verb]["p50"], r[mode]["ratio_to_floor_p50"][verb]]


def print_table(results: list) -> None:
    print("\nms per call, p50 unless said. server = Server-Timing; client = round trip seen by the driver; "
          "json = the driver's own encode + decode; ratio = extender server p50 / floor server p50")
    widths = (7, 7, 7, 6, 6, 6, 7, 5)
    titles = ("server", "p99", "client", "json", "floor", "p99", "client", "ratio")
    print(f"{'nodes':>6} {'mode':>7} {'verb':>10} " + " ".join(f"{t:>{w}}" for t, w in zip(titles, widths)))
    for r, mode, e, f in _runs(results):
        for verb in VERBS:
            figures = _verb_row(r, mode, e, f, verb)
            print(f"{r['nodes']:>6} {mode:>7} {verb:>10} " + " ".join(f"{v:>{w}}" for v, w in zip(figures, widths)))
        print(f"{r['nodes']:>6} {mode:>7} {'cycle':>10} {e['cycle_server_ms']['p50']:>7} "
              f"{e['cycle_server_ms']['p99']:>7}   cycles/s {e['cycles_per_s']} (floor {f['cycles_per_s']}, "
              f"ratio {r[mode]['cycles_ratio_to_floor']})")
        o = r[mode]["echo"]
        print(f"{r['nodes']:>6} {mode:>7} {'echo':>10} server p50 " + ", ".join(
            f"{verb} {o['server_ms'][verb]['p50']} (ratio {r[mode]['ratio_to_echo_p50'][verb]})" for verb in VERBS)
            + f"; cycles/s {o['cycles_per_s']}")
        print(f"{r['nodes']:>6} {mode:>7} RSS MB at start {r['rss_mb_at_start']:.0f}, "
              f"at end {r[mode]['rss_mb_at_end']:.0f}, startup {r['startup_s']} s")


def markdown(report: dict) -> str:
    """The report's figures as the Markdown tables of benchmarks/RESULTS.md."""
    lines = ["| nodes | NodeNames / Nodes | verb | server p50 | server p99 | client p50 | driver JSON p50 "
             "| floor server p50 | floor server p99 | floor client p50 | server p50 / floor |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    cycles = ["| nodes | NodeNames / Nodes | cycle server p50 | cycle server p99 | cycles/s | floor cycles/s "
              "| ratio | RSS MB start / end | startup s |", "|---|---|---|---|---|---|---|---|---|"]
    echoes = ["| nodes | NodeNames / Nodes | verb | echo server p50 | echo server p99 | echo client p50 "
              "| server p50 / echo |", "|---|---|---|---|---|---|---|"]
    for r, mode, e, f in _runs(report["results"]):
        for verb in VERBS:
            figures = " | ".join(str(v) for v in _verb_row(r, mode, e, f, verb))
            lines.append(f"| {r['nodes']:,} | {LABELS[mode]} | {verb} | {figures} |")
            o = r[mode]["echo"]
            echoes.append(f"| {r['nodes']:,} | {LABELS[mode]} | {verb} | {o['server_ms'][verb]['p50']} "
                          f"| {o['server_ms'][verb]['p99']} | {o['client_ms'][verb]['p50']} "
                          f"| {r[mode]['ratio_to_echo_p50'][verb]} |")
        cycles.append(f"| {r['nodes']:,} | {LABELS[mode]} | {e['cycle_server_ms']['p50']} | {e['cycle_server_ms']['p99']} "
                      f"| {e['cycles_per_s']} | {f['cycles_per_s']} | {r[mode]['cycles_ratio_to_floor']} "
                      f"| {r['rss_mb_at_start']:.0f} / {r[mode]['rss_mb_at_end']:.0f} | {r['startup_s']} |")
    return "\n".join(lines) + "\n\n" + "\n".join(cycles) + "\n\n" + "\n".join(echoes) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Drive the extender like kube-scheduler and measure it.")
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 5000, 10000])
    parser.add_argument("--pods", type=int, default=2000, help="measured pods per mode")
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--modes", nargs="+", default=["names", "objects"], choices=["names", "objects"],
                        help="names = nodeCacheCapable true, objects = false (full Node objects)")
    parser.add_argument("--objects-pods", type=int, default=None, help="measured pods in objects mode")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--scoring", default="ack", help="the extender's --scoring (default ack)")
    parser.add_argument("--json", metavar="FILE", help="write every figure here")
    parser.add_argument("--markdown", metavar="FILE", help="write the tables of benchmarks/RESULTS.md here")
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory() as workdir:
        for nodes in args.nodes:
            r = {}
            for mode in args.modes:
                pods = args.objects_pods if mode == "objects" and args.objects_pods else args.pods
                one = measure(nodes, pods, min(args.warmup, pods), [mode], args.seed, workdir, args.scoring)
                r = {**one, **{k: v for k, v in r.items() if k in ("names", "objects")}}
            results.append(r)
            print_table([r])
    report = {"machine": machine(), "command": " ".join(["python -m benchmarks.load"] + (argv or sys.argv[1:])),
              "results": results}
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "wb") as handle:
            handle.write(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    if args.markdown:
        with open(args.markdown, "w") as handle:
            handle.write(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
