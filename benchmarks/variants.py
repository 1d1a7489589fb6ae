"""Held-out traces: the default pod list with a different mix, to check results are not tuned to the shared ones.

``python -m benchmarks.variants --kind share --fraction 0.6 --out DIR`` writes
``openb_pod_list_<name>.csv`` (and copies the node list) where pods of one
kind — ``share`` (GPU-sharing), ``multi`` (multi-GPU) or ``cpu`` (CPU-only) —
make up ``fraction`` of the GPU demand (of the pods, for ``cpu``): pods of
that kind are drawn with replacement and added, or pods of that kind
dropped at random, from the base list, seeded. The FGD paper built its
gpushare/multigpu/cpu variants the same way in spirit; these fractions are
ones it did not publish.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys

import numpy as np

from benchmarks.trace import DEFAULT_DIR, MILLI, NODE_FILE, Pods, pod_file, read_pods

KINDS = ("share", "multi", "cpu")


def kind_mask(pods: Pods, kind: str) -> np.ndarray:
    if kind == "share":
        return (pods.num_gpu == 1) & (pods.gpu_milli < MILLI)
    if kind == "multi":
        return pods.num_gpu > 1
    if kind == "cpu":
        return pods.num_gpu == 0
    raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")


def reweigh(pods: Pods, kind: str, fraction: float, seed: int = 0) -> Pods:
    """Pods where ``kind`` makes up ``fraction`` of the GPU demand (of the pod count for ``cpu``).
    ``fraction`` 1 (``share`` or ``multi``): the other GPU pods are dropped and pods of the kind
    drawn until the kind alone asks for the base list's whole GPU demand (CPU-only pods kept)."""
    if not 0 < fraction < 1 and not (fraction == 1 and kind != "cpu"):
        raise ValueError("fraction must be between 0 and 1 (1 itself only for share and multi)")
    rng = np.random.default_rng(seed)
    mine = kind_mask(pods, kind)
    size = np.ones(len(pods)) if kind == "cpu" else pods.demand.astype(float)
    if fraction == 1:
        total, index = size.sum(), np.flatnonzero(mine | (size == 0)).tolist()
        own, candidates = size[mine].sum(), np.flatnonzero(mine)
        while own < total:
            pick = int(candidates[rng.integers(len(candidates))])
            index.append(pick)
            own += size[pick]
        return pods.take(np.array(index))
    own, rest = size[mine].sum(), size[~mine].sum()
    target = fraction / (1 - fraction) * rest  # the kind's total for the wanted fraction
    index = list(range(len(pods)))
    candidates = np.flatnonzero(mine)
    if own < target:
        while own < target:
            pick = int(candidates[rng.integers(len(candidates))])
            index.append(pick)
            own += size[pick]
    else:
        keep = list(rng.permutation(candidates))
        while own > target and keep:
            own -= size[keep.pop()]
        index = sorted(np.flatnonzero(~mine).tolist() + keep)
    return pods.take(np.array(index))


def write(pods: Pods, path: str) -> None:
    with open(path, "w") as f:
        f.write("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n")
        for i in range(len(pods)):
            f.write(f"v-{i:05d},{pods.cpu[i]},{pods.memory[i]},{pods.num_gpu[i]},{pods.gpu_milli[i]},"
                    f"{pods.gpu_spec[i]}\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.variants", description=__doc__.splitlines()[0])
    parser.add_argument("--trace-dir", default=DEFAULT_DIR)
    parser.add_argument("--base", default="default")
    parser.add_argument("--kind", required=True, choices=KINDS)
    parser.add_argument("--fraction", type=float, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    pods = reweigh(read_pods(pod_file(args.base, args.trace_dir)), args.kind, args.fraction, args.seed)
    os.makedirs(args.out, exist_ok=True)
    name = f"{args.kind}{round(args.fraction * 100):02d}"
    write(pods, pod_file(name, args.out))
    shutil.copy(os.path.join(args.trace_dir, NODE_FILE), os.path.join(args.out, NODE_FILE))
    print(f"wrote {pod_file(name, args.out)}: {len(pods)} pods")
    return 0


if __name__ == "__main__":
    sys.exit(main())
