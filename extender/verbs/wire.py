"""The kube-scheduler extender wire format (``k8s.io/kube-scheduler/extender/v1``).

Requests are decoded the way Go's ``encoding/json`` decodes them into the
scheduler's structs: top-level keys match case-insensitively (exact match
preferred) and unknown keys are ignored. Replies use the Go field names
exactly, ``null`` for nil, and integers for scores.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import orjson


class WireError(ValueError):
    """A request body that is not what the scheduler sends; ``str()`` says why."""


def decode(body: bytes) -> object:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise WireError(f"request body is not valid JSON: {exc}") from None


def encode(value: object) -> bytes:
    return orjson.dumps(value)


def encode_report(report: dict) -> bytes:
    """``encode(report)`` for a report whose ``nodes`` may be an iterator of dicts: the same bytes,
    with each node encoded as it is taken and written into one buffer, so neither the report's
    objects nor its encoded pieces are ever held whole beside the result (at 5,000 nodes a traced
    peak of ~25 MB for 22 MB of JSON; built whole it was ~88)."""
    out = io.BytesIO()
    out.write(b"{")
    for k, (key, value) in enumerate(report.items()):
        out.write(b"," if k else b"")
        out.write(encode(key))
        out.write(b":")
        if key == "nodes":
            out.write(b"[")
            for n, node in enumerate(value):
                if n:
                    out.write(b",")
                out.write(encode(node))
            out.write(b"]")
        else:
            out.write(encode(value))
    out.write(b"}")
    return out.getvalue()


def field(obj: dict, name: str):
    """``obj[name]`` with Go's case-insensitive fallback; None when absent."""
    if name in obj:
        return obj[name]
    folded = name.casefold()
    found = None
    for key, value in obj.items():
        if isinstance(key, str) and key.casefold() == folded:
            found = value  # Go keeps the last matching key
    return found


class ExtenderArgs:
    """A decoded ``ExtenderArgs``.

    ``pod`` is the Pod; ``nodes`` the full Node objects when the scheduler is
    not node-cache capable, else None; ``names`` the candidate node names in
    the scheduler's order. When the body ends with its ``NodeNames`` array, as
    kube-scheduler's always does, ``names_json`` holds that array's bytes and
    ``names`` is decoded only when first read, so that a caller who has seen
    the same bytes before can skip decoding them (reading ``names`` may then
    raise :class:`WireError`).
    """

    __slots__ = ("pod", "nodes", "names_json", "_names", "_body")

    def __init__(self, pod: dict, names: list | None, nodes: list | None, names_json: bytes | None = None,
                 body: bytes | None = None):
        self.pod = pod
        self.nodes = nodes
        self.names_json = names_json
        self._names = names
        self._body = body

    @property
    def names(self) -> list:
        if self._names is None:
            try:
                names = orjson.loads(self.names_json)
            except orjson.JSONDecodeError:
                names = None
            if type(names) is not list:  # the split was not the body's last member: decode it all
                whole = _from_object(decode(self._body))
                self.pod, self.nodes, self.names_json, names = whole.pod, whole.nodes, None, whole.names
            self._names = names
        return self._names


NAMES_NOT_A_LIST = "ExtenderArgs.NodeNames must be a list of node names or null"


@dataclass
class BindingArgs:
    name: str
    namespace: str
    uid: str
    node: str


_WHITESPACE = b" \t\r\n"
_NODE_NAMES_KEY = b'"NodeNames"'


def _skip(body: bytes, i: int, step: int) -> int:
    """The first index from ``i`` (moving by ``step``) that is not JSON whitespace."""
    while 0 <= i < len(body) and body[i] in _WHITESPACE:
        i += step
    return i


