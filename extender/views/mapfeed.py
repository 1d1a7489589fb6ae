"""The GPU map's feed: ``GET <prefix>/inspect?compact=1``, the inspect report without what the map does not draw.

The full report carries every pod's annotations (4.6 MB at 1,000 nodes × 8
GPUs, 23 MB at 5,000); the map refreshes every few seconds. The compact form
keeps the report's top-level keys but ``nodes``, and writes each node as::

    {"name", "pool", "model", "ready", "unschedulable", "sharing", "placement", "schedule",
     "problem", "warnings", "wholeGpus",                        as in inspect
     "stranded": GPUs stranded (null before any pod was seen),
     "idle": its unallocated share in GPUs (null likewise),
     "gpus": [[memory used, memory total, compute used, compute total, flags, pods], ...],
     "unaccounted": [["namespace/name", GiB or null], ...]}

GPU ``flags``: 1 healthy, 2 stranded. ``pods``: ``[["namespace/name", GiB,
compute %, 1 if bound else 0], ...]`` on that GPU, sorted. GPU i of the list
is GPU index i. ``compact`` is 1 in the reply, so a reader can tell the forms
apart.

May import ``extender.views.stranded``; reads a report ``Ledger.inspect`` made.
"""

from __future__ import annotations

from extender.views.stranded import Stranded

NODE_KEYS = ("name", "pool", "model", "ready", "unschedulable", "sharing", "placement", "schedule", "problem",
             "warnings", "wholeGpus")
HEALTHY, STRANDED = 1, 2


def compact(report: dict, measured: Stranded | None) -> dict:
    """The compact form of an inspect ``report`` (its ``nodes`` any iterable of full entries, not
    annotated: each node's stranded share is read from ``measured`` here), nodes compacted as taken."""
    rows = {name: i for i, name in enumerate(measured.names)} if measured is not None else {}

    def compacted(node: dict) -> dict:
        i = rows.get(node["name"])
        gpus = []
        for gpu in node["gpus"]:
            stranded = i is not None and bool(measured.per_gpu[i, gpu["index"]])
            pods = [[f"{p['namespace']}/{p['name']}", p["memory"], p["core"], int(bool(p["confirmed"]))]
                    for p in gpu["pods"]]
            gpus.append([gpu["memory"]["used"], gpu["memory"]["total"], gpu["core"]["used"], gpu["core"]["total"],
                         HEALTHY * gpu["healthy"] + STRANDED * stranded, pods])
        return {**{key: node[key] for key in NODE_KEYS},
                "stranded": None if i is None else round(float(measured.per_node[i]), 4),
                "idle": None if i is None else round(float(measured.idle[i]), 4),
                "gpus": gpus,
                "unaccounted": [[f"{u['namespace']}/{u['name']}", u["memory"]] for u in node["unaccounted"]]}

    return {**{k: v for k, v in report.items() if k != "nodes"}, "compact": 1,
            "nodes": map(compacted, report["nodes"])}
