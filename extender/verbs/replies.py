"""Filter and prioritize replies written straight to JSON bytes.

A reply names every node it was asked about, so building it as Python dicts
and lists costs a few hundred nanoseconds per node. Instead each node's
JSON-encoded name is prepared once per node layout, padded with spaces to the
longest name — JSON allows whitespace between tokens — so that every node's
fragment has the same width. A reply for any subset of nodes, in any order, is
then one numpy gather of those fragments plus a few column writes:

    NodeNames            ["gpu-a"  ,"gpu-bb" ]
    FailedNodes          {"gpu-a"  :"insufficient free GPU memory"    , ...}
    prioritize           [{"Host":"gpu-a"  ,"Score":10},{"Host":"gpu-bb" ,"Score": 7}]

Decoders (Go's encoding/json included) read these exactly as the compact
form. When a name is unknown to the ledger, or the node layout changed while
the request was served, the reply is built the ordinary way with orjson.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from itertools import compress

import numpy as np
import orjson

from extender.verbs import wire
from extender.verbs.nodelists import Fragments, NodeLists
from policy.placement import Evaluation
from policy.reasons import FITS, MESSAGE_TABLE, MESSAGES, UNRESOLVABLE_TABLE


def _void(raw: bytes) -> np.void:
    return np.frombuffer(raw, dtype=f"V{len(raw)}")[0]


_REASONS = [_void(b":" + orjson.dumps(MESSAGES[code]) + b",") for code in range(len(MESSAGES))]  # ':"reason",'
_HOST = _void(b'{"Host":')
_SCORES = np.array([_void(b',"Score":%2d},' % score) for score in range(11)])  # ',"Score": 7},'
_RECENT = 16  # replies kept for reuse (a filter reply is ~40 bytes per node)


def _items(fragments: Fragments, key, build) -> np.ndarray:
    """One numpy item per row (or per score and row) of a reply's repeated piece, built
    once per node layout by ``build()`` and kept with the layout's fragments."""
    items = fragments.derived.get(key)
    if items is None:
        block = build()
        items = fragments.derived[key] = block.view(f"V{block.dtype.itemsize}").reshape(-1)
    return items


def _map_of(fragments: Fragments, rows: np.ndarray, codes: np.ndarray) -> bytes:
    """``"a":"reason","b":"reason"`` for ``rows`` and their reason codes (no braces).

    One block per reason present (a dozen at most), each as wide as its own
    reason, so short reasons are not padded to the longest.
    """
    if not len(rows):
        return b""
    blocks = []
    for code in np.flatnonzero(np.bincount(codes, minlength=len(_REASONS))):
        def build(code=code):
            block = np.empty(len(fragments.bare), dtype=[("name", fragments.bare.dtype),
                                                          ("reason", _REASONS[code].dtype)])
            block["name"] = fragments.bare
            block["reason"] = _REASONS[code]
            return block

        blocks.append(_items(fragments, ("reason", int(code)), build).take(rows.compress(codes == code)).tobytes())
    return b"".join(blocks)[:-1]


def _scores_of(fragments: Fragments, rows: np.ndarray, scores: np.ndarray) -> bytes:
    """``{"Host":"a","Score":10},...`` for ``rows`` (no brackets)."""
    def build():
        block = np.empty((len(_SCORES), len(fragments.bare)),
                         dtype=[("host", _HOST.dtype), ("name", fragments.bare.dtype), ("score", _SCORES.dtype)])
        block["host"] = _HOST
        block["name"] = fragments.bare
        block["score"] = _SCORES[:, None]
        return block

    items = _items(fragments, "scores", build)  # score s of row r at s * rows + r
    return items.take(scores * len(fragments.bare) + rows).tobytes()[:-1]


