"""``cgpu-simulate``: replay a GPU trace through the extender's own decisions.

Runs the FGD paper's protocol (``benchmarks.protocol``) for N seeds from 42
and prints the unallocated GPU % at 100 % arrived workload (mean ± sd), the
failed pods by shape and the decision time per pod; ``--json`` writes the
same as JSON (``runs`` holds each seed's record, ``unallocated_mean`` and
``unallocated_sd`` the summary).

The trace (``--trace``): ``sample``, the small synthetic one shipped with the
package (``benchmarks.sample_trace``), by default; or one of the openb pod
lists (Alibaba's GPU cluster trace v2023, which the project does not ship),
read from ``--openb-dir``. ``--nodes``/``--pods`` name the files themselves; one
given alone takes its partner from the same folder. A trace that is not there
is one line on stderr saying where it comes from, and exit 2.

A console script of the bench (``cgpu-simulate``, also ``python -m
benchmarks.simulate``), not a subcommand of ``cgpu-extender``: the service
never imports :mod:`benchmarks`, and the container image leaves it out.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from benchmarks import protocol, sample_trace, summary
from benchmarks.kube import SETTINGS
from benchmarks.mapping import MAPPINGS
from benchmarks.replay import replay
from benchmarks.trace import DEFAULT_DIR, NODE_FILE, TRACES, TraceError, pod_file, read_nodes, read_pods
from policy.scoring import STRATEGIES

PROG = "cgpu-simulate"
HELP = "replay a GPU trace (a bundled sample, or Alibaba's openb) through the extender's placement (FGD protocol)"
OPENB_SOURCE = ("the openb trace is Alibaba's GPU cluster trace v2023, not shipped with cgpu-extender: download "
                "the CSVs of https://github.com/alibaba/clusterdata (folder cluster-trace-gpu-v2023/csv; Weng et al., "
                "\"Beware of Fragmentation\", USENIX ATC 2023) and give their folder with --openb-dir DIR "
                "(or the files with --nodes/--pods)")
SAMPLE = "sample"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=HELP)
    parser.add_argument("--trace", default=SAMPLE, choices=(SAMPLE, *TRACES),
                        help="sample: the small synthetic trace shipped with the package (default); the others: "
                             "openb's pod lists, read from --openb-dir")
    parser.add_argument("--openb-dir", default=DEFAULT_DIR, metavar="DIR",
                        help=f"folder of the openb CSVs, from github.com/alibaba/clusterdata "
                             f"cluster-trace-gpu-v2023/csv (default {DEFAULT_DIR})")
    parser.add_argument("--nodes", metavar="CSV", help="node list (default: the trace's)")
    parser.add_argument("--pods", metavar="CSV", help="pod list (default: the trace's)")
    parser.add_argument("--policy", default="fragmentation", choices=sorted(STRATEGIES),
                        help="scoring strategy (default fragmentation)")
    parser.add_argument("--mapping", default="milli", choices=list(MAPPINGS),
                        help="trace rows to requests: milli (exact, as the paper) or cgpu (GiB + core %%)")
    parser.add_argument("--setting", default="paper", choices=list(SETTINGS),
                        help="paper: the strategy places CPU-only pods too; kube: kube-scheduler's default "
                             "scoring does")
    parser.add_argument("--seeds", type=int, default=10, help="number of seeds, from 42 (default 10)")
    parser.add_argument("--json", metavar="FILE", help="write the results as JSON")
    return parser


def main(argv: list | None = None) -> int:
    return run(build_parser().parse_args(argv))


def trace_files(args: argparse.Namespace) -> tuple:
    """``(nodes CSV, pods CSV, trace name)`` the options ask for (see module doc)."""
    nodes, pods = args.nodes, args.pods
    if nodes is None and pods is None:
        if args.trace == SAMPLE:
            return sample_trace.NODES_PATH, sample_trace.PODS_PATH, SAMPLE
        return os.path.join(args.openb_dir, NODE_FILE), pod_file(args.trace, args.openb_dir), args.trace
    if nodes is None:  # a lone pod list: the node list of its folder
        sample = os.path.basename(pods) == sample_trace.POD_FILE
        nodes = os.path.join(os.path.dirname(pods), sample_trace.NODE_FILE if sample else NODE_FILE)
    if pods is None:
        sample = os.path.basename(nodes) == sample_trace.NODE_FILE
        pods = os.path.join(os.path.dirname(nodes), sample_trace.POD_FILE if sample else "openb_pod_list_default.csv")
    name = os.path.basename(pods).removeprefix("openb_pod_list_").removesuffix(".csv")
    return nodes, pods, SAMPLE if name == sample_trace.POD_FILE.removesuffix(".csv") else name


def run(args: argparse.Namespace) -> int:
    if args.seeds < 1:
        print(f"{PROG}: --seeds must be at least 1, got {args.seeds}", file=sys.stderr)
        return 2
    nodes_path, pods_path, trace = trace_files(args)
    missing = [p for p in (nodes_path, pods_path) if not os.path.isfile(p)]
    if missing and trace != SAMPLE and all(os.path.basename(p).startswith("openb_") for p in missing):
        print(f"{PROG}: {' and '.join(missing)} not found; {OPENB_SOURCE}", file=sys.stderr)
        return 2
    try:
        nodes = read_nodes(nodes_path)
        pods = read_pods(pods_path)
    except TraceError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    records = []
    for seed in range(protocol.SEEDS[0], protocol.SEEDS[0] + args.seeds):
        run_ = replay(nodes, pods, args.policy, seed, args.mapping, args.setting, stop_at=1.0)
        records.append(summary.record(run_, trace))
        r = records[-1]
        print(f"seed {seed}: unallocated {r['unallocated']:.2f} %, {r['failed']} of {r['pods']} pods failed, "
              f"decision median {r['decision_us']['median']:.0f} us, p99 {r['decision_us']['p99']:.0f} us",
              flush=True)
    result = summary.aggregate(records)[0]
    print(f"{args.policy} on {trace} ({args.mapping}, {args.setting}): unallocated GPU at 100 % arrived "
          f"{result['unallocated_mean']:.2f} ± {result['unallocated_sd']:.2f} % over {args.seeds} seed(s)")
    failed = ", ".join(f"{shape} {n:.1f}" for shape, n in
                       sorted(result["failed_by_shape_mean"].items(), key=lambda kv: -kv[1]))
    print(f"failed pods per seed by GPUs x milli: {failed or 'none'}")
    print(f"decision time per pod: median {result['decision_us_median']:.0f} us, "
          f"mean {result['decision_us_mean']:.0f} us, p99 {result['decision_us_p99']:.0f} us")
    if args.json:
        out = {key: value for key, value in result.items() if key != "curve"}
        out.update(nodes=nodes_path, pods=pods_path, runs=[{k: v for k, v in r.items() if k != "curve"}
                                                            for r in records])
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=float)
    return 0


if __name__ == "__main__":
    sys.exit(main())
