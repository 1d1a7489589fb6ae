import json

from extender.ledger import annotations as A
from policy.request import simple_request


def test_single_gpu_pod_gets_v2_and_v1_keys():
    written = A.write({0: {1: 2}}, {0: {1: 30}}, 15, 1700000000000000000)
    assert json.loads(written[A.V2_ALLOCATION]) == {"0": {"1": 2}}
    assert json.loads(written[A.V2_CORE]) == {"0": {"1": 30}}
    assert json.loads(written[A.V2_DEVICE]) == {"1": 15}
    assert written[A.V2_ASSIGNED] == "false" and written[A.V2_ASSUME_TIME] == "1700000000000000000"
    assert (written[A.V1_INDEX], written[A.V1_POD], written[A.V1_DEVICE], written[A.V1_ASSIGNED]) == \
        ("1", "2", "15", "false")
    assert all(isinstance(v, str) for v in written.values())


def test_multi_gpu_pod_has_no_v1_index_and_no_core():
    written = A.write({0: {0: 4, 2: 4}, 1: {0: 1, 2: 1}}, {}, 16, 1)
    assert json.loads(written[A.V2_ALLOCATION]) == {"0": {"0": 4, "2": 4}, "1": {"0": 1, "2": 1}}
    assert A.V1_INDEX not in written and A.V2_CORE not in written


def test_read_prefers_v2_then_v1():
    written = A.write({0: {3: 5}}, {0: {3: 25}}, 15, 1)
    assert A.read(written, None) == A.Recovered({0: {3: 5}}, {0: {3: 25}}, "v2", gpu_memory=15, assume_ns=1)
    v1 = {A.V1_INDEX: "1", A.V1_POD: "6"}
    assert A.read(v1, simple_request(6, 30)) == A.Recovered({0: {1: 6}}, {0: {1: 30}}, "v1")
    taken = {A.V1_INDEX: "1", A.V1_POD: "6", A.V1_DEVICE: "22", A.V1_ASSIGNED: "true", A.V1_ASSUME_TIME: "7"}
    assert A.read(taken, None) == A.Recovered({0: {1: 6}}, {}, "v1", gpu_memory=22, assume_ns=7, assigned=True)
    broken_v2 = {A.V2_ALLOCATION: "{not json", **v1}
    assert A.read(broken_v2, None).source == "v1"
    assert A.read({A.V2_ALLOCATION: '{"0": {"1": -3}}'}, None) is None
    assert A.read({}, simple_request(2)) is None
    assert A.read({A.V1_INDEX: "x", A.V1_POD: "2"}, None) is None


def test_written_then_read_gives_back_every_field():
    for assigned in (False, True):
        written = A.write({1: {0: 3, 2: 3}}, {}, 16, 123, assigned=assigned)
        assert A.read(written, None) == A.Recovered({1: {0: 3, 2: 3}}, {}, "v2", 16, 123, assigned)
    v1_only = A.write({0: {2: 5}}, {}, 22, 9, assigned=True, v1_only=True)
    assert set(v1_only) == {A.V1_INDEX, A.V1_POD, A.V1_DEVICE, A.V1_ASSIGNED, A.V1_ASSUME_TIME}
    assert A.read(v1_only, None) == A.Recovered({0: {2: 5}}, {}, "v1", 22, 9, True)
