"""What a set of runs amounts to: per-run records and their mean ± sd over seeds.

A run record is a small JSON-able dict (:func:`record`): the headline
unallocated GPU % at 100 % arrived, the curve on a 1 % grid of arrived
workload, failed pods by shape, decision-time statistics. :func:`aggregate`
groups records by (trace, mapping, setting, policy, label) over seeds.
"""

from __future__ import annotations

import statistics
import warnings

import numpy as np

from benchmarks.replay import Run

GRID = np.arange(0, 131)  # arrived workload, % of capacity


def record(run: Run, trace: str, label: str = "") -> dict:
    arrived, unallocated = run.curve()
    index = np.searchsorted(arrived, GRID + 1e-9, side="right") - 1
    curve = [None if i < 0 or arrived[-1] < g else round(float(unallocated[i]), 3) for g, i in zip(GRID, index)]
    times = run.decision_ns / 1e3
    return {
        "trace": trace, "mapping": run.mapping, "setting": run.setting, "policy": run.policy,
        "label": label or run.policy, "seed": run.seed,
        "unallocated": run.unallocated_at(1.0),
        "pods": int(len(run.placed)), "failed": int((~run.placed).sum()),
        "failed_by_shape": {f"{k}x{m}": n for (k, m), n in sorted(run.failed_by_shape(1.0).items())},
        "decision_us": {"median": float(np.median(times)) if len(times) else None,
                        "mean": float(times.mean()) if len(times) else None,
                        "p99": float(np.percentile(times, 99)) if len(times) else None},
        "consistent": run.consistent,
        "curve": curve,
    }


def key(r: dict) -> tuple:
    return r["trace"], r["mapping"], r["setting"], r["label"]


def aggregate(records: list) -> list:
    """One summary per (trace, mapping, setting, label), seeds pooled."""
    groups: dict = {}
    for r in records:
        groups.setdefault(key(r), []).append(r)
    out = []
    for (trace, mapping, setting, label), runs in sorted(groups.items()):
        values = [r["unallocated"] for r in runs]
        shapes = sorted({s for r in runs for s in r["failed_by_shape"]})
        curves = np.array([[np.nan if v is None else v for v in r["curve"]] for r in runs], dtype=float)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # columns past a run's end are all NaN
            mean_curve = np.nanmean(curves, axis=0) if len(curves) else []
        out.append({
            "trace": trace, "mapping": mapping, "setting": setting, "label": label, "policy": runs[0]["policy"],
            "seeds": sorted(r["seed"] for r in runs),
            "unallocated_mean": statistics.fmean(values),
            "unallocated_sd": statistics.stdev(values) if len(values) > 1 else 0.0,
            "failed_by_shape_mean": {s: statistics.fmean(r["failed_by_shape"].get(s, 0) for r in runs) for s in shapes},
            "decision_us_median": statistics.median(r["decision_us"]["median"] for r in runs),
            "decision_us_mean": statistics.fmean(r["decision_us"]["mean"] for r in runs),
            "decision_us_p99": statistics.median(r["decision_us"]["p99"] for r in runs),
            "consistent": all(r["consistent"] for r in runs),
            "curve": [None if np.isnan(v) else round(float(v), 3) for v in mean_curve],
        })
    return out
