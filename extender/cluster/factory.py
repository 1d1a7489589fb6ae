"""The backend a configuration asks for: its cluster file, the Kubernetes API, or the built-in demo."""

from __future__ import annotations


def make_cluster(config):
    """The backend ``config`` asks for: its cluster file, the Kubernetes API, or the demo."""
    if config.cluster_file:
        from extender.cluster.clusterfile import stream
        from extender.cluster.embedded import EmbeddedCluster

        return EmbeddedCluster(stream(config.cluster_file), source=config.cluster_file)
    if config.kubernetes:
        from extender.cluster.kube import connect
        from extender.cluster.kube.backend import KubernetesCluster

        return KubernetesCluster.from_configuration(connect.load(config.kubeconfig),
                                                    source=connect.available(config.kubeconfig) or "kubernetes")
    from extender.cluster.demo import demo_objects
    from extender.cluster.embedded import EmbeddedCluster

    return EmbeddedCluster(demo_objects(), source="demo")
