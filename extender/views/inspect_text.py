"""The ``kubectl inspect cgpu`` text format, rendered from an inspect report.

The report is what ``GET <prefix>/inspect`` answers (``Ledger.inspect``), so
the same text comes out whether the allocations were read from a running
extender or rebuilt from the API server's pod annotations.

Summary (one row per node that shares GPU memory, by name)::

    NAME    IPADDRESS   GPU0(Allocated/Total)  GPU1(Allocated/Total)  GPU Memory(GiB)
    node-a  192.0.2.10  15/15                  9/15                   24/60
    ------------------------------------------------------------------------
    Allocated/Total GPU Memory In Cluster:
    24/60 (40%)

* a ``PENDING(Allocated)`` column appears when some node has pods bound to it
  that request GPU memory but carry no GPU index (the ledger's *unaccounted*
  pods); their memory counts in the node's and the cluster's allocated total;
* *ours*: when a core_mem node is shown, a ``GPU Core(%)`` column gives each
  node's allocated/total compute ("-" on memory-only nodes) and the cluster
  compute total follows the memory total.

Details (``-d``), per node: ``NAME:``/``IPADDRESS:`` lines, a table of pods
(``NAME NAMESPACE GPUi(Allocated)`` … ``Pending(Allocated)``, capitalised so
in ``-d`` as the original tool prints it) with each pod's
GiB on each GPU — written ``GiB (P%)`` on core_mem nodes — then
``Allocated :``, ``Total :`` and a rule; the cluster total closes the output.
Percentages are truncated, as the original tool truncates them.
"""

from __future__ import annotations

PAD = 2


def _percent(used: int, total: int) -> int:
    return int(used * 100 / total) if total > 0 else 0


def align(rows: list) -> list:
    """Rows of cells → lines; every cell but the last padded to its column's width + 2."""
    widths: dict = {}
    for row in rows:
        for i, cell in enumerate(row[:-1]):
            widths[i] = max(widths.get(i, 0), len(cell))
    return ["".join(cell.ljust(widths[i] + PAD) for i, cell in enumerate(row[:-1])) + row[-1] if row else ""
            for row in rows]


def _shown(report: dict, node: str | None) -> list:
    nodes = sorted((n for n in report.get("nodes", []) if n["memory"]["total"] > 0), key=lambda n: n["name"])
    return [n for n in nodes if n["name"] == node] if node else nodes


def _pending(node: dict) -> int:
    """GiB requested by the node's unaccounted pods (unreadable requests: what is held)."""
    return sum(u["memory"] if u["memory"] is not None else max(map(int, u["held"]["memory"].values()), default=0)
               for u in node.get("unaccounted", []))


def _held(node: dict, gpu: int | None = None) -> int:
    """GiB the ledger holds back for unaccounted pods on one GPU (all GPUs when None):
    counted in ``used``, shown here under PENDING instead, as ACK's tool shows it."""
    return sum(int(v) for u in node.get("unaccounted", []) for g, v in u["held"]["memory"].items()
               if gpu is None or int(g) == gpu)


def _used(node: dict) -> int:
    return node["memory"]["used"] - _held(node) + _pending(node)


def _is_core(node: dict) -> bool:
    return node.get("sharing") == "memory+core"


class UnknownNode(LookupError):
    pass


def render(report: dict, details: bool = False, node: str | None = None) -> str:
    """The text for ``report`` (see module doc); ``node`` limits it to one node."""
    nodes = _shown(report, node)
    if node and not nodes:
        raise UnknownNode(f"node {node} is unknown or shares no GPU memory")
    lines = _details(nodes) if details else _summary(nodes)
    used = sum(_used(n) for n in nodes)
    total = sum(n["memory"]["total"] for n in nodes)
    cluster = f"{used}/{total} ({_percent(used, total)}%)"
    if details:
        lines += ["", "", f"Allocated/Total GPU Memory In Cluster:  {cluster}"]
    else:
        lines += ["Allocated/Total GPU Memory In Cluster:", cluster]
    core_nodes = [n for n in nodes if _is_core(n)]
    if core_nodes:
        core_used = sum(n["core"]["used"] for n in core_nodes)
        core_total = sum(n["core"]["total"] for n in core_nodes)
        core = f"{core_used}/{core_total} ({_percent(core_used, core_total)}%)"
        lines += [f"Allocated/Total GPU Core In Cluster:  {core}"] if details else \
                 ["Allocated/Total GPU Core In Cluster:", core]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _summary(nodes: list) -> list:
    slots = max((len(n["gpus"]) for n in nodes), default=0)
    pending = any(n.get("unaccounted") for n in nodes)
    core = any(_is_core(n) for n in nodes)
    header = ["NAME", "IPADDRESS"] + [f"GPU{i}(Allocated/Total)" for i in range(slots)]
    header += ["PENDING(Allocated)"] * pending + ["GPU Memory(GiB)"] + ["GPU Core(%)"] * core
    rows = [header]
    for n in nodes:
        cells = [n["name"], n.get("address") or "unknown"]
        gpus = n["gpus"]
        cells += [f"{g['memory']['used'] - _held(n, g['index'])}/{g['memory']['total']}" for g in gpus]
        cells += ["0/0"] * (slots - len(gpus))
        if pending:
            cells.append(str(_pending(n)) if n.get("unaccounted") else "")
        cells.append(f"{_used(n)}/{n['memory']['total']}")
        if core:
            cells.append(f"{n['core']['used']}/{n['core']['total']}" if _is_core(n) else "-")
        rows.append(cells)
    lines = align(rows)
    return lines + ["-" * (max(map(len, lines)) + 4)]


def _pod_rows(node: dict) -> list:
    """One row per pod: name, namespace, {gpu: (GiB, core)}, pending GiB."""
    pods: dict = {}
    for gpu in node["gpus"]:
        for p in gpu["pods"]:
            row = pods.setdefault(p["uid"], (p["name"], p["namespace"], {}, 0))
            row[2][gpu["index"]] = (p["memory"], p["core"])
    rows = sorted(pods.values(), key=lambda r: (min(r[2]), r[1], r[0]))
    rows += [(u["name"], u["namespace"], {}, _pending({"unaccounted": [u]}))
             for u in sorted(node.get("unaccounted", []), key=lambda u: (u["namespace"], u["name"]))]
    return rows


def _details(nodes: list) -> list:
    lines: list = []
    for n in nodes:
        core = _is_core(n)
        pending = bool(n.get("unaccounted"))
        count = len(n["gpus"])
        header = ["NAME", "NAMESPACE"] + [f"GPU{i}(Allocated)" for i in range(count)]
        header += ["Pending(Allocated)"] * pending + [""]
        table = [header]
        for name, namespace, per_gpu, waiting in _pod_rows(n):
            cells = [name, namespace]
            for i in range(count):
                memory, units = per_gpu.get(i, (0, 0))
                cells.append(f"{memory} ({units}%)" if core and i in per_gpu else str(memory))
            if pending:
                cells.append(str(waiting))
            table.append(cells + [""])
        used = _used(n)
        footer = [["Allocated :", f"{used} ({_percent(used, n['memory']['total'])}%)"],
                  ["Total :", str(n["memory"]["total"])]]
        if core:
            units, capacity = n["core"]["used"], n["core"]["total"]
            footer += [["Allocated Core :", f"{units} ({_percent(units, capacity)}%)"], ["Total Core :", str(capacity)]]
        body = align(table)
        lines += ["", *align([["NAME:", n["name"]], ["IPADDRESS:", n.get("address") or "unknown"]]), "",
                  *body, *align(footer), "-" * (max(map(len, body)) + 4)]
    return lines
