"""The heap is frozen once, after the first sync, and never while the view is not synced."""

import gc
import threading

import pytest

from extender.logs import get_logger
from extender.serving.heap import freeze_after_sync


@pytest.fixture
def unfrozen():
    gc.unfreeze()
    yield
    gc.unfreeze()  # the rest of the suite collects as usual


def test_frozen_once_the_view_is_synced(unfrozen):
    synced = threading.Event()
    asked = threading.Semaphore(0)

    def ready():
        asked.release()
        return synced.is_set()

    thread = freeze_after_sync(ready, threading.Event(), interval=0.01)
    assert asked.acquire(timeout=5) and asked.acquire(timeout=5)  # asked twice: still waiting
    assert gc.get_freeze_count() == 0
    kept = [{"pod": i} for i in range(1000)]  # alive at the sync: frozen with the rest
    synced.set()
    thread.join(5)
    assert not thread.is_alive()
    assert gc.get_freeze_count() >= len(kept)
    gc.unfreeze()
    assert gc.get_freeze_count() == 0


def test_stopped_before_sync_freezes_nothing(unfrozen):
    stop = threading.Event()
    thread = freeze_after_sync(lambda: False, stop, interval=0.01)
    stop.set()
    thread.join(5)
    assert not thread.is_alive()
    assert gc.get_freeze_count() == 0


def test_a_failing_readiness_check_is_logged_and_leaves_the_heap_as_it_is(unfrozen, caplog, monkeypatch):
    monkeypatch.setattr(get_logger(), "propagate", True)  # configure() (serve) turns it off; caplog reads the root

    def ready():
        raise RuntimeError("no view")

    with caplog.at_level("WARNING"):
        thread = freeze_after_sync(ready, threading.Event(), interval=0.01)
        thread.join(5)
    assert not thread.is_alive()
    assert gc.get_freeze_count() == 0
    assert [r.getMessage() for r in caplog.records] == ["heap not frozen"]
