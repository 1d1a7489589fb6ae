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
from itertools import compress

import numpy as np
import orjson

from extender import wire
from policy.reasons import FITS, MESSAGE_TABLE, MESSAGES, UNRESOLVABLE_TABLE

_SPACE = ord(" ")
_TENS = np.frombuffer(b" " * 10 + b"1", dtype=np.uint8)  # score 0..10 as two characters
_ONES = np.frombuffer(b"01234567890", dtype=np.uint8)
_HOST = np.frombuffer(b'{"Host":', dtype=np.uint8)
_SCORE = np.frombuffer(b',"Score":00},', dtype=np.uint8)


def _padded(encoded: list, terminator: bytes) -> np.ndarray:
    """One row per fragment: the bytes, spaces up to the widest, then ``terminator``."""
    width = max(map(len, encoded), default=2)
    matrix = np.full((len(encoded), width + len(terminator)), _SPACE, dtype=np.uint8)
    for i, fragment in enumerate(encoded):
        matrix[i, :len(fragment)] = np.frombuffer(fragment, dtype=np.uint8)
    matrix[:, width:] = np.frombuffer(terminator, dtype=np.uint8)
    return matrix


_REASONS = [np.frombuffer(b":" + orjson.dumps(MESSAGES[code]) + b",", dtype=np.uint8)
            for code in range(len(MESSAGES))]  # ':"reason",' per code


class Fragments:
    """Padded names of every row of one node layout."""

    def __init__(self, layout: int, names_by_row: list):
        self.layout = layout
        self.names = _padded([orjson.dumps(n or "") for n in names_by_row], b",")
        self.width = self.names.shape[1] - 1  # padded name, without the terminator

    def list_of(self, rows: np.ndarray) -> bytes:
        """``"a","b"`` for ``rows`` (no brackets)."""
        return self.names[rows].tobytes()[:-1]

    def map_of(self, rows: np.ndarray, codes: np.ndarray) -> bytes:
        """``"a":"reason","b":"reason"`` for ``rows`` and their reason codes (no braces).

        One block per reason present (a dozen at most), each as wide as its own
        reason, so short reasons are not padded to the longest.
        """
        if not len(rows):
            return b""
        blocks = []
        for code in np.flatnonzero(np.bincount(codes, minlength=len(_REASONS))):
            these = rows[codes == code]
            reason = _REASONS[code]
            block = np.empty((len(these), self.width + len(reason)), dtype=np.uint8)
            block[:, :self.width] = self.names[these, :self.width]
            block[:, self.width:] = reason
            blocks.append(block.tobytes())
        return b"".join(blocks)[:-1]

    def scores_of(self, rows: np.ndarray, scores: np.ndarray) -> bytes:
        """``{"Host":"a","Score":10},...`` for ``rows`` (no brackets)."""
        head = len(_HOST)
        block = np.empty((len(rows), head + self.width + len(_SCORE)), dtype=np.uint8)
        block[:, :head] = _HOST
        block[:, head:head + self.width] = self.names[rows, :self.width]
        block[:, head + self.width:] = _SCORE
        block[:, -4] = _TENS[scores]
        block[:, -3] = _ONES[scores]
        return block.tobytes()[:-1]


class ReplyWriter:
    """Builds replies for one :class:`~policy.state.ClusterState` (see module doc)."""

    def __init__(self, state):
        self._state = state
        self._fragments: Fragments | None = None
        self._lock = threading.Lock()

    def fragments(self, layout: int, rows: np.ndarray) -> Fragments | None:
        """Fragments for ``layout`` if every row is known and the layout is current."""
        if len(rows) and rows.min() < 0:
            return None
        current = self._fragments
        if current is not None and current.layout == layout:
            return current
        with self._lock:
            state = self._state
            if state.layout != layout:
                return None
            names = list(state.names)
            if state.layout != layout:
                return None
            self._fragments = Fragments(layout, names)
            return self._fragments

    def filter(self, names: list, nodes: list | None, rows: np.ndarray, layout: int, codes: np.ndarray) -> bytes:
        """An ``ExtenderFilterResult``: nodes with code ``FITS`` pass, the others fail with their reason.

        ``nodes`` are the request's Node objects (nodeCacheCapable=false) or None.
        """
        ok = codes == FITS
        unresolvable = UNRESOLVABLE_TABLE[codes]
        failed = ~ok & ~unresolvable
        fragments = None if nodes is not None else self.fragments(layout, rows)
        if fragments is None:
            reply = wire.filter_reply(
                list(compress(names, ok)), None if nodes is None else list(compress(nodes, ok)),
                dict(zip(compress(names, failed), MESSAGE_TABLE[codes[failed]])),
                dict(zip(compress(names, unresolvable), MESSAGE_TABLE[codes[unresolvable]])))
            return wire.encode(reply)
        return b"".join((
            b'{"Nodes":null,"NodeNames":[', fragments.list_of(rows[ok]),
            b'],"FailedNodes":{', fragments.map_of(rows[failed], codes[failed]),
            b'},"FailedAndUnresolvableNodes":{', fragments.map_of(rows[unresolvable], codes[unresolvable]),
            b'},"Error":""}',
        ))

    def prioritize(self, names: list, rows: np.ndarray, layout: int, scores: np.ndarray) -> bytes:
        """A ``HostPriorityList`` with integer scores 0..10."""
        fragments = self.fragments(layout, rows)
        if fragments is None:
            return wire.encode(wire.prioritize_reply(names, scores.tolist()))
        return b"[" + fragments.scores_of(rows, scores) + b"]"
