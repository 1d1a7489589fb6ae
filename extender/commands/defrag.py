"""``cgpu-extender defrag``: the fewest moves that give pending shared-GPU pods room on the GPUs there are.

Reads a cluster file (``--cluster``, PodDisruptionBudgets in it counted),
the API server (``--kubeconfig``, else the in-cluster or default
configuration, as ``inspect`` does; PodDisruptionBudgets listed too), or a
running extender (``--endpoint URL`` of its prefix or of its defrag route),
and prints the plan (:mod:`extender.defrag.inputs`): a table of moves, or
with ``--json`` the object ``GET {prefix}/defrag`` answers. It only plans;
nothing is evicted (that is ``serve --defrag-execute``).
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.parse
import urllib.request

from extender.planning import DEFAULT_PLACEHOLDER_NAMESPACE, DEFAULT_SCHEDULER_NAMES, PlanSettings
from policy.defrag import DEFAULT_MAX_MOVES

MAX_MOVES = 100


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "defrag", help="the fewest pod moves that turn stranded GPU fragments into room for pending pods",
        description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--cluster", metavar="FILE",
                        help="a cluster file (kubectl get nodes,pods,pdb -A -o yaml)")
    source.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig of the API server to read")
    source.add_argument("--endpoint", metavar="URL",
                        help="ask a running extender (e.g. http://127.0.0.1:32766/cgpu-scheduler)")
    parser.add_argument("--max-moves", type=int, default=DEFAULT_MAX_MOVES, metavar="N",
                        help=f"most moves in the plan, 0 to {MAX_MOVES} (default {DEFAULT_MAX_MOVES})")
    parser.add_argument("--scheduler-name", action="append", metavar="NAME", dest="scheduler_names",
                        help="pending pods of this scheduler are the extender's; repeat for several "
                             "(default: default-scheduler)")
    parser.add_argument("--placeholder-namespace", default=DEFAULT_PLACEHOLDER_NAMESPACE, metavar="NS",
                        help=f"namespace of scale-up placeholders, left out (default {DEFAULT_PLACEHOLDER_NAMESPACE})")
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    parser.set_defaults(run=run)


class DefragSourceError(Exception):
    """The plan could not be had; ``str()`` says from where and why."""


def from_endpoint(url: str, max_moves: int, timeout: float = 60.0) -> dict:
    """The plan a running extender answers."""
    url = url.rstrip("/")
    if not url.endswith("/defrag"):
        url += "/defrag"
    url += "?" + urllib.parse.urlencode({"maxMoves": max_moves})
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            return json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        try:
            error = json.loads(exc.read()).get("Error")
        except (ValueError, AttributeError, OSError):
            error = None
        raise DefragSourceError(f"{url} answered {exc.code}: {error or exc.reason}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise DefragSourceError(f"cannot read {url}: {getattr(exc, 'reason', exc)}") from None


def from_objects(objects, settings: PlanSettings, max_moves: int) -> dict:
    """The plan for a ledger fed with these objects (Nodes, Pods, ConfigMaps, PodDisruptionBudgets)."""
    from extender.defrag.inputs import defrag_json, defrag_of
    from extender.embedded import EmbeddedCluster
    from extender.ledger import Ledger
    from policy.scoring import make_strategy
    from policy.state import ClusterState

    ledger = Ledger(ClusterState(), make_strategy())
    cluster = EmbeddedCluster(objects, source="defrag")
    cluster.start(ledger)
    return defrag_json(defrag_of(ledger, settings, cluster.disruption_budgets(), max_moves))


def run(args: argparse.Namespace) -> int:
    from extender.clusterfile import ClusterFileError, load
    from extender.commands.inspect import SourceError, api_objects
    from extender.defrag.text import render

    if not 0 <= args.max_moves <= MAX_MOVES:
        print(f"defrag: --max-moves must be 0 to {MAX_MOVES}, got {args.max_moves}", file=sys.stderr)
        return 2
    settings = PlanSettings(scheduler_names=tuple(args.scheduler_names or DEFAULT_SCHEDULER_NAMES),
                            placeholder_namespace=args.placeholder_namespace)
    try:
        if args.endpoint:
            reply = from_endpoint(args.endpoint, args.max_moves)
        else:
            objects = load(args.cluster)[0] if args.cluster else api_objects(args.kubeconfig, budgets=True)
            reply = from_objects(objects, settings, args.max_moves)
    except (ClusterFileError, SourceError, DefragSourceError) as exc:
        print(f"defrag: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(json.dumps(reply, indent=2) + "\n" if args.json else render(reply))
    return 0
