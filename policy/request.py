"""What a pod asks of shared GPUs, read from a v1 Pod and validated.

Contract of :func:`parse_pod_request`:

* returns ``None`` for a pod that asks for no shared-GPU resource (it is passed
  through untouched);
* returns a :class:`GPURequest` for a valid shared-GPU pod;
* raises :class:`InvalidRequest` with one specific, stable message naming the
  first rule the pod breaks.

Rules (ACK's): amounts come from ``limits`` of ``spec.containers`` (a value
present only in ``requests`` is taken from there; both present must agree);
init containers are ignored. ``aliyun.com/gpu-mem`` is whole GiB, at least 1,
and required; ``aliyun.com/gpu-core.percentage`` is a multiple of 5 from 5 to
100 and at most 100 for the whole pod. Every GPU container asks for the same
set of resources. Pod label ``aliyun.com/gpu-count=N`` splits the pod's memory
evenly over N GPUs of one node (memory only; each container's amount divides
by N). Pod label ``ack.gpushare.placement=require-whole-device`` asks for
completely free GPUs that the request fills exactly.

A request also carries the pod's CPU (millicores) and host memory (bytes) as
kube-scheduler counts them (:func:`host_requests`) and the GPU models it may
use (:func:`gpu_models`); placement never checks them (kube-scheduler does),
but a strategy may weigh them. A request with
``gpu_count == 0`` (:func:`host_request`) is a pod that asks for no GPU: it
fits every known node and takes no GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from fractions import Fraction

from policy.names import (
    CORE_PER_GPU,
    MAX_GPUS_PER_NODE,
    GPU_CORE,
    GPU_MEM,
    GPU_MODEL_LABEL,
    POD_GPU_COUNT,
    POD_PLACEMENT,
    REQUIRE_WHOLE_DEVICE,
)
from policy.echo import shown
from policy.quantity import QuantityError, count_label, parse_quantity


class InvalidRequest(ValueError):
    """A shared-GPU pod that breaks one of ACK's rules; ``str()`` says which."""


@dataclass(frozen=True)
class ContainerRequest:
    index: int  # position in spec.containers
    name: str
    memory: int  # GiB, the container's total over all its GPUs
    core: int  # compute units, 0 for a memory-only container


@dataclass(frozen=True)
class GPURequest:
    containers: tuple[ContainerRequest, ...]
    gpu_count: int = 1
    whole_device: bool = False
    cpu: int = 0  # millicores, the pod's CPU request
    host_memory: int = 0  # bytes, the pod's memory request
    models: frozenset | None = None  # GPU models (GPU_MODEL_LABEL values) the pod may use, None = any

    @cached_property
    def memory(self) -> int:
        """GiB for the whole pod."""
        return sum(c.memory for c in self.containers)

    @cached_property
    def core(self) -> int:
        """Compute units for the whole pod (0 when memory-only)."""
        return sum(c.core for c in self.containers)

    @cached_property
    def memory_per_gpu(self) -> int:
        return self.memory // self.gpu_count if self.gpu_count else 0

    @cached_property
    def core_per_gpu(self) -> int:
        return self.core // self.gpu_count if self.gpu_count else 0

    @cached_property
    def wants_core(self) -> bool:
        """True for a memory+compute pod, which only core_mem nodes take."""
        return self.core > 0

    @cached_property
    def shape(self) -> tuple[int, int, int]:
        """``(memory per GPU, core per GPU, GPU count)``: what placement depends on."""
        return (self.memory_per_gpu, self.core_per_gpu, self.gpu_count)

    @cached_property
    def fit_key(self) -> tuple:
        """All that decides where the request fits (:func:`policy.placement.gpu_fit`)."""
        return (self.memory_per_gpu, self.core_per_gpu, self.gpu_count, self.wants_core, self.whole_device)

    @cached_property
    def placement_key(self) -> tuple:
        """All that placement and scoring read: the request but for how it splits over containers."""
        return self.fit_key + (self.cpu, self.host_memory, self.models)


def simple_request(memory: int, core: int = 0, gpu_count: int = 1, whole_device: bool = False,
                   cpu: int = 0, host_memory: int = 0, models: frozenset | None = None) -> GPURequest:
    """A one-container request, for callers that have no Pod object (replays, tests)."""
    return GPURequest((ContainerRequest(0, "main", memory, core),), gpu_count, whole_device, cpu, host_memory,
                      models)


def host_request(cpu: int = 0, host_memory: int = 0) -> GPURequest:
    """A pod that asks for no GPU, only ``cpu`` millicores and ``host_memory`` bytes."""
    return GPURequest((), 0, False, cpu, host_memory)


def _object(value) -> dict:
    """``value`` if it is a JSON object, else an empty one (for fields read leniently)."""
    return value if isinstance(value, dict) else {}


