"""A small synthetic openb-format trace, written to a temporary directory for the replay tests."""

from __future__ import annotations

import os

import numpy as np

NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model"
POD_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"

NODES = [  # name, cpu, memory, gpus, model
    ("n-0", 32_000, 131_072, 4, "T4"),
    ("n-1", 16_000, 65_536, 2, "T4"),
    ("n-2", 64_000, 262_144, 8, "G2"),
    ("n-3", 8_000, 32_768, 1, "P100"),
    ("n-4", 48_000, 196_608, 4, "G2"),
]


def pods(count: int = 60, seed: int = 0) -> list:
    """(cpu, memory, num_gpu, gpu_milli, gpu_spec) rows mixing every kind the real trace has."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(count):
        kind = rng.choice(["share", "share", "whole", "multi", "cpu", "spec"])
        cpu, mem = int(rng.choice([2_000, 4_000, 8_000])), int(rng.choice([4_096, 8_192, 16_384]))
        if kind == "share":
            rows.append((cpu, mem, 1, int(rng.choice([120, 250, 470, 810])), ""))
        elif kind == "whole":
            rows.append((cpu, mem, 1, 1000, ""))
        elif kind == "multi":
            rows.append((cpu, mem, 2, 1000, ""))
        elif kind == "cpu":
            rows.append((cpu, mem, 0, 0, ""))
        else:
            rows.append((cpu, mem, 1, int(rng.choice([300, 1000])), str(rng.choice(["T4", "G2|P100"]))))
    return rows


def write(directory: str, pod_rows: list | None = None, name: str = "synthetic") -> tuple[str, str]:
    """Write the node list and a pod list in openb format; returns their paths."""
    nodes_path = os.path.join(directory, "openb_node_list_gpu_node.csv")
    with open(nodes_path, "w") as f:
        f.write(NODE_HEADER + "\n" + "".join(f"{n},{c},{m},{g},{model}\n" for n, c, m, g, model in NODES))
    pods_path = os.path.join(directory, f"openb_pod_list_{name}.csv")
    with open(pods_path, "w") as f:
        f.write(POD_HEADER + "\n")
        for i, (cpu, mem, k, milli, spec) in enumerate(pods() if pod_rows is None else pod_rows):
            f.write(f"pod-{i:04d},{cpu},{mem},{k},{milli},{spec},LS,Running,0,0,0\n")
    return nodes_path, pods_path
