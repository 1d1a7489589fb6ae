"""Small clusters and workloads for the churn replay's tests, built in memory (milli mapping: 1000 units a GPU)."""

from __future__ import annotations

import numpy as np

from benchmarks.churn import Move
from benchmarks.timeline import Workload
from benchmarks.trace import Nodes, Pods

BIG_HOST = (64_000, 262_144)  # CPU millicores and MiB no pod here exhausts


def nodes(gpus: list, models: list | None = None, hosts: list | None = None) -> Nodes:
    n = len(gpus)
    hosts = hosts or [BIG_HOST] * n
    return Nodes([f"n-{i}" for i in range(n)], np.array([h[0] for h in hosts]), np.array([h[1] for h in hosts]),
                 np.array(gpus), np.array(models or ["T4"] * n, dtype=object))


def work(pods: list) -> Workload:
    """``pods``: (arrive, depart, num_gpu, gpu_milli, priority[, cpu, mib, spec]) in any order."""
    pods = sorted(pods, key=lambda p: p[0])
    rows = [p + (1_000, 1_024, "")[len(p) - 5:] for p in pods]
    table = Pods([f"p{i}" for i in range(len(rows))], np.array([r[5] for r in rows]), np.array([r[6] for r in rows]),
                 np.array([r[2] for r in rows]), np.array([r[3] if r[2] else 0 for r in rows]),
                 np.array([r[7] for r in rows], dtype=object))
    n = len(rows)
    return Workload(table, np.zeros(n, dtype=np.int64), np.arange(n), np.array([float(r[0]) for r in rows]),
                    np.array([float(r[1]) for r in rows]), np.array([r[4] for r in rows], dtype=np.int64))


def random_work(rng: np.random.Generator, count: int, horizon: float = 1000.0) -> Workload:
    """Share, whole-GPU, two-GPU and CPU-only pods arriving over ``horizon`` seconds."""
    pods = []
    for _ in range(count):
        arrive = float(rng.uniform(0, horizon))
        life = float(rng.choice([0.0, rng.exponential(horizon / 4)]))
        kind = rng.integers(4)
        k, milli = [(1, int(rng.choice([120, 250, 470, 810]))), (1, 1000), (2, 1000), (0, 0)][kind]
        pods.append((arrive, arrive + life, k, milli, int(rng.integers(3)), int(rng.choice([1_000, 8_000])),
                     int(rng.choice([1_024, 32_768])), ""))
    return work(pods)


def shuffling_planner(rng: np.random.Generator):
    """A planner that proposes many legal-looking moves: each resident share pod to another GPU with room."""
    def plan(ledger, held, waiting, max_moves):
        state = ledger.state
        moves = []
        for allocation in ledger.allocations():
            (gpu, amount), = allocation.memory_per_gpu.items() if len(allocation.memory_per_gpu) == 1 \
                else ((None, None),)
            if gpu is None or amount >= 1000:
                continue
            for name in rng.permutation([n for n in state.names if n is not None]):
                row = state.index[name]
                free = state.array("mem_free")[row]
                room = [g for g in np.flatnonzero(free >= amount) if (name, g) != (allocation.node, gpu)]
                if room:
                    moves.append(Move(allocation.pod.uid, name, (int(room[0]),)))
                    break
            if len(moves) >= 3 * max_moves + 2:  # more than allowed: the replay must cut the plan
                break
        return moves

    return plan
