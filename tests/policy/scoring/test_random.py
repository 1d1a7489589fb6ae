from helpers import build, raw_and_scores
from policy.names import BINPACK, MODE_CORE
from policy.node import NodeSpec
from policy.request import simple_request
from policy.scoring import make_strategy


def cluster():
    return build({n: (NodeSpec(n, MODE_CORE, 2, 15, 100, BINPACK, 20), []) for n in "abcdefgh"})


def test_same_seed_same_choices_and_every_feasible_node_can_win():
    state = cluster()
    runs = [[raw_and_scores(state, simple_request(2, 30), s)[1] for _ in range(40)]
            for s in (make_strategy("random", seed=7), make_strategy("random", seed=7))]
    assert runs[0] == runs[1]
    winners = {max(scores, key=scores.get) for scores in runs[0]}
    assert len(winners) > 1
    assert all(sorted(scores.values())[-1] == 10 for scores in runs[0])