class ReplyWriter:
    """Builds replies with the fragments of one :class:`~extender.verbs.nodelists.NodeLists` (see module doc).

    A reply is a function of the rows asked about (the same array object, from
    the node-list memo), the layout, and the codes or raw scores; the last
    reply per verb and request key is kept and returned again while those are
    unchanged, as they mostly are from one pod of a Job to the next.
    """

    def __init__(self, lists: NodeLists):
        self._lists = lists
        self._recent: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def _reuse(self, key, rows: np.ndarray, layout: int, basis: np.ndarray) -> bytes | None:
        with self._lock:
            entry = self._recent.get(key)
        if entry is not None and entry[0] is rows and entry[1] == layout and np.array_equal(entry[2], basis):
            return entry[3]
        return None

    def _keep(self, key, rows: np.ndarray, layout: int, basis: np.ndarray, reply: bytes) -> bytes:
        with self._lock:
            self._recent[key] = (rows, layout, basis, reply)
            self._recent.move_to_end(key)
            if len(self._recent) > _RECENT:
                self._recent.popitem(last=False)
        return reply

    def filter(self, args: wire.ExtenderArgs, rows: np.ndarray, layout: int, codes: np.ndarray,
               key=None) -> bytes:
        """An ``ExtenderFilterResult`` for the nodes of ``args`` (at ``rows``): nodes with code
        ``FITS`` pass, the others fail with their reason. ``key`` (the request's) lets an
        unchanged reply be reused."""
        if key is not None:
            reply = self._reuse(("filter", key), rows, layout, codes)
            if reply is not None:
                return reply
        ok = codes == FITS
        unresolvable = UNRESOLVABLE_TABLE[codes]
        failed = ~ok & ~unresolvable
        nodes = args.nodes
        fragments = None if nodes is not None else self._lists.fragments(layout, rows)
        if fragments is None:
            names = args.names
            reply = wire.filter_reply(
                list(compress(names, ok)), None if nodes is None else list(compress(nodes, ok)),
                dict(zip(compress(names, failed), MESSAGE_TABLE[codes[failed]])),
                dict(zip(compress(names, unresolvable), MESSAGE_TABLE[codes[unresolvable]])))
            return wire.encode(reply)
        reply = b"".join((
            b'{"Nodes":null,"NodeNames":[', fragments.list_of(np.compress(ok, rows)),
            b'],"FailedNodes":{', _map_of(fragments, np.compress(failed, rows), codes[failed]),
            b'},"FailedAndUnresolvableNodes":{',
            _map_of(fragments, np.compress(unresolvable, rows), codes[unresolvable]),
            b'},"Error":""}',
        ))
        return reply if key is None else self._keep(("filter", key), rows, layout, codes, reply)

    def prioritize(self, args: wire.ExtenderArgs, rows: np.ndarray, layout: int, evaluation: Evaluation | None,
                   key=None) -> bytes:
        """A ``HostPriorityList`` for the nodes of ``args`` (at ``rows``): ``evaluation``'s
        integer scores 0..10, all 0 when it is None. ``key`` (the request's) lets the
        reply for unchanged raw scores be reused."""
        if evaluation is None:
            scores = np.zeros(len(rows), dtype=np.int64)
        else:
            if key is not None:
                reply = self._reuse(("prioritize", key), rows, layout, evaluation.raw)
                if reply is not None:
                    return reply
            scores = evaluation.scores()
        reply = self.scores(args, rows, layout, scores)
        if evaluation is None or key is None:
            return reply
        return self._keep(("prioritize", key), rows, layout, evaluation.raw, reply)

    def scores(self, args: wire.ExtenderArgs, rows: np.ndarray, layout: int, scores: np.ndarray) -> bytes:
        """A ``HostPriorityList`` of integer ``scores`` for the nodes of ``args`` (at ``rows``)."""
        fragments = self._lists.fragments(layout, rows)
        if fragments is None:
            return wire.encode(wire.prioritize_reply(args.names, scores.tolist()))
        return b"[" + _scores_of(fragments, rows, scores) + b"]"
