"""``cgpu-extender simulate``: replay the openb GPU trace through the extender's own decisions.

Runs the FGD paper's protocol (``benchmarks.protocol``) for N seeds from 42
and prints the unallocated GPU % at 100 % arrived workload (mean ± sd), the
failed pods by shape and the decision time per pod; ``--json`` writes the
same as JSON (``runs`` holds each seed's record, ``unallocated_mean`` and
``unallocated_sd`` the summary).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from policy.scoring import STRATEGIES


HELP = "replay the openb GPU trace through the extender's placement (FGD protocol)"
MISSING = ("cgpu-extender: simulate needs the benchmarks package, which this installation lacks "
           "(the container image leaves it out): run it from a source checkout (pip install -e .)")


def register(subparsers) -> None:
    try:
        from benchmarks.kube import SETTINGS
        from benchmarks.mapping import MAPPINGS
        from benchmarks.trace import DEFAULT_DIR, NODE_FILE, pod_file
    except ModuleNotFoundError as exc:
        if exc.name != "benchmarks":
            raise
        # The container image installs policy/ and extender/ only: serve and inspect must still start.
        parser = subparsers.add_parser("simulate", help=HELP + " [not installed here]",
                                       description=__doc__.splitlines()[0])
        parser.set_defaults(run=_missing)
        return

    parser = subparsers.add_parser("simulate", help=HELP, description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default=os.path.join(DEFAULT_DIR, NODE_FILE), metavar="CSV",
                        help=f"node list (default {os.path.join(DEFAULT_DIR, NODE_FILE)})")
    parser.add_argument("--pods", default=pod_file("default"), metavar="CSV",
                        help=f"pod list (default {pod_file('default')})")
    parser.add_argument("--policy", default="fragmentation", choices=sorted(STRATEGIES),
                        help="scoring strategy (default fragmentation)")
    parser.add_argument("--mapping", default="milli", choices=list(MAPPINGS),
                        help="trace rows to requests: milli (exact, as the paper) or cgpu (GiB + core %%)")
    parser.add_argument("--setting", default="paper", choices=list(SETTINGS),
                        help="paper: the strategy places CPU-only pods too; kube: kube-scheduler's default "
                             "scoring does")
    parser.add_argument("--seeds", type=int, default=10, help="number of seeds, from 42 (default 10)")
    parser.add_argument("--json", metavar="FILE", help="write the results as JSON")
    parser.set_defaults(run=run)


def _missing(args: argparse.Namespace) -> int:
    print(MISSING, file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    from benchmarks import protocol, summary
    from benchmarks.replay import replay
    from benchmarks.trace import TraceError, read_nodes, read_pods

    if args.seeds < 1:
        print(f"cgpu-extender: --seeds must be at least 1, got {args.seeds}", file=sys.stderr)
        return 2
    try:
        nodes = read_nodes(args.nodes)
        pods = read_pods(args.pods)
    except TraceError as exc:
        print(f"cgpu-extender: {exc}", file=sys.stderr)
        return 2
    trace = os.path.basename(args.pods).removeprefix("openb_pod_list_").removesuffix(".csv")
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
        out.update(nodes=args.nodes, pods=args.pods, runs=[{k: v for k, v in r.items() if k != "curve"}
                                                            for r in records])
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=float)
    return 0
