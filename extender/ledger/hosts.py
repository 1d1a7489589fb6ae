"""CPU and host memory of the pods bound to each node, counted on the node's row for strategies that weigh them.

A pod counts on the node it is bound to (shared-GPU or not) until it finishes
or is deleted; bind counts it at once. A node that leaves and comes back
counts its pods again (:meth:`HostCounts.restore`). Counting takes a lock of
its own.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class HostUse:
    """A bound pod's CPU (millicores) and host-memory (bytes) requests on its node."""

    node: str
    cpu: int
    memory: int


class HostCounts:
    """Every pod's counted :class:`HostUse`, by pod and by node, and the state's host usage they sum to."""

    def __init__(self, state):
        self.state = state
        self._host: dict[str, HostUse] = {}
        self._host_by_node: dict[str, dict[str, HostUse]] = defaultdict(dict)
        self._host_lock = threading.Lock()

    def get(self, uid: str) -> HostUse | None:
        """The CPU and host memory counted for a pod, if any."""
        return self._host.get(uid)

    def count(self, uid: str, use: HostUse | None) -> None:
        """Make ``use`` the pod's counted CPU and host memory (None: count nothing)."""
        with self._host_lock:
            old = self._host.get(uid)
            if old == use:
                return
            if old is not None:
                del self._host[uid]
                self._host_by_node[old.node].pop(uid, None)
                self.state.add_host_usage(old.node, old.cpu, old.memory, -1)
            if use is not None:
                self._host[uid] = use
                self._host_by_node[use.node][uid] = use
                self.state.add_host_usage(use.node, use.cpu, use.memory)

    def restore(self, node: str) -> None:
        """Count again the pods of ``node``, whose row is new (it left and came back); under the state's lock."""
        for use in self._host_by_node.get(node, {}).values():
            self.state.add_host_usage(node, use.cpu, use.memory)
