"""binpack: prefer the node where the pod leaves its GPUs fullest.

    raw(node) = mean over the chosen GPUs g of fullness_after(g)

where ``fullness_after`` is ``(mem_used + m) / mem_total`` on memory-only nodes
and the mean of that and ``(core_used + c) / core_total`` on core_mem nodes.
A GPU the pod fills exactly scores 1.
"""

from __future__ import annotations

import numpy as np

from policy.placement import Candidates


class Binpack:
    name = "binpack"
    row_local = True

    def score(self, candidates: Candidates) -> np.ndarray:
        return candidates.fill_after()
