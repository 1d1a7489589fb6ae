"""Which node pool a node belongs to, read from the labels cloud providers set.

The first present of ACK's, Karpenter's, GKE's, EKS's and AKS's node-pool
labels; ``""`` for a node that carries none of them.
"""

from __future__ import annotations

POOL_LABELS = ("alibabacloud.com/nodepool-id", "karpenter.sh/nodepool", "cloud.google.com/gke-nodepool",
               "eks.amazonaws.com/nodegroup", "kubernetes.azure.com/agentpool")


def pool_of(labels: dict) -> str:
    """The node's pool by its labels (see module doc)."""
    return next((labels[key] for key in POOL_LABELS if labels.get(key)), "")
