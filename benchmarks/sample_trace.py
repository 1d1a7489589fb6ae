"""A small synthetic trace in the openb CSV format, shipped so ``cgpu-simulate`` runs from a fresh clone.

It is **not** Alibaba's trace (that one is not ours to copy into the
repository: ``cgpu-simulate --trace default --openb-dir DIR`` reads
it). It is generated here, with a fixed seed, in the same columns, and shaped
loosely after the published description of openb's default pod list (its
README in alibaba/clusterdata, cluster-trace-gpu-v2023): 16 nodes of the
trace's GPU models (104 GPUs), and 400 pods of which about 13 % ask for no
GPU, 40 % share one GPU (``gpu_milli`` a multiple of 10 from 50 to 810), the
rest take one or more whole GPUs, and one GPU pod in ten names the models it
may run on. Figures computed from it say nothing about the real workload; it
is there to show the command working and to test it.

    python -m benchmarks.sample_trace      # rewrites benchmarks/sample/*.csv (a test checks they match)
"""

from __future__ import annotations

import os
import sys

import numpy as np

SEED = 20230710  # USENIX ATC 2023's first day
DIRECTORY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sample")
NODE_FILE, POD_FILE = "sample_node_list.csv", "sample_pod_list.csv"
NODES_PATH, PODS_PATH = os.path.join(DIRECTORY, NODE_FILE), os.path.join(DIRECTORY, POD_FILE)
NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model"
POD_HEADER = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
              "scheduled_time")

NODE_KINDS = (  # count, CPU millicores, host memory MiB, GPUs, model
    (2, 64_000, 262_144, 2, "P100"),
    (3, 96_000, 393_216, 8, "G2"),
    (3, 96_000, 786_432, 8, "G2"),
    (3, 32_000, 131_072, 4, "T4"),
    (2, 64_000, 262_144, 8, "V100M16"),
    (1, 96_000, 393_216, 8, "V100M32"),
    (2, 128_000, 524_288, 8, "A10"),
)
PODS = 400
SPECS = ("G2", "T4", "V100M16|V100M32", "A10|G2")


def node_rows() -> list:
    """``(sn, cpu_milli, memory_mib, gpu, model)`` per node."""
    rows = []
    for count, cpu, memory, gpus, model in NODE_KINDS:
        rows += [(f"sample-node-{len(rows) + i:02d}", cpu, memory, gpus, model) for i in range(count)]
    return rows


def pod_rows(seed: int = SEED) -> list:
    """``(name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos, creation_time)`` per pod."""
    rng = np.random.default_rng(seed)
    rows, clock = [], 0
    for i in range(PODS):
        kind = rng.choice(["cpu", "share", "whole", "multi"], p=[0.13, 0.40, 0.35, 0.12])
        cpu = int(rng.choice([1_000, 2_000, 4_000, 6_000, 8_000, 12_000, 16_000]))
        memory = int(rng.choice([2_048, 4_096, 8_192, 12_288, 16_384, 24_576, 32_768]))
        if kind == "cpu":
            num_gpu, milli = 0, 0
        elif kind == "share":
            num_gpu, milli = 1, int(rng.integers(5, 82)) * 10
        elif kind == "whole":
            num_gpu, milli = 1, 1000
        else:
            num_gpu, milli = int(rng.choice([2, 4, 8], p=[0.6, 0.3, 0.1])), 1000
            cpu, memory = cpu * num_gpu // 2, memory * num_gpu // 2
        spec = str(rng.choice(SPECS)) if num_gpu and rng.random() < 0.1 else ""
        qos = str(rng.choice(["LS", "BE"], p=[0.8, 0.2]))
        clock += int(rng.integers(1, 600))
        rows.append((f"sample-pod-{i:04d}", cpu, memory, num_gpu, milli, spec, qos, clock))
    return rows


def node_csv() -> str:
    return NODE_HEADER + "\n" + "".join(",".join(map(str, row)) + "\n" for row in node_rows())


def pod_csv(seed: int = SEED) -> str:
    lines = [f"{name},{cpu},{memory},{k},{milli},{spec},{qos},Running,{created},,{created}\n"
             for name, cpu, memory, k, milli, spec, qos, created in pod_rows(seed)]
    return POD_HEADER + "\n" + "".join(lines)


def write(directory: str = DIRECTORY) -> tuple:
    """Write both files into ``directory``; their paths."""
    os.makedirs(directory, exist_ok=True)
    paths = os.path.join(directory, NODE_FILE), os.path.join(directory, POD_FILE)
    for path, text in zip(paths, (node_csv(), pod_csv())):
        with open(path, "w", newline="") as f:
            f.write(text)
    return paths


if __name__ == "__main__":
    for written in write(sys.argv[1] if len(sys.argv) > 1 else DIRECTORY):
        print(f"wrote {written}")
