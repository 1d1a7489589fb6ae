"""The openb CSVs (Alibaba GPU cluster trace v2023) as numpy columns.

Files are read from ``../shared/traces/openb/`` seen from the project root
(:data:`DEFAULT_DIR`) or any path. Nodes: ``sn, cpu_milli, memory_mib, gpu,
model``; pods: ``name, cpu_milli, memory_mib, num_gpu, gpu_milli`` and, where
present, ``gpu_spec`` (allowed GPU models joined by ``|``, empty = any); for
the replay with churn, each pod's ``creation_time`` and ``deletion_time``
(seconds) and ``qos`` (:func:`read_times`).
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass

import numpy as np

MILLI = 1000  # milli-GPU in one GPU

_BESIDE_PROJECT = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "traces", "openb")


def default_dir() -> str:
    """``../shared/traces/openb`` from the project root (this checkout), else from the working directory."""
    for candidate in (_BESIDE_PROJECT, os.path.join("..", "shared", "traces", "openb")):
        if os.path.isdir(candidate):
            return os.path.normpath(candidate)
    return os.path.normpath(_BESIDE_PROJECT)


DEFAULT_DIR = default_dir()
NODE_FILE = "openb_node_list_gpu_node.csv"
TRACES = ("default", "cpu050", "gpushare40", "multigpu20", "gpuspec10")

# GPU memory per model used by the paper's simulator, MiB (trace README).
GPU_MEMORY_MIB = {"T4": 15109, "V100M16": 16160, "P100": 16280, "A10": 22731, "V100M32": 32510,
                  "G2": 20000, "G3": 30000}


class TraceError(ValueError):
    """A trace file that is missing or not in the openb format."""


@dataclass
class Nodes:
    name: list
    cpu: np.ndarray  # millicores
    memory: np.ndarray  # MiB
    gpus: np.ndarray
    model: np.ndarray  # str

    def __len__(self) -> int:
        return len(self.name)

    @property
    def gpu_capacity(self) -> int:
        """Cluster GPU capacity in milli-GPU."""
        return int(self.gpus.sum()) * MILLI


@dataclass
class Pods:
    name: list
    cpu: np.ndarray  # millicores
    memory: np.ndarray  # MiB
    num_gpu: np.ndarray
    gpu_milli: np.ndarray  # per GPU; 1000 for whole-GPU pods, 0 for CPU-only ones
    gpu_spec: np.ndarray  # str, "" = any model

    def __len__(self) -> int:
        return len(self.name)

    @property
    def demand(self) -> np.ndarray:
        """GPU demand of each pod in milli-GPU."""
        return self.num_gpu * self.gpu_milli

    def take(self, order: np.ndarray) -> "Pods":
        return Pods([self.name[i] for i in order], self.cpu[order], self.memory[order], self.num_gpu[order],
                    self.gpu_milli[order], self.gpu_spec[order])


def _rows(path: str, required: tuple) -> list:
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in required if c not in (reader.fieldnames or [])]
            if missing:
                raise TraceError(f"{path}: missing column(s) {', '.join(missing)}")
            return list(reader)
    except OSError as exc:
        raise TraceError(f"cannot read {path}: {exc.strerror or exc}") from None


def _ints(rows: list, column: str, path: str) -> np.ndarray:
    try:
        return np.array([int(r[column] or 0) for r in rows], dtype=np.int64)
    except ValueError as exc:
        raise TraceError(f"{path}: column {column} is not whole numbers ({exc})") from None


def read_nodes(path: str) -> Nodes:
    rows = _rows(path, ("sn", "cpu_milli", "memory_mib", "gpu", "model"))
    return Nodes([r["sn"] for r in rows], _ints(rows, "cpu_milli", path), _ints(rows, "memory_mib", path),
                 _ints(rows, "gpu", path), np.array([r["model"] for r in rows], dtype=object))


def read_pods(path: str) -> Pods:
    rows = _rows(path, ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"))
    num_gpu = _ints(rows, "num_gpu", path)
    milli = _ints(rows, "gpu_milli", path)
    if ((num_gpu > 1) & (milli != MILLI)).any() or ((milli < 0) | (milli > MILLI)).any():
        raise TraceError(f"{path}: multi-GPU pods must have gpu_milli 1000 and shares must be 0..1000")
    milli = np.where(num_gpu == 0, 0, milli)
    spec = np.array([(r.get("gpu_spec") or "").strip() for r in rows], dtype=object)
    return Pods([r["name"] for r in rows], _ints(rows, "cpu_milli", path), _ints(rows, "memory_mib", path),
                num_gpu, milli, spec)


@dataclass
class Times:
    creation: np.ndarray  # seconds from the trace's start
    deletion: np.ndarray  # seconds, never before creation
    qos: np.ndarray  # str: LS, BE, Burstable, Guaranteed ("" when the file has no qos column)


def read_times(path: str) -> Times:
    """Each pod's creation and deletion time and QoS class, in the order of :func:`read_pods`."""
    rows = _rows(path, ("name", "creation_time", "deletion_time"))
    creation, deletion = _ints(rows, "creation_time", path), _ints(rows, "deletion_time", path)
    if (deletion < creation).any():
        raise TraceError(f"{path}: a pod is deleted before it is created (row {int(np.argmax(deletion < creation)) + 2})")
    return Times(creation, deletion, np.array([(r.get("qos") or "").strip() for r in rows], dtype=object))


def pod_file(trace: str, directory: str = DEFAULT_DIR) -> str:
    return os.path.join(directory, f"openb_pod_list_{trace}.csv")
