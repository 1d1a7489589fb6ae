import numpy as np
import pytest

import small_trace
from benchmarks.trace import read_pods
from benchmarks.variants import kind_mask, reweigh


@pytest.fixture(scope="module")
def pods(tmp_path_factory):
    return read_pods(small_trace.write(str(tmp_path_factory.mktemp("v")))[1])


@pytest.mark.parametrize("kind,fraction", [("share", 0.6), ("share", 0.1), ("multi", 0.5), ("cpu", 0.4)])
def test_the_kind_reaches_its_fraction(pods, kind, fraction):
    out = reweigh(pods, kind, fraction, seed=1)
    mine = kind_mask(out, kind)
    size = np.ones(len(out)) if kind == "cpu" else out.demand
    share = size[mine].sum() / size.sum()
    largest = size[mine].max() / size.sum()
    assert abs(share - fraction) <= largest + 1e-9
    assert (kind_mask(out, kind) == mine).all() and len(out) > 0


def test_other_pods_are_kept_and_the_draws_are_seeded(pods):
    a, b = reweigh(pods, "share", 0.6, seed=3), reweigh(pods, "share", 0.6, seed=3)
    assert a.name == b.name
    others = [n for n, m in zip(pods.name, kind_mask(pods, "share")) if not m]
    assert sorted(n for n, m in zip(a.name, kind_mask(a, "share")) if not m) == sorted(others)


@pytest.mark.parametrize("kind", ["share", "multi"])
def test_fraction_one_keeps_only_the_kind_and_cpu_pods_at_the_base_demand(pods, kind):
    out = reweigh(pods, kind, 1.0, seed=2)
    gpu = out.demand > 0
    assert (kind_mask(out, kind) | ~gpu).all()
    assert (~gpu).sum() == (pods.demand == 0).sum()
    largest = out.demand[gpu].max()
    assert pods.demand.sum() <= out.demand.sum() < pods.demand.sum() + largest


def test_bad_arguments(pods):
    with pytest.raises(ValueError):
        reweigh(pods, "cpu", 1.0)
    with pytest.raises(ValueError):
        reweigh(pods, "share", 1.5)
    with pytest.raises(ValueError):
        kind_mask(pods, "gpu")


def test_best_fit_decreasing_waste_hand_cases():
    from benchmarks.floor import best_fit_decreasing_waste
    assert best_fit_decreasing_waste([810, 190]) == 0
    assert best_fit_decreasing_waste([470, 470, 810]) == 60 + 190
    assert best_fit_decreasing_waste([300, 700, 650, 350, 100]) == 0 + 0 + 900
    assert best_fit_decreasing_waste([]) == 0
