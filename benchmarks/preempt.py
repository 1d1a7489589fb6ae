"""Preemption: how often kube-scheduler's own victims free no room on a single GPU,
and what the extender's preempt verb costs per candidate node.

The load benchmark's synthetic cluster (``benchmarks.synthetic``: GPUs already
partly used by pods shaped after the openb trace), its bound pods given
priorities 0, 10 or 100 and start times at random, then filled further with
``--fill`` of the driver's pods per node (each where the extender scores it
best, until nothing fits). For each preemptor
(priority 1000, the driver's shapes) the candidate nodes are those
kube-scheduler's preemption would consider: a sharing node of the pod's mode
where the pod does not fit its GPUs now for a reason freeing GPUs could change,
but fits the node's *total* GPU memory
once every lower-priority pod is gone. kube-scheduler's victims on each are
emulated as its ``selectVictimsOnNode`` picks them, by totals: all
lower-priority pods out, then each put back, highest priority first, while the
totals still fit. Then ``POST preempt`` gets those candidates (100 at most per
call, meta form) and the answer is classified per candidate: kube-scheduler's
victims kept (they make room), replaced by the extender's, or the node dropped.

    python -m benchmarks.preempt --nodes 1000 --fill 12 --preemptors 200
"""

from __future__ import annotations

import argparse
import random
import time

import numpy as np
import orjson

from benchmarks.synthetic import POD_SHAPES, cluster_objects, pending_pod
from extender.serving.app import build_extender
from extender.serving.config import Config
from extender.cluster.embedded import EmbeddedCluster
from extender.ledger.records import PodRef
from policy.reasons import FITS, UNRESOLVABLE_TABLE
from policy.request import parse_pod_request
from policy.victims import Resident, keep_proposal

MAX_CANDIDATES = 100


def with_priorities(objects: list, rng: random.Random) -> list:
    for obj in objects:
        if obj["kind"] == "Pod":
            obj["spec"]["priority"] = rng.choice((0, 10, 100))
            obj["status"]["startTime"] = f"2026-{rng.randint(1, 11):02d}-{rng.randint(1, 28):02d}T00:00:00Z"
    return objects


def kube_victims(total_free: int, pods: list, request_memory: int, priority: int) -> list | None:
    """kube-scheduler's choice by node totals (see module doc); None when the node is no candidate."""
    lower = sorted((a for a in pods if a.priority < priority), key=lambda a: (-a.priority, a.start))
    free = total_free + sum(sum(a.memory_per_gpu.values()) for a in lower)
    if free < request_memory:
        return None
    victims = []
    for a in lower:  # reprieve: put back while the totals still fit
        size = sum(a.memory_per_gpu.values())
        if free - size >= request_memory:
            free -= size
        else:
            victims.append(a.pod.uid)
    return victims


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--preemptors", type=int, default=200)
    parser.add_argument("--fill", type=int, default=12, help="more pods per node bound before preempting")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    objects = with_priorities(cluster_objects(args.nodes, seed=args.seed), rng)
    extender = build_extender(Config(), cluster=EmbeddedCluster(objects, "bench"))
    ledger = extender.ledger
    names, view = ledger.state.view_all()
    for i in range(args.fill * args.nodes):  # fill: each pod where it scores best, until none fits
        pod = pending_pod(10_000_000 + i, args.seed)
        request = parse_pod_request(pod)
        result = ledger.evaluate(request, names)
        if not result.feasible.any():
            break
        best = names[int(np.argmax(np.where(result.feasible, result.raw, -np.inf)))]
        allocation, _ = ledger.reserve(PodRef.of(pod), request, best, 1, rng.choice((0, 10, 100)),
                                       f"2026-{rng.randint(1, 11):02d}-{rng.randint(1, 28):02d}T00:00:00Z")
    counts = {"candidates": 0, "kept": 0, "replaced": 0, "dropped": 0, "kube frees no GPU": 0}
    victims_kube, victims_ours, cpu = [], [], 0.0
    for i in range(args.preemptors):
        pod = pending_pod(i, args.seed)
        pod["spec"]["priority"] = 1000
        request = parse_pod_request(pod)
        codes = ledger.check(request, names)
        candidates = {}
        for j, name in enumerate(names):
            if codes[j] == FITS or UNRESOLVABLE_TABLE[codes[j]] or len(candidates) >= MAX_CANDIDATES:
                continue
            found = ledger.residents(name)
            row, pods = found
            if int(row.mode[0]) == 0:
                continue
            total_free = int(row.mem_free[0, :int(row.gpu_count[0])].sum())
            proposal = kube_victims(total_free, pods, request.memory, 1000)
            if proposal:
                candidates[name] = (proposal, row, pods)
        if not candidates:
            continue
        body = orjson.dumps({"Pod": pod, "NodeNameToMetaVictims": {
            n: {"Pods": [{"UID": u} for u in p], "NumPDBViolations": 0} for n, (p, _, _) in candidates.items()}})
        started = time.process_time()
        reply, status = extender.preempt(body)
        cpu += time.process_time() - started
        assert status == 200
        answer = orjson.loads(reply)["NodeNameToMetaVictims"]
        for name, (proposal, row, pods) in candidates.items():
            counts["candidates"] += 1
            residents = [Resident(a.pod.uid, a.priority, a.start, a.memory_per_gpu, a.core_per_gpu, a.wants_core)
                         for a in pods]
            if keep_proposal(row, request, residents, proposal) is None:
                counts["kube frees no GPU"] += 1
            if name not in answer:
                counts["dropped"] += 1
                continue
            ours = [v["UID"] for v in answer[name]["Pods"]]
            counts["kept" if ours == proposal else "replaced"] += 1
            victims_kube.append(len(proposal))
            victims_ours.append(len(ours))
    n = counts["candidates"]
    print(f"nodes {args.nodes}, preemptors {args.preemptors}, candidate nodes {n}")
    for key, value in counts.items():
        if key != "candidates":
            print(f"  {key}: {value} ({100 * value / max(n, 1):.0f} %)")
    if victims_kube:
        print(f"  victims per answered node: kube-scheduler's {np.mean(victims_kube):.2f}, "
              f"the extender's {np.mean(victims_ours):.2f}")
    print(f"  preempt CPU: {1000 * cpu / max(n, 1):.3f} ms per candidate node ({1000 * cpu:.0f} ms in all)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
