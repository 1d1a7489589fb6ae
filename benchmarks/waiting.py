"""Pods that fit nowhere yet, in the order kube-scheduler's queue retries them.

Highest priority first, then the oldest (earliest arrival), then the
arrival's index (determinism) — ``PrioritySort``'s order. Each pod also
carries a *kind*: pods of one kind ask for the same thing (request, CPU,
memory, GPU models), so where one does not fit, none does; a retry that has
tried every kind waiting may stop.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import Counter


class WaitingPods:
    """The pending queue (see module doc); pods are arrival indices."""

    def __init__(self) -> None:
        self._keys: list[tuple] = []  # (-priority, arrival time, index), sorted
        self._key_of: dict[int, tuple] = {}
        self._kind_of: dict[int, object] = {}
        self._kinds: Counter = Counter()

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, pod: int) -> bool:
        return pod in self._key_of

    def add(self, pod: int, priority: int, arrived: float, kind) -> None:
        key = (-priority, arrived, pod)
        insort(self._keys, key)
        self._key_of[pod] = key
        self._kind_of[pod] = kind
        self._kinds[kind] += 1

    def remove(self, pod: int) -> bool:
        """Take ``pod`` out (placed or deleted); False when it was not waiting."""
        key = self._key_of.pop(pod, None)
        if key is None:
            return False
        del self._keys[bisect_left(self._keys, key)]
        kind = self._kind_of.pop(pod)
        self._kinds[kind] -= 1
        if not self._kinds[kind]:
            del self._kinds[kind]
        return True

    def ordered(self) -> list[int]:
        """The waiting pods in retry order (a copy: the queue may change while it is walked)."""
        return [key[2] for key in self._keys]

    def kind(self, pod: int):
        return self._kind_of[pod]

    def kinds(self) -> int:
        """How many kinds are waiting."""
        return len(self._kinds)
