"""Hostile clients against the extender as served (``cgpu-extender serve``): what each costs it.

Each scenario starts ``serve`` (as deployed: gunicorn, one worker, default
limits), measures the worker's RSS at rest, runs its flood from this process
on loopback, and prints the RSS growth, how the flood's connections ended, and
how the verbs and probes answered meanwhile:

* ``chunks``: clients each send a 5 MiB bind body in 1-byte chunks;
* ``tls-silent``: TCP connections to the mutual-TLS port that never send a byte
  (the plain probe port and a client with a certificate asked meanwhile);
* ``unread``: clients send a filter naming 100,000 unknown nodes and never read
  the reply;
* ``probe-idle``: idle connections to the plain probe port (the verb port and
  new probe clients asked meanwhile);
* ``nofile``: ``serve`` started with an open-files limit of 1,024 (soft and
  hard), then more idle connections than that;
* ``get-flood``: clients looping ``GET metrics`` (the probe port) and ``inspect``
  and ``plan`` (or only the ``--routes`` given) on a cluster of ``--nodes``
  nodes × 8 GPUs, while binds are timed on the verb port; the RSS is sampled
  every 0.1 s;
* ``preempt``: one preempt naming ``--candidates`` crowded nodes (8 GPUs × 20
  pods each) for a whole-GPU pod, timed;
* ``sigterm``: SIGTERM while a large reply is being read slowly: how much of it
  arrives;
* ``per-connection``: what one connection holds, by kind: a never-used plain
  connection, a pending TLS handshake (with the handshake limit raised, and
  with asyncio's own 256 KiB TLS read buffer for comparison).

    python -m benchmarks.hostile all
    python -m benchmarks.hostile get-flood --nodes 5000 [--routes metrics]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import resource
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson

from benchmarks import processes
from benchmarks.slowclients import free_port, wait_ready
from benchmarks.synthetic import cluster_objects, pending_pod

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from pki import make_pki  # noqa: E402  (the tests' certificates: a CA, a server, a client)

PREFIX = "/cgpu-scheduler"
POD = {"metadata": {"name": "p", "namespace": "default", "uid": "u1"},
       "spec": {"containers": [{"name": "c", "resources": {"limits": {"aliyun.com/gpu-mem": "2",
                                                                       "aliyun.com/gpu-core.percentage": "30"}}}]}}
DEMO_FILTER = orjson.dumps({"Pod": POD, "Nodes": None, "NodeNames": ["gpu-core-a", "gpu-core-b"]})


class Served:
    """``cgpu-extender serve ARGS`` on free ports; ``port``, ``probe_port``, the process."""

    def __init__(self, *args: str, probe: bool = False, nofile: int | None = None, log: str | None = None):
        self.port, self.probe_port = free_port(), (free_port() if probe else None)
        command = [sys.executable, "-m", "extender", "serve", "--port", str(self.port), *args]
        if probe:
            command += ["--probe-port", str(self.probe_port)]
        self.log = open(log or os.devnull, "w")

        def limit():
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.process = subprocess.Popen(command, stdout=self.log, stderr=self.log, preexec_fn=limit)

    def rss(self) -> float:
        return processes.rss_mb(self.process.pid)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


@contextlib.contextmanager
def serving(*args: str, probe: bool = False, nofile: int | None = None, ready_port: str = "port", log=None):
    server = Served(*args, probe=probe, nofile=nofile, log=log)
    try:
        wait_ready(getattr(server, ready_port), timeout=600, process=server.process)
        time.sleep(1.0)  # the heap frozen after the first sync, the RSS settled
        yield server
    finally:
        server.stop()


def timed(port: int, method: str, path: str, body: bytes | None = None, timeout: float = 10,
          context: ssl.SSLContext | None = None) -> tuple:
    """``(status or the error's name, milliseconds)`` of one request on a new connection."""
    started = time.perf_counter()
    try:
        if context is None:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        else:
            connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout, context=context)
        connection.request(method, PREFIX + path, body, {"Content-Type": "application/json"})
        reply = connection.getresponse()
        reply.read()
        connection.close()
        status = reply.status
    except (OSError, http.client.HTTPException) as exc:  # refused, reset, or closed mid-reply
        status = type(exc).__name__
    return status, round((time.perf_counter() - started) * 1000, 1)


def closed_by_server(sockets: list) -> int:
    """How many of ``sockets`` the server has closed (EOF or reset)."""
    closed = 0
    for s in sockets:
        s.setblocking(False)
        try:
            while True:
                data = s.recv(1 << 20)
                if not data:
                    closed += 1
                    break
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
    return closed


