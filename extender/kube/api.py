"""Writes to the API server without the generated client's request building.

The ``kubernetes`` client (37.x) validates every call's arguments with
pydantic, serializes the body through its model layer, re-reads proxy settings
from the environment and parses the reply's headers with the email package:
about 1.8 ms of CPU per call in ``benchmarks.load_kube`` (py-spy). Bind's
writes (the Binding, the Event, rarely an annotation patch; defragmentation's
Evictions) go through
:class:`RawApi` instead: the body encoded with orjson, the reply read as
bytes, the client's own TLS settings and authentication. Failures are raised
as the client's ``ApiException`` (status, reason, body), so callers handle them
as before.

Transport: a :class:`~extender.kube.httpclient.KeepAliveClient` (a kept
connection per thread, TLS built from the client configuration: CA, client
certificate, ``verify_ssl``, ``assert_hostname``, ``tls_server_name``) where
the configuration asks for no proxy; else the client's own urllib3 pool,
which knows proxies. The auth header comes from
:meth:`ApiClient.update_params_for_auth`, so a token the client refreshes
(service-account token files, exec plugins) is used as the client would use
it; it is asked again at most once per :data:`AUTH_TTL` seconds.
"""

from __future__ import annotations

import base64
import ssl
import threading
import time
from urllib.parse import quote, urlsplit

import orjson

from extender.kube.httpclient import KeepAliveClient

AUTH_TTL = 1.0  # seconds an auth header is reused before the client is asked again


class RawApi:
    def __init__(self, api_client, timeout: float):
        from kubernetes.client.exceptions import ApiException

        self._client = api_client
        self._pool = api_client.rest_client.pool_manager
        self._host = api_client.configuration.host.rstrip("/")
        self._timeout = timeout
        self._error = ApiException
        self._direct = direct_client(api_client.configuration, timeout)
        self._prefix = urlsplit(self._host).path  # a host URL may carry a path (an API proxy's)
        self._auth_lock = threading.Lock()
        self._auth: tuple[float, dict] = (float("-inf"), {})

    def _headers(self, path: str, method: str) -> dict:
        now = time.monotonic()
        expires, auth = self._auth
        if now >= expires:
            auth = {}
            with self._auth_lock:
                self._client.update_params_for_auth(auth, [], ["BearerToken"], path, method, None)
                self._auth = (now + AUTH_TTL, auth)
        return {**self._client.default_headers, **auth}

    def _request(self, method: str, path: str, body: dict, content_type: str = "application/json") -> dict:
        (reply,) = self._send([(method, path, body, content_type)])
        if isinstance(reply, Exception):
            raise reply
        return reply

    def _send(self, requests: list[tuple[str, str, dict, str]], settle: float = 0.0) -> list:
        """Per ``(method, path, body, content type)``, the reply as JSON or the exception that failed
        it (an ``ApiException`` for a status not 2xx); pipelined on one connection where the
        transport is ours (its replies read ``settle`` seconds after the write), else one after
        another."""
        sent = [(method, path,
                 {**self._headers(path, method), "Accept": "application/json", "Content-Type": content_type},
                 orjson.dumps(body)) for method, path, body, content_type in requests]
        if self._direct is not None:
            replies = self._direct.pipeline([(method, self._prefix + path, headers, data)
                                             for method, path, headers, data in sent], settle)
        else:
            replies = [self._pooled(*request) for request in sent]
        return [reply if isinstance(reply, Exception) else self._json(*reply) for reply in replies]

    def _pooled(self, method: str, path: str, headers: dict, data: bytes):
        try:
            response = self._pool.request(method, self._host + path, body=data,
                                          headers=headers, timeout=self._timeout, retries=False,
                                          preload_content=True)
        except Exception as exc:  # noqa: BLE001 - handed back as this request's failure
            return exc
        return response.status, response.reason, response.data

    def _json(self, status: int, reason: str, reply: bytes):
        if not 200 <= status < 300:
            error = self._error(status=status, reason=reason)
            error.body = reply
            return error
        try:
            return orjson.loads(reply or b"{}")
        except orjson.JSONDecodeError as exc:
            return exc

    def patch_pod(self, namespace: str, name: str, body: dict) -> dict:
        """A JSON merge patch of a pod (``metadata.annotations`` here)."""
        return self._request("PATCH", f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}", body,
                             "application/merge-patch+json")

    def create_binding(self, namespace: str, name: str, body: dict) -> dict:
        return self._request("POST", f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}/binding", body)

    def create_eviction(self, namespace: str, name: str, body: dict) -> dict:
        """Evict a pod (policy/v1 Eviction): the API server refuses with 429 what a budget forbids."""
        return self._request("POST", f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}/eviction", body)

    def create_events(self, events: list[tuple[str, dict]], settle: float = 0.0) -> list:
        """Create each ``(namespace, Event)``: per event, the reply or the exception that failed it
        (``settle``: see :meth:`_send`)."""
        return self._send([("POST", f"/api/v1/namespaces/{quote(namespace)}/events", body, "application/json")
                           for namespace, body in events], settle)


def direct_client(configuration, timeout: float) -> KeepAliveClient | None:
    """A :class:`KeepAliveClient` for the configuration's host, or None where only the client's
    own transport will do (a proxy, or a scheme other than http/https)."""
    from kubernetes.client.rest import should_bypass_proxies

    if configuration.proxy and not should_bypass_proxies(configuration.host, configuration.no_proxy or ""):
        return None
    if isinstance(configuration.assert_hostname, str):  # a name to check other than the host's
        return None
    url = urlsplit(configuration.host)
    if url.scheme not in ("http", "https") or not url.hostname:
        return None
    port = url.port or (443 if url.scheme == "https" else 80)
    if url.scheme == "http":
        return KeepAliveClient(url.hostname, port, timeout)
    return KeepAliveClient(url.hostname, port, timeout, tls_context(configuration),
                           configuration.tls_server_name or url.hostname)


def tls_context(configuration) -> ssl.SSLContext:
    """The TLS settings the ``kubernetes`` client gives urllib3, as an :class:`ssl.SSLContext`."""
    verify = configuration.verify_ssl
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH,
                                         cafile=(verify and configuration.ssl_ca_cert) or None,
                                         cadata=_pem(configuration.ca_cert_data) if verify else None)
    if not verify or configuration.assert_hostname is False:
        context.check_hostname = False
    if not verify:
        context.verify_mode = ssl.CERT_NONE
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file or None)
    return context


def _pem(data) -> str | None:
    """CA data as :meth:`ssl.SSLContext.load_verify_locations` takes it (PEM text), or None."""
    if not data:
        return None
    if isinstance(data, bytes):
        data = data.decode("ascii", "replace")
    if "-----BEGIN" not in data:  # base64 of PEM, as a kubeconfig's certificate-authority-data
        data = base64.b64decode(data).decode("ascii", "replace")
    return data
