"""A small Kubernetes API server for tests: real JSON over real HTTP on 127.0.0.1.

It holds Nodes, Pods and ConfigMaps in memory and speaks what the official
``kubernetes`` client sends: lists carrying ``metadata.resourceVersion``,
streaming watches (chunked JSON lines, ``ERROR`` with a 410 Status when the
requested resourceVersion is older than the kept history), JSON merge and
strategic-merge patches on pods (maps only, which is all strategic merge adds
for annotations; a patch naming another ``metadata.uid`` is invalid, 422),
the ``pods/binding`` subresource with the real server's rules (404, 409 when
already bound or the UID differs, annotations copied from the Binding),
pod creation (409 when the name is taken) and deletion (404), lists by
equality label selectors, Event creation, evictions (:mod:`fakeevict`: budgets
enforced), and Status bodies for errors.

Faults are switched on from tests: :meth:`FakeKube.cut_watches` ends every
open watch in the middle of an event, :meth:`FakeKube.compact` forgets the
event history (the next watch gets 410 Gone), ``fail_bindings`` answers the
next bindings with an error status after nothing was written, ``fail_events``
the next Event creations and ``fail_creates`` the next pod creations likewise, and the server
can be started late on a port fixed in advance (API unreachable at start).
"""

from __future__ import annotations

import bisect
import copy
import itertools
import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from fakeevict import evict

