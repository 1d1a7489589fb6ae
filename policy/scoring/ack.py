"""ack (the default): each node is judged by its own ``ack.node.gpu.placement``.

    raw(node) = f            on binpack nodes
    raw(node) = 1 − f        on spread nodes

with ``f`` the mean fullness of the chosen GPUs after placement (see
:mod:`policy.scoring.binpack`). This is the direction of ACK's own scoring;
its ``70 / n²`` term is the same for every node of one pod and drops out.
On a cluster whose nodes are all binpack it equals :mod:`binpack`.
"""

from __future__ import annotations

import numpy as np

from policy.names import SPREAD
from policy.placement import Candidates


class Ack:
    name = "ack"
    row_local = True

    def score(self, candidates: Candidates) -> np.ndarray:
        f = candidates.fill_after()
        return np.where(candidates.view.placement == SPREAD, 1.0 - f, f)
