"""The pool templates file: max sizes of node pools, and what a new node is for pools at zero nodes.

YAML or JSON::

    pools:
      np-a10:                 # the pool label's value on the pool's nodes
        maxSize: 10           # optional: the node pool's maximum size
      np-a100:
        maxSize: 4
        node:                 # optional: a v1 Node as the pool's new nodes join (used while it has none)
          metadata:
            labels: {ack.node.gpu.schedule: cgpu, gpu-spec: A100}
          spec:
            taints: [{key: scaler, value: gpu, effect: NoSchedule}]
          status:
            allocatable: {aliyun.com/gpu-count: "8", aliyun.com/gpu-mem: "640"}

Contract of :func:`load`: returns pool name → :class:`~policy.pools.Entry`,
or raises :class:`TemplatesError` naming the file, the pool and the rule
broken (an unknown key, a max size that is not a whole number ≥ 0, a node
that is not an object, a node whose pool label names another pool).
"""

from __future__ import annotations

import yaml

from policy.pools import DEFAULT_POOL_LABELS, Entry, pool_of
from policy.selectors import labels_of

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
KEYS = ("maxSize", "node")


class TemplatesError(ValueError):
    """A templates file that cannot be used; ``str()`` says where and why."""


def parse(text: str, path: str = "<templates>", pool_labels=DEFAULT_POOL_LABELS) -> dict:
    """The entries of a templates file's text (see module doc)."""
    try:
        document = yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError as exc:
        raise TemplatesError(f"{path}: not valid YAML or JSON: {exc}") from None
    if document is None:
        return {}
    pools = document.get("pools") if isinstance(document, dict) else None
    if not isinstance(document, dict) or set(document) - {"pools"} or not isinstance(pools, dict):
        raise TemplatesError(f"{path}: expected an object with one key, pools: a map of pool name to its entry")
    entries = {}
    for name, entry in pools.items():
        where = f"{path}: pool {name!r}"
        if not isinstance(name, str) or not name:
            raise TemplatesError(f"{path}: pool names must be non-empty strings, got {name!r}")
        entry = {} if entry is None else entry
        if not isinstance(entry, dict):
            raise TemplatesError(f"{where}: expected an object with maxSize and/or node")
        unknown = sorted(str(k) for k in set(entry) - set(KEYS))
        if unknown:
            raise TemplatesError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(KEYS)})")
        max_size = entry.get("maxSize")
        if max_size is not None and (not isinstance(max_size, int) or isinstance(max_size, bool) or max_size < 0):
            raise TemplatesError(f"{where}: maxSize must be a whole number ≥ 0, got {max_size!r}")
        node = entry.get("node")
        if node is not None:
            if not isinstance(node, dict):
                raise TemplatesError(f"{where}: node must be a v1 Node object")
            found = pool_of(labels_of(node), pool_labels)
            if found is not None and found[1] != name:
                raise TemplatesError(f"{where}: its node's label {found[0]}={found[1]!r} names another pool")
        entries[name] = Entry(max_size=max_size, node=node)
    return entries


def load(path: str, pool_labels=DEFAULT_POOL_LABELS) -> dict:
    """The entries of the templates file at ``path`` (see module doc)."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise TemplatesError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    return parse(text, path, pool_labels)
