"""The Kubernetes backend's tests: their fixtures are kubefixtures'."""

from kubefixtures import kube, started  # noqa: F401 (fixtures)
