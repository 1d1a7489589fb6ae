"""bestfit: the FGD paper's BestFit baseline — the node left with the least CPU and GPU.

    raw(node) = 1 − (½ · cpu_left / 128 cores + ½ · gpu_left / 8 GPUs)

after placement: ``cpu_left`` is the node's allocatable CPU minus the pods'
requests and this pod's (0 where the node's CPU is not known), ``gpu_left``
the sum over its healthy GPUs of ``1 − fullness`` (fullness as in
:mod:`policy.scoring.binpack`) once the pod is on its chosen GPUs. 128 cores
and 8 GPUs are the paper's normalisers (the largest node). Inside the node
the GPUs are the placement label's choice (binpack: the fullest that fit,
i.e. best fit).
"""

from __future__ import annotations

import numpy as np

from policy.names import MODE_CORE
from policy.placement import Candidates
from policy.state import fullness_of

CPU_SCALE = 128_000  # millicores
GPU_SCALE = 8


class BestFit:
    name = "bestfit"
    row_local = True

    def score(self, candidates: Candidates) -> np.ndarray:
        view, request = candidates.view, candidates.request
        on_chosen = np.zeros(view.healthy.shape, dtype=np.int64)
        rows = np.repeat(np.arange(len(view)), candidates.gpus.shape[1])
        picked = candidates.gpus.reshape(-1)
        on_chosen[rows[picked >= 0], picked[picked >= 0]] = 1
        after = fullness_of(view.mem_used + on_chosen * request.memory_per_gpu, view.mem_total,
                            view.core_used + on_chosen * request.core_per_gpu, view.core_total,
                            (view.mode == MODE_CORE)[:, None])
        gpu_left = np.where(view.healthy, 1.0 - after, 0.0).sum(axis=1)
        cpu_left = np.where(view.cpu_total > 0, view.cpu_total - view.cpu_used - request.cpu, 0)
        return 1.0 - (0.5 * cpu_left / CPU_SCALE + 0.5 * gpu_left / GPU_SCALE)
