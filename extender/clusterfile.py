"""Reading a cluster dump: v1 Node, Pod and ConfigMap objects and policy/v1 PodDisruptionBudgets, from YAML or JSON.

Accepts what ``kubectl get nodes,pods -o yaml`` prints (a ``kind: List``), a
typed list (``NodeList``, ``PodList``), single objects, or several YAML
documents in one file. A file named ``*.jsonl`` or ``*.ndjson`` holds one JSON
object per line (``kubectl get nodes,pods -o json | jq -c '.items[]'``) and is
read a line at a time, so a dump of 10^5 pods never sits in memory whole.
PodDisruptionBudgets count with their ``status.disruptionsAllowed``
(``kubectl get nodes,pods,pdb -A -o yaml``). Objects of other kinds are
skipped and counted.
"""

from __future__ import annotations

import orjson
import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

KINDS = ("Node", "Pod", "ConfigMap", "PodDisruptionBudget")


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
        _checked(obj, path)
    return found, skipped


STREAMED = (".jsonl", ".ndjson")


def _checked(obj: dict, path: str) -> dict:
    """An object of the file as it is: one the ledger cannot read (no name, a field of the
    wrong type) is skipped and listed there, never a reason not to start."""
    return obj


def stream(path: str, skipped: list | None = None):
    """The objects of a cluster file, one at a time (see module doc)."""
    skipped = [] if skipped is None else skipped
    try:
        handle = open(path, "rb")
    except OSError as exc:
        raise ClusterFileError(f"{path}: cannot read: {exc.strerror}") from None
    with handle:
        if not path.endswith(STREAMED):
            try:
                text = handle.read().decode("utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ClusterFileError(f"{path}: cannot read: {exc}") from None
            objects, found_skipped = parse_objects(text, path)
            skipped.extend(found_skipped)
            del text
            objects.reverse()
            while objects:
                yield objects.pop()  # handed on one at a time, so each can be freed once used
            return
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                document = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise ClusterFileError(f"{path}:{number}: not a JSON object: {exc}") from None
            found: list = []
            _flatten(document, f"{path}:{number}", found, skipped)
            for obj in found:
                yield _checked(obj, f"{path}:{number}")


def load(path: str) -> tuple[list, list]:
    """Read and parse a whole cluster file: ``(objects, skipped kinds)``."""
    skipped: list = []
    return list(stream(path, skipped)), skipped


def check(path: str) -> int:
    """Read a cluster file through, keeping nothing; the number of objects (or ClusterFileError)."""
    return sum(1 for _ in stream(path))
