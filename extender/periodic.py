"""A round of work every ``interval`` seconds, in a daemon thread of its own, that outlives any one bad round.

Used by the loops that act on the cluster by themselves: scale-up
placeholders (:mod:`extender.cluster.kube.placeholders`) and defragmentation
(:mod:`extender.defrag.executor`). A round that raises is handed to
``failed`` (count it, log it) and the next round comes on time. May import:
nothing of the extender.
"""

from __future__ import annotations

import threading
from typing import Callable


class Periodic:
    def __init__(self, name: str, interval: float, round_: Callable[[], object],
                 failed: Callable[[Exception], None]):
        self.name, self.interval = name, interval
        self._round, self._failed = round_, failed
        self._stop = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """No round starts after this; the one running is waited for (5 s at most), unless it is the caller."""
        self._stop.set()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._round()
            except Exception as exc:  # noqa: BLE001 - the loop must outlive any one bad round
                self._failed(exc)
