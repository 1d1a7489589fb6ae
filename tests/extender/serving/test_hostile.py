"""Whatever reaches the port: every hostile input gets a 2xx or 4xx with a specific
message, the server stays up (healthz answers after each), and the ledger is
exactly as it was (inspect's fingerprint unchanged).

Served for real (gunicorn and our worker on loopback, the demo cluster), so the
transport cases (malformed HTTP, oversized bodies, stalled sockets) meet the
server kube-scheduler meets.
"""

import copy
import http.client
import socket
import time

import orjson
import pytest

from builders import container, pod, scheduler_pod
from extender.serving.app import build_extender, create_app
from extender.serving.config import Config
from policy.names import POD_PLACEMENT
from served import served as serving

PREFIX = "/cgpu-scheduler"
NODES = ["gpu-core-a", "gpu-core-b", "gpu-core-full", "gpu-cgpu-a", "gpu-share-a", "gpu-whole-a"]
MEM, CORE, COUNT = "aliyun.com/gpu-mem", "aliyun.com/gpu-core.percentage", "aliyun.com/gpu-count"
PLACEMENT = POD_PLACEMENT
SMALL_BODY = 1 << 20


@pytest.fixture(scope="module")
def served():
    with serving(config=dict(max_body_bytes=SMALL_BODY), where=dict(threads=4), limits=dict(
            body_bytes=SMALL_BODY, header_seconds=2, body_seconds=2, idle_seconds=5, first_byte_seconds=2)) as server:
        yield server


def request(server, method, path, body=b"", content_type="application/json", timeout=5):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    headers = {"Content-Type": content_type} if content_type else {}
    connection.request(method, path, body, headers)
    reply = connection.getresponse()
    data = reply.read()
    connection.close()
    return reply.status, data


