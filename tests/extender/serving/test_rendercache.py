"""Operators' heavy reads: rendered once for everyone asking at once, and at most once per ttl."""

import threading
import time

import pytest

from extender.serving.rendercache import RenderCache


def test_callers_at_the_same_time_share_one_render():
    cache, started, release = RenderCache(ttl=0), threading.Event(), threading.Event()
    calls = []

    def render():
        calls.append(1)
        started.set()
        release.wait(5)
        return b"view"

    results = []
    first = threading.Thread(target=lambda: results.append(cache.get("k", render)))
    first.start()
    assert started.wait(5)
    others = [threading.Thread(target=lambda: results.append(cache.get("k", render))) for _ in range(5)]
    for t in others:
        t.start()
    time.sleep(0.1)  # they are waiting on the render in flight, not rendering
    release.set()
    for t in [first, *others]:
        t.join(5)
    assert results == [b"view"] * 6 and len(calls) == 1


def test_a_render_is_served_again_until_its_ttl_passes():
    now = [0.0]
    cache = RenderCache(ttl=1.0, clock=lambda: now[0])
    count = iter(range(100))
    assert cache.get("k", lambda: next(count)) == 0
    now[0] = 0.9
    assert cache.get("k", lambda: next(count)) == 0
    assert cache.get("other", lambda: next(count)) == 1  # keys apart
    now[0] = 1.1
    assert cache.get("k", lambda: next(count)) == 2


def test_renders_of_different_keys_take_turns():
    cache, running, most = RenderCache(ttl=0), [0], [0]
    lock = threading.Lock()

    def render():
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        return b"page"

    threads = [threading.Thread(target=cache.get, args=(key, render)) for key in ("metrics", "inspect", "plan")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert most[0] == 1 and cache.renders == 3


def test_a_failed_render_reaches_its_waiters_and_is_not_kept():
    cache = RenderCache(ttl=10)
    with pytest.raises(ZeroDivisionError):
        cache.get("k", lambda: 1 / 0)
    assert cache.get("k", lambda: "fine") == "fine"


def test_a_change_of_what_the_view_shows_is_rendered_at_once():
    now = [0.0]
    cache = RenderCache(ttl=10.0, clock=lambda: now[0])
    count = iter(range(100))
    assert cache.get("k", lambda: next(count), version=1) == 0
    assert cache.get("k", lambda: next(count), version=1) == 0
    assert cache.get("k", lambda: next(count), version=2) == 1


def test_inspect_shows_a_bind_at_once_though_it_was_rendered_just_before():
    import orjson

    from builders import scheduler_pod
    from extender.serving.app import create_app
    from extender.serving.config import Config

    client = create_app(Config(render_ttl=60)).test_client()
    before = client.get("/cgpu-scheduler/inspect").json
    pod = scheduler_pod()
    client.post("/cgpu-scheduler/filter", data=orjson.dumps({"Pod": pod, "NodeNames": ["gpu-core-a"]}),
                content_type="application/json")
    assert client.post("/cgpu-scheduler/bind", content_type="application/json", data=orjson.dumps(
        {"PodName": pod["metadata"]["name"], "PodNamespace": "default", "PodUID": pod["metadata"]["uid"],
         "Node": "gpu-core-a"})).json == {"Error": ""}
    after = client.get("/cgpu-scheduler/inspect").json
    assert after != before and pod["metadata"]["name"] in str(after)
