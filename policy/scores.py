"""From a strategy's raw node scores to kube-scheduler's integer scores 0..10.

Let ``u_0 > u_1 > ... > u_{k-1}`` be the distinct raw scores of the feasible
nodes. Each gets a proportional level

    p_i = floor(10 * (u_i - u_{k-1}) / (u_0 - u_{k-1}))      (p_0 = 10)

and the final score is the largest value not above ``p_i`` that stays strictly
below the score of every better node:

    s_i = max(0, min_{j <= i} (p_j + j) - i)

So the best node(s) get 10, equal raw scores get equal scores, and a strictly
worse node gets a strictly lower score until the 11 integer levels run out
(then the worst share 0). When every feasible node ties, all get 10.
Infeasible nodes get 0.

A raw score that is not a finite number (a strategy's ±inf, NaN, or a range
too wide for ``10 (u_0 − u_{k−1})`` to be finite) has no proportion to keep, so
then the levels come from the ranks instead: the ``u_i`` above are replaced by
their positions ``k−1−i`` in the order (NaN below −inf), and the scores keep
the order, 0..10, as always.
"""

from __future__ import annotations

import numpy as np

MAX_SCORE = 10


def extender_scores(raw: np.ndarray, feasible: np.ndarray) -> np.ndarray:
    """Integer scores 0..10 for ``raw`` (higher is better) over ``feasible`` nodes."""
    scores = np.zeros(len(raw), dtype=np.int64)
    if not feasible.any():
        return scores
    values = raw[feasible].astype(np.float64)
    ascending, position = np.unique(np.where(np.isnan(values), -np.inf, values), return_inverse=True)
    position = position.reshape(-1)
    lo, hi = ascending[0], ascending[-1]
    with np.errstate(over="ignore", invalid="ignore"):
        spread = MAX_SCORE * (hi - lo)
    if not np.isfinite(spread):
        ascending = np.arange(len(ascending), dtype=np.float64)  # ranks: order without proportion
        lo, hi = ascending[0], ascending[-1]
    if hi == lo:
        scores[feasible] = MAX_SCORE
        return scores
    distinct = ascending[::-1]  # best first
    levels = np.floor(MAX_SCORE * (distinct - lo) / (hi - lo)).astype(np.int64)
    levels[0] = MAX_SCORE
    rank = np.arange(len(distinct))
    strict = np.maximum(np.minimum.accumulate(levels + rank) - rank, 0)
    scores[feasible] = strict[::-1][position]
    return scores
