"""One ``coordination.k8s.io/v1`` Lease, read and written as JSON over :class:`~extender.cluster.kube.api.RawApi`.

Contract: :meth:`LeaseClient.get` answers the Lease or None (404);
:meth:`~LeaseClient.create` and :meth:`~LeaseClient.replace` answer the Lease
as written. ``replace`` sends the ``metadata.resourceVersion`` it was given, so
the API server refuses it (409 Conflict) when anyone wrote the Lease since:
the optimistic concurrency leader election rests on. Every failure is a
:class:`~extender.cluster.base.ClusterError` with the HTTP ``status`` when the API
server answered. Requests (RBAC): ``get`` and ``update`` on this Lease,
``create`` on leases of its namespace.

Times on the Lease (``acquireTime``, ``renewTime``) are wall-clock MicroTime,
for people reading it; no replica trusts another's clock: a candidate
measures a lease's age on its own clock from when it saw the record change.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from urllib.parse import quote

from extender.cluster.base import ClusterError
from extender.cluster.kube.backend import _cluster_error

COORDINATION = "/apis/coordination.k8s.io/v1"


def micro_time(seconds: float | None = None) -> str:
    """A Kubernetes MicroTime (RFC 3339, microseconds, UTC) for Unix time ``seconds`` (now if None)."""
    moment = datetime.fromtimestamp(time.time() if seconds is None else seconds, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def spec_of(lease: dict | None) -> dict:
    spec = (lease or {}).get("spec")
    return spec if isinstance(spec, dict) else {}


def holder_of(lease: dict | None) -> str:
    holder = spec_of(lease).get("holderIdentity")
    return holder if isinstance(holder, str) else ""


def record_of(lease: dict | None) -> tuple:
    """What a candidate compares between reads: any change means the holder is alive (client-go
    compares the whole election record likewise)."""
    spec = spec_of(lease)
    return tuple(str(spec.get(k)) for k in ("holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime",
                                            "leaseTransitions"))


class LeaseClient:
    def __init__(self, raw, namespace: str, name: str):
        self._raw = raw
        self.namespace, self.name = namespace, name
        self._collection = f"{COORDINATION}/namespaces/{quote(namespace)}/leases"
        self._item = f"{self._collection}/{quote(name)}"

    def get(self) -> dict | None:
        try:
            return self._raw.request("GET", self._item)
        except Exception as exc:  # noqa: BLE001 - sockets, TLS and the API raise many types
            error = _error(exc)
            if error.status == 404:
                return None
            raise error from None

    def create(self, spec: dict) -> dict:
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace}, "spec": spec}
        try:
            return self._raw.request("POST", self._collection, body)
        except Exception as exc:  # noqa: BLE001
            raise _error(exc) from None

    def replace(self, lease: dict, spec: dict) -> dict:
        """``lease`` (as read or written last, with its resourceVersion) with ``spec`` in place of its own."""
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {k: v for k, v in (lease.get("metadata") or {}).items() if k != "managedFields"},
                "spec": spec}
        try:
            return self._raw.request("PUT", self._item, body)
        except Exception as exc:  # noqa: BLE001
            raise _error(exc) from None


def _error(exc: Exception) -> ClusterError:
    return exc if isinstance(exc, ClusterError) else _cluster_error(exc)