def split_node_names(body: bytes) -> tuple[bytes, bytes] | None:
    """``(rest, names_json)`` when ``body`` ends with a top-level ``"NodeNames": [...]``
    member: ``rest`` is the body without that member and ``names_json`` the
    array's bytes. None when the body does not end that way.

    The split is exact whenever ``rest`` decodes to an object and
    ``names_json`` to an array: the braces of ``rest`` then balance at its
    end, so the member was at the top level, and as the last member it is the
    one Go's decoder keeps.
    """
    end = _skip(body, len(body) - 1, -1)
    if end < 1 or body[end] != 0x7D:  # }
        return None
    close = _skip(body, end - 1, -1)
    key = body.rfind(_NODE_NAMES_KEY, 0, close)
    if close < 0 or body[close] != 0x5D or key < 0:  # ]
        return None
    colon = _skip(body, key + len(_NODE_NAMES_KEY), 1)
    if colon >= close or body[colon] != 0x3A:  # :
        return None
    open_ = _skip(body, colon + 1, 1)
    before = _skip(body, key - 1, -1)
    if open_ >= close or body[open_] != 0x5B or before < 0 or body[before] not in b",{":  # [
        return None
    rest = body[:before] + b"}" if body[before] == 0x2C else body[:before + 1] + b"}"
    return rest, body[open_:close + 1]


def parse_extender_args(body: bytes) -> ExtenderArgs:
    """Decode an ``ExtenderArgs`` body (filter and prioritize); see :class:`ExtenderArgs`."""
    split = split_node_names(body)
    if split is not None:
        try:
            rest = orjson.loads(split[0])
        except orjson.JSONDecodeError:
            split = None
        else:
            if not isinstance(rest, dict):
                split = None
    if split is None:
        return _from_object(decode(body))
    pod = field(rest, "Pod")
    if not isinstance(pod, dict):
        return _from_object(decode(body))  # for the same error as any body without a Pod
    _check_pod(pod)
    return ExtenderArgs(pod, None, None, split[1], body)


def _check_pod(pod: dict, kind: str = "ExtenderArgs") -> None:
    """What Go's decoder would refuse to read into a v1.Pod, as far as the extender reads it."""
    for part in ("metadata", "spec"):
        if pod.get(part) is not None and not isinstance(pod[part], dict):
            raise WireError(f"{kind}.Pod.{part} must be an object")


def _pod_of(args: object, kind: str) -> dict:
    """The ``Pod`` of a decoded ``kind`` body (``ExtenderArgs``, ``ExtenderPreemptionArgs``)."""
    if not isinstance(args, dict):
        raise WireError(f"request body must be a JSON object ({kind})")
    pod = field(args, "Pod")
    if not isinstance(pod, dict):
        raise WireError(f"{kind}.Pod is missing or not an object")
    _check_pod(pod, kind)
    return pod


def _from_object(args: object) -> ExtenderArgs:
    pod = _pod_of(args, "ExtenderArgs")
    names = field(args, "NodeNames")
    if names is not None:
        if type(names) is not list:  # the elements are checked where they are looked up
            raise WireError(NAMES_NOT_A_LIST)
        return ExtenderArgs(pod, names, None)
    node_list = field(args, "Nodes")
    if node_list is None:
        return ExtenderArgs(pod, [], None)
    items = node_list.get("items") if isinstance(node_list, dict) else None
    if items is None and isinstance(node_list, dict):
        items = []
    if not isinstance(items, list) or not all(isinstance(n, dict) for n in items):
        raise WireError("ExtenderArgs.Nodes must be a NodeList (an object with a list of items) or null")
    names = []
    for i, node in enumerate(items):
        meta = node.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        if not isinstance(name, str) or not name:
            raise WireError(f"ExtenderArgs.Nodes.items[{i}] has no metadata.name")
        names.append(name)
    return ExtenderArgs(pod, names, items)


