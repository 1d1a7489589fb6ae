"""The processes of a served extender: gunicorn's arbiter and its one worker, read from /proc."""

from __future__ import annotations

import os


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants (the arbiter, then its worker)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as children:
                    todo.extend(int(child) for child in children.read().split())
        except OSError:  # gone meanwhile
            pass
    return found


def worker(pid: int) -> int:
    """The process that serves: gunicorn's worker (the arbiter's child), else ``pid`` itself."""
    processes = tree(pid)
    return processes[-1]


def rss_mb(pid: int) -> float | None:
    """The resident set of the serving process (:func:`worker`), MiB; None when gone."""
    try:
        with open(f"/proc/{worker(pid)}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None
