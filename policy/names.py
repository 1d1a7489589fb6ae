"""The resource names, labels and modes of ACK shared-GPU scheduling."""

GPU_MEM = "aliyun.com/gpu-mem"
GPU_CORE = "aliyun.com/gpu-core.percentage"
GPU_COUNT = "aliyun.com/gpu-count"
WHOLE_GPU = "nvidia.com/gpu"

# Pod labels.
POD_GPU_COUNT = "aliyun.com/gpu-count"
POD_PLACEMENT = "ack.gpushare.placement"
REQUIRE_WHOLE_DEVICE = "require-whole-device"

# Node labels.
NODE_SCHEDULE = "ack.node.gpu.schedule"
NODE_PLACEMENT = "ack.node.gpu.placement"
NODE_MAX_POD = "ack.node.gpu.max-pod"
GPU_MODEL_LABEL = "aliyun.accelerator/nvidia_name"  # the GPU model ACK labels GPU nodes with

# Sharing modes as stored in the cluster arrays.
MODE_NONE = 0  # not a sharing node (whole GPUs, topology, mig, disabled, none)
MODE_MEMORY = 1  # cgpu, share, mps: GPU memory is shared, compute is not
MODE_CORE = 2  # core_mem: GPU memory and compute are both shared

MODES_BY_LABEL = {"cgpu": MODE_MEMORY, "share": MODE_MEMORY, "mps": MODE_MEMORY, "core_mem": MODE_CORE}
MODE_NAMES = {MODE_NONE: "none", MODE_MEMORY: "memory", MODE_CORE: "memory+core"}

# GPU choice inside a node.
BINPACK = 0
SPREAD = 1
PLACEMENTS_BY_LABEL = {"binpack": BINPACK, "spread": SPREAD}
PLACEMENT_NAMES = {BINPACK: "binpack", SPREAD: "spread"}

DEFAULT_MAX_POD = 20  # cGPU runs at most 20 containers per GPU
UNLIMITED_PODS = 2**31 - 1  # share and mps nodes have no per-GPU pod limit
CORE_PER_GPU = 100  # gpu-core.percentage of one whole GPU

MAX_GPUS_PER_NODE = 64  # more GPUs than any node has: a count beyond it is refused, not allocated
MAX_GIB_PER_GPU = 2**20  # 1 PiB per GPU: beyond it a node's capacity is refused (the state keeps int32)
MAX_CORE_PER_GPU = 100 * MAX_GPUS_PER_NODE
MAX_PODS_LABEL = 10_000  # ack.node.gpu.max-pod above this is refused (the state counts pods per GPU in int32)
