"""What preemption reads of a pod besides its GPU request: priority, start, labels."""

from __future__ import annotations


def priority_and_start(pod: dict) -> tuple[int, str]:
    """A pod's ``spec.priority`` (0 when unset or unreadable) and its start: ``status.startTime``,
    else ``metadata.creationTimestamp`` ("" when neither)."""
    spec, status, meta = (pod.get(k) if isinstance(pod.get(k), dict) else {} for k in ("spec", "status", "metadata"))
    priority = spec.get("priority")
    priority = priority if isinstance(priority, int) and not isinstance(priority, bool) and \
        -2**31 <= priority < 2**31 else 0
    start = status.get("startTime") or meta.get("creationTimestamp") or ""
    return priority, start if isinstance(start, str) else ""


def labels_of(pod: dict) -> dict | None:
    labels = (pod.get("metadata") or {}).get("labels")
    return {k: v for k, v in labels.items() if isinstance(v, str)} or None if isinstance(labels, dict) else None