def median_ms(samples: list) -> float:
    return round(statistics.median(ms for _, ms in samples), 1) if samples else float("nan")


# -- scenarios -------------------------------------------------------------------------------------------

def chunks(clients: int = 6, mib: int = 5) -> dict:
    with serving("--demo") as server:
        rest, stop = server.rss(), threading.Event()

        def attack():
            with socket.create_connection(("127.0.0.1", server.port)) as s:
                s.sendall(b"POST /cgpu-scheduler/bind HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          b"Transfer-Encoding: chunked\r\n\r\n")
                with contextlib.suppress(OSError):
                    for _ in range(mib * 256):
                        if stop.is_set():
                            break
                        s.sendall(b"1\r\nx\r\n" * 4096)
        threads = [threading.Thread(target=attack) for _ in range(clients)]
        for t in threads:
            t.start()
        peak, filters = rest, []
        for _ in range(20):
            filters.append(timed(server.port, "POST", "/filter", DEMO_FILTER))
            peak = max(peak, server.rss())
            time.sleep(0.1)
        stop.set()
        for t in threads:
            t.join()
        return {"clients": clients, "rss_growth_mib": round(peak - rest, 1), "filter_ms_p50": median_ms(filters),
                "filters_ok": sum(s == 200 for s, _ in filters)}


def tls_silent(connections: int = 2500) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        pki = make_pki(Path(folder))
        cert, key = pki["server"]
        with serving("--demo", "--tls-cert", str(cert), "--tls-key", str(key), "--client-ca", str(pki["ca"]),
                     probe=True, ready_port="probe_port") as server:
            rest, sockets = server.rss(), []
            for _ in range(connections):
                sockets.append(socket.create_connection(("127.0.0.1", server.port), timeout=5))
            time.sleep(1.0)
            grown = server.rss() - rest
            context = ssl.create_default_context(cafile=pki["ca"])
            context.load_cert_chain(*pki["client"])
            mtls = timed(server.port, "POST", "/filter", DEMO_FILTER, context=context)
            probe = timed(server.probe_port, "GET", "/healthz")
            open_ = len(sockets) - closed_by_server(sockets)
            for s in sockets:
                s.close()
            return {"connections": connections, "rss_growth_mib": round(grown, 1), "still_open": open_,
                    "mtls_filter": mtls, "probe_healthz": probe}


def unread(clients: int = 60, names: int = 100_000) -> dict:
    body = orjson.dumps({"Pod": POD, "Nodes": None, "NodeNames": [f"unknown-node-{i:06d}" for i in range(names)]})
    request = (b"POST /cgpu-scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n" % len(body)) + body
    with serving("--demo") as server:
        rest = peak = server.rss()
        sockets = []
        for _ in range(clients):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(("127.0.0.1", server.port))
            s.sendall(request)
            sockets.append(s)
            peak = max(peak, server.rss())
        filters = []
        for _ in range(20):
            time.sleep(0.25)
            peak = max(peak, server.rss())
            filters.append(timed(server.port, "POST", "/filter", DEMO_FILTER))
        closed = closed_by_server(sockets)
        for s in sockets:
            s.close()
        return {"clients": clients, "body_bytes": len(body), "rss_peak_growth_mib": round(peak - rest, 1),
                "closed_by_server": closed, "filter_ms_p50": median_ms(filters),
                "filters_ok": sum(s == 200 for s, _ in filters)}


def idle_flood(connections: int, target: str, nofile: int | None = None) -> dict:
    with tempfile.NamedTemporaryFile("r", suffix=".log") as log:
        with serving("--demo", probe=True, nofile=nofile, log=log.name) as server:
            rest, sockets, refused = server.rss(), [], 0
            port = server.probe_port if target == "probe" else server.port
            started = time.monotonic()
            for _ in range(connections):
                try:
                    sockets.append(socket.create_connection(("127.0.0.1", port), timeout=5))
                except OSError:
                    refused += 1
            seconds = round(time.monotonic() - started, 2)
            time.sleep(1.0)
            result = {"connections": connections, "to": target, "nofile": nofile, "connect_seconds": seconds,
                      "connect_failures": refused, "rss_growth_mib": round(server.rss() - rest, 1),
                      "verb_filter": timed(server.port, "POST", "/filter", DEMO_FILTER),
                      "probe_healthz": timed(server.probe_port, "GET", "/healthz"),
                      "still_open": len(sockets) - closed_by_server(sockets)}
            for s in sockets:
                s.close()
        lines = [json.loads(line) for line in Path(log.name).read_text().splitlines() if line.startswith("{")]
        result["log_lines"] = len(lines)
        result["warnings"] = sum(line.get("level") in ("warning", "error") for line in lines)
        return result


GET_ROUTES = ("metrics", "inspect", "plan")


def get_flood(nodes: int = 5000, clients: int = 12, binds: int = 40, routes: tuple = GET_ROUTES,
              seconds: float = 10.0) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "cluster.jsonl"
        path.write_bytes(b"\n".join(orjson.dumps(o) for o in cluster_objects(nodes, 8, seed=0)))
        with serving("--cluster", str(path), probe=True) as server:
            names = orjson.dumps([f"node-{i:05d}" for i in range(nodes)])
            rest, stop = server.rss(), threading.Event()
            where = {"metrics": (server.probe_port, "/metrics"), "inspect": (server.port, "/inspect"),
                     "plan": (server.port, "/plan")}
            routes = [where[route] for route in routes]
            served, peak = [], [rest]

            def loop(port, path):
                while not stop.is_set():
                    served.append(timed(port, "GET", path, timeout=60))
            threads = [threading.Thread(target=loop, args=routes[i % len(routes)]) for i in range(clients)]

            def sample():
                while not stop.is_set():
                    peak[0] = max(peak[0], server.rss())
                    time.sleep(0.1)
            threads.append(threading.Thread(target=sample))
            started = time.monotonic()
            for t in threads:
                t.start()
            time.sleep(2.0)
            bound = []
            for i in range(binds):
                pod = pending_pod(i, 0)
                status, reply = _post(server.port, "/filter", orjson.dumps({"Pod": pod, "Nodes": None}
                                                                             )[:-1] + b',"NodeNames":' + names + b"}")
                fits = orjson.loads(reply).get("NodeNames") or []
                if not fits:
                    continue
                meta = pod["metadata"]
                bound.append(timed(server.port, "POST", "/bind", orjson.dumps(
                    {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"],
                     "Node": fits[0]})))
            time.sleep(max(0.0, seconds - (time.monotonic() - started)))  # a flood of ``seconds`` at least
            stop.set()
            for t in threads:
                t.join()
            bind_ms = sorted(ms for _, ms in bound)
            return {"nodes": nodes, "clients": clients, "routes": list(dict.fromkeys(r for _, r in routes)),
                    "gets_served": len(served), "gets_ok": sum(s == 200 for s, _ in served),
                    "binds": len(bound), "binds_ok": sum(s == 200 for s, _ in bound),
                    "bind_ms_p50": median_ms(bound), "bind_ms_max": bind_ms[-1] if bind_ms else None,
                    "rss_growth_mib": round(peak[0] - rest, 1)}


def _post(port: int, path: str, body: bytes, timeout: float = 60) -> tuple:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    connection.request("POST", PREFIX + path, body, {"Content-Type": "application/json"})
    reply = connection.getresponse()
    return reply.status, reply.read()


def crowded_cluster(nodes: int) -> list:
    """``nodes`` core_mem nodes of 8 × 80 GiB GPUs, each GPU full with 20 pods of 4 GiB and 5 %."""
    from extender.ledger import annotations as A

    objects = []
    for i in range(nodes):
        name = f"crowded-{i:04d}"
        objects.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
            "ack.node.gpu.schedule": "core_mem"}}, "status": {"allocatable": {
                "cpu": "96", "memory": "768Gi", "pods": "256", "aliyun.com/gpu-mem": "640",
                "aliyun.com/gpu-count": "8", "aliyun.com/gpu-core.percentage": "800"}}})
        for g in range(8):
            for k in range(20):
                objects.append({"apiVersion": "v1", "kind": "Pod", "metadata": {
                    "name": f"p-{i}-{g}-{k}", "namespace": "default", "uid": f"u-{i}-{g}-{k}",
                    "annotations": A.write({0: {g: 4}}, {0: {g: 5}}, 80, 1)},
                    "spec": {"nodeName": name, "priority": 0, "containers": [{"name": "c", "resources": {
                        "limits": {"aliyun.com/gpu-mem": "4", "aliyun.com/gpu-core.percentage": "5"}}}]},
                    "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}})
    return objects


def preempt(candidates: int = 100) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "crowded.jsonl"
        path.write_bytes(b"\n".join(orjson.dumps(o) for o in crowded_cluster(candidates)))
        with serving("--cluster", str(path)) as server:
            pod = {"metadata": {"name": "urgent", "namespace": "default", "uid": "urgent"},
                   "spec": {"priority": 1000, "containers": [{"name": "c", "resources": {"limits": {
                       "aliyun.com/gpu-mem": "80", "aliyun.com/gpu-core.percentage": "100"}}}]}}
            body = orjson.dumps({"Pod": pod, "NodeNameToMetaVictims": {
                f"crowded-{i:04d}": {"Pods": [{"UID": f"u-{i}-0-0"}], "NumPDBViolations": 0}
                for i in range(candidates)}})
            started = time.perf_counter()
            status, reply = _post(server.port, "/preempt", body)
            seconds = time.perf_counter() - started
            kept = orjson.loads(reply).get("NodeNameToMetaVictims", {})
            victims = {len(v["Pods"]) for v in kept.values()}
            return {"candidates": candidates, "status": status, "seconds": round(seconds, 3),
                    "ms_per_candidate": round(seconds * 1000 / candidates, 2), "nodes_kept": len(kept),
                    "victims_per_node": sorted(victims)}


def sigterm(names: int = 200_000) -> dict:
    body = orjson.dumps({"Pod": POD, "Nodes": None, "NodeNames": [f"unknown-node-{i:06d}" for i in range(names)]})
    request = (b"POST /cgpu-scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n" % len(body)) + body
    with serving("--demo") as server:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        s.connect(("127.0.0.1", server.port))
        s.sendall(request)
        received = s.recv(65536)
        server.process.send_signal(signal.SIGTERM)
        started = time.monotonic()
        while chunk := s.recv(65536):
            received += chunk
            time.sleep(0.001)  # a slow reader
        head, _, rest = received.partition(b"\r\n\r\n")
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(
            b"content-length")))
        server.process.wait(60)
        return {"reply_bytes": length, "received_bytes": len(rest), "whole": len(rest) == length,
                "read_seconds": round(time.monotonic() - started, 1), "exit_code": server.process.returncode}


