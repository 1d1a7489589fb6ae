"""Reading a cluster dump: v1 Node, Pod and ConfigMap objects from YAML or JSON.

Accepts what ``kubectl get nodes,pods -o yaml`` prints (a ``kind: List``), a
typed list (``NodeList``, ``PodList``), single objects, or several YAML
documents in one file. Objects of other kinds are skipped and counted.
"""

from __future__ import annotations

import orjson
import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

KINDS = ("Node", "Pod", "ConfigMap")


class ClusterFileError(ValueError):
    """A cluster file that cannot be read; ``str()`` says where and why."""


def _flatten(document, path: str, found: list, skipped: list) -> None:
    if document is None:
        return
    if not isinstance(document, dict):
        raise ClusterFileError(f"{path}: expected Kubernetes objects, found {type(document).__name__}")
    kind = document.get("kind", "")
    if "items" in document and (kind == "List" or kind.endswith("List") or not kind):
        item_kind = kind[:-4] if kind.endswith("List") and kind != "List" else None
        for item in document.get("items") or []:
            if isinstance(item, dict) and item_kind and "kind" not in item:
                item = {**item, "kind": item_kind}
            _flatten(item, path, found, skipped)
        return
    if kind in KINDS:
        found.append(document)
    else:
        skipped.append(kind or "<no kind>")


def parse_objects(text: str, path: str = "<cluster>") -> tuple[list, list]:
    """``(objects, skipped kinds)`` from the text of a cluster file."""
    documents = None
    if text.lstrip()[:1] in ("{", "["):
        try:
            documents = [orjson.loads(text)]  # JSON is YAML too, but parses far faster this way
        except orjson.JSONDecodeError:
            pass
    try:
        if documents is None:
            documents = list(yaml.load_all(text, Loader=_LOADER))
    except yaml.YAMLError as exc:
        raise ClusterFileError(f"{path}: not valid YAML or JSON: {exc}") from None
    found, skipped = [], []
    for document in documents:
        _flatten(document, path, found, skipped)
    for obj in found:
        if not ((obj.get("metadata") or {}).get("name")):
            raise ClusterFileError(f"{path}: a {obj.get('kind')} has no metadata.name")
    return found, skipped


def load(path: str) -> tuple[list, list]:
    """Read and parse a cluster file."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise ClusterFileError(f"{path}: cannot read: {exc.strerror}") from None
    return parse_objects(text, path)
