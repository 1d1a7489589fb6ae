"""Which verbs the served application answers in the event loop's thread, and which in its verb pool."""

import threading

import orjson
import pytest

from asgi_client import asgi_call
from builders import scheduler_pod
from extender.serving.app import create_app
from extender.serving.asgi import ExtenderASGI
from extender.serving.config import Config

PREFIX = "/cgpu-scheduler"
FILTER_BODY = orjson.dumps({"Pod": scheduler_pod(), "NodeNames": ["gpu-core-a"]})


@pytest.fixture
def threads_seen(monkeypatch):
    app = create_app(Config())
    served = ExtenderASGI(app, PREFIX, threads=2, inline_body_bytes=len(FILTER_BODY))
    verbs, seen = served.verbs, []
    reply = verbs.reply
    monkeypatch.setattr(verbs, "reply", lambda *a, **k: seen.append((a[0], threading.current_thread().name))
                        or reply(*a, **k))
    yield served, seen
    served.close()


def test_filter_and_prioritize_run_in_the_loops_thread_bind_and_preempt_in_the_verb_pool(threads_seen):
    served, seen = threads_seen
    for verb in ("filter", "prioritize", "bind", "preempt"):
        status, _, _ = asgi_call(served, "POST", f"{PREFIX}/{verb}", FILTER_BODY, {"Content-Type": "application/json"})
        assert status in (200, 400)
    loop_thread = threading.current_thread().name  # asgi_call runs its loop in this thread
    assert seen[0] == ("filter", loop_thread) and seen[1] == ("prioritize", loop_thread)
    assert seen[2][0] == "bind" and seen[2][1].startswith("verb")
    assert seen[3][0] == "preempt" and seen[3][1].startswith("verb")


def test_a_filter_body_over_the_inline_limit_goes_to_the_one_thread_for_large_bodies(threads_seen):
    served, seen = threads_seen
    asgi_call(served, "POST", f"{PREFIX}/filter", FILTER_BODY + b" ", {"Content-Type": "application/json"})
    assert seen[0][0] == "filter" and seen[0][1].startswith("large")
    assert served.large._max_workers == 1
