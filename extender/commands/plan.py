"""``cgpu-extender plan``: where the pending shared-GPU pods can go, and the new nodes they need.

Reads a cluster file (``--cluster``) or the API server (``--kubeconfig``,
else the in-cluster or default configuration, as ``inspect`` does; with the
PodDisruptionBudgets, which say which moves defragmentation may make), rebuilds
the extender's ledger from it and prints the autoscaling plan
(:mod:`extender.planning`): a table per node pool, or with ``--json`` the
object ``GET {prefix}/plan`` answers.
"""

from __future__ import annotations

import argparse
import json
import sys

from extender.planning import DEFAULT_PLACEHOLDER_NAMESPACE, DEFAULT_SCHEDULER_NAMES, PlanSettings
from policy.pools import DEFAULT_POOL_LABELS


def add_planning_arguments(parser: argparse.ArgumentParser) -> None:
    """The options ``plan`` and ``serve`` share: pools, templates, schedulers."""
    parser.add_argument("--templates", metavar="FILE",
                        help="pool max sizes, and templates for pools at zero nodes (YAML; see README)")
    parser.add_argument("--pool-label", action="append", metavar="KEY", dest="pool_labels",
                        help="node label naming a node's pool; repeat for several, the first present wins "
                             f"(default: {', '.join(DEFAULT_POOL_LABELS)})")
    parser.add_argument("--scheduler-name", action="append", metavar="NAME", dest="scheduler_names",
                        help="pending pods of this scheduler are the extender's to plan; repeat for several "
                             "(default: default-scheduler; variant B: cgpu-scheduler)")


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "plan", help="pending shared-GPU pods: what fits now, new nodes per node pool, what cannot be placed",
        description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--cluster", metavar="FILE", help="a cluster file (kubectl get nodes,pods -o yaml)")
    source.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig of the API server to read")
    add_planning_arguments(parser)
    parser.add_argument("--placeholder-namespace", default=DEFAULT_PLACEHOLDER_NAMESPACE, metavar="NS",
                        help="namespace of scale-up placeholders, left out of the plan "
                             f"(default {DEFAULT_PLACEHOLDER_NAMESPACE})")
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    parser.set_defaults(run=run)


def settings_of(args: argparse.Namespace) -> PlanSettings:
    """PlanSettings from the shared options; raises TemplatesError for a bad templates file."""
    from extender.templates import load

    pool_labels = tuple(args.pool_labels or DEFAULT_POOL_LABELS)
    return PlanSettings(pool_labels=pool_labels,
                        scheduler_names=tuple(args.scheduler_names or DEFAULT_SCHEDULER_NAMES),
                        placeholder_namespace=args.placeholder_namespace,
                        templates=load(args.templates, pool_labels) if args.templates else {})


def run(args: argparse.Namespace) -> int:
    from extender.clusterfile import ClusterFileError, load
    from extender.commands.inspect import SourceError, api_objects
    from extender.embedded import EmbeddedCluster
    from extender.ledger import Ledger
    from extender.plan_text import render
    from extender.planning import plan_json, plan_of
    from extender.templates import TemplatesError
    from policy.scoring import make_strategy
    from policy.state import ClusterState

    try:
        settings = settings_of(args)
        objects = load(args.cluster)[0] if args.cluster else api_objects(args.kubeconfig, budgets=True)
    except (TemplatesError, ClusterFileError, SourceError) as exc:
        print(f"plan: {exc}", file=sys.stderr)
        return 1
    ledger = Ledger(ClusterState(), make_strategy())
    cluster = EmbeddedCluster(objects, source="plan")
    cluster.start(ledger)
    planned = plan_of(ledger, settings, budgets=cluster.disruption_budgets)
    sys.stdout.write(json.dumps(plan_json(planned), indent=2) + "\n" if args.json else render(planned))
    return 0
