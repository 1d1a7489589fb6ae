"""A floor under unallocated GPU % for any policy that places every sharing pod: offline best-fit decreasing.

The shares of the sharing pods that arrive by 100 % (same sequence as a run)
are packed offline, largest first, each into the fullest GPU it fits (a new
GPU when none). The idle share left in those GPUs is GPU that no pod of the
run could use with all sharing pods placed; an online policy, which sees the
pods in arrival order, leaves at least about as much.
``python -m benchmarks.floor [--traces ...] [--seeds 10]`` prints it per trace.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import numpy as np

from benchmarks import protocol
from benchmarks.trace import DEFAULT_DIR, MILLI, NODE_FILE, TRACES, pod_file, read_nodes, read_pods


def best_fit_decreasing_waste(shares) -> int:
    """Idle milli left in the GPUs that best-fit decreasing packs ``shares`` (milli, < 1000) into."""
    free = np.zeros(0, dtype=np.int64)
    for share in sorted(shares, reverse=True):
        room = np.flatnonzero(free >= share)
        if len(room):
            best = room[np.argmin(free[room])]
            free[best] -= share
        else:
            free = np.append(free, MILLI - share)
    return int(free.sum())


def floor(nodes, pods, seed: int) -> float:
    """Unallocated GPU % the sharing pods of one run's first 100 % leave even when packed offline."""
    capacity = nodes.gpu_capacity
    seq = pods.take(protocol.arrivals(pods, capacity, seed))
    last = protocol.last_at_or_below(protocol.arrived(seq.demand, capacity), 1.0)
    sharing = (seq.num_gpu[: last + 1] == 1) & (seq.gpu_milli[: last + 1] < MILLI)
    return 100.0 * best_fit_decreasing_waste(seq.gpu_milli[: last + 1][sharing]) / capacity


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.floor", description=__doc__.splitlines()[0])
    parser.add_argument("--trace-dir", default=DEFAULT_DIR)
    parser.add_argument("--traces", nargs="+", default=list(TRACES))
    parser.add_argument("--seeds", type=int, default=len(protocol.SEEDS))
    args = parser.parse_args(argv)
    nodes = read_nodes(os.path.join(args.trace_dir, NODE_FILE))
    for trace in args.traces:
        pods = read_pods(pod_file(trace, args.trace_dir))
        values = [floor(nodes, pods, s) for s in range(protocol.SEEDS[0], protocol.SEEDS[0] + args.seeds)]
        print(f"{trace}: {statistics.fmean(values):.2f} ± {statistics.stdev(values) if len(values) > 1 else 0:.2f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
