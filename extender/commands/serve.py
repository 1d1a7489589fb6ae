"""``cgpu-extender serve``: run the extender (one process, :mod:`extender.httpserver`)."""

from __future__ import annotations

import argparse
import sys

from extender.commands.plan import add_planning_arguments
from extender.config import DEFAULT_HOST, DEFAULT_PORT, DEFAULT_PREFIX, Config
from policy.pools import DEFAULT_POOL_LABELS
from policy.scoring import STRATEGIES


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "serve", help="serve the extender on a Kubernetes cluster, a cluster file, or the demo",
        description="Serve filter, prioritize, bind, inspect, metrics, healthz and readyz over HTTP. "
                    "The cluster: --cluster FILE if given; else --demo if given; else the Kubernetes API "
                    "(--kubeconfig, the pod's service account, or $KUBECONFIG / ~/.kube/config) if there is "
                    "one; else the built-in demo.")
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST})")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    parser.add_argument("--prefix", default=DEFAULT_PREFIX, help=f"URL prefix of the routes (default {DEFAULT_PREFIX})")
    parser.add_argument("--cluster", metavar="FILE",
                        help="embedded cluster from a file of v1 Nodes and Pods (kubectl get nodes,pods -o yaml)")
    parser.add_argument("--demo", action="store_true",
                        help="serve the built-in demo cluster, even where a Kubernetes configuration exists")
    parser.add_argument("--kubeconfig", metavar="PATH", help="use the Kubernetes API server of this kubeconfig")
    parser.add_argument("--scoring", default="ack", choices=sorted(STRATEGIES), help="node scoring strategy (default ack)")
    parser.add_argument("--score-all-pods", action="store_true",
                        help="also score pods without a shared-GPU request (kube-scheduler must then call the "
                             "extender for every pod: no managedResources)")
    parser.add_argument("--seed", type=int, default=0, help="seed for strategies that draw random numbers")
    add_planning_arguments(parser)
    defaults = Config()
    parser.add_argument("--scale-up-placeholders", action="store_true",
                        help="Kubernetes backend: keep placeholder pods that make cluster-autoscaler add the "
                             "nodes the autoscaling plan needs (RBAC: manifests/autoscaling/)")
    parser.add_argument("--placeholder-namespace", default=defaults.placeholder_namespace, metavar="NS",
                        help=f"the placeholders' own namespace (default {defaults.placeholder_namespace})")
    parser.add_argument("--placeholder-priority-class", default=defaults.placeholder_priority_class,
                        metavar="NAME", help="PriorityClass of the placeholders, below every real workload "
                                             f"(default {defaults.placeholder_priority_class})")
    parser.add_argument("--placeholder-image", default=defaults.placeholder_image, metavar="IMAGE",
                        help=f"the placeholders' image (default {defaults.placeholder_image})")
    parser.add_argument("--placeholder-interval", type=float, default=defaults.placeholder_interval,
                        metavar="SECONDS", help=f"seconds between placeholder rounds "
                                                f"(default {defaults.placeholder_interval:g})")
    parser.add_argument("--placeholders-per-pool", type=int, default=defaults.placeholders_per_pool,
                        metavar="N", help="most placeholders for a pool whose max size is not known "
                                          f"(default {defaults.placeholders_per_pool})")
    parser.add_argument("--defrag-max-moves", type=int, default=defaults.defrag_max_moves, metavar="N",
                        help="most moves in a defragmentation plan (GET defrag, each --defrag-execute round), "
                             f"0 to 100 (default {defaults.defrag_max_moves})")
    parser.add_argument("--defrag-execute", action="store_true",
                        help="Kubernetes backend: make the defragmentation plan's moves, evicting one pod at a time "
                             "through the Eviction API (RBAC: manifests/defrag/; docs/defrag.md)")
    parser.add_argument("--defrag-moves-per-hour", type=int, default=defaults.defrag_moves_per_hour, metavar="N",
                        help=f"most evictions --defrag-execute attempts in any hour "
                             f"(default {defaults.defrag_moves_per_hour})")
    parser.add_argument("--defrag-interval", type=float, default=defaults.defrag_interval, metavar="SECONDS",
                        help=f"seconds between --defrag-execute rounds (default {defaults.defrag_interval:g})")
    parser.add_argument("--defrag-hold-seconds", type=float, default=defaults.defrag_hold_seconds,
                        metavar="SECONDS", help="how long a move holds its replacement's GPUs and the room it frees "
                                                f"(default {defaults.defrag_hold_seconds:g})")
    parser.add_argument("--threads", type=int, default=8, help="request handler threads (default 8)")
    parser.add_argument("--max-body-bytes", type=int, default=defaults.max_body_bytes, metavar="BYTES",
                        help=f"largest request body; a larger one is answered 413 unread "
                             f"(default {defaults.max_body_bytes})")
    parser.add_argument("--tls-cert", metavar="FILE", help="serve HTTPS with this certificate (PEM)")
    parser.add_argument("--tls-key", metavar="FILE", help="the certificate's private key (PEM)")
    parser.add_argument("--client-ca", metavar="FILE",
                        help="with --tls-cert: accept only clients whose certificate this CA signed "
                             "(kube-scheduler's extender tlsConfig certFile/keyFile)")
    parser.add_argument("--probe-port", type=int, metavar="PORT",
                        help="also serve GET healthz, readyz and metrics (nothing else) in plain HTTP on this "
                             "port: for the kubelet's probes and Prometheus when --client-ca is set")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from extender.clusterfile import ClusterFileError, check
    from extender.server import ExtenderServer
    from extender.templates import TemplatesError
    from extender.templates import load as load_templates

    if not 0 < args.port < 65536:
        print(f"cgpu-extender: --port must be 1..65535, got {args.port}", file=sys.stderr)
        return 2
    if args.threads < 1:
        print(f"cgpu-extender: --threads must be at least 1, got {args.threads}", file=sys.stderr)
        return 2
    if args.probe_port is not None and (not 0 < args.probe_port < 65536 or args.probe_port == args.port):
        print(f"cgpu-extender: --probe-port must be 1..65535 and not --port, got {args.probe_port}", file=sys.stderr)
        return 2
    if args.max_body_bytes < 1024:
        print(f"cgpu-extender: --max-body-bytes must be at least 1024, got {args.max_body_bytes}", file=sys.stderr)
        return 2
    if bool(args.tls_cert) != bool(args.tls_key) or (args.client_ca and not args.tls_cert):
        print("cgpu-extender: --tls-cert and --tls-key go together, and --client-ca needs them", file=sys.stderr)
        return 2
    if args.tls_cert:
        from extender.httpserver import tls_context

        try:
            tls_context(args.tls_cert, args.tls_key, args.client_ca)  # fail here, clearly
        except (OSError, ValueError) as exc:
            print(f"cgpu-extender: cannot use the TLS files: {exc}", file=sys.stderr)
            return 2
    if args.placeholder_interval <= 0 or args.placeholders_per_pool < 0:
        print("cgpu-extender: --placeholder-interval must be above 0 and --placeholders-per-pool at least 0",
              file=sys.stderr)
        return 2
    if not 0 <= args.defrag_max_moves <= 100 or args.defrag_moves_per_hour < 1 or args.defrag_interval <= 0 \
            or args.defrag_hold_seconds <= 0:
        print("cgpu-extender: --defrag-max-moves must be 0 to 100, --defrag-moves-per-hour at least 1, and "
              "--defrag-interval and --defrag-hold-seconds above 0", file=sys.stderr)
        return 2
    try:
        pool_labels = tuple(args.pool_labels or DEFAULT_POOL_LABELS)
        if args.templates:
            load_templates(args.templates, pool_labels)  # fail here, clearly, at start
    except TemplatesError as exc:
        print(f"cgpu-extender: {exc}", file=sys.stderr)
        return 2
    if args.cluster:
        try:
            check(args.cluster)  # fail here, clearly, at start
        except ClusterFileError as exc:
            print(f"cgpu-extender: {exc}", file=sys.stderr)
            return 2
    kubernetes = False
    if not args.cluster and not args.demo:
        from extender.kube import connect

        kubernetes = connect.available(args.kubeconfig) is not None
        if kubernetes:
            try:
                connect.load(args.kubeconfig)  # fail here, clearly, at start
            except connect.ConnectError as exc:
                print(f"cgpu-extender: {exc}", file=sys.stderr)
                return 2
    config = Config(prefix=args.prefix, cluster_file=args.cluster, kubernetes=kubernetes,
                    kubeconfig=args.kubeconfig, scoring=args.scoring, seed=args.seed,
                    score_all_pods=args.score_all_pods, log_level=args.log_level, pool_labels=pool_labels,
                    scheduler_names=tuple(args.scheduler_names or Config().scheduler_names),
                    templates_file=args.templates, scale_up_placeholders=args.scale_up_placeholders,
                    placeholder_namespace=args.placeholder_namespace,
                    placeholder_priority_class=args.placeholder_priority_class,
                    placeholder_image=args.placeholder_image, placeholder_interval=args.placeholder_interval,
                    placeholders_per_pool=args.placeholders_per_pool, max_body_bytes=args.max_body_bytes,
                    defrag_max_moves=args.defrag_max_moves, defrag_execute=args.defrag_execute,
                    defrag_moves_per_hour=args.defrag_moves_per_hour, defrag_interval=args.defrag_interval,
                    defrag_hold_seconds=args.defrag_hold_seconds)
    ExtenderServer(config, args.host, args.port, threads=args.threads, tls_cert=args.tls_cert,
                   tls_key=args.tls_key, client_ca=args.client_ca, probe_port=args.probe_port).run()
    return 0
