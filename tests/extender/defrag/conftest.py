"""The executor evicts through the Kubernetes backend only: its tests run it on the fake API server."""

from kubefixtures import kube, started  # noqa: F401 (fixtures)