def parse_binding_args(body: bytes) -> BindingArgs:
    """Decode an ``ExtenderBindingArgs`` body."""
    args = decode(body)
    if not isinstance(args, dict):
        raise WireError("request body must be a JSON object (ExtenderBindingArgs)")
    values = {key: field(args, key) for key in ("PodName", "PodNamespace", "PodUID", "Node")}
    wrong = [k for k, v in values.items() if v is not None and not isinstance(v, str)]
    if wrong:
        raise WireError(f"ExtenderBindingArgs fields must be strings: {', '.join(wrong)}")
    missing = [k for k in ("PodName", "PodUID", "Node") if not values[k]]
    if missing:
        raise WireError(f"ExtenderBindingArgs is missing {', '.join(missing)}")
    return BindingArgs(values["PodName"], values["PodNamespace"] or "default", values["PodUID"], values["Node"])


class PreemptionArgs:
    """A decoded ``ExtenderPreemptionArgs``: the preemptor and, per candidate node, the UIDs
    kube-scheduler proposes to evict and its count of PodDisruptionBudget violations.
    Either form is read (``NodeNameToVictims`` with full pods, or ``NodeNameToMetaVictims``);
    ``pods`` keeps the full victims of the first form by UID."""

    __slots__ = ("pod", "victims", "pods")

    def __init__(self, pod: dict, victims: dict, pods: dict):
        self.pod, self.victims, self.pods = pod, victims, pods


def parse_preemption_args(body: bytes) -> PreemptionArgs:
    """Decode an ``ExtenderPreemptionArgs`` body."""
    args = decode(body)
    pod = _pod_of(args, "ExtenderPreemptionArgs")
    meta, full = field(args, "NodeNameToMetaVictims"), field(args, "NodeNameToVictims")
    given = meta if meta is not None else full
    if given is None:
        given = {}
    if not isinstance(given, dict):
        raise WireError("ExtenderPreemptionArgs.NodeNameToMetaVictims / NodeNameToVictims must be an object")
    victims, pods = {}, {}
    for node, entry in given.items():
        if entry is None:
            entry = {}
        if not isinstance(entry, dict):
            raise WireError(f"victims of node {node[:64]!r} must be an object")
        listed = field(entry, "Pods") or []
        count = field(entry, "NumPDBViolations") or 0
        if not isinstance(listed, list) or not isinstance(count, int) or isinstance(count, bool):
            raise WireError(f"victims of node {node[:64]!r}: Pods must be a list and NumPDBViolations a number")
        uids = []
        for item in listed:
            if not isinstance(item, dict):
                raise WireError(f"victims of node {node[:64]!r}: a victim is not an object")
            uid = field(item, "UID") if meta is not None else field(field(item, "metadata") or {}, "uid")
            if not isinstance(uid, str) or not uid:
                raise WireError(f"victims of node {node[:64]!r}: a victim has no UID")
            uids.append(uid)
            if meta is None:
                pods[uid] = item
        victims[node] = (uids, count)
    return PreemptionArgs(pod, victims, pods)


def preemption_reply(victims: dict) -> dict:
    """An ``ExtenderPreemptionResult``, always the meta form: ``{node: (uids, pdb violations)}``."""
    return {"NodeNameToMetaVictims": {node: {"Pods": [{"UID": uid} for uid in uids], "NumPDBViolations": count}
                                      for node, (uids, count) in victims.items()}}


def filter_reply(names: list, nodes: list | None, failed: dict, unresolvable: dict, error: str = "") -> dict:
    """An ``ExtenderFilterResult``; ``nodes`` is None when the request had names only."""
    return {
        "Nodes": None if nodes is None else {"metadata": {}, "items": nodes},
        "NodeNames": names,
        "FailedNodes": failed,
        "FailedAndUnresolvableNodes": unresolvable,
        "Error": error,
    }


def filter_error(error: str) -> dict:
    return filter_reply([], None, {}, {}, error)


def prioritize_reply(names: list, scores) -> list:
    """A ``HostPriorityList``: one ``{"Host", "Score"}`` per node, integer scores."""
    return [{"Host": name, "Score": score} for name, score in zip(names, scores)]


def bind_reply(error: str = "") -> dict:
    """An ``ExtenderBindingResult``."""
    return {"Error": error}
