"""Writes to the API server without the generated client's request building.

The ``kubernetes`` client (37.x) validates every call's arguments with
pydantic, serializes the body through its model layer, re-reads proxy settings
from the environment and parses the reply's headers with the email package:
about 1.8 ms of CPU per call in ``benchmarks.load_kube`` (py-spy), three calls
per bind (annotation patch, Binding, Event). :class:`RawApi` sends the same
requests with the client's own connection pool, TLS settings and
authentication (:meth:`ApiClient.update_params_for_auth`, so a refreshed token
is used as the client would), the body encoded with orjson, and reads the reply
as bytes. Failures are raised as the client's ``ApiException`` (status, reason,
body), so callers handle them as before.
"""

from __future__ import annotations

from urllib.parse import quote

import orjson


class RawApi:
    def __init__(self, api_client, timeout: float):
        from kubernetes.client.exceptions import ApiException

        self._client = api_client
        self._pool = api_client.rest_client.pool_manager
        self._host = api_client.configuration.host.rstrip("/")
        self._timeout = timeout
        self._error = ApiException

    def _request(self, method: str, path: str, body: dict, content_type: str = "application/json") -> dict:
        headers = {**self._client.default_headers, "Accept": "application/json", "Content-Type": content_type}
        self._client.update_params_for_auth(headers, [], ["BearerToken"], path, method, None)
        reply = self._pool.request(method, self._host + path, body=orjson.dumps(body), headers=headers,
                                   timeout=self._timeout, retries=False, preload_content=True)
        if not 200 <= reply.status < 300:
            error = self._error(status=reply.status, reason=reply.reason)
            error.body = reply.data
            raise error
        return orjson.loads(reply.data or b"{}")

    def patch_pod(self, namespace: str, name: str, body: dict) -> dict:
        """A JSON merge patch of a pod (``metadata.annotations`` here)."""
        return self._request("PATCH", f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}", body,
                             "application/merge-patch+json")

    def create_binding(self, namespace: str, name: str, body: dict) -> dict:
        return self._request("POST", f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}/binding", body)

    def create_event(self, namespace: str, body: dict) -> dict:
        return self._request("POST", f"/api/v1/namespaces/{quote(namespace)}/events", body)
