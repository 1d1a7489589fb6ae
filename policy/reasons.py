"""Why a node cannot take a pod: stable codes, short messages, resolvability.

Messages end up in the pod's event (``0/N nodes are available: 3 <reason>``),
so they are short, fixed and low-cardinality. A reason is *unresolvable* when
no amount of waiting or preemption on that node would let the pod in (wrong
mode, too small, too few GPUs); *resolvable* when freeing GPUs could.
"""

from __future__ import annotations

import numpy as np

FITS = 0
UNKNOWN_NODE = 1
NOT_SHARING = 2
NEEDS_CORE_NODE = 3
NEEDS_MEMORY_NODE = 4
TOO_FEW_GPUS = 5
MEMORY_TOO_BIG = 6
CORE_TOO_BIG = 7
WHOLE_SIZE_MISMATCH = 8
OTHER_MODE_PODS = 9
NO_HEALTHY_GPU = 10
NO_FREE_GPU = 11
NO_MEMORY = 12
NO_CORE = 13
NO_POD_SLOT = 14
NO_SINGLE_GPU = 15
HELD_ELSEWHERE = 16  # a defragmentation move holds this pod's room on another node

MESSAGES = {
    FITS: "",
    UNKNOWN_NODE: "node is unknown to the GPU-share extender",
    NOT_SHARING: "node does not share GPUs",
    NEEDS_CORE_NODE: "pod shares GPU compute; node shares GPU memory only",
    NEEDS_MEMORY_NODE: "pod shares GPU memory only; node is core_mem",
    TOO_FEW_GPUS: "node has fewer GPUs than the pod's aliyun.com/gpu-count",
    MEMORY_TOO_BIG: "GPU memory request is larger than the node's GPUs",
    CORE_TOO_BIG: "GPU compute request is larger than the node's GPUs",
    WHOLE_SIZE_MISMATCH: "whole-device request does not match the node's GPU size",
    OTHER_MODE_PODS: "node still hosts pods of another GPU-sharing mode",
    NO_HEALTHY_GPU: "not enough healthy GPUs",
    NO_FREE_GPU: "not enough completely free GPUs",
    NO_MEMORY: "insufficient free GPU memory",
    NO_CORE: "insufficient free GPU compute",
    NO_POD_SLOT: "GPUs are at their pod limit (ack.node.gpu.max-pod)",
    NO_SINGLE_GPU: "no GPU has enough free memory and compute together",
    HELD_ELSEWHERE: "room for this pod is held on another node (defragmentation)",
}

# Stable snake_case names of the codes, for metric labels (``reason="no_memory"``).
NAMES = {
    FITS: "fits", UNKNOWN_NODE: "unknown_node", NOT_SHARING: "not_sharing", NEEDS_CORE_NODE: "needs_core_node",
    NEEDS_MEMORY_NODE: "needs_memory_node", TOO_FEW_GPUS: "too_few_gpus", MEMORY_TOO_BIG: "memory_too_big",
    CORE_TOO_BIG: "core_too_big", WHOLE_SIZE_MISMATCH: "whole_size_mismatch", OTHER_MODE_PODS: "other_mode_pods",
    NO_HEALTHY_GPU: "no_healthy_gpu", NO_FREE_GPU: "no_free_gpu", NO_MEMORY: "no_memory", NO_CORE: "no_core",
    NO_POD_SLOT: "no_pod_slot", NO_SINGLE_GPU: "no_single_gpu",
    HELD_ELSEWHERE: "held_elsewhere",
}

UNRESOLVABLE = frozenset(
    {UNKNOWN_NODE, NOT_SHARING, NEEDS_CORE_NODE, NEEDS_MEMORY_NODE, TOO_FEW_GPUS, MEMORY_TOO_BIG,
     CORE_TOO_BIG, WHOLE_SIZE_MISMATCH}
)

# Lookup tables indexed by code, for building replies without per-node branches.
MESSAGE_TABLE = np.array([MESSAGES[c] for c in range(len(MESSAGES))], dtype=object)
UNRESOLVABLE_TABLE = np.array([c in UNRESOLVABLE for c in range(len(MESSAGES))], dtype=bool)
