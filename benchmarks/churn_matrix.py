"""Churn replays for several policies, move budgets and seeds, resumable, and their tables.

``python -m benchmarks.churn_matrix`` (see ``--help``) replays the workload
of :mod:`benchmarks.timeline` with each policy of ``--policies`` and, for
each budget of ``--budgets`` (moves per hour), with ``fragmentation`` plus
the defragmentation step (:mod:`benchmarks.defrag_step`), for each seed; each
run's figures (:func:`benchmarks.churn_stats.summary`) go to
``OUT/runs/<name>.json`` (skipped when present, so an interrupted matrix
resumes), and the tables over every run of the same workload are printed.
Runs go one after another: the machine's other users keep their cores.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from benchmarks import churn_stats
from benchmarks.churn import Defrag, churn
from benchmarks.kube import SETTINGS
from benchmarks.mapping import MAPPINGS
from benchmarks.timeline import workload
from benchmarks.trace import DEFAULT_DIR, NODE_FILE, TraceError, pod_file, read_nodes, read_pods, read_times
from policy.scoring import STRATEGIES

SEED0 = 42
DEFRAGGED = "fragmentation"  # the policy the defragmentation step runs with


DEFAULT_EVERY = 5.0  # minutes between defragmentation steps


def defrag_label(budget: int, every: float = DEFAULT_EVERY) -> str:
    return f"{DEFRAGGED}+defrag {budget}/h" + ("" if every == DEFAULT_EVERY else f" every {every:g} min")


def workload_key(args) -> str:
    return f"{args.trace}-c{args.copies}-x{args.speedup:g}-l{args.lead:g}-{args.mapping}-{args.setting}"


def run_path(out: str, key: str, label: str, seed: int) -> str:
    return os.path.join(out, "runs", f"{key}-{label.replace(' ', '_').replace('/', 'per')}-{seed}.json")


def configs(args) -> list:
    """``(label, policy, budget or None)`` of every run per seed."""
    found = [(policy, policy, None) for policy in args.policies]
    return found + [(defrag_label(b, args.every), DEFRAGGED, b) for b in args.budgets]


def _planner(args):
    from benchmarks.defrag_step import planner  # needs policy.defrag
    return planner(args.max_pending)


def run_all(args, log=print) -> list:
    key = workload_key(args)
    nodes = read_nodes(os.path.join(args.trace_dir, NODE_FILE))
    path = pod_file(args.trace, args.trace_dir)
    pods, times = read_pods(path), read_times(path)
    records = []
    for seed in range(SEED0, SEED0 + args.seeds):
        work = None
        for label, policy, budget in configs(args):
            target = run_path(args.out, key, label, seed)
            if os.path.exists(target):
                with open(target) as f:
                    records.append(json.load(f))
                continue
            if work is None:
                work = workload(pods, times, args.copies, args.speedup, seed, args.lead)
            defrag = None if budget is None else Defrag(_planner(args), budget, 60.0 * args.every)
            run = churn(nodes, work, policy, seed, args.mapping, args.setting, defrag=defrag, label=label)
            record = {**churn_stats.summary(run, work), "workload": key, "budget": budget}
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target + ".tmp", "w") as f:
                json.dump(record, f)
            os.replace(target + ".tmp", target)
            records.append(record)
            log(f"{label} seed {seed}: unallocated {record['unallocated_mean']:.2f} %, "
                f"{record['never_placed']} never placed, {record['moves']} moves, {record['seconds']:.0f} s")
    return records


def _cell(values, digits: int = 2) -> str:
    values = np.asarray(values, dtype=float)
    if not len(values):
        return "—"  # e.g. the offered load never reached the band
    mean = values.mean()
    mean = 0.0 if abs(mean) < 0.5 * 10.0**-digits else mean  # no "-0.00"
    if len(values) > 1:
        return f"{mean:.{digits}f} ± {values.std(ddof=1):.{digits}f}"
    return f"{mean:.{digits}f}"


def tables(records: list) -> str:
    """Markdown: unallocated share, waits, and what moves bought, each cell mean ± sd over seeds."""
    by_label: dict = {}
    for r in records:
        by_label.setdefault(r["label"], []).append(r)
    seeds = sorted({r["seed"] for r in records})
    levels = [f"{round(100 * level)}" for level in churn_stats.LEVELS]
    lines = [f"Seeds {seeds[0]}..{seeds[-1]} ({len(seeds)}); unallocated and waiting: % of GPU capacity, "
             "time-weighted means (bands: unallocated ± sd / waiting); waits in seconds, GPU pods placed after "
             "waiting or not.", "",
             "| policy | unallocated, window | " + " | ".join(f"offered {lv} %" for lv in levels)
             + " | waiting, window | moves |",
             "|---|" + "---|" * (len(levels) + 3)]
    for label, rs in by_label.items():
        cells = []
        for lv in levels:
            inside = [r["bands"][lv] for r in rs if r["bands"].get(lv)]
            cells.append(f"{_cell([b['unallocated'] for b in inside])} / {np.mean([b['waiting'] for b in inside]):.2f}"
                         if inside else "—")
        lines.append(f"| {label} | {_cell([r['unallocated_mean'] for r in rs])} | " + " | ".join(cells)
                     + f" | {_cell([r['waiting_mean'] for r in rs])} | {_cell([r['moves'] for r in rs], 0)} |")
    lines += ["", "| policy | GPU pods that waited | wait mean | p50 | p95 | max | never placed (pods) "
              "| never placed (% of capacity) |", "|---|---|---|---|---|---|---|---|"]
    for label, rs in by_label.items():
        lines.append(f"| {label} | {_cell([r['waited'] for r in rs], 0)} | {_cell([r['wait_mean'] for r in rs], 1)} | "
                     f"{_cell([r['wait_p50'] for r in rs], 1)} | {_cell([r['wait_p95'] for r in rs], 1)} | "
                     f"{_cell([r['wait_max'] for r in rs], 0)} | {_cell([r['never_placed'] for r in rs], 0)} | "
                     f"{_cell([r['never_placed_demand'] for r in rs])} |")
    kinds = ("share", "whole", "multi")
    lines += ["", "By kind — mean wait (s) / never placed (pods):", "",
              "| policy | sharing pods | whole-GPU pods | multi-GPU pods |", "|---|---|---|---|"]
    for label, rs in by_label.items():
        lines.append(f"| {label} | " + " | ".join(
            f"{_cell([r['kinds'][k]['wait_mean'] for r in rs], 0)} / {_cell([r['kinds'][k]['never_placed'] for r in rs], 0)}"
            for k in kinds) + " |")
    base = {r["seed"]: r for r in by_label.get(DEFRAGGED, [])}
    bought = [(label, rs) for label, rs in by_label.items() if rs[0].get("budget") is not None and base]
    if bought:
        lines += ["", f"What moves bought, against `{DEFRAGGED}` on the same seed (negative: better):", "",
                  "| budget | moves | placed by a step | Δ unallocated (points) | Δ wait mean (s) | Δ never placed |",
                  "|---|---|---|---|---|---|"]
        for label, rs in bought:
            paired = [(r, base[r["seed"]]) for r in rs if r["seed"] in base]
            lines.append(f"| {label} | {_cell([r['moves'] for r, _ in paired], 0)} | "
                         f"{_cell([r['placed_after_moves'] for r, _ in paired], 0)} | "
                         f"{_cell([r['unallocated_mean'] - b['unallocated_mean'] for r, b in paired], 3)} | "
                         f"{_cell([r['wait_mean'] - b['wait_mean'] for r, b in paired], 1)} | "
                         f"{_cell([r['never_placed'] - b['never_placed'] for r, b in paired], 0)} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.churn_matrix", description=__doc__.splitlines()[0])
    parser.add_argument("--trace-dir", default=DEFAULT_DIR)
    parser.add_argument("--trace", default="default", help="pod list openb_pod_list_<name>.csv (with times)")
    parser.add_argument("--copies", type=int, default=5, help="copies of the trace laid over one another")
    parser.add_argument("--speedup", type=float, default=500.0, help="arrival times divided by this")
    parser.add_argument("--lead", type=float, default=0.01, help="share of pods that arrive at the window's opening")
    parser.add_argument("--mapping", default="milli", choices=list(MAPPINGS))
    parser.add_argument("--setting", default="shipped", choices=list(SETTINGS))
    parser.add_argument("--policies", nargs="*", default=["binpack", "fragmentation"], choices=sorted(STRATEGIES))
    parser.add_argument("--budgets", nargs="*", type=int, default=[],
                        help="moves per hour of fragmentation with defragmentation, one run each (needs policy.defrag)")
    parser.add_argument("--every", type=float, default=DEFAULT_EVERY, help="minutes between defragmentation steps")
    parser.add_argument("--max-pending", type=int, default=256, help="waiting pods one plan considers at most")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "out", "churn"))
    args = parser.parse_args(argv)
    if args.copies < 1 or args.speedup <= 0 or not 0 <= args.lead < 1 or args.seeds < 1 or args.every <= 0 \
            or any(b < 0 for b in args.budgets):
        print("churn_matrix: --copies, --seeds ≥ 1; --speedup, --every > 0; --lead in [0, 1); budgets ≥ 0",
              file=sys.stderr)
        return 2
    try:
        if args.budgets:
            _planner(args)
        records = run_all(args)
    except TraceError as exc:
        print(f"churn_matrix: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:
        print(f"churn_matrix: the defragmentation planner is not available ({exc})", file=sys.stderr)
        return 2
    print(tables(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
