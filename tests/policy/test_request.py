import pytest

from builders import container, pod, scheduler_pod
from policy.request import InvalidRequest, parse_pod_request


def test_cuda_sample_from_the_scheduler():
    request = parse_pod_request(scheduler_pod())
    assert (request.memory, request.core, request.gpu_count, request.whole_device) == (2, 30, 1, False)
    assert request.containers[0].index == 0


def test_pod_without_shared_gpu_passes_through():
    assert parse_pod_request(pod(containers=[{"name": "web", "resources": {"limits": {"cpu": "1"}}}])) is None
    assert parse_pod_request(pod(containers=[{"name": "bare"}])) is None


def test_init_containers_are_ignored():
    p = pod(mem=3)
    p["spec"]["initContainers"] = [container("init", mem=10, core=50)]
    assert parse_pod_request(p).memory == 3


def test_containers_sum_and_keep_their_index():
    p = pod(containers=[{"name": "sidecar"}, container("a", mem=2, core=20), container("b", mem="1k", core=30)])
    request = parse_pod_request(p)
    assert [c.index for c in request.containers] == [1, 2]
    assert (request.memory, request.core) == (1002, 50)


def test_limit_only_and_request_only_are_read():
    only_limit = pod(containers=[container(mem="4", core="10", requests=False)])
    assert parse_pod_request(only_limit).shape == (4, 10, 1)
    only_request = pod(containers=[{"name": "c", "resources": {"requests": {"aliyun.com/gpu-mem": "2Ki"}}}])
    assert parse_pod_request(only_request).memory == 2048


def test_gpu_count_label_splits_memory():
    request = parse_pod_request(pod(mem=8, labels={"aliyun.com/gpu-count": "2"}))
    assert request.shape == (4, 0, 2)


def test_whole_device_label():
    request = parse_pod_request(pod(mem=15, labels={"ack.gpushare.placement": "require-whole-device"}))
    assert request.whole_device


# Each broken rule has its own message; the fragment below is what tells them apart.
INVALID = {
    "core 33": (pod(mem=2, core=33), "multiple of 5 from 5 to 100, got '33'"),
    "core 0": (pod(mem=2, core=0), "multiple of 5 from 5 to 100, got '0'"),
    "core 105": (pod(mem=2, core=105), "multiple of 5 from 5 to 100, got '105'"),
    "compute without memory": (pod(containers=[container(core=30)]),
                               "aliyun.com/gpu-core.percentage without aliyun.com/gpu-mem"),
    "mixed container sets": (pod(containers=[container("a", mem=2, core=30), container("b", mem=2)]),
                             "every GPU container must request the same resources"),
    "gpu-count not dividing": (pod(mem=3, labels={"aliyun.com/gpu-count": "2"}),
                               "does not divide evenly over 2 GPUs"),
    "non-integer quantity": (pod(mem="1.5"), "must be a whole number, got '1.5'"),
    "not a quantity": (pod(mem="lots"), "'lots' in container 'main' is not a valid quantity"),
    "memory zero": (pod(mem=0), "must be at least 1 GiB"),
    "request differs from limit": (
        pod(containers=[{"name": "c", "resources": {"limits": {"aliyun.com/gpu-mem": "2"},
                                                    "requests": {"aliyun.com/gpu-mem": "3"}}}]),
        "request '3' differs from its limit '2'"),
    "gpu-count with compute": (pod(mem=4, core=50, labels={"aliyun.com/gpu-count": "2"}),
                               "splits GPU memory only"),
    "gpu-count not a number": (pod(mem=4, labels={"aliyun.com/gpu-count": "two"}),
                               "label aliyun.com/gpu-count must be a whole number of GPUs"),
    "pod compute above one GPU": (pod(containers=[container("a", mem=1, core=60), container("b", mem=1, core=60)]),
                                  "more than one GPU (100)"),
    "unknown placement": (pod(mem=2, labels={"ack.gpushare.placement": "anywhere"}),
                          "must be 'require-whole-device'"),
    "whole device with partial compute": (
        pod(mem=15, core=50, labels={"ack.gpushare.placement": "require-whole-device"}),
        "needs the whole GPU's compute"),
    "containers not a list": ({"metadata": {"name": "x"}, "spec": {"containers": "oops"}},
                              "spec.containers is not a list"),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_each_invalid_request_has_its_own_message(case):
    p, fragment = INVALID[case]
    with pytest.raises(InvalidRequest) as caught:
        parse_pod_request(p)
    assert fragment in str(caught.value)
    others = [f for name, (_, f) in INVALID.items() if name != case and f not in fragment]
    assert not any(f in str(caught.value) for f in others), "message must not be shared with another rule"
