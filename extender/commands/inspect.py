"""``cgpu-extender inspect [-d] [NODE]``: GPU sharing per node, in ``kubectl inspect cgpu``'s format.

The allocations come from the API server's pod annotations (the kubeconfig,
in-cluster config or ``--kubeconfig``), rebuilt by the same ledger the
extender runs — so it also works on clusters where ACK's own scheduler made
them — or from a running extender (``--endpoint URL`` of its prefix or of
its inspect route). Installed also as ``kubectl-inspect-cgpu``, which makes
``kubectl inspect cgpu [-d] [NODE]`` work.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-d", "--details", action="store_true", help="per node, the pods and their GPU shares")
    parser.add_argument("node", nargs="?", metavar="NODE", help="only this node")
    parser.add_argument("--endpoint", metavar="URL",
                        help="read a running extender (e.g. http://127.0.0.1:32766/cgpu-scheduler) instead of "
                             "the API server")
    parser.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig of the API server to read")
    parser.add_argument("--json", action="store_true", help="print the inspect report as JSON instead")


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "inspect", help="show GPU memory/compute allocated per node and GPU (kubectl inspect cgpu format)",
        description="GPU memory and compute allocated per node and GPU, read from the API server's pod "
                    "annotations or from a running extender (--endpoint).")
    add_arguments(parser)
    parser.set_defaults(run=run)


class SourceError(Exception):
    """The allocations could not be read; ``str()`` says from where and why."""


def from_endpoint(url: str, timeout: float = 10.0) -> dict:
    """The inspect report of a running extender."""
    url = url.rstrip("/")
    if not url.endswith("/inspect"):
        url += "/inspect"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            return json.loads(reply.read())
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise SourceError(f"cannot read {url}: {getattr(exc, 'reason', exc)}") from None


def from_objects(objects: list) -> dict:
    """The inspect report of a ledger fed with these Nodes, Pods and ConfigMaps."""
    from extender.embedded import EmbeddedCluster
    from extender.ledger import Ledger
    from policy.scoring import make_strategy
    from policy.state import ClusterState

    ledger = Ledger(ClusterState(), make_strategy())
    EmbeddedCluster(objects, source="inspect").start(ledger)
    return ledger.inspect()


def from_api(kubeconfig: str | None = None, api_client=None) -> dict:
    """The inspect report rebuilt from the API server's nodes, pods and unhealthy-GPU ConfigMaps."""
    return from_objects(api_objects(kubeconfig, api_client))


def api_objects(kubeconfig: str | None = None, api_client=None, budgets: bool = False) -> list:
    """The API server's Nodes, Pods and ``kube-system`` ConfigMaps, as v1 objects; with ``budgets``
    also every PodDisruptionBudget (policy/v1)."""
    import orjson
    from kubernetes import client

    from extender.kube import connect
    from policy.node import UNHEALTHY_CONFIGMAP_NAMESPACE

    if api_client is None:
        try:
            api_client = client.ApiClient(connect.load(kubeconfig))
        except connect.ConnectError as exc:
            raise SourceError(str(exc)) from None
    api = client.CoreV1Api(api_client)
    objects = []
    calls = (("Node", api.list_node, ()), ("Pod", api.list_pod_for_all_namespaces, ()),
             ("ConfigMap", api.list_namespaced_config_map, (UNHEALTHY_CONFIGMAP_NAMESPACE,)))
    if budgets:
        calls += (("PodDisruptionBudget",
                   client.PolicyV1Api(api_client).list_pod_disruption_budget_for_all_namespaces, ()),)
    for kind, call, args in calls:
        try:
            response = call(*args, _preload_content=False, _request_timeout=30)
            items = orjson.loads(response.data).get("items") or []
        except Exception as exc:  # noqa: BLE001 - any client failure ends the command with its reason
            raise SourceError(f"cannot list {kind}s: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}") \
                from None
        objects += [{**item, "kind": kind} for item in items]
    return objects


def run(args: argparse.Namespace) -> int:
    from extender.inspect_text import UnknownNode, render

    try:
        report = from_endpoint(args.endpoint) if args.endpoint else from_api(args.kubeconfig)
        text = json.dumps(report, indent=2) + "\n" if args.json else render(report, args.details, args.node)
    except (SourceError, UnknownNode) as exc:
        print(f"inspect: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(text)
    return 0


def kubectl_plugin(argv: list | None = None) -> int:
    """Entry point of ``kubectl-inspect-cgpu`` (kubectl passes ``-d NODE`` through)."""
    parser = argparse.ArgumentParser(prog="kubectl inspect cgpu",
                                     description="GPU memory and compute allocated per node and GPU.")
    add_arguments(parser)
    return run(parser.parse_args(argv))
