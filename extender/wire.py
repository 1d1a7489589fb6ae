"""The kube-scheduler extender wire format (``k8s.io/kube-scheduler/extender/v1``).

Requests are decoded the way Go's ``encoding/json`` decodes them into the
scheduler's structs: top-level keys match case-insensitively (exact match
preferred) and unknown keys are ignored. Replies use the Go field names
exactly, ``null`` for nil, and integers for scores.
"""

from __future__ import annotations

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


@dataclass
class ExtenderArgs:
    pod: dict
    names: list  # node names, in the scheduler's order
    nodes: list | None  # full Node objects when the scheduler is not node-cache capable


@dataclass
class BindingArgs:
    name: str
    namespace: str
    uid: str
    node: str


def parse_extender_args(body: bytes) -> ExtenderArgs:
    """Decode an ``ExtenderArgs`` body (filter and prioritize)."""
    args = decode(body)
    if not isinstance(args, dict):
        raise WireError("request body must be a JSON object (ExtenderArgs)")
    pod = field(args, "Pod")
    if not isinstance(pod, dict):
        raise WireError("ExtenderArgs.Pod is missing or not an object")
    names = field(args, "NodeNames")
    if names is not None:
        if type(names) is not list:  # the elements are checked where they are looked up
            raise WireError("ExtenderArgs.NodeNames must be a list of node names or null")
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
        name = (node.get("metadata") or {}).get("name")
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
