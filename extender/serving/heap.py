"""Keeping the synced cluster view out of the garbage collector's full passes.

The first sync leaves ~175,000 tracked objects at 5,000 nodes (the watched
objects, the ledger), nearly all of them alive until the process ends. Each
full (generation 2) collection walks all of them: 39 ms at rest on the 2-core
VM of ``benchmarks/RESULTS.md``, 59 – 146 ms in in-process runs under load, a
pause in the middle of whatever request the loop was serving. :func:`freeze_after_sync`
waits in a thread of its own until the view is synced once, collects, and
moves every object alive then to the permanent generation (``gc.freeze()``),
which no later collection walks; a full pass then costs what the objects
created since cost. Objects frozen this way are still freed by reference
counting when they go (a deleted pod's object, say); only a reference cycle
among them would stay until the process ends.
"""

from __future__ import annotations

import gc
import threading
import time
from typing import Callable

from extender.logs import fields, get_logger


def freeze_after_sync(ready: Callable[[], bool], stop: threading.Event, interval: float = 0.5) -> threading.Thread:
    """Start a daemon thread that, once ``ready()`` is true, collects and freezes the heap once
    and ends (or ends without doing so when ``stop`` is set first)."""
    def wait_then_freeze():
        try:
            while not stop.is_set():
                if ready():
                    freeze()
                    return
                stop.wait(interval)
        except Exception as exc:  # noqa: BLE001 - only a pause is at stake: say so and leave the heap as it is
            get_logger().warning("heap not frozen", exc_info=exc)

    thread = threading.Thread(target=wait_then_freeze, name="heap-freeze", daemon=True)
    thread.start()
    return thread


def freeze() -> int:
    """Collect, then move every tracked object to the permanent generation; how many moved."""
    started = time.perf_counter()
    gc.collect()
    before = gc.get_freeze_count()
    gc.freeze()
    moved = gc.get_freeze_count() - before
    get_logger().info("heap frozen after the first sync", extra=fields(
        objects=moved, collect_ms=round((time.perf_counter() - started) * 1000, 1)))
    return moved
