"""Fuzzing the verbs: arbitrary JSON where kube-scheduler puts its objects, and byte
mutations of kube-scheduler-shaped bodies. Never a 500, never a change of state
(filter and prioritize change nothing; a bind that is refused changes nothing)."""

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import scheduler_pod
from extender.serving.app import build_extender, create_app
from extender.serving.config import Config

PREFIX = "/cgpu-scheduler"
NODES = ["gpu-core-a", "gpu-core-b", "gpu-core-full", "gpu-cgpu-a", "gpu-share-a", "gpu-whole-a"]
CLIENT = create_app(Config(), extender=build_extender(Config())).test_client()

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False) |
    st.text(max_size=30) | st.sampled_from(["2", "1e100000000", "²", "٢", " 2", "1Ki", "-1", "0.5"]),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.sampled_from(["metadata", "spec", "containers", "resources", "limits", "requests", "name", "labels",
                         "aliyun.com/gpu-mem", "aliyun.com/gpu-core.percentage", "aliyun.com/gpu-count",
                         "uid", "namespace", "nodeName", "x"]) | st.text(max_size=8), children, max_size=4),
    max_leaves=25)


def _without_stranded(value):
    if isinstance(value, dict):
        return {k: _without_stranded(v) for k, v in value.items() if k != "stranded"}
    if isinstance(value, list):
        return [_without_stranded(v) for v in value]
    return value


def fingerprint() -> dict:
    """inspect, less the stranded measure: it follows the shape mix filter learns from
    every pod it sees (as it should), not any allocation."""
    return _without_stranded(orjson.loads(CLIENT.get(f"{PREFIX}/inspect").data))


def post(verb: str, body: bytes):
    reply = CLIENT.post(f"{PREFIX}/{verb}", data=body, content_type="application/json")
    assert reply.status_code < 500, (verb, body[:300], reply.data[:300])
    return reply


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(pod=json_values, names=json_values)
def test_arbitrary_json_in_extender_args_never_faults_or_changes_state(pod, names):
    before = fingerprint()
    for args in ({"Pod": pod, "Nodes": None, "NodeNames": NODES}, {"Pod": pod, "NodeNames": names},
                 {"Pod": pod, "Nodes": {"items": names}}):
        try:
            body = orjson.dumps(args)
        except TypeError:
            continue
        post("filter", body)
        post("prioritize", body)
    assert fingerprint() == before


BASE = orjson.dumps({"Pod": scheduler_pod(), "Nodes": None, "NodeNames": NODES})
BIND = orjson.dumps({"PodName": "cuda-sample-7x9kq", "PodNamespace": "default",
                     "PodUID": "6c2f8d0e-5b1a-4c3e-9f7d-2a8b4c6d1e0f", "Node": "gpu-core-full"})


@st.composite
def mutated(draw, base: bytes):
    data = bytearray(base)
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["flip", "insert", "delete", "digits"]))
        at = draw(st.integers(0, len(data)))
        if kind == "flip" and at < len(data):
            data[at] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del data[at:at + draw(st.integers(1, 16))]
        else:
            data[at:at] = b"9" * draw(st.integers(1, 6000))
    return bytes(data)


@SETTINGS
@given(body=mutated(BASE), bind=mutated(BIND))
def test_byte_mutations_of_scheduler_bodies_never_fault_or_change_state(body, bind):
    before = fingerprint()
    post("filter", body)
    post("prioritize", body)
    post("bind", bind)  # gpu-core-full cannot take the pod: any bind that parses is refused
    assert fingerprint() == before
