"""Tie-breaks below a rounded measure: fuller GPUs, then fuller CPU and memory.

A strategy whose measure is rounded to 2⁻²⁰ (``fragmentation``'s growths)
orders equal measures by the node's GPU fullness ``u`` and then by the
fullness ``h`` of its CPU and memory once the pod is on it, both in [0, 1]:

    tie(u, h) = (⌊u · 2¹⁸⌉ + h) · 2⁻⁴⁰          ≤ 2⁻²² + 2⁻⁴⁰     (⌊·⌉: to the nearest)

Below 2⁻²⁰, so ``−measure + tie`` keeps the measure's order. u is kept to
2⁻¹⁸, rounded to the nearest so that two forms of one fullness that differ
by float noise count as equal (eight GPUs' fullness in thousandths that sum
to 4 may sum to 3.9999999999999996: floored, u's 0.49999999999999994 and 0.5
would differ, and the noise would decide where h should). u's steps are at
least 1 / (2 × GPUs × units per GPU), 3·10⁻⁵ (7 of 2⁻¹⁸) for 16 GPUs of
1,000 milli, more in GiB, so no two merge and h, at most 1, stays below the
next u (finer steps, e.g. GPU memory counted in MiB, count as equal and h
orders them). h's resolution is the float step of the sum: 2⁻¹¹ of h where
|measure| < 4, 2⁻⁸ up to 32. Packed, not ranked: a lexicographic rank of
(u, h) cost 400 µs at 2,500 nodes, this 10 µs (measured on this machine, 2026-11-26).
"""

from __future__ import annotations

import numpy as np

U_STEPS = 2.0 ** 18
SCALE = 2.0 ** -40


def tie(gpu_fill: np.ndarray, host_fill: np.ndarray) -> np.ndarray:
    """``tie(u, h)`` of each node (see module doc); u and h are clipped to [0, 1] (a node whose pods
    ask for more than it has, as the API server may report it, is no more than full)."""
    return (np.rint(np.clip(gpu_fill, 0, 1) * U_STEPS) + np.clip(host_fill, 0, 1)) * SCALE
