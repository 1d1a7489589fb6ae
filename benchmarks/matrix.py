"""Many runs at once: every (trace, mapping, setting, policy, seed), resumable, in worker processes.

``python -m benchmarks.matrix`` runs the matrix of ``benchmarks/RESULTS.md``
(see ``--help``); each run's record goes to ``OUT/runs/<name>.json`` (skipped
when present, so an interrupted matrix resumes) and the summary over seeds to
``OUT/summary.json``. Keep workers ≤ the cores you may use.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed

from benchmarks import protocol, summary
from benchmarks.mapping import MAPPINGS
from benchmarks.replay import replay
from benchmarks.trace import DEFAULT_DIR, NODE_FILE, TRACES, pod_file, read_nodes, read_pods
from policy.scoring import STRATEGIES

POLICIES = ("random", "spread", "ack", "binpack", "bestfit", "fragmentation")
# FGD's own measure in our replay: pods counted once, no Stranded, no Starved (host-aware, learned online)
FGD_MEASURE = {"weighting": "pods", "stranded": False, "starved": False}


def run_name(trace, mapping, setting, label, seed) -> str:
    return f"{trace}-{mapping}-{setting}-{label}-{seed}"


def _one(job: dict) -> dict:
    nodes = read_nodes(job["nodes"])
    pods = read_pods(job["pods"])
    run = replay(nodes, pods, job["policy"], job["seed"], job["mapping"], job["setting"], job["stop_at"],
                 job.get("options") or {})
    result = summary.record(run, job["trace"], job["label"])
    result["options"] = job.get("options") or {}
    with open(job["path"] + ".tmp", "w") as f:
        json.dump(result, f)
    os.replace(job["path"] + ".tmp", job["path"])
    return result


def jobs_for(configs: list, seeds, trace_dir: str, out: str, curve_traces=("default",)) -> list:
    """``configs``: dicts with trace, mapping, setting, policy and optional label/options."""
    jobs = []
    for c in configs:
        label = c.get("label") or c["policy"]
        for seed in seeds:
            path = os.path.join(out, "runs", run_name(c["trace"], c["mapping"], c["setting"], label, seed) + ".json")
            jobs.append({**c, "label": label, "seed": seed, "path": path,
                         "nodes": os.path.join(trace_dir, NODE_FILE), "pods": pod_file(c["trace"], trace_dir),
                         "stop_at": protocol.RATIO if c["trace"] in curve_traces else 1.0})
    return jobs


def run_jobs(jobs: list, workers: int, log=print) -> list:
    done, todo = [], []
    for job in jobs:
        if os.path.exists(job["path"]):
            with open(job["path"]) as f:
                done.append(json.load(f))
        else:
            todo.append(job)
    log(f"{len(done)} runs already there, {len(todo)} to go")
    if todo:
        os.makedirs(os.path.dirname(todo[0]["path"]), exist_ok=True)
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = {pool.submit(_one, job): job for job in todo}
            for future in as_completed(futures):
                result = future.result()
                done.append(result)
                log(f"{len(done)}/{len(jobs)} {result['trace']} {result['mapping']} {result['setting']} "
                    f"{result['label']} seed {result['seed']}: {result['unallocated']:.2f} %")
    return done


def standard_configs(traces=TRACES, policies=POLICIES, mappings=tuple(MAPPINGS), kube_traces=("default",),
                     kube_mappings=("milli",), shipped_traces=()) -> list:
    configs = [{"trace": t, "mapping": m, "setting": "paper", "policy": p}
               for t in traces for m in mappings for p in policies]
    for setting, chosen in (("kube", kube_traces), ("shipped", shipped_traces)):
        configs += [{"trace": t, "mapping": m, "setting": setting, "policy": p}
                    for t in chosen if t in traces for m in kube_mappings for p in policies]
    return configs


def ablation_configs(traces=("default",), labels=None) -> list:
    """Fragmentation variants (milli, paper): what each ingredient is worth (``labels``: only these)."""
    return [config for trace in traces for config in _ablations(trace) if labels is None or config["label"] in labels]


def _ablations(trace: str) -> list:
    base = {"trace": trace, "mapping": "milli", "setting": "paper", "policy": "fragmentation"}
    return [{**base, "label": "fragmentation[pods]", "options": {"weighting": "pods"}},
            {**base, "label": "fragmentation[host-blind]", "options": {"host_aware": False}},
            {**base, "label": "fragmentation[no-stranded]", "options": {"stranded": False}},
            {**base, "label": "fragmentation[no-starved]", "options": {"starved": False}},
            {**base, "label": "fragmentation[fgd]", "options": FGD_MEASURE}]



def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.matrix", description=__doc__.splitlines()[0])
    parser.add_argument("--trace-dir", default=DEFAULT_DIR)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "out"))
    parser.add_argument("--traces", nargs="+", default=list(TRACES),
                        help="pod lists openb_pod_list_<name>.csv in --trace-dir (default: the five shared ones)")
    parser.add_argument("--policies", nargs="+", default=list(POLICIES), choices=sorted(STRATEGIES))
    parser.add_argument("--mappings", nargs="+", default=list(MAPPINGS), choices=list(MAPPINGS))
    parser.add_argument("--kube-traces", nargs="*", default=["default"],
                        help="traces also run in the kube setting (default: default)")
    parser.add_argument("--kube-mappings", nargs="*", default=["milli"], choices=list(MAPPINGS),
                        help="mappings run in the kube and shipped settings (default: milli)")
    parser.add_argument("--shipped-traces", nargs="*", default=[],
                        help="traces also run in the shipped fragmentation deployment's setting (default: none)")
    parser.add_argument("--ablations", nargs="*", default=None, metavar="TRACE",
                        help="also run the fragmentation ablations, on these traces (none named: default)")
    parser.add_argument("--ablation-labels", nargs="+", default=None, metavar="LABEL",
                        help="only these ablations, e.g. 'fragmentation[fgd]' (default: all)")
    parser.add_argument("--seeds", type=int, default=len(protocol.SEEDS))
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    configs = standard_configs(args.traces, args.policies, args.mappings, args.kube_traces, args.kube_mappings,
                               args.shipped_traces)
    if args.ablations is not None:
        configs += ablation_configs(args.ablations or ("default",), args.ablation_labels)
    seeds = range(protocol.SEEDS[0], protocol.SEEDS[0] + args.seeds)
    records = run_jobs(jobs_for(configs, seeds, args.trace_dir, args.out), args.workers)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary.aggregate(records), f, indent=1)
    print(f"summary: {os.path.join(args.out, 'summary.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
