"""Defragmentation as the service runs it: the opt-in loop that makes the plan's moves (``serve --defrag-execute``).

:mod:`~extender.defrag.executor` evicts, one move at a time and rate-limited,
the moves of the plan :mod:`extender.views.defrag_plan` makes; the room held
for a move is the ledger's (:mod:`extender.ledger.defrag_holds`). See
docs/defrag.md. A room of its own because it acts on the cluster: it is the
only part of the service, besides bind, that writes (through the backend's
``evict``), and it runs on a thread of its own.

May import :mod:`policy`, :mod:`extender.logs`, :mod:`extender.ledger`,
:mod:`extender.cluster` and :mod:`extender.views` (layering: tests/test_layout.py).
"""