KINDS = {"nodes": "Node", "pods": "Pod", "configmaps": "ConfigMap", "poddisruptionbudgets": "PodDisruptionBudget"}
NAMESPACED = {"pods", "configmaps", "poddisruptionbudgets"}
_uids = itertools.count(1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def status(code: int, reason: str, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch (``null`` deletes a key)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str):
        super().__init__(message)
        self.body = status(code, reason, message)


class FakeKube:
    """The store, its event history, and the HTTP server in front of them."""

    def __init__(self, port: int | None = None):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.cond = threading.Condition()
        self.rv = 100
        self.store = {kind: {} for kind in KINDS}  # kind -> (namespace, name) -> object
        self.history = {kind: [] for kind in KINDS}  # kind -> [(rv, type, object)]
        self.compacted = {kind: 0 for kind in KINDS}  # a watch from an rv below this gets 410
        self.cut_generation = 0
        self.fail_bindings: list[int] = []  # statuses for the next bindings, in order
        self.fail_reads: list[int] = []  # statuses for the next single-pod reads, in order
        self.fail_creates: list[int] = []  # statuses for the next pod creations, in order
        self.fail_evictions: list[int] = []  # statuses for the next evictions, in order
        self.requests: list[tuple[str, str]] = []  # (method, path) of every request
        self.events: list[dict] = []  # Events created through the API
        self.fail_events: list[int] = []  # statuses for the next Event creations, in order
        self.watches_open = 0
        self.write_delay = 0.0  # seconds every write waits before it is handled (a loaded API server)
        self.list_pages = 0  # list requests answered (one per page)
        self._server = None
        self._thread = None

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> "FakeKube":
        handler = type("Handler", (_Handler,), {"kube": self})
        self._server = _Server(("127.0.0.1", self.port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self.cut_watches()
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # -- store -------------------------------------------------------------------
    def _key(self, kind: str, obj: dict) -> tuple:
        meta = obj["metadata"]
        return (meta.get("namespace", "default") if kind in NAMESPACED else "", meta["name"])

    def _emit(self, kind: str, kind_type: str, obj: dict) -> None:
        self.history[kind].append((self.rv, kind_type, copy.deepcopy(obj)))
        self.cond.notify_all()

    def create(self, kind: str, obj: dict) -> dict:
        with self.cond:
            obj = copy.deepcopy(obj)
            obj.pop("kind", None)
            obj.pop("apiVersion", None)
            meta = obj.setdefault("metadata", {})
            if kind in NAMESPACED:
                meta.setdefault("namespace", "default")
            meta.setdefault("uid", f"uid-{next(_uids):06d}")
            meta.setdefault("creationTimestamp", "2026-11-22T03:00:00Z")
            self.rv += 1
            meta["resourceVersion"] = str(self.rv)
            self.store[kind][self._key(kind, obj)] = obj
            self._emit(kind, "ADDED", obj)
            return copy.deepcopy(obj)

    def update(self, kind: str, obj: dict) -> dict:
        with self.cond:
            return copy.deepcopy(self._replace(kind, obj))

    def update_many(self, kind: str, objects: list) -> None:
        """:meth:`update` of each object in turn, under one lock: a burst of MODIFIED events at once."""
        with self.cond:
            for obj in objects:
                self._replace(kind, obj)

    def _replace(self, kind: str, obj: dict) -> dict:
        """Store a copy of ``obj`` in place of the object of its name, keeping its UID (lock held)."""
        obj = copy.deepcopy(obj)
        key = self._key(kind, obj)
        obj["metadata"]["uid"] = self.store[kind][key]["metadata"]["uid"]
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.store[kind][key] = obj
        self._emit(kind, "MODIFIED", obj)
        return obj

    def delete(self, kind: str, name: str, namespace: str = "default") -> dict:
        with self.cond:
            key = (namespace if kind in NAMESPACED else "", name)
            obj = self.store[kind].pop(key)
            self.rv += 1
            obj["metadata"]["resourceVersion"] = str(self.rv)
            self._emit(kind, "DELETED", obj)
            return copy.deepcopy(obj)

    def get(self, kind: str, name: str, namespace: str = "default") -> dict | None:
        with self.cond:
            obj = self.store[kind].get((namespace if kind in NAMESPACED else "", name))
            return copy.deepcopy(obj)

    def objects(self, kind: str) -> list:
        with self.cond:
            return copy.deepcopy(list(self.store[kind].values()))

    def set_pod_phase(self, name: str, phase: str, namespace: str = "default") -> dict:
        pod = self.get("pods", name, namespace)
        pod.setdefault("status", {})["phase"] = phase
        return self.update("pods", pod)

    # -- faults ------------------------------------------------------------------
    def cut_watches(self) -> None:
        """End every open watch abruptly, in the middle of an event."""
        with self.cond:
            self.cut_generation += 1
            self.cond.notify_all()

    def compact(self) -> None:
        """Forget the event history: a watch from any resourceVersion before now gets 410 Gone."""
        with self.cond:
            for kind in KINDS:
                self.history[kind].clear()
                self.compacted[kind] = self.rv
            self.cond.notify_all()

    def wait_watches(self, count: int, timeout: float = 10.0) -> None:
        """Block until at least ``count`` watches are open."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while self.watches_open < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"only {self.watches_open} watches open, wanted {count}")
                self.cond.wait(left)

    # -- API operations -----------------------------------------------------------
    def api_list(self, kind: str, namespace: str | None, limit: int = 0, token: str = "",
                 label_selector: str = "") -> dict:
        """A list, in pages of ``limit`` when asked; ``continue`` carries the snapshot's
        resourceVersion and offset, and expires (410) once the history is compacted past it.
        ``label_selector`` takes equality terms only (``a=b,c=d``)."""
        with self.cond:
            self.list_pages += 1
            snapshot, offset = self.rv, 0
            if token:
                snapshot, offset = (int(part) for part in token.split(":"))
                if snapshot < self.compacted[kind]:
                    raise ApiError(410, "Expired", "The provided continue parameter is too old to display a "
                                                   "consistent list result.")
            wanted = dict(term.split("=", 1) for term in label_selector.split(",") if term)
            items = [copy.deepcopy(o) for (ns, _), o in sorted(self.store[kind].items())
                     if (namespace is None or ns == namespace)
                     and wanted.items() <= ((o["metadata"].get("labels") or {}).items())]
            meta = {"resourceVersion": str(snapshot)}
            if limit and offset + limit < len(items):
                meta["continue"] = f"{snapshot}:{offset + limit}"
            page = items[offset:offset + limit] if limit else items[offset:]
            return {"kind": KINDS[kind] + "List", "apiVersion": "v1", "metadata": meta, "items": page}

    def api_patch(self, namespace: str, name: str, content_type: str, body: dict) -> dict:
        if content_type not in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
            raise ApiError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format: "
                                                        f"{content_type}")
        with self.cond:
            pod = self.store["pods"].get((namespace, name))
            if pod is None:
                raise ApiError(404, "NotFound", f'pods "{name}" not found')
            meta = body.get("metadata") or {}
            if meta.get("uid") not in (None, pod["metadata"]["uid"]):  # uid is immutable: the update is invalid
                raise ApiError(422, "Invalid", f'Pod "{name}" is invalid: metadata.uid: Invalid value: '
                                               f'"{meta["uid"]}": field is immutable')
            patched = merge_patch(pod, body)
            patched["metadata"]["uid"] = pod["metadata"]["uid"]
            if not patched["metadata"].get("annotations"):
                patched["metadata"].pop("annotations", None)
            return self.update("pods", patched)

    def api_bind(self, namespace: str, name: str, body: dict) -> dict:
        with self.cond:
            if self.fail_bindings:
                code = self.fail_bindings.pop(0)
                raise ApiError(code, "InternalError", "Internal error occurred: etcdserver: request timed out")
            pod = self.store["pods"].get((namespace, name))
            if pod is None:
                raise ApiError(404, "NotFound", f'pods "{name}" not found')
            uid = (body.get("metadata") or {}).get("uid")
            if uid and uid != pod["metadata"]["uid"]:
                raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on pods/binding "{name}": '
                                                f'Precondition failed: UID in precondition: {uid}, UID in object '
                                                f'meta: {pod["metadata"]["uid"]}')
            if pod["spec"].get("nodeName"):
                raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on pods/binding "{name}": pod '
                                                f'{name} is already assigned to node "{pod["spec"]["nodeName"]}"')
            target = (body.get("target") or {}).get("name")
            if not target:
                raise ApiError(422, "Invalid", "Binding.target.name: Required value")
            bound = copy.deepcopy(pod)
            bound["spec"]["nodeName"] = target
            extra = (body.get("metadata") or {}).get("annotations") or {}
            if extra:
                bound["metadata"]["annotations"] = {**(bound["metadata"].get("annotations") or {}), **extra}
            bound.setdefault("status", {}).setdefault("conditions", []).append(
                {"type": "PodScheduled", "status": "True"})
            self.update("pods", bound)
            return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    def api_create_pod(self, namespace: str, body: dict) -> dict:
        with self.cond:
            if self.fail_creates:
                code = self.fail_creates.pop(0)
                raise ApiError(code, "Forbidden", f'pods is forbidden: no PriorityClass with name '
                                                  f'{(body.get("spec") or {}).get("priorityClassName")} was found')
            name = (body.get("metadata") or {}).get("name")
            if not name:
                raise ApiError(422, "Invalid", "Pod is invalid: metadata.name: Required value")
            if (namespace, name) in self.store["pods"]:
                raise ApiError(409, "AlreadyExists", f'pods "{name}" already exists')
            body = {**body, "metadata": {**body["metadata"], "namespace": namespace}}
            body.setdefault("status", {"phase": "Pending"})
            return self.create("pods", body)

    def api_delete_pod(self, namespace: str, name: str) -> dict:
        with self.cond:
            if (namespace, name) not in self.store["pods"]:
                raise ApiError(404, "NotFound", f'pods "{name}" not found')
            return self.delete("pods", name, namespace)

    def api_get_pod(self, namespace: str, name: str) -> dict:
        with self.cond:
            if self.fail_reads:
                code = self.fail_reads.pop(0)
                raise ApiError(code, "ServiceUnavailable", "the server is currently unable to handle the request")
        pod = self.get("pods", name, namespace)
        if pod is None:
            raise ApiError(404, "NotFound", f'pods "{name}" not found')
        return pod

    def _after(self, kind: str, position: int) -> list:
        """The history's events after resourceVersion ``position`` (the history is in order)."""
        history = self.history[kind]
        return history[bisect.bisect_right(history, position, key=lambda event: event[0]):]

    def watch_events(self, kind: str, namespace: str | None, since: int, deadline: float):
        """Yield events after ``since``; a 410 ERROR if history was compacted; stop at a cut or the deadline."""
        generation = self.cut_generation
        with self.cond:
            self.watches_open += 1
            self.cond.notify_all()
        try:
            position = since
            while True:
                with self.cond:
                    gone = since < self.compacted[kind]
                    pending = self._after(kind, position)
                    while not gone and not pending and self.cut_generation == generation:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            return
                        self.cond.wait(min(left, 0.2))
                        pending = self._after(kind, position)
                    cut = self.cut_generation != generation
                if gone:
                    yield "ERROR", status(410, "Expired", f"too old resource version: {since} "
                                                          f"({self.compacted[kind]})")
                    return
                if cut:
                    yield "CUT", None
                    return
                for rv, event_type, obj in pending:
                    position = rv
                    if namespace is None or obj["metadata"].get("namespace") == namespace:
                        yield event_type, obj
        finally:
            with self.cond:
                self.watches_open -= 1
                self.cond.notify_all()


class _Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # clients hanging up (the point of several tests) are not errors worth printing


_COLLECTION = re.compile(r"^/api/v1/(?:namespaces/(?P<ns>[^/]+)/)?(?P<kind>nodes|pods|configmaps)$")
_BUDGETS = re.compile(r"^/apis/policy/v1/poddisruptionbudgets$")
_EVENTS = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/events$")
_POD = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<name>[^/]+)(?P<binding>/binding|/eviction)?$")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # as kube-apiserver (Go's net/http) does: TCP_NODELAY, and a small reply's head and body in
    # one write. Unbuffered, the stdlib handler writes them apart: with Nagle's algorithm the body
    # then waits for the client's delayed ACK (40 ms a request on Linux), and without it a client
    # waiting on the reply wakes twice
    disable_nagle_algorithm = True
    wbufsize = 64 * 1024
    kube: FakeKube

    def log_message(self, format, *args):  # noqa: A002 - quiet
        pass

    def _reply(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}")

    def _dispatch(self, method: str) -> None:
        url = urlparse(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        self.kube.requests.append((method, url.path))
        if method != "GET" and self.kube.write_delay:
            time.sleep(self.kube.write_delay)
        try:
            collection = _COLLECTION.match(url.path)
            pod = _POD.match(url.path)
            if method == "GET" and collection:
                kind, namespace = collection["kind"], collection["ns"]
                if query.get("watch") in ("true", "1"):
                    return self._watch(kind, namespace, query)
                selector = {"label_selector": query["labelSelector"]} if query.get("labelSelector") else {}
                return self._reply(200, self.kube.api_list(kind, namespace, int(query.get("limit") or 0),
                                                           query.get("continue") or "", **selector))
            if collection and method == "POST" and collection["kind"] == "pods" and collection["ns"]:
                return self._reply(201, self.kube.api_create_pod(collection["ns"], self._body()))
            if pod and method == "DELETE" and not pod["binding"]:
                self._body()
                return self._reply(200, self.kube.api_delete_pod(pod["ns"], pod["name"]))
            if pod and method == "GET" and not pod["binding"]:
                return self._reply(200, self.kube.api_get_pod(pod["ns"], pod["name"]))
            if pod and method == "PATCH" and not pod["binding"]:
                content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
                return self._reply(200, self.kube.api_patch(pod["ns"], pod["name"], content_type, self._body()))
            if method == "GET" and _BUDGETS.match(url.path):
                with self.kube.cond:
                    items = [copy.deepcopy(b) for b in self.kube.store["poddisruptionbudgets"].values()]
                return self._reply(200, {"kind": "PodDisruptionBudgetList", "apiVersion": "policy/v1",
                                         "metadata": {"resourceVersion": str(self.kube.rv)}, "items": items})
            if method == "POST" and _EVENTS.match(url.path):
                event = self._body()
                if self.kube.fail_events:
                    code = self.kube.fail_events.pop(0)
                    raise ApiError(code, "InternalError", "event creation failed (injected)")
                self.kube.events.append(event)
                return self._reply(201, event)
            if pod and method == "POST" and pod["binding"] == "/eviction":
                return self._reply(201, evict(self.kube, pod["ns"], pod["name"], self._body()))
            if pod and method == "POST" and pod["binding"]:
                return self._reply(201, self.kube.api_bind(pod["ns"], pod["name"], self._body()))
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({method} {url.path})")
        except ApiError as exc:
            self._reply(exc.body["code"], exc.body)

    def _watch(self, kind: str, namespace: str | None, query: dict) -> None:
        since = int(query.get("resourceVersion") or self.kube.rv)
        deadline = time.monotonic() + float(query.get("timeoutSeconds") or 30)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()  # the head at once: a watch may wait long for its first event
        try:
            for event_type, obj in self.kube.watch_events(kind, namespace, since, deadline):
                if event_type == "CUT":
                    self._chunk(b'{"type":"MODIFIED","object":{"metadata":{"na')
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self._chunk(json.dumps({"type": event_type, "object": obj}).encode() + b"\n")
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def do_GET(self):  # noqa: N802
        self._dispatch("GET")

    def do_PATCH(self):  # noqa: N802
        self._dispatch("PATCH")

    def do_POST(self):  # noqa: N802
        self._dispatch("POST")

    def do_DELETE(self):  # noqa: N802
        self._dispatch("DELETE")


def wait_until(condition, timeout: float = 10.0, what: str = "condition"):
    """Poll ``condition`` until it returns something true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)
