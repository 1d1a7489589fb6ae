"""The verbs answered on the served application's direct path are the verbs Flask's routes answer."""

import orjson
from flask import request
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asgi_client import asgi_call
from builders import scheduler_pod
from extender.serving.app import build_extender, create_app
from extender.serving.asgi import ExtenderASGI
from extender.serving.config import Config
from extender.serving.http_verbs import VERBS, mimetype

PREFIX = "/cgpu-scheduler"
NOW = 1_795_000_000_000_000_000
NODES = ["gpu-core-a", "gpu-core-b", "gpu-core-full", "gpu-cgpu-a", "gpu-share-a", "gpu-whole-a"]
POD = scheduler_pod()
BODIES = [
    orjson.dumps({"Pod": POD, "NodeNames": NODES}),
    orjson.dumps({"Pod": POD, "NodeNames": None}),
    orjson.dumps({"PodName": POD["metadata"]["name"], "PodNamespace": "default", "PodUID": POD["metadata"]["uid"],
                  "Node": "gpu-core-a"}),
    orjson.dumps({"Pod": POD, "NodeNameToVictims": {}}),
    b"", b"{", b"[]", b"null", b'{"Pod": 1}', b"\xff\xfe",
]
CONTENT_TYPES = ["application/json", "application/json; charset=utf-8", "APPLICATION/JSON", " application/json ;x",
                 "text/plain", "application/jsonx", "multipart/form-data; boundary=x", "", None]


@pytest.mark.parametrize("value, expected", [("application/json", "application/json"),
                                             ("Application/JSON; charset=utf-8", "application/json"),
                                             (" text/plain ", "text/plain"), ("", ""), (None, "")])
def test_mimetype_is_the_media_type_without_parameters_in_lower_case(value, expected):
    assert mimetype(value) == expected


def direct_reply(served, verb, body, content_type):
    headers = {"Content-Type": content_type} if content_type is not None else {}
    status, out, data = asgi_call(served, "POST", f"{PREFIX}/{verb}", body, headers)
    return status, out[b"content-type"], data, out[b"server-timing"]


def flask_reply(client, verb, body, content_type):
    headers = {"Content-Type": content_type} if content_type is not None else {}
    reply = client.post(f"{PREFIX}/{verb}", data=body, headers=headers)
    return reply.status_code, reply.headers["Content-Type"].encode(), reply.data, reply.headers["Server-Timing"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(VERBS), st.sampled_from(BODIES) | st.binary(max_size=40),
                          st.sampled_from(CONTENT_TYPES)), min_size=1, max_size=8))
def test_the_direct_path_answers_every_request_as_flask_does(requests):
    """Two extenders on the same cluster, one asked through Flask, one directly: the same replies in
    the same order (a bind that succeeds on one must succeed on the other), state kept alike."""
    # one fixed bind time for both: a bound pod's annotations carry it, and inspect shows them
    flask_app, direct_app = (create_app(Config(), extender=build_extender(Config(), clock=lambda: NOW))
                             for _ in range(2))
    client, served = flask_app.test_client(), ExtenderASGI(direct_app, PREFIX, threads=1)
    for verb, body, content_type in requests:
        status, kind, data, timing = direct_reply(served, verb, body, content_type)
        assert (status, kind, data) == flask_reply(client, verb, body, content_type)[:3]
        assert timing.startswith(b"app;dur=") and float(timing.split(b"=")[1]) >= 0
    assert (client.get(f"{PREFIX}/inspect").json
            == direct_app.test_client().get(f"{PREFIX}/inspect").json)
    served.close()


def test_a_fault_on_the_direct_path_is_one_line_and_counted(monkeypatch):
    app = create_app(Config())
    monkeypatch.setattr(app.extensions["cgpu"].ledger, "check_rows", lambda *a: 1 / 0)
    status, _, data, _ = direct_reply(ExtenderASGI(app, PREFIX, threads=1), "filter", BODIES[0], "application/json")
    assert (status, orjson.loads(data)) == (500, {"Error": "internal error in the GPU-share extender: "
                                                           "ZeroDivisionError"})
    scrape = app.test_client().get(f"{PREFIX}/metrics").data.decode()
    assert 'verb="filter"' in scrape and _count(scrape, "filter") == 1


def _count(scrape: str, verb: str) -> float:
    line = next(line for line in scrape.splitlines() if line.startswith("cgpu_request_duration_seconds_count")
                and f'verb="{verb}"' in line)
    return float(line.rsplit(" ", 1)[1])


def test_the_served_verbs_take_the_direct_path_with_or_without_a_query(monkeypatch):
    config = Config()
    app = create_app(config, extender=build_extender(config))
    seen, through_flask = [], []
    verbs = app.extensions["cgpu_verbs"]
    reply = verbs.reply
    monkeypatch.setattr(verbs, "reply", lambda *a, **k: seen.append(a[0]) or reply(*a, **k))
    app.before_request(lambda: through_flask.append(request.full_path))
    served = ExtenderASGI(app, PREFIX, threads=1)
    for path in (f"{PREFIX}/filter", f"{PREFIX}/filter?x=1", f"{PREFIX}/bind", f"{PREFIX}/filter/"):
        asgi_call(served, "POST", path, BODIES[0], {"Content-Type": "application/json"})
    served.close()
    assert seen == ["filter", "filter", "bind"]
    assert through_flask == [f"{PREFIX}/filter/?"]  # only exact paths go direct; Flask answers the rest
