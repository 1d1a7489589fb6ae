"""kube-scheduler's part of a decision, emulated around the extender.

kube-scheduler keeps its own cache of what pods request on each node. For a
pod it

1. filters nodes: CPU and host memory fit (NodeResourcesFit) and the pod's
   GPU-model constraint, a required node affinity on the node's model label
   (NodeAffinity);
2. asks the extender to filter the rest, then to prioritize the survivors;
3. adds up scores: ``extender score × weight × 10`` plus, in the realistic
   setting, its default scoring plugins — emulated here as NodeResourcesFit's
   LeastAllocated and NodeResourcesBalancedAllocation over CPU and memory,
   both weight 1, with Go's integer arithmetic (the other default plugins
   score every node alike in this cluster: no taints, images, pod affinity
   or topology spread);
4. picks uniformly at random among the nodes with the top total.

Three settings (``SETTINGS``):

* ``paper`` — as the FGD simulator: the extender's strategy scores every pod,
  CPU-only ones too (as a request for no GPU), and no default plugin scores;
* ``kube`` — the default deployment with ``managedResources``
  (``manifests/overlays/default/scheduler-config.yaml``): the extender never sees CPU-only
  pods, the default plugins place them; GPU pods get the extender's score with
  that manifest's weight (one extender point outweighs all default plugins)
  plus the default plugins' scores, which then break the extender's ties;
* ``shipped`` — the fragmentation deployment (``manifests/overlays/fragmentation/``):
  every pod of its scheduler goes through the extender (``--score-all-pods``, no
  ``managedResources``), and every pod's total is the extender's score with
  that manifest's weight plus the default plugins' scores.

The weights are read from the manifests, not copied here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from benchmarks.trace import Nodes

SETTINGS = ("paper", "kube", "shipped")
MANIFESTS = Path(__file__).resolve().parents[1] / "manifests"
CONFIG_OF = {"kube": MANIFESTS / "overlays" / "default" / "scheduler-config.yaml",
             "shipped": MANIFESTS / "overlays" / "fragmentation" / "scheduler-config.yaml"}


def extender_weight(setting: str) -> int:
    """The extender's ``weight`` in the scheduler configuration the setting deploys."""
    (extender,) = yaml.safe_load(CONFIG_OF[setting].read_text())["extenders"]
    return int(extender["weight"])


def all_pods_through_extender(setting: str) -> bool:
    """Whether the extender sees (and scores) pods that ask for no GPU in ``setting``."""
    return setting in ("paper", "shipped")
MAX_NODE_SCORE = 100
MAX_EXTENDER_PRIORITY = 10


class KubeScheduler:
    def __init__(self, nodes: Nodes, setting: str, rng: np.random.Generator):
        if setting not in SETTINGS:
            raise ValueError(f"unknown setting {setting!r}; known: {', '.join(SETTINGS)}")
        self.setting = setting
        self.weight = extender_weight(setting) if setting in CONFIG_OF else None
        self.rng = rng
        self.cpu_total = nodes.cpu.copy()
        self.mem_total = nodes.memory.copy()
        self.cpu_used = np.zeros(len(nodes), dtype=np.int64)
        self.mem_used = np.zeros(len(nodes), dtype=np.int64)
        self.model = nodes.model
        self._affinity: dict = {}

    def affinity(self, spec: str) -> np.ndarray:
        """Nodes whose model label is one the pod allows (every node for an empty spec)."""
        mask = self._affinity.get(spec)
        if mask is None:
            allowed = [m for m in spec.split("|") if m]
            mask = np.isin(self.model, allowed) if allowed else np.ones(len(self.model), dtype=bool)
            self._affinity[spec] = mask
        return mask

    def filter(self, cpu: int, memory: int, spec: str) -> np.ndarray:
        """Indices of the nodes that pass kube-scheduler's own filters."""
        fits = (self.cpu_total - self.cpu_used >= cpu) & (self.mem_total - self.mem_used >= memory)
        return np.flatnonzero(fits & self.affinity(spec))

    def fits_on(self, node: int, cpu: int, memory: int, spec: str) -> bool:
        """Whether ``node`` passes kube-scheduler's own filters (:meth:`filter` for one node)."""
        return bool(self.cpu_total[node] - self.cpu_used[node] >= cpu and self.mem_total[node] - self.mem_used[node]
                    >= memory and self.affinity(spec)[node])

    def default_scores(self, nodes: np.ndarray, cpu: int, memory: int) -> np.ndarray:
        """LeastAllocated + BalancedAllocation for placing the pod on each of ``nodes``."""
        cpu_total, mem_total = self.cpu_total[nodes], self.mem_total[nodes]
        cpu_after, mem_after = self.cpu_used[nodes] + cpu, self.mem_used[nodes] + memory
        least = (((cpu_total - cpu_after) * MAX_NODE_SCORE) // cpu_total
                 + ((mem_total - mem_after) * MAX_NODE_SCORE) // mem_total) // 2
        cpu_fraction = np.minimum(cpu_after / cpu_total, 1.0)
        mem_fraction = np.minimum(mem_after / mem_total, 1.0)
        balanced = ((1.0 - np.abs(cpu_fraction - mem_fraction) / 2) * MAX_NODE_SCORE).astype(np.int64)
        return least + balanced

    def total_scores(self, nodes: np.ndarray, extender: np.ndarray | None, cpu: int, memory: int) -> np.ndarray:
        """Total score of each of ``nodes``; ``extender`` holds the extender's 0..10 scores or None."""
        if self.setting == "paper":
            return extender
        total = self.default_scores(nodes, cpu, memory)
        if extender is not None:
            total = total + extender * self.weight * (MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY)
        return total

    def pick(self, nodes: np.ndarray, total: np.ndarray) -> int:
        """A node uniformly at random among those with the top total score."""
        best = np.flatnonzero(total == total.max())
        return int(nodes[best[self.rng.integers(len(best))]])

    def bind(self, node: int, cpu: int, memory: int) -> None:
        self.cpu_used[node] += cpu
        self.mem_used[node] += memory

    def unbind(self, node: int, cpu: int, memory: int) -> None:
        """A pod bound with :meth:`bind` left the node."""
        self.cpu_used[node] -= cpu
        self.mem_used[node] -= memory
