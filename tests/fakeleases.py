"""Leases for the fake API server (:mod:`fakekube`): ``coordination.k8s.io/v1`` as kube-apiserver answers it.

``GET``/``PUT`` on ``/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}``
and ``POST`` on its collection: 404 for a missing Lease, 409 AlreadyExists on
a second create, and the optimistic concurrency leader election rests on — a
``PUT`` must carry ``metadata.resourceVersion`` (422 without: Leases allow no
unconditional update) and gets 409 Conflict unless it is the stored one.
Writes take their resourceVersion from the server's one counter, as etcd's
revision counts writes to every kind.

Faults for tests: ``refuse[identity]`` answers writes whose ``holderIdentity``
is that identity with 503 and writes nothing (a leader cut off from the API
server: it cannot renew); ``writes`` records every write that succeeded
(method, namespace, name, spec).
"""

from __future__ import annotations

import copy
import re

LEASE_PATH = re.compile(r"^/apis/coordination\.k8s\.io/v1/namespaces/(?P<ns>[^/]+)/leases(?:/(?P<name>[^/]+))?$")


class LeaseError(Exception):
    def __init__(self, code: int, reason: str, message: str):
        super().__init__(message)
        self.code, self.reason = code, reason


class Leases:
    def __init__(self, kube):
        self.kube = kube  # its cond guards this store too; its rv numbers the writes
        self.store: dict = {}  # (namespace, name) → Lease
        self.refuse: set = set()  # holderIdentity whose writes are answered 503
        self.writes: list = []  # (method, namespace, name, spec) of every write that took effect

    def get(self, namespace: str, name: str) -> dict | None:
        with self.kube.cond:
            return copy.deepcopy(self.store.get((namespace, name)))

    def put(self, namespace: str, name: str, spec: dict) -> dict:
        """Create or overwrite a Lease from the test (as another client would have written it)."""
        with self.kube.cond:
            self.kube.rv += 1
            lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                     "metadata": {"name": name, "namespace": namespace, "resourceVersion": str(self.kube.rv),
                                  "uid": f"lease-{namespace}-{name}"},
                     "spec": copy.deepcopy(spec)}
            self.store[(namespace, name)] = lease
            return copy.deepcopy(lease)

    def handle(self, method: str, namespace: str, name: str | None, body: dict | None) -> tuple[int, dict]:
        """``(status, body)`` for one request (the body a Status on errors)."""
        try:
            if method == "GET" and name:
                return 200, self._read(namespace, name)
            if method == "POST" and not name:
                return 201, self._create(namespace, body or {})
            if method == "PUT" and name:
                return 200, self._replace(namespace, name, body or {})
            raise LeaseError(405, "MethodNotAllowed", f"{method} is not supported here")
        except LeaseError as exc:
            return exc.code, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                              "message": str(exc), "reason": exc.reason, "code": exc.code}

    def _read(self, namespace: str, name: str) -> dict:
        lease = self.get(namespace, name)
        if lease is None:
            raise LeaseError(404, "NotFound", f'leases.coordination.k8s.io "{name}" not found')
        return lease

    def _refused(self, spec: dict) -> None:
        if spec.get("holderIdentity") in self.refuse:
            raise LeaseError(503, "ServiceUnavailable", "the server is currently unable to handle the request")

    def _create(self, namespace: str, body: dict) -> dict:
        meta = body.get("metadata") or {}
        name = meta.get("name")
        if not name:
            raise LeaseError(422, "Invalid", "Lease.coordination.k8s.io is invalid: metadata.name: Required value")
        spec = body.get("spec") or {}
        self._refused(spec)
        with self.kube.cond:
            if (namespace, name) in self.store:
                raise LeaseError(409, "AlreadyExists", f'leases.coordination.k8s.io "{name}" already exists')
            lease = self.put(namespace, name, spec)
            self.writes.append(("POST", namespace, name, copy.deepcopy(spec)))
            return lease

    def _replace(self, namespace: str, name: str, body: dict) -> dict:
        meta = body.get("metadata") or {}
        if meta.get("name") not in (None, name):
            raise LeaseError(400, "BadRequest", "the name of the object does not match the name on the URL")
        if not meta.get("resourceVersion"):
            raise LeaseError(422, "Invalid", "metadata.resourceVersion: Invalid value: 0x0: must be specified "
                                             "for an update")
        spec = body.get("spec") or {}
        self._refused(spec)
        with self.kube.cond:
            current = self.store.get((namespace, name))
            if current is None:
                raise LeaseError(404, "NotFound", f'leases.coordination.k8s.io "{name}" not found')
            if current["metadata"]["resourceVersion"] != meta["resourceVersion"]:
                raise LeaseError(409, "Conflict", f'Operation cannot be fulfilled on leases.coordination.k8s.io '
                                                  f'"{name}": the object has been modified; please apply your '
                                                  f'changes to the latest version and try again')
            lease = self.put(namespace, name, spec)
            self.writes.append(("PUT", namespace, name, copy.deepcopy(spec)))
            return lease
