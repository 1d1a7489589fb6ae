"""What watching the extender costs: a Prometheus scrape, inspect (the GPU map's refresh), the
stranded-GPU measure, and what the metrics add to every filter and bind.

For each cluster size, the synthetic cluster of the load benchmark (``benchmarks.synthetic``:
bound pods shaped after the openb trace) is served by the app in process; ``--pods`` pending
pods are then filtered, prioritized and bound through it (so the mix is learned and binds
are counted). Figures are CPU seconds of this process (``time.process_time``), the median of
``--repeat`` runs, so other load on the machine changes them little:

* ``scrape``: one ``GET metrics`` (the text format), with its series count and size;
* ``scrape after a bind``: the same right after one more bind (the stranded measure is
  recomputed for the changed node only);
* ``inspect``: one ``GET inspect``;
* ``stranded, cold``: the stranded measure with nothing cached (a new process's first scrape);
* per call on the request path: counting one filter reply's reasons over every node
  (``Outcomes.filtered``) and observing one request duration.

    python -m benchmarks.scrape [--nodes 1000 5000 10000] [--pods 200] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
import orjson

from benchmarks.synthetic import cluster_objects, pending_pod
from extender.serving.app import build_extender, create_app
from extender.serving.config import Config
from extender.cluster.embedded import EmbeddedCluster
from extender.verbs.outcomes import Outcomes
from extender.views.stranded import StrandedMeter
from policy.request import parse_pod_request

PREFIX = "/cgpu-scheduler"


def cpu(function, repeat: int) -> float:
    """Median CPU seconds of ``function()`` over ``repeat`` runs."""
    times = []
    for _ in range(repeat):
        started = time.process_time()
        function()
        times.append(time.process_time() - started)
    return statistics.median(times)


def schedule(client, names: list, pods: list) -> int:
    """Filter, prioritize and bind each pod to its best node; the pods bound."""
    bound = 0
    for p in pods:
        body = orjson.dumps({"Pod": p, "Nodes": None, "NodeNames": names})
        passed = orjson.loads(client.post(f"{PREFIX}/filter", data=body).data)["NodeNames"]
        if not passed:
            continue
        body = orjson.dumps({"Pod": p, "Nodes": None, "NodeNames": passed})
        scores = orjson.loads(client.post(f"{PREFIX}/prioritize", data=body).data)
        best = max(scores, key=lambda s: s["Score"])["Host"]
        meta = p["metadata"]
        reply = client.post(f"{PREFIX}/bind", data=orjson.dumps({"PodName": meta["name"], "PodNamespace": "load",
                                                                 "PodUID": meta["uid"], "Node": best}))
        bound += orjson.loads(reply.data)["Error"] == ""
    return bound


def measure(nodes: int, pods: int, repeat: int) -> dict:
    extender = build_extender(Config(), cluster=EmbeddedCluster(cluster_objects(nodes, seed=1), source="synthetic"))
    client = create_app(Config(), extender=extender).test_client()
    names = [n for n in extender.ledger.state.names if n is not None]
    bound = schedule(client, names, [pending_pod(i, seed=1) for i in range(pods)])
    body = client.get(f"{PREFIX}/metrics").data
    series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    scrape = cpu(lambda: client.get(f"{PREFIX}/metrics"), repeat)
    extra = iter(range(pods, pods + 10 * repeat))

    def bind_then_scrape():
        schedule(client, names, [pending_pod(next(extra), seed=1)])
        started = time.process_time()
        client.get(f"{PREFIX}/metrics")
        return time.process_time() - started

    after_bind = statistics.median(bind_then_scrape() for _ in range(repeat))
    inspect = cpu(lambda: client.get(f"{PREFIX}/inspect"), repeat)
    cold = cpu(lambda: StrandedMeter(extender.ledger.state, extender.mix).current(), repeat)
    codes = extender.ledger.check(parse_pod_request(pending_pod(0, seed=1)), names)
    outcomes, calls = Outcomes(), 2000
    filtered = cpu(lambda: [outcomes.filtered(codes) for _ in range(calls)], 1) / calls
    metrics = client.application.extensions["cgpu_metrics"]
    observe = cpu(lambda: [metrics.observe("filter", 0.001) for _ in range(calls * 10)], 1) / (calls * 10)
    return {"nodes": nodes, "gpus": int(np.sum(extender.ledger.state.view_all()[1].gpu_count)),
            "allocations": len(extender.ledger.allocations()), "bound": bound, "shapes": len(extender.mix),
            "series": series, "bytes": len(body), "scrape_s": scrape, "scrape_after_bind_s": after_bind,
            "inspect_s": inspect, "inspect_bytes": len(client.get(f"{PREFIX}/inspect").data),
            "stranded_cold_s": cold, "filtered_us": filtered * 1e6, "observe_us": observe * 1e6}


def table(rows: list) -> str:
    lines = ["| nodes | GPUs | pods with a share | series | scrape (MB) | scrape CPU s | after a bind | "
             "inspect CPU s (MB) | stranded cold s | filter count µs | duration observe µs |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['nodes']:,} | {r['gpus']:,} | {r['allocations']:,} | {r['series']:,} | "
                     f"{r['bytes'] / 1e6:.1f} | {r['scrape_s']:.2f} | {r['scrape_after_bind_s']:.2f} | "
                     f"{r['inspect_s']:.2f} ({r['inspect_bytes'] / 1e6:.1f}) | {r['stranded_cold_s']:.3f} | "
                     f"{r['filtered_us']:.1f} | {r['observe_us']:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="CPU cost of scrapes, inspect and the metrics' request hooks.")
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 5000, 10000])
    parser.add_argument("--pods", type=int, default=200, help="pods scheduled before measuring")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    rows = []
    for nodes in args.nodes:
        rows.append(measure(nodes, args.pods, args.repeat))
        print(table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
    print(f"python -m benchmarks.scrape {' '.join(argv if argv is not None else sys.argv[1:])}")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
