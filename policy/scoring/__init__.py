"""Node scoring strategies, one per module, chosen by name in configuration.

A strategy has ``name`` and ``score(candidates) -> raw`` (float per node,
higher is better; only feasible nodes matter). A node's raw score may depend
only on that node's row and the request, never on which other nodes are in
the view: the ledger may evaluate every node and then pick the ones asked for.
A strategy whose scores depend on nothing else either (no learned mix, no
random draws) says so with ``row_local = True``; the ledger then keeps its
results per request between calls and recomputes only the nodes that
changed (:mod:`policy.rowcache`). It may also have
``choose(candidates) -> gpus`` to pick GPUs itself instead of the node's
placement label, and ``observe(request)`` to learn from the pods it sees.
"""

from __future__ import annotations

import inspect

from policy.scoring.ack import Ack
from policy.scoring.bestfit import BestFit
from policy.scoring.binpack import Binpack
from policy.scoring.fragmentation import Fragmentation
from policy.scoring.random import Random
from policy.scoring.spread import Spread

STRATEGIES = {cls.name: cls for cls in (Ack, Binpack, Spread, Random, BestFit, Fragmentation)}
DEFAULT_STRATEGY = "ack"


def make_strategy(name: str = DEFAULT_STRATEGY, **options):
    """A new strategy instance; raises ValueError naming the known strategies.

    ``options`` (e.g. ``seed``) go to the strategies whose constructor takes
    them and are ignored by the others.
    """
    try:
        cls = STRATEGIES[name]
    except KeyError:
        raise ValueError(f"unknown scoring strategy {name!r}; known: {', '.join(sorted(STRATEGIES))}") from None
    accepted = inspect.signature(cls).parameters
    return cls(**{k: v for k, v in options.items() if k in accepted})