def gpu_models(pod: dict) -> frozenset | None:
    """The GPU models a pod may use, from ``spec.nodeSelector`` and required node affinity on GPU_MODEL_LABEL.

    nodeSelector gives one model; a required nodeAffinity whose every term has
    an ``In`` expression on the label gives the union of their values. Both
    present: the intersection. None when the pod does not restrict the model
    (other operators are not interpreted, which only makes the set larger).
    """
    spec = _object(_object(pod).get("spec"))
    allowed = None
    selector = _object(spec.get("nodeSelector"))
    if isinstance(selector.get(GPU_MODEL_LABEL), str):
        allowed = frozenset([selector[GPU_MODEL_LABEL]])
    required = _object(_object(_object(spec.get("affinity")).get("nodeAffinity"))
                       .get("requiredDuringSchedulingIgnoredDuringExecution"))
    terms = required.get("nodeSelectorTerms")
    if isinstance(terms, list) and terms:
        union: set = set()
        for term in terms:
            expressions = _object(term).get("matchExpressions")
            values = [e.get("values") for e in (expressions if isinstance(expressions, list) else ())
                      if isinstance(e, dict) and e.get("key") == GPU_MODEL_LABEL and e.get("operator") == "In"]
            if not values:
                union = None
                break
            union.update(v for v in (values[0] if isinstance(values[0], list) else ()) if isinstance(v, str))
        if union is not None:
            allowed = frozenset(union) if allowed is None else allowed & frozenset(union)
    return allowed


_NOTHING = Fraction(0)


def _host_amount(container: dict, resource: str) -> Fraction:
    """A container's request of ``resource`` (its limit when it has no request), 0 if unreadable."""
    resources = _object(container.get("resources"))
    for source in ("requests", "limits"):
        amounts = _object(resources.get(source))
        if resource in amounts:
            try:
                return max(parse_quantity(amounts[resource]), _NOTHING)
            except QuantityError:
                return _NOTHING
    return _NOTHING


def host_requests(pod: dict) -> tuple[int, int]:
    """``(cpu millicores, memory bytes)`` the pod requests, rounded up, as kube-scheduler sums them.

    The containers' sum, or the largest init container when that is larger,
    plus ``spec.overhead``. A value that is not a quantity counts as 0 (the
    API server would not have admitted it).
    """
    spec = _object(_object(pod).get("spec"))
    containers, inits = spec.get("containers"), spec.get("initContainers")
    cpu = memory = _NOTHING
    for container in containers if isinstance(containers, list) else ():
        if isinstance(container, dict):
            cpu += _host_amount(container, "cpu")
            memory += _host_amount(container, "memory")
    for container in inits if isinstance(inits, list) else ():
        if isinstance(container, dict):
            cpu = max(cpu, _host_amount(container, "cpu"))
            memory = max(memory, _host_amount(container, "memory"))
    overhead = _object(spec.get("overhead"))
    if overhead:
        cpu += _host_amount({"resources": {"requests": overhead}}, "cpu")
        memory += _host_amount({"resources": {"requests": overhead}}, "memory")
    return math.ceil(cpu * 1000), math.ceil(memory)


def _amount(container: dict, resource: str) -> object | None:
    """The raw limit (else request) of ``resource``, checking the two agree."""
    name = container.get("name", "")
    resources = container.get("resources", {})
    if not isinstance(resources, dict):
        raise InvalidRequest(f"malformed pod: resources of container {shown(name)} is not an object")
    limits = resources.get("limits", {})
    requests = resources.get("requests", {})
    if not isinstance(limits, dict) or not isinstance(requests, dict):
        raise InvalidRequest(f"malformed pod: resources.limits or requests of container {shown(name)} "
                             "is not an object")
    for amounts in (limits, requests):
        if resource in amounts and amounts[resource] is None:
            raise InvalidRequest(f"{resource} null in container {shown(name)} is not a valid quantity")
    if resource in limits and resource in requests:
        try:
            same = parse_quantity(limits[resource]) == parse_quantity(requests[resource])
        except QuantityError:
            same = True  # reported as an invalid quantity by the caller
        if not same:
            raise InvalidRequest(
                f"{resource} request {shown(requests[resource])} differs from its limit "
                f"{shown(limits[resource])} in container {shown(name)}"
            )
    if resource in limits:
        return limits[resource]
    return requests.get(resource)


def _whole(raw: object, resource: str, container: str) -> int:
    try:
        exact = parse_quantity(raw)
    except QuantityError as exc:
        raise InvalidRequest(f"{resource} {shown(raw)} in container {shown(container)} is not a valid quantity: "
                             f"{exc}") from None
    if exact.denominator != 1:
        raise InvalidRequest(f"{resource} must be a whole number, got {shown(raw)} in container {shown(container)}")
    return int(exact)


def _containers(pod: dict) -> list:
    spec = pod.get("spec") if isinstance(pod, dict) else None
    containers = spec.get("containers") if isinstance(spec, dict) else None
    if not isinstance(containers, list) or not all(isinstance(c, dict) for c in containers):
        raise InvalidRequest("malformed pod: spec.containers is not a list of containers")
    return containers


def _labels(pod: dict) -> dict:
    return _object(_object(_object(pod).get("metadata")).get("labels"))


