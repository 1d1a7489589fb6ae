"""spread: prefer the node where the pod leaves its GPUs emptiest.

    raw(node) = 1 − mean over the chosen GPUs g of fullness_after(g)

(``fullness_after`` as in :mod:`policy.scoring.binpack`).
"""

from __future__ import annotations

import numpy as np

from policy.placement import Candidates


class Spread:
    name = "spread"
    row_local = True

    def score(self, candidates: Candidates) -> np.ndarray:
        return 1.0 - candidates.fill_after()
