"""Unaccounted pods: bound, asking for shared GPU, saying on no annotation which GPU they use.

Such a pod is never silently dropped: it is held back on *every* GPU of its
node (:meth:`UnaccountedPods.hold`) until its allocation shows up or it goes,
and reported (inspect, metrics, a Warning event from the Kubernetes backend).
Holding and releasing take the node's lock and the state's lock, as the
allocation records do.
"""

from __future__ import annotations

from dataclasses import dataclass

from extender.ledger.records import PodRef
from extender.logs import fields, get_logger
from policy.echo import shown
from policy.request import GPURequest


@dataclass(slots=True)
class Unaccounted:
    """A bound pod that asks for shared GPU but says on no annotation which GPU it uses.

    Held back on every GPU of its node (see :meth:`UnaccountedPods.hold`): ``memory``
    and ``core`` are per GPU (None: unknown, the pod's request is malformed, so
    each GPU is held whole); ``held`` is what is counted on the node's row now.
    """
    pod: PodRef
    node: str
    memory: int | None
    core: int | None
    wants_core: bool = False
    reason: str = "bound pod requests shared GPU but carries no allocation annotation"
    held: tuple = ()  # ({gpu: GiB}, {gpu: compute}) counted on the row


class UnaccountedPods:
    """The unaccounted pods by UID, each counted on its node's row (``node_lock``: the ledger's per-node locks)."""

    def __init__(self, state, node_lock):
        self.state = state
        self.node_lock = node_lock
        self._unaccounted: dict[str, Unaccounted] = {}

    def __contains__(self, uid: str) -> bool:
        return uid in self._unaccounted

    def __len__(self) -> int:
        return len(self._unaccounted)

    def values(self):
        """The pods held, as a live view (read it under the state's lock, or copy it)."""
        return self._unaccounted.values()

    def hold(self, ref: PodRef, node: str, request: GPURequest | None, invalid: str | None) -> None:
        """Count an unaccounted pod on its node, conservatively: its per-GPU request
        on *every* GPU of the node (the whole GPU when the request is unreadable),
        each GPU one pod more, and its kind (memory only, or memory and compute)
        for the no-mixing rule. Whichever GPU the pod really uses, the node is then
        never filled past what it has."""
        if request is not None:
            item = Unaccounted(ref, node, request.memory_per_gpu, request.core_per_gpu if request.wants_core else 0,
                               request.wants_core)
        else:
            item = Unaccounted(ref, node, None, None, False,
                               reason=f"bound pod asks for shared GPU with a request that cannot be read "
                                      f"({shown(invalid, 200)}); each GPU of the node is held whole")
        with self.node_lock(node), self.state.lock:
            self._unaccounted[ref.uid] = item
            self.apply(item)
        get_logger().warning("unaccounted GPU use", extra=fields(
            pod=str(ref), uid=ref.uid, node=node, memory=item.memory, core=item.core, reason=item.reason))

    def apply(self, item: Unaccounted) -> None:
        """Count ``item`` on its node's row as it is now (under the state's lock)."""
        state = self.state
        row = state.index.get(item.node, -1)
        if row < 0:
            item.held = ()
            return
        n = int(state.array("gpu_count")[row])
        totals, cores = state.array("mem_total")[row, :n].tolist(), state.array("core_total")[row, :n].tolist()
        memory = {g: t if item.memory is None else min(item.memory, t) for g, t in enumerate(totals)}
        core = {g: c if item.core is None else min(item.core, c) for g, c in enumerate(cores)
                if item.core is None and c or item.core}
        state.add_usage(item.node, memory, core, item.wants_core)
        item.held = (memory, core)

    def unhold(self, uid: str) -> None:
        """Stop holding the pod (its allocation showed up, or it went)."""
        item = self._unaccounted.get(uid)
        if item is None:
            return
        with self.node_lock(item.node), self.state.lock:
            if self._unaccounted.pop(uid, None) is not None and item.held:
                self.state.add_usage(item.node, *item.held, item.wants_core, -1)
                item.held = ()

    def reapply(self, node: str, is_new: bool) -> None:
        """Count the pods of ``node`` on its row again: all of them when the row is new, else those not
        counted yet (the node's GPUs were unknown); under the state's lock."""
        for item in self._unaccounted.values():
            if item.node == node and (is_new or not item.held):
                self.apply(item)