def raw(server, data: bytes, timeout=5) -> tuple[int, bytes]:
    """Send bytes as they are; the status and body of the reply (0 when the server just closed)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=timeout) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := s.recv(65536):
            received += chunk
    if not received:
        return 0, b""
    head, _, body = received.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def fingerprint(server) -> bytes:
    status, data = request(server, "GET", f"{PREFIX}/inspect")
    assert status == 200
    return data


def healthy(server) -> bool:
    return request(server, "GET", f"{PREFIX}/healthz", timeout=2)[0] == 200


# -- pods: (id, pod, expected words in the message) ------------------------------------------

def with_limits(**limits):
    p = pod(name="hostile", uid="uid-hostile")
    p["spec"]["containers"][0]["resources"] = {"limits": limits}
    return p


def with_label(value, mem="4"):
    p = with_limits(**{MEM: mem})
    p["metadata"]["labels"][COUNT] = value
    return p


def edited(change):
    p = with_limits(**{MEM: "2"})
    change(p)
    return p


DEEP_POD = with_limits(**{MEM: "nested 1010 lists deep (written by hand)"})

POD_CASES = [
    ("mem-exponent-1e100000000", with_limits(**{MEM: "1e100000000"}), "out of range"),
    ("mem-exponent-1e10000000", with_limits(**{MEM: "1e10000000"}), "out of range"),
    ("mem-5000-digits", with_limits(**{MEM: "9" * 5000}), "longer than 64"),
    ("core-5000-digits", with_limits(**{MEM: "2", CORE: "5" * 5000}), "longer than 64"),
    ("mem-superscript-two", with_limits(**{MEM: "²"}), "not a quantity"),
    ("mem-arabic-indic-two", with_limits(**{MEM: "٢"}), "not a quantity"),
    ("mem-leading-space", with_limits(**{MEM: " 2"}), "not a quantity"),
    ("mem-trailing-space", with_limits(**{MEM: "2 "}), "not a quantity"),
    ("mem-hex", with_limits(**{MEM: "0x10"}), "not a quantity"),
    ("mem-1e30", with_limits(**{MEM: "1e30"}), "out of range"),
    ("mem-json-1e19", with_limits(**{MEM: 10**19}), "out of range"),
    ("mem-json-float-1e300", with_limits(**{MEM: 1e300}), "out of range"),
    ("mem-negative", with_limits(**{MEM: "-1"}), "at least 1 GiB"),
    ("mem-zero", with_limits(**{MEM: "0"}), "at least 1 GiB"),
    ("mem-fraction", with_limits(**{MEM: "1.5"}), "whole number"),
    ("mem-null", with_limits(**{MEM: None}), "null"),
    ("mem-list", with_limits(**{MEM: []}), "not a valid quantity"),
    ("mem-object", with_limits(**{MEM: {}}), "not a valid quantity"),
    ("mem-true", with_limits(**{MEM: True}), "not a valid quantity"),
    ("mem-nested-1010-deep", DEEP_POD, "not a valid quantity"),
    ("mem-NaN-text", with_limits(**{MEM: "NaN"}), "not a quantity"),
    ("mem-unknown-suffix", with_limits(**{MEM: "1K"}), "not a quantity"),
    ("core-not-multiple-of-5", with_limits(**{MEM: "2", CORE: "7"}), "multiple of 5"),
    ("core-over-100", with_limits(**{MEM: "2", CORE: "105"}), "multiple of 5"),
    ("core-without-mem", with_limits(**{CORE: "30"}), "without"),
    ("request-differs-from-limit", edited(lambda p: p["spec"]["containers"][0]["resources"].update(
        requests={MEM: "3"})), "differs from its limit"),
    ("resources-null", edited(lambda p: p["spec"]["containers"][0].update(resources=None)), "not an object"),
    ("resources-list", edited(lambda p: p["spec"]["containers"][0].update(resources=[])), "not an object"),
    ("limits-null", edited(lambda p: p["spec"]["containers"][0]["resources"].update(limits=None)),
     "not an object"),
    ("containers-not-list", edited(lambda p: p["spec"].update(containers={"a": 1})), "containers"),
    ("containers-of-numbers", edited(lambda p: p["spec"].update(containers=[1, 2])), "containers"),
    ("spec-null", edited(lambda p: p.update(spec=None)), "containers"),
    ("count-superscript-two", with_label("²"), COUNT),
    ("count-arabic-indic-two", with_label("٢"), COUNT),
    ("count-zero", with_label("0"), COUNT),
    ("count-65", with_label("65"), COUNT),
    ("count-10-to-the-12", with_label(str(10**12)), COUNT),
    ("count-5000-digits", with_label("1" * 5000), COUNT),
    ("count-negative", with_label("-1"), COUNT),
    ("count-space", with_label(" 2"), COUNT),
    ("count-json-number", with_label(2), COUNT),
    ("count-uneven-split", with_label("3"), "divide evenly"),
    ("placement-wrong", edited(lambda p: p["metadata"]["labels"].update(
        {PLACEMENT: "x" * 10000})), PLACEMENT),
    ("mixed-containers", edited(lambda p: p["spec"]["containers"].append(container("b", mem=2, core=10))),
     "same resources"),
]


@pytest.mark.parametrize("case", POD_CASES, ids=[c[0] for c in POD_CASES])
def test_a_hostile_pod_is_refused_on_every_node_with_a_specific_message(served, case):
    _, p, words = case
    before = fingerprint(served)
    if p is DEEP_POD:  # orjson would not write it; kube-scheduler's Go could
        body = b'{"Pod": {"spec": {"containers": [{"name": "a", "resources": {"limits": {"' + MEM.encode() + \
               b'": ' + b"[" * 1010 + b"]" * 1010 + b"}}}]}}, \"NodeNames\": " + orjson.dumps(NODES) + b"}"
    else:
        body = orjson.dumps({"Pod": p, "Nodes": None, "NodeNames": NODES})
    started = time.monotonic()
    status, data = request(served, "POST", f"{PREFIX}/filter", body)
    assert status == 200 and time.monotonic() - started < 5
    reply = orjson.loads(data)
    messages = [reply["Error"]] + list(reply["FailedNodes"].values()) + list(reply["FailedAndUnresolvableNodes"].values())
    assert not reply["NodeNames"] and any(words in m for m in messages), reply
    assert all(len(m) < 600 for m in messages)  # user strings are cut, never echoed whole
    status, data = request(served, "POST", f"{PREFIX}/prioritize", body)
    assert status == 200 and all(s["Score"] == 0 for s in orjson.loads(data))
    assert fingerprint(served) == before and healthy(served)


def test_a_100_kb_container_name_does_not_grow_the_reply(served):
    p = with_limits(**{MEM: "2", CORE: "7"})
    p["spec"]["containers"][0]["name"] = "n" * 100_000
    status, data = request(served, "POST", f"{PREFIX}/filter", orjson.dumps({"Pod": p, "NodeNames": NODES}))
    assert status == 200 and len(data) < 20 * 1024 and "container name" in data.decode()


# -- wire: bodies that are not ExtenderArgs --------------------------------------------------

WIRE_CASES = [
    ("empty", b"", "not valid JSON"),
    ("truncated", b'{"Pod": {', "not valid JSON"),
    ("array", b"[]", "JSON object"),
    ("null", b"null", "JSON object"),
    ("number", b"12", "JSON object"),
    ("string", b'"x"', "JSON object"),
    ("invalid-utf8", b'{"Pod": "\xff\xfe"}', "not valid JSON"),
    ("deep-nesting", b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),
    ("huge-integer-as-gpu-mem", b'{"Pod": {"spec": {"containers": [{"name": "a", "resources": {"limits": '
     b'{"aliyun.com/gpu-mem": 100000000000000000000000000000}}}]}}, "NodeNames": ["gpu-core-a"]}', "gpu-mem"),
    ("pod-missing", b'{"NodeNames": ["gpu-core-a"]}', "Pod"),
    ("pod-a-list", b'{"Pod": [], "NodeNames": ["gpu-core-a"]}', "Pod"),
    ("nodenames-string", b'{"Pod": {}, "NodeNames": "gpu-core-a"}', "NodeNames"),
    ("nodenames-numbers", b'{"Pod": {}, "NodeNames": [1, 2]}', "NodeNames"),
    ("nodes-items-not-objects", b'{"Pod": {}, "Nodes": {"items": [1]}}', "Nodes"),
    ("node-metadata-not-an-object", b'{"Pod": {}, "Nodes": {"items": [{"metadata": true}]}}', "metadata.name"),
]


def _error_of(data: bytes) -> str:
    """The reply's Error, else its nodes' reasons: where a verb says what was wrong."""
    reply = orjson.loads(data)
    if not isinstance(reply, dict):
        return ""
    reasons = {**(reply.get("FailedNodes") or {}), **(reply.get("FailedAndUnresolvableNodes") or {})}
    return reply["Error"] or " | ".join(reasons.values())


@pytest.mark.parametrize("case", WIRE_CASES, ids=[c[0] for c in WIRE_CASES])
def test_a_body_that_is_not_extender_args_gets_a_specific_error(served, case):
    _, body, words = case
    before = fingerprint(served)
    for verb in ("filter", "bind"):
        status, data = request(served, "POST", f"{PREFIX}/{verb}", body)
        assert status == 200 and _error_of(data), (verb, data)
        if verb == "filter":
            assert words in _error_of(data), data
    status, data = request(served, "POST", f"{PREFIX}/prioritize", body)
    assert status == 200 and all(s["Score"] == 0 for s in orjson.loads(data))
    assert fingerprint(served) == before and healthy(served)


BIND_CASES = [
    ("fields-missing", {"PodName": "a"}, "missing"),
    ("uid-a-number", {"PodName": "a", "PodNamespace": "b", "PodUID": 5, "Node": "gpu-core-a"}, "PodUID"),
    ("never-filtered", {"PodName": "a", "PodNamespace": "b", "PodUID": "c", "Node": "gpu-core-a"}, "unknown"),
    ("unknown-node", {"PodName": "cuda-sample-7x9kq", "PodNamespace": "default",
                      "PodUID": "6c2f8d0e-5b1a-4c3e-9f7d-2a8b4c6d1e0f", "Node": "no-such-node"}, "no-such-node"),
    ("node-that-cannot-fit", {"PodName": "cuda-sample-7x9kq", "PodNamespace": "default",
                              "PodUID": "6c2f8d0e-5b1a-4c3e-9f7d-2a8b4c6d1e0f", "Node": "gpu-core-full"},
     "insufficient"),
    ("node-not-sharing", {"PodName": "cuda-sample-7x9kq", "PodNamespace": "default",
                          "PodUID": "6c2f8d0e-5b1a-4c3e-9f7d-2a8b4c6d1e0f", "Node": "gpu-whole-a"}, "share"),
    ("long-node-name", {"PodName": "a", "PodNamespace": "b", "PodUID": "c", "Node": "n" * 100_000}, ""),
]


@pytest.mark.parametrize("case", BIND_CASES, ids=[c[0] for c in BIND_CASES])
def test_a_bind_that_cannot_be_done_changes_nothing(served, case):
    _, args, words = case
    request(served, "POST", f"{PREFIX}/filter", orjson.dumps({"Pod": scheduler_pod(), "NodeNames": NODES}))
    before = fingerprint(served)
    status, data = request(served, "POST", f"{PREFIX}/bind", orjson.dumps(args))
    error = _error_of(data)
    assert status == 200 and error and words in error and len(error) < 1000, data
    assert fingerprint(served) == before and healthy(served)


# -- content types: a verb reads JSON only ---------------------------------------------------

@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x", None, "application/jsonx",
                                          "text/json"])
def test_a_verb_that_is_not_sent_json_is_refused_415_and_binds_nothing(served, content_type):
    request(served, "POST", f"{PREFIX}/filter", orjson.dumps({"Pod": scheduler_pod(), "NodeNames": NODES}))
    before = fingerprint(served)
    args = {"PodName": "cuda-sample-7x9kq", "PodNamespace": "default",
            "PodUID": "6c2f8d0e-5b1a-4c3e-9f7d-2a8b4c6d1e0f", "Node": "gpu-core-a"}
    for verb in ("bind", "filter", "prioritize"):
        status, data = request(served, "POST", f"{PREFIX}/{verb}", orjson.dumps(args), content_type=content_type)
        assert status == 415 and b"application/json" in data
    assert fingerprint(served) == before


def test_json_with_a_charset_is_json(served):
    status, data = request(served, "POST", f"{PREFIX}/filter",
                           orjson.dumps({"Pod": scheduler_pod(), "NodeNames": ["gpu-core-b"]}),
                           content_type="application/json; charset=utf-8")
    assert status == 200 and orjson.loads(data)["NodeNames"] == ["gpu-core-b"]


# -- transport: what is not a well-formed HTTP/1.1 request ------------------------------------

JSON_HEAD = b"Content-Type: application/json\r\nConnection: close\r\n"
TRANSPORT_CASES = [
    ("bad-chunk-size", b"POST /cgpu-scheduler/filter HTTP/1.1\r\nHost: x\r\n" + JSON_HEAD +
     b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", (400,)),
    ("content-length-not-a-number", b"POST /cgpu-scheduler/filter HTTP/1.1\r\nHost: x\r\n" + JSON_HEAD +
     b"Content-Length: ten\r\n\r\n", (400,)),
    ("content-length-twice", b"POST /cgpu-scheduler/filter HTTP/1.1\r\nHost: x\r\n" + JSON_HEAD +
     b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}", (400,)),
    ("content-length-a-terabyte", b"POST /cgpu-scheduler/filter HTTP/1.1\r\nHost: x\r\n" + JSON_HEAD +
     b"Content-Length: 1000000000000\r\n\r\n{}", (413,)),
    ("content-length-past-the-limit", b"POST /cgpu-scheduler/bind HTTP/1.1\r\nHost: x\r\n" + JSON_HEAD +
     b"Content-Length: %d\r\n\r\n{}" % (SMALL_BODY + 1), (413,)),
    ("chunked-past-the-limit", b"POST /cgpu-scheduler/filter HTTP/1.1\r\nHost: x\r\n" + JSON_HEAD +
     b"Transfer-Encoding: chunked\r\n\r\n" + (b"10000\r\n" + b" " * 0x10000 + b"\r\n") * 17 + b"0\r\n\r\n", (413,)),
    ("header-of-100-kb", b"GET /cgpu-scheduler/healthz HTTP/1.1\r\nHost: x\r\nX-A: " + b"a" * 100_000 +
     b"\r\n\r\n", (431, 400)),
    ("url-of-100-kb", b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", (431, 400, 414)),
    ("garbage-request-line", b"GARBAGE\r\n\r\n", (400,)),
    ("http2-preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", (400, 505)),
    ("no-host-header", b"GET /cgpu-scheduler/healthz HTTP/1.1\r\n\r\n", (400,)),
    ("nul-in-header", b"GET /cgpu-scheduler/healthz HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n", (400,)),
    ("transfer-encoding-gzip", b"POST /cgpu-scheduler/filter HTTP/1.1\r\nHost: x\r\n" + JSON_HEAD +
     b"Transfer-Encoding: gzip\r\n\r\n", (501, 400)),
    ("unknown-method", b"BREW /cgpu-scheduler/filter HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", (405,)),
    ("unknown-path", b"GET /cgpu-scheduler/%00%ff HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", (404,)),
    ("get-on-a-verb", b"GET /cgpu-scheduler/bind HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", (405,)),
]


@pytest.mark.parametrize("case", TRANSPORT_CASES, ids=[c[0] for c in TRANSPORT_CASES])
def test_a_malformed_http_request_gets_a_4xx_or_5xx_status_hint_and_changes_nothing(served, case):
    _, data, statuses = case
    before = fingerprint(served)
    status, body = raw(served, data)
    assert status in statuses, (status, body[:200])
    assert b"Traceback" not in body
    assert fingerprint(served) == before and healthy(served)


# -- slow and idle clients ---------------------------------------------------------------------

STALLS = [
    b"POST /cgpu-scheduler/filter HTTP/1.1\r\nHo",  # part of the head
    b"POST /cgpu-scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Content-Length: 100\r\n\r\n{\"Pod\"",  # all of the head, part of the body
    b"",  # connected, nothing sent
    b"GET /cgpu-scheduler/healthz HTTP/1.1\r\nHost: x\r\n\r\n",  # answered, then idle on keep-alive
]


def test_hundreds_of_stalled_sockets_do_not_delay_a_filter(served):
    sockets = []
    try:
        for i in range(200):
            s = socket.create_connection(("127.0.0.1", served.port), timeout=5)
            s.sendall(STALLS[i % len(STALLS)])
            sockets.append(s)
        p = scheduler_pod(name="after-stall", uid="uid-after-stall")
        for _ in range(20):
            status, data = request(served, "POST", f"{PREFIX}/filter",
                                   orjson.dumps({"Pod": p, "NodeNames": NODES}), timeout=5)
            assert status == 200 and orjson.loads(data)["NodeNames"] == ["gpu-core-a", "gpu-core-b"]
        assert healthy(served)
    finally:
        for s in sockets:
            s.close()


def test_a_stalled_socket_is_closed_at_its_deadline(served):
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as s:
        s.sendall(STALLS[0])
        started = time.monotonic()
        assert s.recv(100) == b""  # closed by the server (header deadline: 2 s here)
        assert time.monotonic() - started < 9


def test_what_filter_remembers_of_a_pod_is_what_bind_needs_not_its_env():
    extender = build_extender(Config())
    client = create_app(Config(), extender=extender).test_client()
    for i in range(20):
        p = scheduler_pod(name=f"env-{i}", uid=f"uid-env-{i}")
        p["spec"]["containers"][0]["env"] = [{"name": "BLOB", "value": "x" * 1_000_000}]
        p["spec"]["containers"][0]["command"] = ["y" * 100_000]
        client.post(f"{PREFIX}/filter", data=orjson.dumps({"Pod": p, "NodeNames": NODES}),
                    content_type="application/json")
    kept = [extender.pods.get(f"uid-env-{i}").pod for i in range(20)]
    assert all(len(orjson.dumps(pod)) < 2000 for pod in kept)
    assert all(len(key) < 2000 for key in extender._by_fields._items)


def test_head_is_answered_with_the_length_a_get_would_have_and_no_body(served):
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=5)
    connection.request("GET", f"{PREFIX}/healthz")
    length = len(connection.getresponse().read())
    connection.request("HEAD", f"{PREFIX}/healthz")  # the same keep-alive connection goes on after it
    reply = connection.getresponse()
    assert reply.status == 200 and int(reply.getheader("Content-Length")) == length and reply.read() == b""
    connection.request("GET", f"{PREFIX}/healthz")
    assert connection.getresponse().status == 200
