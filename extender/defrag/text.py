"""The defragmentation plan as text, from its JSON (so a running extender's reply prints the same)::

    2 moves let 2 pending pods in; 2 whole GPUs freed (exact search, at most 5 moves)

    MOVE  POD           FROM   TO     GPUS
    1     default/a-1   gpu-a  gpu-a  1
    2     default/b-1   gpu-b  gpu-b  1

    room after the moves:
    POD           NODE   GPUS  HOW
    default/w1    gpu-a  0     gets room through 1 move

    no room:
    POD           REASON
    default/huge  fits no node even with every GPU empty: ...

GPUS is where the replacement (or the pending pod) goes; a section without
rows is left out. Imports: :mod:`extender.inspect_text` only.
"""

from __future__ import annotations

from extender.inspect_text import align


def _gpus(gpus) -> str:
    return ",".join(str(g) for g in gpus)


def render(reply: dict) -> str:
    reasons = reply.get("reasons") or {}
    moves = reply.get("moves") or []
    freed = reply.get("wholeGPUsFreed", 0)
    head = str(reasons.get("summary") or "")
    if moves:
        head += f"; {freed} whole GPU{'s' if freed != 1 else ''} freed"
    search = reasons.get("search")
    lines = [head if search in (None, "none") else f"{head} ({search} search, at most {reasons.get('maxMoves')} moves)"]
    if moves:
        lines += [""] + align([["MOVE", "POD", "FROM", "TO", "GPUS"]] + [
            [str(i), m["pod"], m["from"], m["to"], _gpus(m["gpus"])] for i, m in enumerate(moves, 1)])
    pending = reasons.get("pending") or {}
    placements = reasons.get("placements") or {}
    placed = [[pod, spot["node"], _gpus(spot["gpus"]), pending.get(pod, "")] for pod, spot in placements.items()
              if pod in (reply.get("unblocks") or [])]
    if placed:
        lines += ["", "room after the moves:"] + align([["POD", "NODE", "GPUS", "HOW"]] + placed)
    left = [[pod, why] for pod, why in pending.items() if pod not in placements]
    if left:
        lines += ["", "no room:"] + align([["POD", "REASON"]] + left)
    return "\n".join(lines) + "\n"
