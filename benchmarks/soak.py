"""Memory over a long run of varied requests against ``cgpu-extender serve --demo``.

Drives ``--requests`` calls over a few keep-alive connections: filter and
prioritize of pods of many shapes (new UIDs each time, some with a 100 KB env
value or container name, some invalid in each way the hostile tests know),
binds that are refused, oversized and malformed bodies. Prints the server's RSS
every ``--every`` requests: after warm-up it should stay flat.

    python -m benchmarks.soak --requests 100000 --every 10000
"""

from __future__ import annotations

import argparse
import http.client
import random
import sys
import time

import orjson

from benchmarks import processes
from benchmarks.slowclients import free_port, wait_ready

NODES = ["gpu-core-a", "gpu-core-b", "gpu-core-full", "gpu-cgpu-a", "gpu-share-a", "gpu-whole-a"]
BAD = ["1e100000000", "9" * 5000, "²", " 2", None, [], "-1", "1.5"]


def body_for(rng: random.Random, i: int) -> tuple[str, bytes]:
    kind = rng.random()
    limits = {"aliyun.com/gpu-mem": str(rng.choice((1, 2, 3, 4, 6, 8, 12, 30)))}
    if rng.random() < 0.5:
        limits["aliyun.com/gpu-core.percentage"] = str(rng.choice((5, 10, 25, 50, 100)))
    if kind < 0.1:
        limits["aliyun.com/gpu-mem"] = rng.choice(BAD)
    container = {"name": f"c{rng.randrange(1000)}", "resources": {"limits": limits}}
    if kind > 0.9:
        container["env"] = [{"name": "BLOB", "value": "x" * 100_000}]
    if 0.85 < kind <= 0.9:
        container["name"] = "n" * 100_000
    pod = {"metadata": {"name": f"p{i}", "namespace": f"ns{i % 50}", "uid": f"uid-{i}",
                        "labels": {"aliyun.com/gpu-count": rng.choice(("1", "2", "²"))} if kind < 0.2 else {}},
           "spec": {"containers": [container]}}
    roll = rng.random()
    if roll < 0.45:
        return "filter", orjson.dumps({"Pod": pod, "NodeNames": rng.sample(NODES, rng.randint(1, 6))})
    if roll < 0.9:
        return "prioritize", orjson.dumps({"Pod": pod, "NodeNames": rng.sample(NODES, rng.randint(1, 6))})
    if roll < 0.97:
        return "bind", orjson.dumps({"PodName": f"p{i}", "PodNamespace": "x", "PodUID": f"never-{i}",
                                     "Node": rng.choice(NODES)})
    return "filter", b"{" * rng.randint(1, 5000)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--every", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    import subprocess

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "extender", "serve", "--demo", "--port", str(port),
                               "--log-level", "error"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(port)
        rng = random.Random(args.seed)
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        statuses: dict = {}
        started = time.monotonic()
        print(f"{'requests':>9} {'RSS MB':>7} {'s':>6}")
        print(f"{0:>9} {processes.rss_mb(server.pid):>7.1f} {0:>6.0f}")
        for i in range(1, args.requests + 1):
            verb, body = body_for(rng, i)
            connection.request("POST", f"/cgpu-scheduler/{verb}", body, {"Content-Type": "application/json"})
            reply = connection.getresponse()
            reply.read()
            statuses[reply.status] = statuses.get(reply.status, 0) + 1
            if reply.getheader("Connection", "").lower() == "close":
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            if i % args.every == 0:
                print(f"{i:>9} {processes.rss_mb(server.pid):>7.1f} {time.monotonic() - started:>6.0f}", flush=True)
        print("statuses:", dict(sorted(statuses.items())))
        return 0 if not any(s >= 500 for s in statuses) else 1
    finally:
        server.terminate()
        server.wait(15)


if __name__ == "__main__":
    sys.exit(main())