def request_fields(pod: dict) -> tuple:
    """All of a pod that :func:`parse_pod_request` reads: pods equal in these (the
    replicas of one workload) have the same request, or break the same rule."""
    spec = _object(_object(pod).get("spec"))
    labels = _labels(pod)
    return (slim_containers(spec.get("containers")), slim_containers(spec.get("initContainers")), spec.get("overhead"),
            spec.get("nodeSelector"), spec.get("affinity"), labels.get(POD_GPU_COUNT), labels.get(POD_PLACEMENT))


def slim_containers(containers):
    """Of each container, what parsing reads (name and resources; not its env or command)."""
    if not isinstance(containers, list):
        return containers
    return [{k: c[k] for k in ("name", "resources") if k in c} if isinstance(c, dict) else c for c in containers]


MAX_CONTAINER_NAME = 63  # a DNS label, as the API server validates container names


def asks_for_shared_gpu(pod: dict) -> bool:
    """Whether any container names a shared-GPU resource, however malformed the rest."""
    spec = _object(_object(pod).get("spec"))
    containers = spec.get("containers")
    for container in containers if isinstance(containers, list) else ():
        resources = _object(_object(container).get("resources"))
        for source in (resources.get("limits"), resources.get("requests")):
            if isinstance(source, dict) and (GPU_MEM in source or GPU_CORE in source):
                return True
    return False


def parse_pod_request(pod: dict) -> GPURequest | None:
    """Read and validate the shared-GPU request of a v1 Pod (see module doc)."""
    found = []
    for index, container in enumerate(_containers(pod)):
        name = container.get("name", "")
        if not isinstance(name, str) or len(name) > MAX_CONTAINER_NAME:
            raise InvalidRequest(f"malformed pod: container name {shown(name)} is not a name of at most "
                                 f"{MAX_CONTAINER_NAME} characters")
        raw_mem = _amount(container, GPU_MEM)
        raw_core = _amount(container, GPU_CORE)
        if raw_mem is None and raw_core is None:
            continue
        if raw_mem is None:
            raise InvalidRequest(
                f"{GPU_CORE} without {GPU_MEM} in container {shown(name)}: "
                "GPU compute is shared only together with GPU memory"
            )
        memory = _whole(raw_mem, GPU_MEM, name)
        if memory < 1:
            raise InvalidRequest(f"{GPU_MEM} must be at least 1 GiB, got {shown(raw_mem)} in container {shown(name)}")
        core = 0
        if raw_core is not None:
            core = _whole(raw_core, GPU_CORE, name)
            if core % 5 or not 5 <= core <= CORE_PER_GPU:
                raise InvalidRequest(
                    f"{GPU_CORE} must be a multiple of 5 from 5 to 100, got {shown(raw_core)} "
                    f"in container {shown(name)}"
                )
        found.append(ContainerRequest(index, name, memory, core))
    if not found:
        return None

    first = found[0]
    for other in found[1:]:
        if (first.core > 0) != (other.core > 0):
            def resource_set(c: ContainerRequest) -> str:
                return f"{GPU_MEM} and {GPU_CORE}" if c.core else f"{GPU_MEM} only"

            raise InvalidRequest(
                "every GPU container must request the same resources: container "
                f"{shown(first.name)} requests {resource_set(first)}, container {shown(other.name)} "
                f"requests {resource_set(other)}"
            )

    labels = _labels(pod)
    gpu_count = 1
    if POD_GPU_COUNT in labels:
        raw = labels[POD_GPU_COUNT]
        gpu_count = count_label(raw, MAX_GPUS_PER_NODE)
        if gpu_count is None or gpu_count < 1:
            raise InvalidRequest(f"label {POD_GPU_COUNT} must be a whole number of GPUs from 1 to "
                                 f"{MAX_GPUS_PER_NODE}, got {shown(raw)}")
    whole_device = False
    if POD_PLACEMENT in labels:
        if labels[POD_PLACEMENT] != REQUIRE_WHOLE_DEVICE:
            raise InvalidRequest(
                f"label {POD_PLACEMENT} must be {REQUIRE_WHOLE_DEVICE!r}, got {shown(labels[POD_PLACEMENT])}"
            )
        whole_device = True

    cpu, host_memory = host_requests(pod)
    request = GPURequest(tuple(found), gpu_count, whole_device, cpu, host_memory, gpu_models(pod))
    if gpu_count > 1:
        if request.wants_core:
            raise InvalidRequest(
                f"label {POD_GPU_COUNT} splits GPU memory only; it cannot be combined with {GPU_CORE}"
            )
        for c in found:
            if c.memory % gpu_count:
                raise InvalidRequest(
                    f"{GPU_MEM} {c.memory} in container {shown(c.name)} does not divide evenly over {gpu_count} GPUs"
                )
    elif request.core > CORE_PER_GPU:
        raise InvalidRequest(f"the pod's total {GPU_CORE} is {request.core}, more than one GPU (100)")
    if whole_device and request.wants_core and request.core_per_gpu != CORE_PER_GPU:
        raise InvalidRequest(
            f"{REQUIRE_WHOLE_DEVICE} needs the whole GPU's compute: {GPU_CORE} must total 100, "
            f"got {request.core_per_gpu}"
        )
    return request
