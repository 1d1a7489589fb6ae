"""Slow and idle clients against the extender as served (``cgpu-extender serve --demo``).

Opens ``--stalled`` sockets that each stop mid-request (part of a head, a whole
head and part of a body, nothing at all, or an idle keep-alive connection after
one request), then sends ``--requests`` normal filter calls one after another on
a fresh connection each and prints how many were answered and their latency.

    python -m benchmarks.slowclients --stalled 500 --requests 200
"""

from __future__ import annotations

import argparse
import http.client
import os
import socket
import statistics
import subprocess
import sys
import time

import orjson

from benchmarks import processes

STALLS = (
    b"POST /cgpu-scheduler/filter HTTP/1.1\r\nHo",
    b"POST /cgpu-scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Content-Length: 100\r\n\r\n{\"Pod\"",
    b"",
    b"GET /cgpu-scheduler/healthz HTTP/1.1\r\nHost: x\r\n\r\n",
)
POD = {"metadata": {"name": "bench", "namespace": "default", "uid": "uid-bench"},
       "spec": {"containers": [{"name": "c", "resources": {"limits": {"aliyun.com/gpu-mem": "2"}}}]}}
BODY = orjson.dumps({"Pod": POD, "NodeNames": ["gpu-core-a", "gpu-core-b", "gpu-cgpu-a", "gpu-share-a"]})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port: int, timeout: float = 30, process=None) -> None:
    """Poll ``readyz`` every 0.1 s until 200; an error if ``process`` (a ``Popen``) ends first.
    (It polled without a pause while the answer was 503: ~84,000 probes, ~26 CPU-s of the
    server's, while a 5,000-node cluster synced on two cores.)"""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the server exited (code {process.returncode}) before it was ready")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            connection.request("GET", "/cgpu-scheduler/readyz")
            if connection.getresponse().status == 200:
                return
            connection.close()
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"server did not become ready in {timeout} s")


def filter_once(port: int, timeout: float) -> float | None:
    started = time.perf_counter()
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        connection.request("POST", "/cgpu-scheduler/filter", BODY, {"Content-Type": "application/json"})
        reply = connection.getresponse()
        reply.read()
        connection.close()
        return (time.perf_counter() - started) * 1000 if reply.status == 200 else None
    except OSError:
        return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stalled", type=int, default=500)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--timeout", type=float, default=5.0, help="per normal request, seconds")
    args = parser.parse_args(argv)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "extender", "serve", "--demo", "--port", str(port),
                               "--log-level", "error"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sockets = []
    try:
        wait_ready(port)
        baseline = [t for t in (filter_once(port, args.timeout) for _ in range(args.requests)) if t is not None]
        for i in range(args.stalled):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(STALLS[i % len(STALLS)])
            sockets.append(s)
        time.sleep(0.5)
        times = [filter_once(port, args.timeout) for _ in range(args.requests)]
        answered = [t for t in times if t is not None]
        worker = processes.worker(server.pid)
        print(f"stalled sockets: {args.stalled}; worker threads: {len(os.listdir(f'/proc/{worker}/task'))}; "
              f"RSS {processes.rss_mb(server.pid):.0f} MB")
        for label, sample, total in (("without stalled sockets", baseline, args.requests),
                                     ("with them", answered, args.requests)):
            if sample:
                q = statistics.quantiles(sample, n=100)
                print(f"{label}: {len(sample)}/{total} filters answered, round trip p50 {statistics.median(sample):.2f} ms, "
                      f"p99 {q[98]:.2f} ms, max {max(sample):.2f} ms")
            else:
                print(f"{label}: 0/{total} filters answered")
        return 0
    finally:
        for s in sockets:
            s.close()
        server.terminate()
        server.wait(15)


if __name__ == "__main__":
    sys.exit(main())