@contextlib.contextmanager
def limited(limits: dict, where: dict, patch: str = ""):
    """``benchmarks.limited_server`` with ``limits`` (``patch``: Python run first, for comparisons)."""
    port = free_port()
    spec = json.dumps({"config": {"log_level": "warning"}, "where": {"host": "127.0.0.1", "port": port, **where},
                       "limits": limits})
    code = f"{patch}\nfrom benchmarks.limited_server import main\nmain([{spec!r}])"
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the limited server did not start") from None
                time.sleep(0.1)
        time.sleep(1.0)
        yield port, process
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)


def per_connection(count: int = 1000) -> dict:
    result = {}
    with tempfile.TemporaryDirectory() as folder:
        pki = make_pki(Path(folder))
        cert, key = pki["server"]
        tls = {"tls_cert": str(cert), "tls_key": str(key), "client_ca": str(pki["ca"])}
        raised = {"handshakes": count + 10, "connections": 2 * count, "first_byte_seconds": 120}
        kinds = (("plain, never used", {}, ""), ("TLS, handshake pending", tls, ""),
                 ("TLS, handshake pending, asyncio's 256 KiB buffer", tls,
                  "import extender.serving.protocol as p; p.TLSConnection.max_size = 256 * 1024"))
        for kind, where, patch in kinds:
            with limited(raised, where, patch) as (port, process):
                rest = processes.rss_mb(process.pid)
                sockets = [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]
                time.sleep(2.0)
                result[kind] = round((processes.rss_mb(process.pid) - rest) * 1024 / count, 1)
                for s in sockets:
                    s.close()
    return {"connections": count, "kib_each": result}


SCENARIOS = {
    "chunks": lambda a: chunks(),
    "tls-silent": lambda a: tls_silent(),
    "unread": lambda a: unread(),
    "probe-idle": lambda a: idle_flood(4100, "probe"),
    "nofile": lambda a: idle_flood(1100, "verbs", nofile=1024),
    "get-flood": lambda a: get_flood(a.nodes, routes=tuple(a.routes)),
    "preempt": lambda a: [preempt(n) for n in a.candidates],
    "sigterm": lambda a: sigterm(),
    "per-connection": lambda a: per_connection(),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", choices=[*SCENARIOS, "all"])
    parser.add_argument("--nodes", type=int, default=5000, help="get-flood: nodes of the cluster (default 5000)")
    parser.add_argument("--routes", nargs="+", choices=GET_ROUTES, default=list(GET_ROUTES),
                        help="get-flood: the GETs the clients loop on (default all three)")
    parser.add_argument("--candidates", type=int, nargs="+", default=[100, 1000],
                        help="preempt: candidate nodes per call (default 100 1000)")
    args = parser.parse_args(argv)
    for name in (SCENARIOS if args.scenario == "all" else [args.scenario]):
        print(name, json.dumps(SCENARIOS[name](args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
