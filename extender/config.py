"""Configuration of one extender process."""

from __future__ import annotations

from dataclasses import dataclass

from policy.pools import DEFAULT_POOL_LABELS

DEFAULT_PREFIX = "/cgpu-scheduler"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 32766
DEFAULT_MAX_BODY = 64 * 2**20  # bytes: full Node objects of 10,000 nodes are ~35 MB


@dataclass
class Config:
    prefix: str = DEFAULT_PREFIX  # URL prefix of every route
    cluster_file: str | None = None  # embedded cluster from this file (wins over everything else)
    kubernetes: bool = False  # use the Kubernetes API server (else the built-in demo)
    kubeconfig: str | None = None  # with kubernetes: this kubeconfig; None = in-cluster or the default one
    scoring: str = "ack"  # node scoring strategy (policy.scoring)
    seed: int = 0  # for strategies that draw random numbers
    pod_cache_size: int = 10000  # Pods remembered from filter for bind
    score_all_pods: bool = False  # also score pods without a shared-GPU request (see Extender)
    log_level: str = "info"
    max_body_bytes: int = DEFAULT_MAX_BODY  # a larger request body is answered 413 without being read
    # autoscaling (extender.planning, extender.kube.placeholders)
    pool_labels: tuple = DEFAULT_POOL_LABELS  # a node's pool: the first of these labels it carries
    scheduler_names: tuple = ("default-scheduler",)  # pending pods of these schedulers are ours to plan
    templates_file: str | None = None  # pool max sizes and templates for pools at zero nodes
    scale_up_placeholders: bool = False  # kube backend: keep placeholder pods that make cluster-autoscaler act
    placeholder_namespace: str = "cgpu-placeholders"
    placeholder_priority_class: str = "cgpu-placeholder"
    placeholder_image: str = "registry.k8s.io/pause:3.10"
    placeholder_interval: float = 10.0  # seconds between reconciles
    placeholders_per_pool: int = 10  # bound for a pool whose max size is not known
    # defragmentation (extender.defrag; docs/defrag.md)
    defrag_max_moves: int = 5  # most moves in a plan (GET defrag, each execution round)
    defrag_execute: bool = False  # kube backend: evict for the plan's moves (opt-in)
    defrag_moves_per_hour: int = 6  # evictions (attempted) in any hour, at most
    defrag_interval: float = 60.0  # seconds between execution rounds
    defrag_hold_seconds: float = 300.0  # how long a move's held room and steering last at most

    def normalised_prefix(self) -> str:
        """``/a/b`` form: one leading slash, no trailing one ("" for the root)."""
        return "/" + self.prefix.strip("/") if self.prefix.strip("/") else ""
