"""What the GPU map's refresh costs: the size and the extender's CPU of ``GET inspect``, ``inspect?compact=1``
and ``GET plan``.

For each cluster size, :mod:`benchmarks.operator_cluster`'s cluster (the load benchmark's synthetic nodes and
bound pods, with pools, GPU models, readiness and ``--pending`` pending pods) is served by the app in process,
its heap frozen as the server does after the first sync (``extender.serving.heap``), after the extender learned the
load driver's first eight pod shapes (so the stranded measure is made). Sizes are exact; CPU figures are the
median of ``--repeat`` requests (``time.process_time``: other load on the machine changes them little).

    python -m benchmarks.mapfeed [--nodes 1000 5000] [--pending 40] [--repeat 7]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

from benchmarks.operator_cluster import operator_objects
from benchmarks.synthetic import pending_pod
from extender.serving.app import build_extender, create_app
from extender.serving.config import Config
from extender.cluster.embedded import EmbeddedCluster
from policy.request import parse_pod_request

PREFIX = "/cgpu-scheduler"
ROUTES = (("inspect", "/inspect"), ("compact", "/inspect?compact=1"), ("plan", "/plan"))


def measure(nodes: int, pending: int, repeat: int) -> dict:
    extender = build_extender(Config(), cluster=EmbeddedCluster(operator_objects(nodes, pending), source="bench"))
    for i in range(8):
        extender.mix.observe(parse_pod_request(pending_pod(i)))
    client = create_app(Config(), extender=extender).test_client()
    gc.collect()
    gc.freeze()
    result = {"nodes": nodes, "pending": pending}
    for name, route in ROUTES:
        reply = client.get(PREFIX + route)
        assert reply.status_code == 200, (route, reply.data[:200])
        times = []
        for _ in range(repeat):
            started = time.process_time()
            client.get(PREFIX + route)
            times.append(time.process_time() - started)
        result[name] = (len(reply.data), statistics.median(times))
    gc.unfreeze()
    return result


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--pending", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    print("| nodes | pending | inspect MB (CPU s) | inspect?compact=1 MB (CPU s) | plan KB (CPU s) |")
    print("|---|---|---|---|---|")
    for nodes in args.nodes:
        r = measure(nodes, args.pending, args.repeat)
        (full, full_s), (small, small_s), (plan, plan_s) = r["inspect"], r["compact"], r["plan"]
        print(f"| {nodes:,} | {args.pending} | {full / 1e6:.2f} ({full_s:.3f}) | {small / 1e6:.2f} ({small_s:.3f}) | "
              f"{plan / 1e3:.1f} ({plan_s:.3f}) |", flush=True)


if __name__ == "__main__":
    main()
