"""Held-out traces: the default pod list with a different mix, to check results are not tuned to the shared ones.

``python -m benchmarks.variants --kind share --fraction 0.6 --out DIR`` writes
``openb_pod_list_<name>.csv`` (and copies the node list) where pods of one
kind — ``share`` (GPU-sharing), ``multi`` (multi-GPU) or ``cpu`` (CPU-only) —
make up ``fraction`` of the GPU demand (of the pods, for ``cpu``), built the
way the FGD paper's published variants are (read from their files in
``alibaba/clusterdata``, ``cluster-trace-gpu-v2023/csv/``: ``gpushareXX``
keeps default's 8,152 pods and 1,088 CPU-only pods and redraws its 7,064 GPU
pods; ``multigpuXX`` appends multi-GPU pods; ``cpuXXX`` — XXX the CPU-only
pods' share of the pod count in tenths of a percent — adds or drops CPU-only
pods):

- ``share``: the GPU pod count is kept; sharing and other GPU pods are drawn
  (a sample without replacement up to the base's count, with replacement
  beyond) in the numbers that give sharing pods ``fraction`` of the demand;
- ``multi`` and ``cpu``: pods of the kind are drawn with replacement and
  added, or dropped at random, until they make up ``fraction``.

Seeded. ``--kind share --fraction 0.8`` is the paper's gpushare80,
``--kind cpu --fraction 0.25`` its cpu250.
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


def draw(rng: np.random.Generator, index: np.ndarray, count: int) -> list[int]:
    """``count`` of ``index``: a sample without replacement up to its size, then draws with replacement."""
    if count <= len(index):
        return rng.choice(index, count, replace=False).tolist()
    return index.tolist() + rng.choice(index, count - len(index), replace=True).tolist()


def redraw_gpu_pods(pods: Pods, fraction: float, rng: np.random.Generator) -> Pods:
    """As many GPU pods as ``pods`` has, sharing pods ``fraction`` of their demand (by the kinds'
    mean demand); CPU-only pods kept."""
    share, gpu = kind_mask(pods, "share"), pods.demand > 0
    other = gpu & ~share
    count = int(gpu.sum())
    if fraction == 1 or not other.any():
        sharing = count
    else:
        mean_share, mean_other = pods.demand[share].mean(), pods.demand[other].mean()
        sharing = round(fraction * count * mean_other / (mean_share * (1 - fraction) + fraction * mean_other))
    index = (np.flatnonzero(~gpu).tolist() + draw(rng, np.flatnonzero(share), sharing)
             + draw(rng, np.flatnonzero(other), count - sharing))
    return pods.take(np.array(sorted(index)))


def reweigh(pods: Pods, kind: str, fraction: float, seed: int = 0) -> Pods:
    """Pods where ``kind`` makes up ``fraction`` of the GPU demand (of the pod count for ``cpu``),
    built as the module says. ``fraction`` 1: every GPU pod a sharing pod (``share``); the other GPU
    pods dropped and multi-GPU pods drawn up to the base list's GPU demand (``multi``)."""
    if not 0 < fraction < 1 and not (fraction == 1 and kind != "cpu"):
        raise ValueError("fraction must be between 0 and 1 (1 itself only for share and multi)")
    rng = np.random.default_rng(seed)
    if kind == "share":
        return redraw_gpu_pods(pods, fraction, rng)
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
