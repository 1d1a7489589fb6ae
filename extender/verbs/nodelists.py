"""Node-name lists as the wire carries them, mapped to the state's rows without per-node work.

kube-scheduler sends the same lists pod after pod: every candidate node to
filter, then to prioritize exactly the nodes filter passed, in filter's order.
:class:`NodeLists` keeps, per node layout (see :class:`~policy.state.ClusterState`):

* each node's name as a JSON fragment padded with spaces to a common width
  (:class:`Fragments`), from which replies and lists for any subset of rows
  are cut by one numpy gather;
* recent lists by their JSON bytes → rows. A request whose ``NodeNames`` array
  is byte for byte one seen before (or the compact encoding of the nodes
  filter just passed, which is what the scheduler sends to prioritize) gets
  its rows without decoding a single name. Anything else is decoded and
  looked up by name.
"""

from __future__ import annotations

import threading

import numpy as np
import orjson

_SPACE = ord(" ")
_MEMO_SIZE = 16


class Fragments:
    """Padded JSON names of every row of one node layout.

    Row i of ``names`` is ``"name"`` + spaces + ``,``, all rows equally wide;
    ``keep`` marks the bytes that are not padding, ``size`` counts them, and
    ``bare`` holds each padded name without its comma as one numpy item.
    ``derived`` keeps what replies build from these once per layout.
    """

    def __init__(self, layout: int, names_by_row: list):
        encoded = [orjson.dumps(n or "") for n in names_by_row]
        self.layout = layout
        self.width = max(map(len, encoded), default=2)  # padded name, without the terminator
        self.names = np.full((len(encoded), self.width + 1), _SPACE, dtype=np.uint8)
        self.keep = np.zeros(self.names.shape, dtype=bool)
        for i, fragment in enumerate(encoded):
            self.names[i, :len(fragment)] = np.frombuffer(fragment, dtype=np.uint8)
            self.keep[i, :len(fragment)] = True
        self.names[:, -1] = ord(",")
        self.keep[:, -1] = True
        self.size = self.keep.sum(axis=1)
        self.bare = np.ascontiguousarray(self.names[:, :self.width]).view(f"V{self.width}").reshape(-1)
        self.derived: dict = {}

    def compact_size(self, rows: np.ndarray) -> int:
        """``len(self.compact_list_of(rows))``, without building it."""
        return int(np.take(self.size, rows).sum()) + 1 if len(rows) else 2

    def list_of(self, rows: np.ndarray) -> bytes:
        """``"a"  ,"b"  `` for ``rows``: padded, comma-separated, no brackets."""
        return np.take(self.names, rows, axis=0).tobytes()[:-1]

    def compact_list_of(self, rows: np.ndarray) -> bytes:
        """``["a","b"]``: the names of ``rows`` exactly as Go's encoder writes a []string."""
        if not len(rows):
            return b"[]"
        names = np.take(self.names, rows, axis=0).ravel()
        return b"[" + names[np.take(self.keep, rows, axis=0).ravel()].tobytes()[:-1] + b"]"


class NodeLists:
    """Fragments and remembered lists for one :class:`~policy.state.ClusterState` (see module doc)."""

    def __init__(self, state):
        self._state = state
        self._fragments: Fragments | None = None
        self._memo: dict = {}  # len(json) → (layout, json, rows)
        self._lock = threading.Lock()

    def rows(self, args) -> tuple[np.ndarray, int]:
        """``(rows, layout)`` of ``args.names`` (an :class:`~extender.verbs.wire.ExtenderArgs`), -1 for an
        unknown name; reading ``args.names`` may raise ``WireError``, and a list whose
        elements are not all names raises ``TypeError``."""
        raw = args.names_json
        if raw is not None:
            memo = self._memo.get(len(raw))
            if memo is not None and memo[0] == self._state.layout and memo[1] == raw:
                return memo[2], memo[0]
        names = args.names
        rows, layout = self._state.lookup(names)
        if (rows < 0).any() and not all(type(n) is str for n in names):
            raise TypeError("node names must be strings")
        if args.names_json is not None and not (len(rows) and rows.min() < 0):
            # the array's own bytes (still, once names decoded), kept only for lists of known nodes: a
            # list of unknown names is no list the scheduler repeats, and could be any size
            rows = self._remember(args.names_json, rows, layout)
        return rows, layout

    def remember(self, rows: np.ndarray, layout: int) -> None:
        """Let a later request that names exactly ``rows``, compactly encoded, skip decoding them."""
        fragments = self.fragments(layout, rows)
        if fragments is None:
            return
        memo = self._memo.get(fragments.compact_size(rows))
        if memo is None or memo[0] != layout or not np.array_equal(memo[2], rows):
            self._remember(fragments.compact_list_of(rows), rows, layout)

    def _remember(self, raw: bytes, rows: np.ndarray, layout: int) -> np.ndarray:
        """Keep ``raw`` → a read-only copy of ``rows``, and return the copy."""
        rows = np.array(rows)
        rows.flags.writeable = False
        with self._lock:
            if len(self._memo) >= _MEMO_SIZE:
                self._memo.clear()
            self._memo[len(raw)] = (layout, raw, rows)
        return rows

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
