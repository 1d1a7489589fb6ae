import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from policy.scores import extender_scores

raws = st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=60)
any_floats = st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=60)


@given(st.one_of(raws, any_floats), st.data())
def test_scores_keep_the_order_of_raw_scores(values, data):
    """Over any floats, ±inf, NaN and ranges too wide to subtract included (NaN ranks below −inf)."""
    raw = np.array(values, dtype=np.float64)
    feasible = np.array(data.draw(st.lists(st.booleans(), min_size=len(values), max_size=len(values))))
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # no arithmetic on non-finite values
        scores = extender_scores(raw, feasible)
    assert scores.dtype.kind == "i" and ((scores >= 0) & (scores <= 10)).all()
    assert (scores[~feasible] == 0).all()
    if not feasible.any():
        return
    raw = np.where(np.isnan(raw), -np.inf, raw)
    best = raw[feasible].max()
    assert (scores[feasible & (raw == best)] == 10).all()
    distinct = np.unique(raw[feasible])[::-1]
    by_value = {v: scores[feasible & (raw == v)] for v in distinct}
    for v, s in by_value.items():
        assert len(set(s.tolist())) == 1, "equal raw scores get equal scores"
    levels = [int(by_value[v][0]) for v in distinct]
    for better, worse in zip(levels, levels[1:]):
        # strictly lower wherever integers allow: only 0 may repeat
        assert worse < better or worse == 0


def test_worked_example():
    raw = np.array([0.45, 0.2, 0.44, 0.1, 0.45, -np.inf])
    feasible = np.array([True, True, True, True, True, False])
    # p = floor(10 * (u - 0.1) / 0.35) = [10, 9, 2, 0] for u = [0.45, 0.44, 0.2, 0.1]
    assert extender_scores(raw, feasible).tolist() == [10, 2, 9, 0, 10, 0]


def test_more_distinct_values_than_levels():
    raw = np.linspace(1.0, 0.9, 15)
    scores = extender_scores(raw, np.ones(15, dtype=bool))
    assert scores.tolist() == [10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0, 0, 0, 0]


def test_non_finite_raw_scores_rank_instead_of_wrapping_around():
    """A feasible node's −inf once became −2^63 after the cast, a negative index in the reply."""
    raw = np.array([1.0, -np.inf, 0.5, np.nan, np.inf])
    assert extender_scores(raw, np.ones(5, dtype=bool)).tolist() == [6, 0, 3, 0, 10]  # ranks 2, 0, 1, 0, 3 of 0..3
    assert extender_scores(np.array([1e308, -1e308]), np.ones(2, dtype=bool)).tolist() == [10, 0]


def test_all_tied_all_ten():
    assert extender_scores(np.array([0.3, 0.3]), np.array([True, True])).tolist() == [10, 10]


def reference_scores(raw, feasible):
    """The module doc's formula, term by term, over every distinct value."""
    scores = np.zeros(len(raw), dtype=np.int64)
    if not feasible.any():
        return scores
    u = sorted(set(raw[feasible].tolist()), reverse=True)
    lo, hi = u[-1], u[0]
    if hi == lo:
        scores[feasible] = 10
        return scores
    p = [10] + [int(np.floor(10 * (v - lo) / (hi - lo))) for v in u[1:]]
    s = {v: max(0, min(p[j] + j for j in range(i + 1)) - i) for i, v in enumerate(u)}
    for i in np.flatnonzero(feasible):
        scores[i] = s[raw[i]]
    return scores


FEW = [0.0, 0.5, 1.0, 2.0, 2.5, 3.0, 7.0, 9.0, 9.5, 10.0, 11.0, -3.0]


@given(st.integers(1, 300).flatmap(lambda n: st.lists(st.sampled_from(FEW), min_size=n, max_size=n)
                                   | st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=n, max_size=n)),
       st.data())
def test_scores_follow_the_formula_on_large_lists_with_ties(values, data):
    # up to 300 values, with few distinct ones (many ties) or many
    raw = np.array(values)
    feasible = np.array(data.draw(st.lists(st.booleans(), min_size=len(values), max_size=len(values))))
    assert extender_scores(raw, feasible).tolist() == reference_scores(raw, feasible).tolist()
