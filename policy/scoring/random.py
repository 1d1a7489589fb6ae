"""random: a baseline that scores feasible nodes uniformly at random.

    raw(node) ~ U[0, 1), independently per node and per call

The generator is the strategy's own, seeded from configuration, so a replay
with the same seed makes the same choices.
"""

from __future__ import annotations

import numpy as np

from policy.placement import Candidates


class Random:
    name = "random"

    def __init__(self, seed: int = 0):
        self._rng = np.random.default_rng(seed)

    def score(self, candidates: Candidates) -> np.ndarray:
        return self._rng.random(len(candidates.feasible))
